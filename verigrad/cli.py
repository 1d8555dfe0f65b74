"""The `verigrad` command: `train`, `eval`, `demo`, `ir`, `ops`, `fetch`, `generate`, `chat`, `version`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

THREADS_HELP = "default: VERIGRAD_THREADS, else every core (at most 8)"


def _train(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from .backends import default_threads
    from .plot import have_matplotlib, training_picture
    from .train import TrainConfig, test_predictions, train

    config = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        seed=args.seed,
        out=args.out,
        backend=args.backend,
        threads=args.threads or default_threads(),
        data=args.data,
        data_dir=args.data_dir,
        compiled=not args.eager,
    )
    console = Console()
    console.print(
        f"[bold]verigrad train[/]: CNN on {config.data}, {config.epochs} epochs, batch {config.batch_size}, "
        f"{config.optimizer}, backend {config.backend}, {config.threads} thread(s), seed {config.seed}"
    )
    columns = (
        TextColumn("epoch {task.fields[epoch]}/{task.fields[epochs]}"),
        BarColumn(),
        TextColumn("step {task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]:.4f}  acc {task.fields[accuracy]:6.1%}"),
        TextColumn("{task.fields[steps_per_s]:6.1f} steps/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(
            "train",
            total=None,
            epoch=0,
            epochs=config.epochs,
            loss=float("nan"),
            accuracy=0.0,
            steps_per_s=0.0,
        )

        def on_step(s: dict) -> None:
            progress.update(
                task,
                completed=s["step"],
                total=s["steps"],
                epoch=s["epoch"],
                loss=s["loss"],
                accuracy=s["accuracy"],
                steps_per_s=s["steps_per_s"],
            )

        result = train(config, on_step=on_step)
    console.print(
        f"test accuracy [bold]{result.test_accuracy:.2%}[/] after {result.seconds:.1f} s of training; "
        f"checkpoint {escape(str(result.checkpoint))}"
    )
    if have_matplotlib():
        images, labels, predicted = test_predictions(result.model, config)
        picture = training_picture(
            result.history, images, labels, predicted, Path(config.out) / "training.png"
        )
        console.print(f"picture {escape(str(picture))}")
    else:
        # markup=False: rich would take [plot] for a style tag and drop it
        console.print('no picture: matplotlib is missing (pip install "verigrad[plot]")', markup=False)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .train import evaluate

    accuracy, count = evaluate(args.checkpoint, data_dir=args.data_dir)
    print(f"{args.checkpoint}: test accuracy {accuracy:.2%} on {count} images")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demos import run_demo

    return run_demo(steps=args.steps)


IR_MODELS = ("cnn", "mlp")
IR_SCRIPT_HELP = (
    "a Python file that defines program() returning a verigrad Program, or `model` (a function "
    "or module) and `example_spec` (a verigrad.spec, or a tuple of them, for its arguments)"
)


def _ir(args: argparse.Namespace) -> int:
    from .ir.passes import optimize

    if args.script is not None:
        if args.model is not None or args.train or args.batch is not None:
            raise ValueError("give a SCRIPT or --model (with --train, --optimizer, --batch), not both")
        program = _script_program(Path(args.script))
    else:
        program = _model_program(args.model or "cnn", args.train, args.optimizer, args.batch)
    if args.passes:
        program = optimize(program)
    program.verify()
    print(program)
    return 0


def _model_program(name: str, train: bool, optimizer: str, batch: int | None):
    """The forward program of a model of the repository, or its training step (forward, loss,
    backward, optimizer update), with a symbolic batch `B` unless `batch` is given."""
    from .autograd import no_grad
    from .demos import MLP
    from .ir import trace
    from .models import digits_cnn
    from .nn import CrossEntropyLoss
    from .ops import manual_seed
    from .shapes import dims, spec
    from .train import make_optimizer

    manual_seed(0)
    b = dims("B") if batch is None else batch
    if name == "cnn":
        model, x = digits_cnn(8, 8), spec([b, 1, 8, 8])
    elif name == "mlp":
        model, x = MLP.create(2, 64, 3), spec([b, 2])
    else:
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(IR_MODELS)}")
    if not train:
        with no_grad():  # composite ops stay whole when no gradient is taken
            return trace(model, x)
    opt = make_optimizer(optimizer, model.parameters(), None)
    loss_fn = CrossEntropyLoss()

    def step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return trace(step, x, spec([b], "i64"))


def _script_program(path: Path):
    """Run the script and take its Program (see IR_SCRIPT_HELP)."""
    import runpy

    from .errors import VerigradError
    from .ir import Program, trace
    from .shapes import Spec

    if not path.is_file():
        raise ValueError(f"no such script: {path}")
    try:
        namespace = runpy.run_path(str(path), run_name="__verigrad_ir__")
        if callable(namespace.get("program")):
            program = namespace["program"]()
        elif "model" in namespace and "example_spec" in namespace:
            specs = namespace["example_spec"]
            program = trace(namespace["model"], *((specs,) if isinstance(specs, Spec) else specs))
        else:
            program = None
    except VerigradError:
        raise  # a shape or dtype error: main() prints it with the user's line
    except Exception as e:  # the script's own error, in one line with the script's line
        line = _last_frame(e, path)
        raise ValueError(f"{path}{f':{line}' if line else ''}: {type(e).__name__}: {e}") from None
    if program is None:
        raise ValueError(f"{path} defines neither program() nor model and example_spec")
    if not isinstance(program, Program):
        raise ValueError(f"{path}: program() returned {type(program).__name__}, not a verigrad Program")
    return program


def _last_frame(error: BaseException, path: Path) -> int | None:
    """The deepest line of the script in the error's traceback, if any."""
    import traceback

    target = path.resolve()
    frames = traceback.extract_tb(error.__traceback__)
    lines = [f.lineno for f in frames if Path(f.filename).resolve() == target]
    return lines[-1] if lines else None


def _ops(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from .backends import get_backend
    from .registry import OPS

    table = Table("op", "kind", "grad", "exact", "torch", "doc", title="verigrad ops")
    for name, op in sorted(OPS.items()):
        doc = (op.__doc__ or "").split("\n")[0]
        table.add_row(
            name,
            "composite" if op.is_composite else "primitive",
            "yes" if op.differentiable else "",
            "yes" if op.exact else "",
            "yes" if op.torch else "",
            doc,
        )
    console = Console()
    console.print(table)
    report = get_backend().report()
    console.print(
        f"{len(OPS)} ops; backend {get_backend().name}: {len(report['native'])} native, "
        f"{len(report['fallback'])} on the reference"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    if args.every_f32:
        from .sweep import run_command as sweep_command

        return sweep_command(args.backend, args.op)
    from .verify import run_command

    return run_command(args.backend, args.op)


def _fetch(args: argparse.Namespace) -> int:
    from .models.fetch import fetch

    print(fetch(args.name))
    return 0


def _open_language_model(args: argparse.Namespace):
    """The model and tokenizer of --model, and one line on stderr saying what runs."""
    from .backends import get_backend
    from .models.catalog import load_language_model, matmul_description

    model, tokenizer = load_language_model(args.model, args.activations)
    print(
        f"{args.model}: {type(model).__name__}, context {model.context_length}, vocab {model.vocab_size}; "
        f"{matmul_description(model)}; backend {get_backend().name}, {args.threads} thread(s)",
        file=sys.stderr,
    )
    return model, tokenizer


def _sampling(args: argparse.Namespace) -> dict:
    return {
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "repeat_penalty": args.repeat_penalty,
        "seed": args.seed,
    }


def _on_backend(run):
    """Run an LM command on --backend with --threads, restoring both afterwards."""

    def wrapped(args: argparse.Namespace) -> int:
        from .backends import backend, default_threads, get_backend, set_threads

        if args.threads is None:
            args.threads = default_threads()
        with backend(args.backend):
            before = get_backend().threads
            set_threads(args.threads)
            try:
                return run(args)
            finally:
                set_threads(before)

    return wrapped


def _print_piece(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


@_on_backend
def _generate(args: argparse.Namespace) -> int:
    from .models.lm import generate

    model, tokenizer = _open_language_model(args)
    if args.raw or not tokenizer.chat_template:
        prompt = tokenizer.encode(args.prompt)
    else:  # an instruction-tuned model reads the prompt as the user's turn of a chat
        text = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}])
        prompt = tokenizer.encode(text, add_special=False)  # the template writes the special tokens
    result = generate(model, tokenizer, prompt, stream=_print_piece, **_sampling(args))
    print()
    print(result.summary(), file=sys.stderr)
    return 130 if result.finish_reason == "interrupted" else 0


@_on_backend
def _chat(args: argparse.Namespace) -> int:
    from .models.lm import generate

    model, tokenizer = _open_language_model(args)
    if not tokenizer.chat_template:
        raise ValueError(f"{args.model} has no chat template: use `verigrad generate` for plain text")
    start = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(start)
    cache = model.new_cache(1, min(args.context or model.context_length, model.context_length))
    print("type a message; /reset starts over, /exit (or Ctrl-D) quits", file=sys.stderr)
    turn = 0
    while True:
        try:
            line = input("> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if line in ("/exit", "/quit"):
            return 0
        if line == "/reset":
            messages = list(start)
            continue
        if not line:
            continue
        messages.append({"role": "user", "content": line})
        text = tokenizer.apply_chat_template(messages)
        try:
            result = generate(
                model,
                tokenizer,
                tokenizer.encode(text, add_special=False),
                stream=_print_piece,
                cache=cache,
                **{**_sampling(args), "seed": args.seed + turn},
            )
        except ValueError as e:  # the conversation outgrew the context
            messages.pop()
            print(f"verigrad chat: error: {e}; /reset starts a new conversation", file=sys.stderr)
            continue
        print()
        print(result.summary(), file=sys.stderr)
        messages.append({"role": "assistant", "content": result.text})
        turn += 1


def _add_language_model_commands(sub) -> None:
    """`fetch`, `generate` and `chat`."""
    from .backends import available
    from .models.fetch import MODELS

    fetch = sub.add_parser("fetch", help="download a model into the cache (once) and print its path")
    fetch.add_argument("name", nargs="?", default="smollm2", choices=sorted(MODELS), help="default smollm2")
    fetch.set_defaults(run=_fetch)
    generate = sub.add_parser("generate", help="continue a prompt with a language model, streaming the text")
    generate.add_argument("prompt", help="the text to continue (by default, as the user's chat turn)")
    generate.add_argument(
        "--raw", action="store_true", help="give the prompt to the model as it is, not as a chat turn"
    )
    generate.set_defaults(run=_generate)
    chat = sub.add_parser("chat", help="talk with a language model (multi-turn, with its chat template)")
    chat.add_argument("--system", default=None, help="a system message starting the conversation")
    chat.add_argument(
        "--context", type=_positive_int, default=None, help="tokens kept (default: the model's)"
    )
    chat.set_defaults(run=_chat)
    for p in (generate, chat):
        p.add_argument(
            "--model",
            default="smollm2",
            help="a name (smollm2), a .gguf file, or a GPT-2 folder (default smollm2)",
        )
        p.add_argument("--max-tokens", type=_positive_int, default=256, help="per reply (default 256)")
        p.add_argument("--temperature", type=_non_negative_float, default=0.8, help="0: greedy (default 0.8)")
        p.add_argument("--top-k", type=_non_negative_int, default=40, help="0: off (default 40)")
        p.add_argument("--top-p", type=_positive_float, default=0.95, help="1: off (default 0.95)")
        p.add_argument("--repeat-penalty", type=_positive_float, default=1.0, help="1: off (default 1.0)")
        p.add_argument("--seed", type=int, default=0, help="the same seed gives the same text (default 0)")
        p.add_argument(
            "--threads",
            type=_positive_int,
            default=None,
            help=THREADS_HELP,
        )
        p.add_argument(
            "--activations",
            choices=("q8", "f32"),
            default="q8",
            help="quantized matmul: activations to 8 bits per block of 32 as llama.cpp (q8, default), or f32",
        )
        p.add_argument(
            "--backend", choices=available(), default="cpu" if "cpu" in available() else "reference"
        )


def _version(args: argparse.Namespace) -> int:
    import verigrad

    print(f"verigrad {verigrad.__version__}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line (`verigrad train: error: ...`), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="verigrad",
        description="verigrad: every op has one NumPy definition; shapes are checked for every size.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from .backends import available
    from .train import OPTIMIZERS

    train = sub.add_parser("train", help="train the CNN on the shipped digits (or MNIST) and save it")
    train.add_argument("--epochs", type=_positive_int, default=12)
    train.add_argument("--batch-size", type=_positive_int, default=32)
    train.add_argument(
        "--lr", type=_positive_float, default=None, help="default: 1e-2 (adam, adamw), 0.1 (sgd)"
    )
    train.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", default="runs/digits", help="folder for the checkpoint and the picture")
    train.add_argument("--backend", choices=available(), default="cpu")
    train.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help=THREADS_HELP,
    )
    train.add_argument("--eager", action="store_true", help="run each step eagerly instead of compiled")
    train.add_argument("--data", choices=("digits", "mnist"), default="digits")
    train.add_argument("--data-dir", default=None, help="folder with MNIST's IDX files (for --data mnist)")
    train.set_defaults(run=_train)
    evaluate = sub.add_parser("eval", help="test accuracy of a checkpoint written by `verigrad train`")
    evaluate.add_argument("checkpoint")
    evaluate.add_argument("--data-dir", default=None)
    evaluate.set_defaults(run=_eval)
    demo = sub.add_parser("demo", help="train a small MLP eagerly and print the loss falling")
    demo.add_argument("--steps", type=_positive_int, default=300, help="SGD steps (default 300)")
    demo.set_defaults(run=_demo)
    ir = sub.add_parser(
        "ir",
        help="print the IR program of a model (forward or training step) or of a script",
        description="Print a traced program: a model of the repository (its forward pass, or with "
        "--train its training step) with a symbolic batch B, or what SCRIPT defines.",
    )
    ir.add_argument("script", nargs="?", metavar="SCRIPT.py", help=IR_SCRIPT_HELP)
    ir.add_argument("--model", choices=IR_MODELS, default=None, help="default: cnn (the digits CNN)")
    ir.add_argument("--train", action="store_true", help="the training step: forward, backward, update")
    ir.add_argument("--optimizer", choices=OPTIMIZERS, default="adam", help="with --train (default adam)")
    ir.add_argument(
        "--passes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print after the default pass pipeline (default), or as traced (--no-passes)",
    )
    ir.add_argument("--batch", type=_positive_int, default=None, help="a concrete batch (default: symbol B)")
    ir.set_defaults(run=_ir)
    sub.add_parser("ops", help="list every op in the registry").set_defaults(run=_ops)
    verify = sub.add_parser(
        "verify",
        help="verify a backend's kernels against the op references (exit 1 on any failure)",
        description="List a backend's native kernels (with their stated exactness) and the ops that fall "
        "back to the reference, then hold every native kernel to its op's reference on the op's samples, "
        "special values, empty, size-1 and grown sizes and non-contiguous views, with 1, 2 and 3 threads.",
    )
    verify.add_argument("--backend", choices=available(), default="cpu", help="default: cpu")
    verify.add_argument("--op", default=None, help="verify only this op's kernels")
    verify.add_argument(
        "--every-f32",
        action="store_true",
        help="instead, run the f32 kernel of --op (default: of every one-operand element-wise op) on all "
        "2^32 f32 inputs against the reference (0.5-3 minutes per op on two cores)",
    )
    verify.set_defaults(run=_verify)
    _add_language_model_commands(sub)
    sub.add_parser("version", help="print the version").set_defaults(run=_version)
    return parser


def _positive(kind: type, what: str, zero: bool = False):
    """An argparse type: a number of `kind` greater than 0 (or equal to it with `zero`), or a one-line
    error."""
    adjective = "non-negative" if zero else "positive"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {adjective} {what}, got {text!r}") from None
        if not (value >= 0 if zero else value > 0):
            raise argparse.ArgumentTypeError(f"expected a {adjective} {what}, got {value}")
        return value

    return parse


_positive_int = _positive(int, "integer")
_positive_float = _positive(float, "number")
_non_negative_int = _positive(int, "integer", zero=True)
_non_negative_float = _positive(float, "number", zero=True)


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import VerigradError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except (VerigradError, ValueError, OSError) as e:  # a one-line error, never a traceback
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if getattr(e, "where", None) is not None:
            message += f" (at {e.where})"  # the user's line of a shape or dtype error
        print(f"verigrad {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"verigrad {args.command}: interrupted", file=sys.stderr)
        return 130
