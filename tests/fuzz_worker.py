"""The subprocess of the tests/test_fuzz_*.py modules: it imports verigrad's loaders once, then runs each case
in a forked child under a time and an address-space limit (tools/fuzz.py's `run_case`), so that a
segfault, a hang or a huge allocation is an outcome, not the end of the test run.

Protocol: one JSON line in, `{"loader": NAME, "path": FILE, "args": {...}}`; one JSON line out, the outcome
`{"kind", "seconds", "peak_mib", "detail"}` (kind: loaded, refused, wrong, crashed, other, timeout).
`FuzzWorker` is the tests' side.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from fuzz import Outcome, Wrong, run_case  # noqa: E402

from verigrad.errors import VerigradError  # noqa: E402


class Refused(VerigradError):
    """A command's ValueError that names the file at fault: the refusal its command line prints."""


@contextmanager
def value_errors_naming(text: str) -> Iterator[None]:
    """A ValueError whose message holds `text` (the file's path) as a Refused."""
    try:
        yield
    except VerigradError:
        raise
    except ValueError as e:
        if text not in str(e):
            raise
        raise Refused(str(e)) from None


def no_file(path: Path) -> None:
    if path.exists():
        raise Wrong(f"{path} was left behind by a refused run")


def load_model(path: Path, tokens: int = 3) -> None:
    """`load_language_model(path)`, then its tokenizer's ids through the model: a prompt's logits and
    `tokens` greedy steps with the KV cache."""
    from verigrad.models.catalog import load_language_model
    from verigrad.models.lm import generate

    model, tokenizer = load_language_model(path)
    ids = tokenizer.encode("hello world", add_special=False)[: min(4, model.context_length)] or [0]
    with np.errstate(all="ignore"):
        logits = model(np.array([ids])).numpy()
        if logits.shape != (1, len(ids), model.vocab_size):
            raise Wrong(f"logits of shape {logits.shape} for {len(ids)} ids")
        prompt = tokenizer.encode("hello")
        if len(prompt) + tokens <= model.context_length:  # a file may claim a context of 1
            generate(model, tokenizer, prompt, max_tokens=tokens, temperature=0.0)


def quantize(path: Path, out: str, type_name: str) -> None:
    """`verigrad quantize path out --type type_name`: a refusal is one line naming the input and leaves no
    `out`; a written `out` loads and runs as a model where the input does."""
    from verigrad.cli import main

    target = Path(out)
    target.unlink(missing_ok=True)
    errors = io.StringIO()
    with redirect_stderr(errors):
        status = main(["quantize", str(path), out, "--type", type_name])
    if status:
        no_file(target)
        message = errors.getvalue().strip()
        if str(path) not in message or "\n" in message:
            raise Wrong(f"exit status {status}, the error does not name the file in one line: {message}")
        raise Refused(message)
    if not target.is_file():
        raise Wrong(f"the command ended well without writing {target}")
    try:
        load_model(target, tokens=1)
    except VerigradError as e:  # fine where the input does not load either (it has no tokenizer)
        try:
            load_model(path, tokens=1)
        except VerigradError:
            return
        raise Wrong(f"the input loads, its quantized output is refused: {e}") from None


def resume(path: Path, command: str, config: dict[str, Any], cache: str = "") -> None:
    """`verigrad train lm --resume` (command "lm") or `verigrad finetune --resume` (command "finetune") of
    the run folder holding the checkpoint `path`, then one training step."""
    from verigrad.cli import finetune_trainer, lm_trainer

    with value_errors_naming(str(path)):
        if command == "lm":
            trainer = lm_trainer
            run = trainer.prepare(trainer.LMTrainConfig(**config), resume=True, cache=cache)
        else:
            trainer = finetune_trainer
            run = trainer.prepare(trainer.FinetuneConfig(**config), resume=True)
    run.config.steps = run.start + 1
    run.config.eval_every = run.config.save_every = 10**6
    with np.errstate(all="ignore"), value_errors_naming("training diverged, no checkpoint written"):
        trainer.train(run)
    if not isinstance(run.history["loss"][-1], float):
        raise Wrong(f"the step's loss is {run.history['loss'][-1]!r}")


def finetune_data(path: Path, tokenizer: str, context: int = 64) -> None:
    """The fine-tuning examples of the JSONL file `path`, tokenized by the GGUF file `tokenizer`."""
    from verigrad.cli.finetune_data import prepare_examples
    from verigrad.io.gguf import read_gguf
    from verigrad.io.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(read_gguf(tokenizer))
    with value_errors_naming(str(path)):
        examples, _ = prepare_examples(str(path), tok, context)
    for example in examples:
        ids = np.asarray(example.ids)
        if ids.size and (ids.min() < 0 or ids.max() >= tok.vocab_size):
            raise Wrong(f"an example holds id {ids.max()} of a {tok.vocab_size}-token vocabulary")


LOADERS: dict[str, Callable[..., None]] = {
    "model": load_model,
    "quantize": quantize,
    "resume": resume,
    "finetune_data": finetune_data,
}


def serve(lines: Any, out: Any, time_limit: float, memory_mib: int) -> None:
    for line in lines:
        case = json.loads(line)
        load = functools.partial(LOADERS[case["loader"]], **case.get("args", {}))
        outcome = run_case(lambda path, load=load: load(path), Path(case["path"]), time_limit, memory_mib)
        out.write(json.dumps(outcome.__dict__) + "\n")
        out.flush()


class FuzzWorker:
    """The tests' side: `with FuzzWorker() as w: w.run("model", path)` gives the case's `Outcome`."""

    def __init__(self, time_limit: float = 20.0, memory_mib: int = 1024) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
        command = [sys.executable, __file__, str(time_limit), str(memory_mib)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def run(self, loader: str, path: Path, **args: Any) -> Outcome:
        case = {"loader": loader, "path": str(path), "args": args}
        self.process.stdin.write(json.dumps(case) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fuzz worker ended (status {self.process.wait()})")
        return Outcome(**json.loads(line))

    def __enter__(self) -> FuzzWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


if __name__ == "__main__":
    import verigrad.cli.finetune_trainer
    import verigrad.cli.lm_trainer
    import verigrad.io.gguf_quantize
    import verigrad.models.catalog  # noqa: F401

    serve(sys.stdin, sys.stdout, float(sys.argv[1]), int(sys.argv[2]))
