"""The serving engine: continuous batching of generation requests on one model, in a background thread.

`submit(request, on_event)` queues a request and returns its handle; `cancel(handle)` stops it. The thread
admits waiting requests between steps, into the free rows of the batch's cache (up to `max_batch` running or
prefilled; a row freed by a step is taken before the next): a request's prompt is prefilled into its row in
chunks of `block` tokens at block-aligned positions (`forward_chunk`: a plan compiled for any chunk length,
the eager forward's bits), whole blocks copied from the prefix cache where an earlier prompt computed them
(prefix_cache.py states the rule). Several prompts are prefilled at once where the model takes ragged steps
(else one at a time): a round runs one chunk of each, one after the other, or with `batch_prompts` as one
forward (`forward_ragged`, each run the bits it gets alone). The chunks are interleaved with the decode steps
(`prefill_tokens` prompt tokens between two steps), so a long prompt delays the running sequences' next tokens
by `prefill_tokens` tokens' time (about a step row each), not by its whole length; the chunks are the same
however they are interleaved or batched, so the prompt's results are too. (They are not one forward pass's by
construction: a chunk's attention sums the positions before it and its own in two f64 sums then adds them,
another association; rounded to f32 that rarely shows, and SmolLM2's logits and cache after prompts of 70 to
300 tokens were the same bits.) Every step runs one token of every running sequence as one batch
(`CachedStep.rows`: batched quantized matmuls, each row at its own length); sequences leave (end token,
max_tokens, a stop string, the context, a cancel) between steps, the last running row moving into the freed
one (the prompts being prefilled keep their rows; one that is done moves into the row after the running ones).
With `join_chunks` (the default) a prompt's chunk that would spend the rest of the prefill budget, when it is
a whole block and not its prompt's last, runs within the step instead (`forward_ragged`, or `forward_mixed`
for a model without ragged steps: the rows' tokens and the chunk as one forward, whose products read each
weight once for both; each row's bits are those it gets alone, so the chunking is still the same); with
`join_last` the prompts' last chunks too, whose first tokens come from the step's logits (off by default: on
SmolLM2 at 8 clients their sequences' first decode rows come a step later and the products past 8 rows cost
what the chunks run apart saved). A ragged forward's tokens are padded to a multiple of `ragged_pad` (fewer
plans), and `warm_positions` builds the steps' and chunks' plans for the short chats' windows before the first
request. Every kernel of the step computes row i from row i alone, so a request's tokens and log-probabilities
are the same bits whatever batch it lands in, and with a seed its own generator draws them.

`on_event(Event)` is called on the engine's thread with each new token's text (held back while it may be
the start of a stop string; a matched stop is not returned), and last with the finish reason and usage.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..autograd import no_grad
from ..backends import backend, get_backend
from ..models.lm import LanguageModel
from ..models.sampling import SamplingOptions, log_probabilities, next_token, penalized
from .batching import BatchCache
from .prefix_cache import PrefixCache

# A prompt is prefilled in chunks of BLOCK tokens at multiples of BLOCK, the prefix cache's unit: 16 tokens
# (vLLM's block), so that the system prompt that a chat template puts before every question (SmolLM2's:
# 24 tokens) is computed once and copied after (with 64, a prompt shorter than 65 tokens shares nothing,
# and a chat's prompts mostly are); a chunk costs ~5 ms of Python and eager dispatch more than its tokens.
# PREFILL_TOKENS prompt tokens run between two decode steps (several chunks), and the prefix cache keeps
# PREFIX_TOKENS tokens' blocks.
BLOCK, PREFILL_TOKENS, PREFIX_TOKENS = 16, 64, 16384
# a ragged forward's tokens are rounded up to a multiple of RAGGED_PAD (the padding a run of its own whose
# keys are not kept, each run's bits unchanged): a plan per (tokens, runs, window), and in a minute of 8
# clients' steady load 6 plans built in place of 14 (about 0.1 s each), for ~3.5 padded tokens a forward
RAGGED_PAD = 8


class QueueFull(Exception):
    """The engine's queue of waiting requests is full."""


@dataclass(frozen=True)
class Request:
    """A generation request: prompt token ids and OpenAI's sampling settings. `logprobs`: None for none,
    else how many most likely alternatives to report with each token's own log-probability (0 ... 20)."""

    prompt: Sequence[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: int | None = None

    def __post_init__(self) -> None:
        SamplingOptions(self.temperature, 0, self.top_p)  # checks them
        if not (isinstance(self.max_tokens, int) and self.max_tokens >= 1):
            raise ValueError(f"Request: max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not self.prompt:
            raise ValueError("Request: the prompt is empty: give at least one token")
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            raise ValueError(f"Request: logprobs must be 0 ... 20 alternatives, got {self.logprobs}")


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability and the `top` most likely alternatives (id, log-probability)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass
class Event:
    """New output of a request: `text` (what is safe to show), `tokens` generated since the last event
    (with `logprobs` when asked), and at the end `finish_reason` ("stop", "length", "cancelled" or
    "error", with `error` the message) and the usage counts."""

    text: str = ""
    tokens: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    error: str | None = None


@dataclass(eq=False)
class Handle:
    """A submitted request: `id`, and `cancelled` once `Engine.cancel` was called."""

    id: int
    request: Request
    on_event: Callable[[Event], None]
    cancelled: bool = False
    submitted: float = field(default_factory=time.perf_counter)


class _Sequence:
    """A running request: its cache row's length, its sampler and its text so far."""

    def __init__(self, handle: Handle, tokenizer: object, cached: int):
        r = handle.request
        self.handle, self.request = handle, r
        self.options = SamplingOptions(r.temperature, 0, r.top_p)
        seed = r.seed if r.seed is not None else int(np.random.SeedSequence().entropy)
        self.rng = np.random.default_rng(seed % 2**64)  # OpenAI's seeds may be negative, NumPy's may not
        self.decoder = tokenizer.stream()  # type: ignore[attr-defined]
        self.counts: dict[int, int] = {}
        self.out: list[int] = []
        self.text, self.sent = "", 0
        self.length = 0  # positions in the cache
        self.last = -1  # the token to run next
        self.cached = cached
        self.stop_width = max((len(s) for s in r.stop), default=0)


class _Prefill:
    """A prompt being prefilled, a chunk at a time, into cache row `row` (one past the running ones)."""

    def __init__(self, seq: _Sequence, prompt: list[int], digests: list[bytes], at: int, row: int):
        self.seq, self.prompt, self.digests, self.at, self.row = seq, prompt, digests, at, row

    def next_chunk(self, block: int) -> list[int]:
        """The prompt's next chunk: up to `block` tokens from `at` (a multiple of `block`)."""
        return self.prompt[self.at : self.at + block]


class Engine:
    """Continuous batching of `model` (a `CachedDecoder`) with `tokenizer`; `capacity` positions per
    sequence (default the model's context, at most 4096). `start()` runs the thread (on the backend
    active where the engine was made: a backend block is the thread's own); `close()` ends it."""

    def __init__(
        self,
        model: LanguageModel,
        tokenizer: object,
        *,
        max_batch: int = 8,
        max_queue: int = 64,
        capacity: int | None = None,
        block: int = BLOCK,
        prefix_blocks: int = PREFIX_TOKENS // BLOCK,
        prefill_tokens: int = PREFILL_TOKENS,
        join_chunks: bool = True,
        join_last: bool = False,
        ragged_pad: int = RAGGED_PAD,
        warm_positions: int = 0,
        batch_prompts: bool = False,
    ):
        checked = (("max_batch", max_batch), ("max_queue", max_queue), ("block", block))
        for name, value in (*checked, ("prefill_tokens", prefill_tokens), ("ragged_pad", ragged_pad)):
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"Engine: {name} must be a positive integer, got {value!r}")
        if not (isinstance(warm_positions, int) and warm_positions >= 0):
            raise ValueError(f"Engine: warm_positions must be an integer >= 0, got {warm_positions!r}")
        if not hasattr(model, "forward_rows"):
            raise TypeError(f"Engine: {type(model).__name__} has no batched decode step (GPT-2, Llama have)")
        capacity = min(model.context_length, 4096) if capacity is None else capacity
        if not (isinstance(capacity, int) and 2 <= capacity <= model.context_length):
            raise ValueError(f"Engine: capacity must be 2 ... {model.context_length}, got {capacity!r}")
        self.model, self.tokenizer = model, tokenizer
        self.backend = get_backend().name
        self.max_batch, self.max_queue, self.capacity, self.block = max_batch, max_queue, capacity, block
        self.prefill_tokens = prefill_tokens  # prompt tokens prefilled between two decode steps
        self.join_chunks = join_chunks  # a prompt's chunk joins the decode step (while sequences run)
        # joined through the ragged step where the model takes it (one trace for any rows and chunk), else
        # the mixed one; with `join_last` (ragged steps only) a prompt's last chunk too, the step giving
        # its first token
        self.ragged = getattr(model, "ragged_steps", False)
        self.join_last = join_chunks and join_last and self.ragged
        self.ragged_pad = ragged_pad  # a ragged step's tokens rounded up to a multiple (its plans)
        self.warm_positions = min(warm_positions, capacity)  # `_warm`'s windows
        # a round's chunks of several prompts as one ragged forward (off by default: at 8 clients it saved
        # no CPU, and every prompt's first token waited for all of them)
        self.batch_prompts = batch_prompts and self.ragged
        # the prompts being prefilled, in the order they came, each in a row past the running ones: several
        # at once where the model takes ragged steps (their chunks run as one forward), else one
        self._prefills: list[_Prefill] = []
        self._most_prefills = max_batch if self.ragged else 1
        self._joins: list[_Prefill] = []  # the prompts whose next chunk the coming step runs
        self.cache = BatchCache(model, max_batch, capacity)
        self.prefix = PrefixCache(block, prefix_blocks)
        self._waiting: collections.deque[Handle] = collections.deque()
        self._running: list[_Sequence] = []
        self._wake = threading.Condition()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._closing = False
        # metrics
        self.requests_total = self.prompt_tokens_total = self.completion_tokens_total = 0
        self.steps_total = 0
        # where the engine's thread spends its time (wall seconds): decode steps (and the rows they ran),
        # prompts' prefill; the rest of the time it waited for requests or ran their events' callbacks
        self.decode_seconds = self.prefill_seconds = 0.0
        self.decode_rows_total = 0
        self.joined_chunks_total = self.joined_tokens_total = 0  # prompt chunks run within decode steps
        # of decode_seconds, the time choosing the steps' tokens and sending their events (wall, and the
        # thread's CPU); the thread's CPU time while it works (its share of the kernels included)
        self.sampling_seconds = self.sampling_cpu_seconds = self.engine_cpu_seconds = 0.0
        # of engine_cpu_seconds, the thread's CPU inside the model's forwards (its share of the kernels, the
        # plans' Python): the decode steps' (with the chunks joined to them) and the prompts' chunks run
        # apart; the rest of it is the engine's own Python (admission, sampling, events, the cache's rows)
        self.step_cpu_seconds = self.chunk_cpu_seconds = 0.0
        self._chosen = 0  # tokens chosen in this turn of the loop, noted in _recent after it
        self._recent: collections.deque[tuple[float, int]] = collections.deque()

    # the public side ------------------------------------------------------------------------------
    def start(self) -> Engine:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="verigrad-engine", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def submit(self, request: Request, on_event: Callable[[Event], None]) -> Handle:
        """Queue `request`; `on_event` receives its events on the engine's thread. Raises QueueFull when
        `max_queue` requests wait, ValueError when the prompt and max_tokens do not fit in a sequence."""
        room = self.capacity - len(request.prompt)
        if room < 1:
            raise ValueError(
                f"the prompt has {len(request.prompt)} tokens; a sequence holds {self.capacity} positions, "
                "so it must have fewer"
            )
        if max(request.prompt) >= self.model.vocab_size or min(request.prompt) < 0:
            raise ValueError(
                f"the prompt has token ids outside the vocabulary (0 ... {self.model.vocab_size - 1})"
            )
        with self._wake:
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"{len(self._waiting)} requests are waiting (the limit); try again later")
            handle = Handle(next(self._ids), request, on_event)
            self._waiting.append(handle)
            self.requests_total += 1
            self._wake.notify()
        return handle

    def cancel(self, handle: Handle) -> None:
        """Stop the request: it leaves the queue or the batch before the next step (its row is freed) and
        gets a last event with finish_reason "cancelled"."""
        with self._wake:
            handle.cancelled = True
            self._wake.notify()

    @property
    def queue_depth(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def plans_built(self) -> int:
        """Plans the model's compiled steps have built so far (each new batch, chunk or window shape)."""
        step = getattr(self.model, "cached_step", None)
        compiled = [
            getattr(step, name, {}) for name in ("decode", "decode_rows", "chunks", "mixes", "raggeds")
        ]
        return sum(c.counts["plans"] for plans in compiled for c in plans.values())

    def tokens_per_second(self, window: float = 10.0) -> float:
        """Generated tokens per second over the last `window` seconds."""
        now = time.perf_counter()
        recent = [(t, n) for t, n in list(self._recent) if t >= now - window]
        return sum(n for _, n in recent) / window

    # the thread -----------------------------------------------------------------------------------
    def _loop(self) -> None:
        # a request's bits may not depend on its batch: products of f32 weights (an F16/F32 GGUF, a
        # safetensors model) take the backend's row-independent path while the engine runs
        with backend(self.backend) as active, active.rows_apart():
            self._warm()
            self._serve()

    def _warm(self) -> None:
        """Build the plans of the common steps before the first request runs (requests wait meanwhile), so
        that none waits on a plan build later: `forward_rows` of 1 ... max_batch rows and a prompt chunk
        of 1 ... block tokens, at each window of up to `warm_positions` positions (64, 128, ...); the
        rows they wrote are cleared."""
        width = 64  # the smallest window (models/_decoder.py's MIN_WINDOW)
        while width <= self.warm_positions and width - self.block >= 1:
            at = width - self.block  # in the window of `width` positions with room for a chunk
            with no_grad():
                for b in range(1, self.max_batch + 1):
                    ids = np.ones((b, 1), np.int64)
                    self.model.forward_rows(ids, self.cache.cache, [at] * b)
                for t in range(1, self.block + 1):
                    self.model.forward_chunk(np.ones((1, t), np.int64), self.cache.row(0, at))
            for row in range(self.max_batch):
                self.cache.clear(row, at, width)
            width *= 2

    def _serve(self) -> None:
        while True:
            with self._wake:
                while not (self._closing or self._waiting or self._running or self._prefills):
                    self._wake.wait()
                if self._closing:
                    break
                dropped = [s for s in self._running if s.handle.cancelled]
            cpu = time.thread_time()
            for s in dropped:
                self._finish(s, "cancelled")
            t0 = time.perf_counter()
            self._prefill_some()
            t1 = time.perf_counter()
            self.prefill_seconds += t1 - t0
            if self._running:
                self.decode_rows_total += len(self._running)
                self._guarded(self._step)
                self.decode_seconds += time.perf_counter() - t1
            self._note_chosen()
            self.engine_cpu_seconds += time.thread_time() - cpu
        for p in list(self._prefills):
            self._drop_prefill(p, Event(finish_reason="cancelled"))
        for s in list(self._running):
            self._finish(s, "cancelled")
        with self._wake:
            waiting, self._waiting = list(self._waiting), collections.deque()
        for handle in waiting:  # their clients are answered too
            handle.on_event(Event(finish_reason="cancelled", prompt_tokens=len(handle.request.prompt)))

    def _note_chosen(self) -> None:
        """Note this turn's tokens in the last minute's counts (`tokens_per_second`): one entry a turn,
        not one a token."""
        now = time.perf_counter()
        if self._chosen:
            self._recent.append((now, self._chosen))
            self._chosen = 0
        while self._recent and self._recent[0][0] < now - 60:
            self._recent.popleft()

    def _guarded(self, work: Callable[[], None]) -> None:
        """Run `work`; an exception ends the running sequences with an error event, not the thread."""
        try:
            work()
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
            for s in list(self._running):
                self._finish(s, "error", message)

    def _prompts_guarded(self, work: Callable[[list[_Prefill]], None], prompts: list[_Prefill]) -> None:
        """Run `work` on prompts being prefilled; an exception ends them with an error event (those
        that already joined the batch too), not the thread."""
        try:
            work(prompts)
        except Exception as e:
            self._prompts_failed(prompts, f"{type(e).__name__}: {e}")

    def _prompts_failed(self, prompts: list[_Prefill], message: str) -> None:
        for p in prompts:
            if p in self._prefills:
                self._drop_prefill(p, Event(finish_reason="error", error=message))
            elif p.seq in self._running:
                self._finish(p.seq, "error", message)

    def _prefill_some(self) -> None:
        """Admit waiting requests into the free rows and prefill their prompts' chunks, one chunk of each
        prompt a round, until `prefill_tokens` tokens ran (or none is left); a prompt whose last chunk ran
        joins the batch. A round's chunks run as one forward (`forward_ragged`, where the model takes
        ragged steps; several prompts run together only there), before the decode step. While sequences
        run (and `join_chunks`), a whole block that is not its prompt's last and would spend the rest of
        the budget is left to the decode step, which runs it with the rows (`_joined_step`): its
        products read each weight once for both. With `join_last` (a model that takes ragged steps: one
        plan per token count, run count and window, whatever the rows and the chunks), the prompts' last
        chunks join the step too, and the step's logits give their first tokens; else they run before
        the step (a chunk of any length joined to `forward_mixed` builds a plan per rows, chunk length
        and window)."""
        budget, self._joins = self.prefill_tokens, []
        while budget > 0:
            self._admit_waiting()
            ready = []  # this round's chunks, run before the step
            for p in list(self._prefills):
                if budget <= 0:
                    break
                if p in self._joins:
                    continue
                if p.seq.handle.cancelled:
                    self._drop_prefill(p, Event(finish_reason="cancelled"))
                    continue
                tokens = len(p.next_chunk(self.block))
                last = p.at + tokens == len(p.prompt)
                whole = tokens == self.block and not last
                if self._running and (
                    (budget <= tokens and whole and self.join_chunks) or (last and self.join_last)
                ):
                    self._joins.append(p)
                else:
                    ready.append(p)
                budget -= tokens
            if not ready:
                return
            for batch in [ready] if self.batch_prompts else [[p] for p in ready]:
                self._prompts_guarded(self._chunks, batch)

    def _admit_waiting(self) -> None:
        """Admit waiting requests while a row is free (and fewer than `_most_prefills` prompts are being
        prefilled); a cancelled one is answered."""
        while (
            len(self._prefills) < self._most_prefills
            and len(self._running) + len(self._prefills) < self.max_batch
        ):
            with self._wake:
                if not self._waiting:
                    return
                handle = self._waiting.popleft()
            if handle.cancelled:
                prompt_tokens = len(handle.request.prompt)
                handle.on_event(Event(finish_reason="cancelled", prompt_tokens=prompt_tokens))
                continue
            try:
                self._admit(handle)
            except Exception as e:
                message = f"{type(e).__name__}: {e}"
                admitted = [p for p in self._prefills if p.seq.handle is handle]
                if admitted:
                    self._prompts_failed(admitted, message)
                else:
                    handle.on_event(Event(finish_reason="error", error=message))

    def _admit(self, handle: Handle) -> None:
        """Start prefilling the request's prompt into the first free row: the blocks the prefix cache
        holds are copied in; `_chunks` runs the rest."""
        prompt = [int(t) for t in handle.request.prompt]
        taken = {p.row for p in self._prefills}
        row = next(r for r in range(len(self._running), self.max_batch) if r not in taken)
        digests = self.prefix.digests(prompt)
        usable = (len(prompt) - 1) // self.block  # at least one token runs, for the next token's logits
        blocks = self.prefix.lookup(digests[:usable])
        start = len(blocks) * self.block
        p = _Prefill(_Sequence(handle, self.tokenizer, start), prompt, digests, start, row)
        self._prefills.append(p)
        for i, (k, v) in enumerate(blocks):
            self.cache.write(row, i * self.block, k, v)

    def _chunks(self, prompts: list[_Prefill]) -> None:
        """Run each prompt's next chunk, as one forward (the eager forward's bits, from plans compiled for
        any chunk length: `forward_chunk` for one, `forward_ragged` for several); after a prompt's last,
        its sequence joins the batch and its first token is sampled."""
        chunks = [p.next_chunk(self.block) for p in prompts]
        cpu = time.thread_time()
        with no_grad():
            if len(prompts) == 1:
                (p,), (chunk,) = prompts, chunks
                rows = self.model.forward_chunk(np.asarray([chunk], np.int64), self.cache.row(p.row, p.at))
            else:
                rows = self.model.forward_ragged(
                    chunks,
                    self.cache.cache,
                    [p.row for p in prompts],
                    [p.at for p in prompts],
                    self.ragged_pad,
                )
        logits = rows.numpy()
        self.chunk_cpu_seconds += time.thread_time() - cpu
        for p, chunk in zip(prompts, chunks):
            self._chunk_ran(p, len(chunk))
        for p, row in zip(prompts, logits):
            self._prompt_done(p, row[-1])

    def _chunk_ran(self, p: _Prefill, count: int) -> None:
        """After `count` tokens of p's prompt ran into its row: a whole block is kept in the prefix cache."""
        if count == self.block:
            self.prefix.store(p.digests[p.at // self.block], *self.cache.read(p.row, p.at, count))
        p.at += count

    def _prompt_done(self, p: _Prefill, logits: np.ndarray) -> None:
        """If p's whole prompt ran (`logits`: its last token's), its sequence joins the batch (its row
        becomes the one after the running ones'), with its first token sampled."""
        if p.at < len(p.prompt):
            return
        self._place(p, len(self._running))
        self._prefills.remove(p)
        p.seq.length = len(p.prompt)
        self.prompt_tokens_total += len(p.prompt)
        self._running.append(p.seq)
        self._choose(p.seq, logits)

    def _place(self, p: _Prefill, row: int) -> None:
        """Move p's positions into `row` (one past the running rows), swapped with the prompt there."""
        if p.row == row:
            return
        other = next((q for q in self._prefills if q.row == row), None)
        if other is None:
            self.cache.move(p.row, row, p.at)
            self.cache.clear(p.row, 0, p.at)
        else:
            self.cache.swap(p.row, row, max(p.at, other.at))
            other.row = p.row
        p.row = row

    def _drop_prefill(self, p: _Prefill, event: Event) -> None:
        """End the prefilling request with `event` (its row holds nothing that is kept)."""
        if p in self._prefills:
            self._prefills.remove(p)
            self.cache.clear(p.row, 0, len(p.prompt))
            event.prompt_tokens = len(p.prompt)
            p.seq.handle.on_event(event)

    def _step(self) -> None:
        """One token of every running sequence, as one batch, with the prefilling prompts' next chunks
        where they join the step (`join_chunks`)."""
        joins = [p for p in self._joins if p in self._prefills]
        if joins:
            try:
                self._joined_step(joins)
            except Exception as e:  # the prompts end with the running sequences (`_guarded`)
                self._prompts_failed(joins, f"{type(e).__name__}: {e}")
                raise
            return
        running = self._running
        ids = np.asarray([[s.last] for s in running], np.int64)
        cpu = time.thread_time()
        with no_grad():
            logits = self.model.forward_rows(ids, self.cache.cache, [s.length for s in running]).numpy()
        self.step_cpu_seconds += time.thread_time() - cpu
        self._stepped(logits)

    def _joined_step(self, joins: list[_Prefill]) -> None:
        """The step of the running sequences and the prompts' next chunks (in their rows) as one forward
        (`forward_ragged`, else `forward_mixed` for one chunk in the row after the running ones: each
        row's bits are those it gets alone); after a prompt's last chunk, its sequence joins the batch
        with its first token from the step's logits."""
        running, n = self._running, len(self._running)
        lengths = [s.length for s in running]
        chunks = [p.next_chunk(self.block) for p in joins]
        cpu = time.thread_time()
        with no_grad():
            if self.ragged:
                tokens = [[s.last] for s in running] + chunks
                rows = list(range(n)) + [p.row for p in joins]
                at = [p.at for p in joins]
                step = self.model.forward_ragged(
                    tokens, self.cache.cache, rows, lengths + at, self.ragged_pad
                )
            else:
                (p,), (chunk,) = joins, chunks
                self._place(p, n)
                ids = np.asarray([[s.last] for s in running], np.int64)
                step = self.model.forward_mixed(
                    ids, np.asarray([chunk], np.int64), self.cache.cache, lengths, p.at
                )
        logits = step.numpy()
        self.step_cpu_seconds += time.thread_time() - cpu
        self.joined_chunks_total += len(joins)
        self.joined_tokens_total += sum(map(len, chunks))
        for p, chunk in zip(joins, chunks):
            self._chunk_ran(p, len(chunk))
        self._stepped(logits[:n])
        for p, row in zip(joins, logits[n:]):
            self._prompt_done(p, row[0])

    def _stepped(self, logits: np.ndarray) -> None:
        """After a step wrote every running sequence's next position: choose their tokens (logits [B, 1,
        vocab])."""
        t0, cpu = time.perf_counter(), time.thread_time()
        running = self._running
        self.steps_total += 1
        for s in running:
            s.length += 1
        rows = logits[:, 0]
        best = rows.argmax(axis=1)  # the greedy rows' tokens, one call for the batch
        for s, row, token in zip(list(running), rows, best.tolist()):
            self._choose(s, row, token)
        self.sampling_seconds += time.perf_counter() - t0
        self.sampling_cpu_seconds += time.thread_time() - cpu

    def _choose(self, s: _Sequence, logits: np.ndarray, best: int | None = None) -> None:
        """Sample s's next token from its logits (`best`: their argmax, where the caller has it), tell
        its client, and end it where it ends."""
        r = s.request
        if (
            best is not None
            and r.temperature == 0
            and not (s.counts and (r.presence_penalty or r.frequency_penalty))
        ):
            # greedy without a penalty: sampling's argmax of the logits in f64, which are the f32 ones
            # exactly (the first maximum, or the first NaN, of the same values)
            token = best
        else:
            scores = penalized(logits, s.counts, r.presence_penalty, r.frequency_penalty)
            token = next_token(scores, (), s.options, s.rng)
        self._chosen += 1
        if token in self.tokenizer.end_ids:  # type: ignore[attr-defined]
            self._finish(s, "stop")
            return
        event = Event(tokens=[token])
        if r.logprobs is not None:
            event.logprobs.append(_logprob(logits, token, r.logprobs))
        s.out.append(token)
        s.counts[token] = s.counts.get(token, 0) + 1
        self.completion_tokens_total += 1
        s.text += s.decoder.push(token)
        if r.stop:
            # a stop may end in this token's text and begin in earlier text not yet sent
            found = [i for i in (s.text.find(x, s.sent) for x in r.stop) if i >= 0]
            if found:
                s.text = s.text[: min(found)]
                self._finish(s, "stop", event=event, matched=True)
                return
        if len(s.out) >= r.max_tokens or s.length >= self.capacity:
            self._finish(s, "length", event=event)
            return
        safe = len(s.text) - (s.stop_width - 1 if s.stop_width else 0)
        if safe > s.sent:
            event.text, s.sent = s.text[s.sent : safe], safe
        s.last = token
        s.handle.on_event(event)

    def _finish(
        self, s: _Sequence, reason: str, error: str | None = None, event: Event | None = None, matched=False
    ) -> None:
        """End s: the rest of its text (up to a `matched` stop string) and the usage in a last event; its
        row freed (the last row's sequence moves in) and the rows zero past their sequences (batching.py)."""
        event = event or Event()
        if not matched:
            s.text += s.decoder.flush()  # incomplete UTF-8 at the end
        event.text, s.sent = s.text[s.sent :], len(s.text)
        event.finish_reason, event.error = reason, error
        event.prompt_tokens, event.completion_tokens = len(s.request.prompt), len(s.out)
        event.cached_tokens = s.cached
        row, last = self._running.index(s), len(self._running) - 1
        end = s.length + 1  # a step that failed may have written the position after its length
        if row != last:
            moved = self._running[last]
            self.cache.move(last, row, moved.length)
            self.cache.clear(row, moved.length, end)
            self._running[row] = moved
            end = moved.length + 1
        self.cache.clear(last, 0, end)
        self._running.pop()  # the prompts being prefilled keep their rows (`_place` moves them in)
        s.handle.on_event(event)


def _logprob(logits: np.ndarray, token: int, top: int) -> TokenLogprob:
    """The token's log-probability (the raw logits' log softmax) and the `top` most likely (ties by id)."""
    lp = log_probabilities(logits)
    best = np.argsort(-lp, kind="stable")[:top] if top else []
    return TokenLogprob(token, float(lp[token]), tuple((int(i), float(lp[i])) for i in best))
