"""The trainer of `verigrad train lm`: a GPT (`models/gpt.py`) trained on a text corpus
(`data/text.py`) with AdamW (weight-decay and no-decay groups), linear warmup then cosine decay,
gradient clipping and accumulation, in one compiled step (`verigrad.compile`; eager with
`compiled=False`).

Everything that can be checked is checked before the first step (`prepare`: the options, the model's
config, the training step symbolically for any batch and sequence length, the data, the output folder,
the checkpoint to resume). A checkpoint (`lm.safetensors`, written atomically) holds the weights, the
optimizer's state, the step (which fixes the schedule and the data order) and the random generator's
state, so a run resumed from it continues with the bits of a run never stopped.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..autograd import no_grad
from ..backends import backend, default_threads, set_threads
from ..data.text import (
    Corpus,
    TokenBatches,
    check_vocab_size,
    prepare_corpus,
    stdlib_files,
    text_files,
    validation_offsets,
    windows,
)
from ..io import save
from ..io.atomic import write_atomically
from ..models.gpt import CHECKPOINT, GPT, TOKENIZER, GPTConfig, decay_groups
from ..nn.utils import clip_grad_norm_
from ..ops import from_numpy, manual_seed
from ..optim import AdamW, Optimizer
from ..tensor import Tensor
from . import data_parallel
from .train_loop import (
    accumulated_step,
    check_options,
    check_token_step,
    evaluating,
    loop_state,
    lr_at,
    restore,
    saved_run,
    train_steps,
)

__all__ = ["LMTrainConfig", "lm_step", "lr_at", "make_optimizer", "prepare", "train"]

PICTURE = "training.png"
SAMPLE_PROMPT = "def "


@dataclass
class LMTrainConfig:
    """The options of `verigrad train lm`; each is checked when the config is made."""

    layers: int = 4
    heads: int = 4
    width: int = 128
    context: int = 128
    batch: int = 8
    steps: int = 1000
    lr: float = 3e-3
    min_lr: float = 3e-4  # the cosine decays to this
    warmup: int = 50
    accumulate: int = 1
    clip: float = 1.0  # 0: no clipping
    weight_decay: float = 0.1
    eval_every: int = 200
    eval_batches: int = 8
    save_every: int = 200
    sample_tokens: int = 64
    vocab_size: int = 2048
    norm: str = "layernorm"
    positions: str = "learned"
    mlp: str = "gelu"
    dropout: float = 0.0
    data: str | None = None  # None: the standard library's sources
    max_files: int | None = None  # the first that many files of the corpus (tests)
    out: str = "runs/lm"
    seed: int = 0
    threads: int = field(default_factory=default_threads)
    compiled: bool = True
    backend: str = "cpu"
    shards: int = 1  # of each batch, whose gradients are averaged in shard order (cli/data_parallel.py)

    def __post_init__(self) -> None:
        check_options(self, "layers", "heads", "width", "context", "batch", "steps", "accumulate")
        check_options(self, "eval_every", "eval_batches", "save_every", "sample_tokens", "threads", "shards")
        if self.max_files is not None and (not isinstance(self.max_files, int) or self.max_files < 2):
            raise ValueError(f"max_files must be an integer of at least 2, got {self.max_files!r}")
        check_vocab_size(self.vocab_size)
        data_parallel.check_batch(self.batch, self.shards, "--batch")
        if self.shards > 1 and self.dropout:
            raise ValueError(
                f"--dropout {self.dropout} with {self.shards} shards: each rank would draw its own masks, "
                "not those of one process; train with --dropout 0 on several shards"
            )
        self.model_config(self.vocab_size)  # the model's own checks: heads dividing width, ...

    def model_config(self, vocab_size: int) -> GPTConfig:
        try:
            return GPTConfig(
                vocab_size=vocab_size,
                context=self.context,
                n_layer=self.layers,
                n_head=self.heads,
                width=self.width,
                norm=self.norm,
                positions=self.positions,
                mlp=self.mlp,
                dropout=self.dropout,
            )
        except ValueError as e:  # named as the command's options
            raise ValueError(
                str(e).replace("GPTConfig: ", "").replace("n_head", "--heads").replace("width", "--width")
            ) from None


def make_optimizer(model: GPT, config: LMTrainConfig) -> Optimizer:
    """AdamW on `decay_groups` (matrices decayed, gains and biases not), betas (0.9, 0.95)."""
    return AdamW(decay_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.95), eps=1e-8)


def lm_step(model: GPT, optimizer: Optimizer, clip: float) -> Callable:
    """step(x, y) on micro-batches x, y [A, B, T]: each micro-batch's loss / A backpropagated (the
    gradients add up, as PyTorch's accumulation), the gradients clipped to norm `clip` (0: not), one
    optimizer update; returns the mean loss."""
    params = [p for p in model.parameters() if p.requires_grad]
    return accumulated_step(model.loss, params, optimizer, clip)


def sharded_lm_step(model: GPT, optimizer: Optimizer, clip: float, ranks: data_parallel.Ranks) -> Callable:
    """`lm_step` with each micro-batch [B, T] split into `ranks.shards` shards along B: a shard's
    gradient is its micro-batches' accumulated as in `lm_step`, the step's the shards' averaged in shard
    order (`data_parallel`), then clipped and applied."""
    params = [p for p in model.parameters() if p.requires_grad]
    ddp = data_parallel.wrap(model, ranks) if ranks.one_shard_a_rank else None

    def step(x, y):
        count = x.shape[0]

        def compute(s: int) -> list[Tensor]:
            xs, ys = data_parallel.shard(x, s, ranks, axis=1), data_parallel.shard(y, s, ranks, axis=1)
            total = None
            for i in range(count):
                last = i == count - 1
                with ddp.no_sync() if ddp is not None and not last else contextlib.nullcontext():
                    loss = model.loss(xs[i], ys[i]) / count
                    loss.backward()
                total = loss.detach() if total is None else total + loss.detach()
            return [total]

        optimizer.zero_grad()
        (total,) = data_parallel.averaged(compute, params, ranks)
        if clip:
            clip_grad_norm_(params, clip)
        optimizer.step()
        return total

    return step


def check_step(model: GPT, optimizer: Optimizer, config: LMTrainConfig) -> None:
    """The training step traced on symbolic token ids [A, B, T] (B and T symbols; T up to the context):
    a shape or dtype error of any batch or sequence length is raised here, before training."""
    check_token_step(lm_step(model, optimizer, config.clip), config.accumulate)


@dataclass
class LMRun:
    """What `prepare` made: the corpus, the model, its optimizer, and the state to start from."""

    config: LMTrainConfig
    corpus: Corpus
    model: GPT
    optimizer: Optimizer
    start: int = 0
    history: dict[str, list[float]] = field(default_factory=dict)


def corpus_files(config: LMTrainConfig) -> list[Path]:
    files = stdlib_files() if config.data is None else text_files(config.data)
    files = files[: config.max_files] if config.max_files else files
    if not files:
        raise ValueError(f"--data {config.data}: no files in it")
    return files


def prepare(config: LMTrainConfig, resume: bool = False, cache: str | None = None) -> LMRun:
    """Everything checked and made before the first step: the output folder, the checkpoint to resume
    (with `resume`: it must exist and match the config), the corpus and tokenizer (from the cache when
    made before), the model, the optimizer, and the step traced symbolically."""
    from ..backends.active import lookup

    lookup(config.backend)
    saved = saved_run(config, CHECKPOINT, resume, "gpt", "verigrad train lm", MUST_MATCH)
    out = Path(config.out)
    corpus = prepare_corpus(corpus_files(config), config.vocab_size, config.seed, cache=cache)
    TokenBatches(corpus.train, config.context, config.batch, config.accumulate, config.seed)  # enough text?
    validation_offsets(
        len(corpus.validation), config.context, config.eval_batches * config.batch, config.seed
    )
    set_threads(config.threads)
    manual_seed(config.seed)
    with backend(config.backend):
        model = GPT(config.model_config(corpus.vocab_size))
        optimizer = make_optimizer(model, config)
        check_step(model, optimizer, config)
    run = LMRun(config, corpus, model, optimizer)
    if saved is not None:
        restore(run, out / CHECKPOINT, saved)
    return run


# the loop ------------------------------------------------------------------------------------------
def evaluate(run: LMRun) -> tuple[float, float]:
    """(validation loss in nats per token, bits per byte) on the fixed validation windows."""
    c = run.config
    offsets = validation_offsets(len(run.corpus.validation), c.context, c.eval_batches * c.batch, c.seed)
    total, count = 0.0, 0
    with evaluating(run.model), no_grad():
        for at in range(0, len(offsets), c.batch):
            part = offsets[at : at + c.batch]
            x, y = windows(run.corpus.validation, part, c.context, (len(part),))
            total += float(run.model.loss(from_numpy(x), from_numpy(y))) * len(part)
            count += len(part)
    loss = total / count
    return loss, loss / math.log(2) / run.corpus.bytes_per_token


def sample(run: LMRun, tokenizer: Any, prompt: str = SAMPLE_PROMPT, seed: int = 0) -> str:
    """`sample_tokens` tokens generated after `prompt` (temperature 0.8, top-k 40), the model in eval mode."""
    from ..models.lm import generate

    with evaluating(run.model):
        result = generate(run.model, tokenizer, prompt, max_tokens=run.config.sample_tokens, seed=seed)
    return prompt + result.text


def train(
    run: LMRun,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int | None = None,
) -> LMRun:
    """Train from `run.start` to `config.steps` (or to step `stop_after`: a test's interrupted run),
    evaluating and sampling every `eval_every` steps and saving every `save_every` and at the end."""
    c = run.config
    ranks = data_parallel.current(c.shards)  # rank 0 alone evaluates and writes files
    out = Path(c.out)
    out.mkdir(parents=True, exist_ok=True)
    if ranks.leader:
        write_atomically(out / TOKENIZER, lambda f: f.write(run.corpus.tokenizer_json.encode()))
        tokenizer = load_tokenizer(out)
    batches = TokenBatches(run.corpus.train, c.context, c.batch, c.accumulate, c.seed)

    def numbers() -> dict[str, float]:
        val_loss, bpb = evaluate(run)
        return {"val_loss": val_loss, "val_bpb": bpb}

    return train_steps(
        run,
        batches,
        sharded_lm_step(run.model, run.optimizer, c.clip, ranks)
        if ranks.shards > 1
        else lm_step(run.model, run.optimizer, c.clip),
        lambda x, y: x.size,
        numbers,
        lambda: save_checkpoint(run, out / CHECKPOINT),
        on_step=on_step,
        on_eval=on_eval,
        eval_extra=lambda step: {"sample": sample(run, tokenizer, seed=step)},
        stop_after=stop_after,
        leader=ranks.leader,
    )


def load_tokenizer(folder: str | Path) -> Any:
    """The run folder's `tokenizer.json` as verigrad's Tokenizer (`<|endoftext|>` ends a text)."""
    from ..io.tokenizer import Tokenizer

    return Tokenizer.from_gpt2_folder(folder)


# checkpoints ---------------------------------------------------------------------------------------
def save_checkpoint(run: LMRun, path: Path) -> Path:
    """Weights, optimizer state (`optimizer.<index>.<name>`), and in the metadata the configs, the step,
    the generator's state, the groups' settings and the history; written atomically."""
    optimizer_tensors, loop_meta = loop_state(run)
    tensors: dict[str, Any] = dict(run.model.state_dict()) | optimizer_tensors
    meta = {
        "model": "gpt",
        "gpt": json.dumps(run.model.config.to_dict()),
        "config": json.dumps(asdict(run.config)),
        **loop_meta,
    }
    return save(tensors, path, metadata=meta)


# the options a resumed run must share with the checkpoint's
MUST_MATCH = (
    "layers",
    "heads",
    "width",
    "context",
    "vocab_size",
    "norm",
    "positions",
    "mlp",
    "data",
    "max_files",
    "seed",
    "batch",
    "accumulate",
)
