"""The trainer of `verigrad finetune`: a Llama GGUF model (a catalog name or a file) fine-tuned on chat
examples (cli/finetune_data.py), the loss on the answer tokens alone, with the loop of `verigrad train
lm` (cli/train_loop.py: AdamW groups, warmup and cosine, clipping, accumulation, validation,
checkpoints, a bit-identical `--resume`).

LoRA (the default): the quantized base stays quantized in memory and frozen (a step's products
de-quantize one matrix at a time, in the forward and again in the backward: nn/lora.py's TrainingQLinear),
f32 adapters are trained (nn/lora.py, PEFT's semantics); the loss's head is applied to the answer rows
alone (models/answer_loss.py). `full=True`: every weight dequantized to f32 and trained. At the end the
adapters are saved as PEFT saves them (`adapter_model.safetensors`, `adapter_config.json`), and with
`merge` the whole model as a GGUF file (`model-f16.gguf` or `model-q8_0.gguf`) with the base's metadata
and tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd import no_grad
from ..backends import backend, default_threads, set_threads
from ..errors import WeightFileError
from ..io import load, save
from ..io.atomic import write_atomically
from ..io.gguf import read_gguf
from ..io.gguf_writer import TYPES, write_like
from ..io.safetensors_format import read_metadata
from ..io.tokenizer import Tokenizer
from ..models.answer_loss import answer_loss
from ..models.gpt import decay_groups
from ..models.llama import Llama
from ..models.lora import (
    DEFAULT_TARGETS,
    adapter_config,
    add_lora,
    check_targets,
    gguf_weights,
    peft_adapters,
    to_f32,
)
from ..nn.lora import check_rank
from ..ops import from_numpy, manual_seed
from ..optim import AdamW, Optimizer
from .finetune_data import IGNORE, ChatBatches, Example, prepare_examples, rows, split
from .train_loop import (
    accumulated_step,
    check_checkpoint,
    check_options,
    check_token_step,
    evaluating,
    loop_state,
    restore_loop_state,
    saved_run,
    train_steps,
)

CHECKPOINT = "finetune.safetensors"
ADAPTERS, ADAPTER_CONFIG = "adapter_model.safetensors", "adapter_config.json"
CONFIG_DIGEST = "adapter_config_sha256"  # in the adapters' metadata: the config exported with them
MERGES = tuple(TYPES)


@dataclass
class FinetuneConfig:
    """The options of `verigrad finetune`; each is checked when the config is made."""

    model: str = "smollm2"
    data: str = ""
    out: str = "runs/finetune"
    full: bool = False
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = DEFAULT_TARGETS
    context: int = 256
    batch: int = 4
    accumulate: int = 1
    steps: int = 100
    lr: float = 2e-4
    min_lr: float = 2e-5
    warmup: int = 10
    clip: float = 1.0
    weight_decay: float = 0.0
    eval_every: int = 50
    save_every: int = 50
    sample_tokens: int = 32
    merge: str | None = None  # "f16" or "q8_0": a GGUF of the merged model at the end
    seed: int = 0
    threads: int = field(default_factory=default_threads)
    compiled: bool = True
    backend: str = "cpu"

    def __post_init__(self) -> None:
        check_options(self, "context", "batch", "accumulate", "steps", "eval_every", "save_every", "threads")
        check_options(self, "sample_tokens")
        self.targets = check_targets(self.targets)
        check_rank(self.rank, self.alpha)
        if self.merge is not None and self.merge not in MERGES:
            raise ValueError(f"--merge must be one of {', '.join(MERGES)}, got {self.merge!r}")
        if not self.data:
            raise ValueError("--data: a JSONL file of chat examples is required")


def gguf_path(model: str) -> Path:
    """The GGUF file of a catalog name (fetched into the cache on first use) or of a path."""
    from ..models.catalog import LANGUAGE_MODELS
    from ..models.fetch import fetch

    if model in LANGUAGE_MODELS:
        return fetch(model)
    path = Path(model)
    if not path.is_file():
        raise WeightFileError(
            f"--model {model}: not a model name ({', '.join(sorted(LANGUAGE_MODELS))}) or a .gguf file"
        )
    return path


def load_base(path: Path, config: FinetuneConfig) -> Llama:
    """The GGUF's Llama (f32 activations: the quantized products differentiate in x), adapted or made f32."""
    model = Llama.from_gguf(path, activations="f32")
    if config.full:
        return to_f32(model)
    return add_lora(model, config.targets, config.rank, config.alpha)


def loss(model: Llama, ids: Any, targets: Any) -> Any:
    """The mean cross-entropy over the answer tokens (targets other than IGNORE), their logits alone made."""
    return answer_loss(model, ids, targets, IGNORE)


def make_optimizer(model: Llama, config: FinetuneConfig) -> Optimizer:
    """AdamW on the trainable parameters (matrices decayed, gains not), betas (0.9, 0.999)."""
    return AdamW(decay_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.999), eps=1e-8)


def finetune_step(model: Llama, optimizer: Optimizer, clip: float) -> Any:
    params = [p for p in model.parameters() if p.requires_grad]
    return accumulated_step(lambda x, y: loss(model, x, y), params, optimizer, clip)


@dataclass
class FinetuneRun:
    """What `prepare` made: the base file, tokenizer, examples, model, optimizer and where to start."""

    config: FinetuneConfig
    source: Path
    tokenizer: Tokenizer
    train: list[Example]
    validation: list[Example]
    cut: int
    model: Llama
    optimizer: Optimizer
    start: int = 0
    history: dict[str, list[float]] = field(default_factory=dict)

    @property
    def pad(self) -> int:
        return self.tokenizer.eos_id if self.tokenizer.eos_id is not None else 0


def prepare(config: FinetuneConfig, resume: bool = False) -> FinetuneRun:
    """Everything checked and made before the first step: the output folder and the checkpoint to resume,
    the base model and its tokenizer, the examples, the model adapted, the optimizer, and the step traced
    for any batch and sequence length."""
    from ..backends.active import lookup

    lookup(config.backend)
    saved = saved_run(config, CHECKPOINT, resume, "finetune", "verigrad finetune", MUST_MATCH)
    out = Path(config.out)
    source = gguf_path(config.model)
    tokenizer = Tokenizer.from_gguf(read_gguf(source))
    examples, cut = prepare_examples(config.data, tokenizer, config.context)
    train, validation = split(examples, config.seed)
    set_threads(config.threads)
    manual_seed(config.seed)
    with backend(config.backend):
        model = load_base(source, config)
        model.rope_rows(config.context)  # made now, not inside the compiled step's trace
        optimizer = make_optimizer(model, config)
        check_token_step(finetune_step(model, optimizer, config.clip), config.accumulate)
    run = FinetuneRun(config, source, tokenizer, train, validation, cut, model, optimizer)
    if saved is not None:
        restore(run, out / CHECKPOINT, saved)
    return run


def evaluate(run: FinetuneRun) -> float:
    """The validation loss: nats per answer token over the validation examples."""
    total, count = 0.0, 0
    with evaluating(run.model), no_grad():
        for at in range(0, len(run.validation), run.config.batch):
            part = run.validation[at : at + run.config.batch]
            x, y = rows(part, max(len(e.ids) for e in part) - 1, run.pad)
            answers = int((y != IGNORE).sum())
            total += float(loss(run.model, from_numpy(x), from_numpy(y))) * answers
            count += answers
    return total / count


def sample(run: FinetuneRun, seed: int) -> str:
    """The model's answer to the first validation (else training) example's prompt."""
    from ..models.lm import generate

    e = (run.validation or run.train)[0]
    prompt = e.ids[: int(np.argmax(e.answer))].tolist()
    with evaluating(run.model), no_grad():
        result = generate(run.model, run.tokenizer, prompt, max_tokens=run.config.sample_tokens, seed=seed)
    return result.text


def train(
    run: FinetuneRun, on_step: Any = None, on_eval: Any = None, stop_after: int | None = None
) -> FinetuneRun:
    """Train from `run.start` to `config.steps` (or to `stop_after`), then write the adapters (LoRA) and,
    with `merge`, the merged GGUF."""
    c = run.config
    out = Path(c.out)
    out.mkdir(parents=True, exist_ok=True)
    batches = ChatBatches(run.train, c.batch, c.accumulate, c.seed, run.pad)
    train_steps(
        run,
        batches,
        finetune_step(run.model, run.optimizer, c.clip),
        lambda x, y: int((y != IGNORE).sum()),  # answer tokens: those trained on
        lambda: {"val_loss": evaluate(run)} if run.validation else {},
        lambda: save_checkpoint(run, out / CHECKPOINT),
        on_step=on_step,
        on_eval=on_eval,
        eval_extra=lambda step: {"sample": sample(run, seed=step)},
        stop_after=stop_after,
    )
    if run.start == c.steps:
        export(run)
    return run


# export --------------------------------------------------------------------------------------------
def export(run: FinetuneRun) -> list[Path]:
    """The adapters as PEFT saves them (LoRA runs), and with `merge` the merged model as a GGUF file."""
    c, out, written = run.config, Path(run.config.out), []
    if not c.full:
        text = (json.dumps(adapter_config(run.model, str(c.model)), indent=2) + "\n").encode()
        # the config first, then the adapters naming its digest: an export cut between the two leaves old
        # adapters beside the new config, which check_adapters detects (each file is whole, old or new)
        write_atomically(out / ADAPTER_CONFIG, lambda f: f.write(text))
        digest = hashlib.sha256(text).hexdigest()
        save(peft_adapters(run.model), out / ADAPTERS, metadata={"format": "pt", CONFIG_DIGEST: digest})
        written += [out / ADAPTERS, out / ADAPTER_CONFIG]
    if c.merge is not None:
        names = read_gguf(run.source).tensors
        written.append(
            write_like(out / f"model-{c.merge}.gguf", run.source, gguf_weights(run.model, names), c.merge)
        )
    return written


def check_adapters(folder: str | Path) -> None:
    """Refuse (ValueError) an adapters file and config that one export did not write together: an export
    interrupted between its two files, or one of them replaced since."""
    folder = Path(folder)
    named = read_metadata(folder / ADAPTERS).get(CONFIG_DIGEST)
    digest = hashlib.sha256((folder / ADAPTER_CONFIG).read_bytes()).hexdigest()
    if named != digest:
        raise ValueError(
            f"{folder}: {ADAPTERS} was not exported with this {ADAPTER_CONFIG} (an interrupted export, or "
            "a file replaced since); export them again"
        )


# checkpoints ---------------------------------------------------------------------------------------
def trainable(model: Llama) -> dict[str, Any]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(run: FinetuneRun, path: Path) -> Path:
    """The trained weights (the adapters, or every weight with `full`), the optimizer's state, and in the
    metadata the config, the step, the generator's state and the history; written atomically."""
    optimizer_tensors, loop_meta = loop_state(run)
    tensors = {k: v.detach().numpy() for k, v in trainable(run.model).items()} | optimizer_tensors
    meta = {"model": "finetune", "config": json.dumps(asdict(run.config)), **loop_meta}
    return save(tensors, path, metadata=meta)


# the options a resumed run must share with the checkpoint's
MUST_MATCH = ("model", "data", "full", "rank", "alpha", "targets", "context", "batch", "accumulate", "seed")


def restore(run: FinetuneRun, path: Path, meta: dict[str, Any]) -> None:
    """Put the checkpoint's weights, optimizer state, step, generator state and history into `run`."""
    tensors = load(path)
    params = trainable(run.model)
    check_checkpoint(path, tensors, params, run.optimizer, meta)
    weights = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    with no_grad():
        for name, value in weights.items():
            params[name].assign(value)
    restore_loop_state(run, tensors, meta)


def nats_to_text(value: float) -> str:
    return f"{value:.3f} (perplexity {math.exp(value):.1f})" if math.isfinite(value) else str(value)
