"""The HTTP side of `verigrad serve`: a Starlette app speaking OpenAI's API over an `Engine`.

Routes: GET /health, GET /metrics (Prometheus text), GET /v1/models, POST /v1/completions and
/v1/chat/completions (JSON, or server-sent events with "stream": true, ending with `data: [DONE]`).
Every error is OpenAI's JSON with a 4xx (5xx where the model failed) and the server keeps serving. A
client that disconnects mid-stream, or before its answer, has its request cancelled: its batch row is
freed before the next step. Starlette and uvicorn are the `serve` extra; only this module imports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from . import protocol
from .engine import Engine, Event, QueueFull
from .protocol import APIError

MAX_BODY = 1 << 20  # bytes of a request body


class _Counters:
    def __init__(self) -> None:
        self.errors: dict[int, int] = {}
        self.lock = threading.Lock()

    def error(self, status: int) -> None:
        with self.lock:
            self.errors[status] = self.errors.get(status, 0) + 1


class _Dispatch:
    """Events from the engine's thread to the requests' queues on one event loop. `call_soon_threadsafe`
    wakes the loop (a write to its self-pipe, then a turn of the loop): one per token per client made
    the loop wake eight times a step at 8 clients. Events queued here wait for one wake-up, which puts
    them all in their queues, in the order the engine gave them."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.pending: list[tuple[asyncio.Queue, Event]] = []
        self.lock = threading.Lock()
        self.scheduled = False

    def put(self, queue: asyncio.Queue, event: Event) -> None:
        """On the engine's thread: `event` for `queue`, with a wake-up of the loop if none is pending."""
        with self.lock:
            self.pending.append((queue, event))
            if self.scheduled:
                return
            self.scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server is stopping
            self.loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self.lock:
            pending, self.pending, self.scheduled = self.pending, [], False
        for queue, event in pending:
            queue.put_nowait(event)


def create_app(
    engine: Engine, model_id: str, *, api_key: str | None = None, max_body: int = MAX_BODY, aliases=()
) -> Starlette:
    """The app serving `engine` under the name `model_id` (or any of `aliases`); with `api_key`, the /v1
    routes need `Authorization: Bearer <api_key>`; bodies over `max_body` bytes get a 413."""
    counters = _Counters()
    names = {model_id, *aliases}
    dispatchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Dispatch] = weakref.WeakKeyDictionary()
    tokenizer = engine.tokenizer

    def failure(error: APIError) -> JSONResponse:
        counters.error(error.status)
        return JSONResponse(error.body(), status_code=error.status)

    def authorize(request: HTTPRequest) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if given != f"Bearer {api_key}":
            what = "no API key given" if not given else "incorrect API key provided"
            raise APIError(
                401, f"{what}: send the header 'Authorization: Bearer <key>'", code="invalid_api_key"
            )

    async def read_json(request: HTTPRequest) -> Any:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body:
            raise APIError(413, f"the request body has {length} bytes; this server takes at most {max_body}")
        data = b""
        async for part in request.stream():
            data += part
            if len(data) > max_body:
                raise APIError(413, f"the request body is over {max_body} bytes, this server's limit")
        try:
            return json.loads(data)
        except ValueError as e:
            raise APIError(400, f"could not parse the JSON body of the request: {e}") from None
        except RecursionError:
            raise APIError(400, "could not parse the JSON body of the request: nested too deeply") from None

    def tokens(text: str, what: str, add_special: bool = True) -> list[int]:
        try:
            return tokenizer.encode(text, add_special=add_special)
        except ValueError as e:  # a lone surrogate, or a byte the vocabulary has no token for
            reason = str(e).removeprefix(f"{tokenizer.source}: ")  # the model's path is the server's own
            raise APIError(400, f"the {what} cannot be tokenized: {reason}", param=what) from None

    def encode(chat: bool):
        def text(prompt: str) -> list[int]:
            return tokens(prompt, "prompt")

        def messages(items: list[dict]) -> list[int]:
            try:
                rendered = tokenizer.apply_chat_template(items)
            except ValueError as e:  # no template, or the template refused the conversation
                raise APIError(400, f"the chat template: {e}", param="messages") from None
            return tokens(rendered, "messages", add_special=False)  # the template writes the special tokens

        return messages if chat else text

    async def health(request: HTTPRequest) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics(request: HTTPRequest) -> Response:
        lines = []

        def metric(name: str, kind: str, help: str, value: float, labels: str = "") -> None:
            if not any(line.startswith(f"# TYPE verigrad_{name} ") for line in lines):
                lines.extend([f"# HELP verigrad_{name} {help}", f"# TYPE verigrad_{name} {kind}"])
            lines.append(f"verigrad_{name}{labels} {value}")

        metric("requests_total", "counter", "Requests accepted by the engine.", engine.requests_total)
        metric("prompt_tokens_total", "counter", "Prompt tokens prefilled.", engine.prompt_tokens_total)
        metric("completion_tokens_total", "counter", "Tokens generated.", engine.completion_tokens_total)
        metric("queue_depth", "gauge", "Requests waiting for a batch row.", engine.queue_depth)
        metric("running_sequences", "gauge", "Sequences in the batch.", engine.running)
        metric(
            "tokens_per_second",
            "gauge",
            "Tokens generated per second, last 10 s.",
            engine.tokens_per_second(),
        )
        metric("prefix_cache_blocks", "gauge", "Blocks held by the prefix cache.", len(engine.prefix))
        metric("decode_steps_total", "counter", "Batched decode steps run.", engine.steps_total)
        metric("decode_rows_total", "counter", "Rows the decode steps ran.", engine.decode_rows_total)
        joined = "Prompt chunks run within decode steps"
        metric("joined_chunks_total", "counter", f"{joined}.", engine.joined_chunks_total)
        metric("joined_tokens_total", "counter", f"{joined}: their tokens.", engine.joined_tokens_total)
        metric("plans_built_total", "counter", "Plans the model's compiled steps built.", engine.plans_built)
        seconds = "Seconds the engine's thread spent"
        metric("decode_seconds_total", "counter", f"{seconds} in decode steps.", engine.decode_seconds)
        metric("prefill_seconds_total", "counter", f"{seconds} prefilling prompts.", engine.prefill_seconds)
        sampling = "choosing the decode steps' tokens and sending their events (within decode)"
        metric("sampling_seconds_total", "counter", f"{seconds} {sampling}.", engine.sampling_seconds)
        metric(
            "sampling_cpu_seconds_total",
            "counter",
            f"CPU seconds of the engine's thread {sampling}.",
            engine.sampling_cpu_seconds,
        )
        metric(
            "engine_cpu_seconds_total",
            "counter",
            "CPU seconds of the engine's thread while it works (its share of the kernels included).",
            engine.engine_cpu_seconds,
        )
        inside = "CPU seconds of the engine's thread inside the model's forwards"
        metric("step_cpu_seconds_total", "counter", f"{inside} of decode steps.", engine.step_cpu_seconds)
        metric("chunk_cpu_seconds_total", "counter", f"{inside} of prompt chunks.", engine.chunk_cpu_seconds)
        with counters.lock:
            for status, n in sorted(counters.errors.items()):
                metric(
                    "http_errors_total", "counter", "Error responses by status.", n, f'{{status="{status}"}}'
                )
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    async def models(request: HTTPRequest) -> Response:
        authorize(request)
        card = {"id": model_id, "object": "model", "created": 0, "owned_by": "verigrad"}
        return JSONResponse({"object": "list", "data": [card]})

    async def complete(request: HTTPRequest, chat: bool) -> Response:
        authorize(request)
        body = await read_json(request)
        if isinstance(body, dict):
            model = body.get("model")
            if model is None:
                raise APIError(400, "'model' is required", param="model")
            if not isinstance(model, str):
                raise APIError(400, f"'model' must be a string, got {model!r:.60}", param="model")
            if model not in names:
                raise APIError(
                    404, f"the model {model!r:.80} does not exist: this server has {model_id!r}",
                    param="model", code="model_not_found",
                )  # fmt: skip
        parsed = protocol.parse(body, chat, encode(chat), engine.capacity)
        loop = asyncio.get_running_loop()
        dispatch = dispatchers.get(loop)
        if dispatch is None:
            dispatch = dispatchers[loop] = _Dispatch(loop)
        events: asyncio.Queue[Event] = asyncio.Queue()

        def on_event(event: Event) -> None:  # on the engine's thread
            dispatch.put(events, event)

        try:
            handle = engine.submit(parsed.request, on_event)
        except QueueFull as e:
            raise APIError(
                429, f"the server is busy: {e}", type="rate_limit_exceeded", code="rate_limit_exceeded"
            ) from None
        except ValueError as e:
            raise APIError(400, str(e), param="prompt") from None  # token ids outside the vocabulary
        rid = protocol.new_id(chat)
        if parsed.stream:
            return StreamingResponse(
                _stream(engine, handle, events, parsed, rid, model_id, tokenizer),
                media_type="text/event-stream",
            )
        return await _answer(engine, handle, events, parsed, rid, model_id, tokenizer, request)

    async def completions(request: HTTPRequest) -> Response:
        return await complete(request, chat=False)

    async def chat_completions(request: HTTPRequest) -> Response:
        return await complete(request, chat=True)

    async def api_error(request: HTTPRequest, exc: Exception) -> Response:
        assert isinstance(exc, APIError)
        return failure(exc)

    async def http_error(request: HTTPRequest, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        what = {404: "no such route", 405: "method not allowed"}.get(exc.status_code, exc.detail)
        return failure(APIError(exc.status_code, f"{request.method} {request.url.path}: {what}"))

    routes = [
        Route("/health", health),
        Route("/metrics", metrics),
        Route("/v1/models", models),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]
    handlers = {APIError: api_error, HTTPException: http_error}
    return Starlette(routes=routes, exception_handlers=handlers)  # type: ignore[arg-type]


async def _answer(
    engine: Engine, handle: Any, events: asyncio.Queue, parsed: Any, rid: str, model: str, tokenizer: Any,
    request: HTTPRequest,
) -> Response:  # fmt: skip
    """Wait for the whole answer; a client gone meanwhile cancels the request."""
    text, items, done = [], [], False
    try:
        while True:
            try:
                event = await asyncio.wait_for(events.get(), 0.5)
            except TimeoutError:
                if await request.is_disconnected():
                    return Response(status_code=499)
                continue
            while True:  # and those queued behind it, without a wait each
                text.append(event.text)
                items.extend(event.logprobs)
                if event.finish_reason or events.empty():
                    break
                event = events.get_nowait()
            if event.finish_reason:
                done = True
                break
    finally:
        if not done:
            engine.cancel(handle)
    if event.finish_reason == "error":
        raise APIError(500, f"the model failed: {event.error}", type="server_error")
    return JSONResponse(protocol.response(parsed, rid, model, "".join(text), event, items, tokenizer))


def _sse(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _text_sse(parsed: Any, rid: str, model: str, tokenizer: Any) -> Callable[[str], str] | None:
    """The request's `_sse` of the stream chunk of an event that carries only text (no log-probabilities,
    not the last), as a function of the text: the chunk made once with a placeholder, each text's JSON
    string put in its place (the same characters, without a dictionary made and encoded a token). None
    where the placeholder is not found once."""
    mark = "\x00verigrad-text\x00"
    template = _sse(protocol.chunk(parsed, rid, model, Event(text=mark), tokenizer))
    quoted = json.dumps(mark, ensure_ascii=False)
    if template.count(quoted) != 1:
        return None
    head, _, tail = template.partition(quoted)
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    return lambda text: head + dumps(text) + tail


async def _stream(
    engine: Engine, handle: Any, events: asyncio.Queue, parsed: Any, rid: str, model: str, tokenizer: Any
) -> AsyncIterator[str]:
    """The answer as server-sent events, a chunk per event; the events already queued when the loop
    gets to them are sent in one write. Closed early (the client left), the request is cancelled."""
    done, offset = False, 0
    text_sse = _text_sse(parsed, rid, model, tokenizer)
    try:
        if parsed.chat:
            yield _sse(protocol.chunk(parsed, rid, model, None, tokenizer))
        while not done:
            ready = [await events.get()]
            while not events.empty():
                ready.append(events.get_nowait())
            out = []
            for event in ready:
                if event.finish_reason == "error":
                    done = True
                    body = APIError(500, f"the model failed: {event.error}", type="server_error").body()
                    out.append(_sse(body))
                    break
                if text_sse and event.text and not (event.logprobs or event.finish_reason):
                    out.append(text_sse(event.text))  # most of a stream's chunks
                elif event.text or event.logprobs or event.finish_reason:
                    out.append(_sse(protocol.chunk(parsed, rid, model, event, tokenizer, offset)))
                    pieces = (tokenizer.token_bytes(lp.token) for lp in event.logprobs)
                    offset += sum(len(b.decode("utf-8", "replace")) for b in pieces)
                if event.finish_reason:
                    done = True
                    if parsed.include_usage:
                        out.append(_sse(protocol.usage_chunk(parsed, rid, model, event)))
                    break
            if done:
                out.append("data: [DONE]\n\n")
            if out:
                yield "".join(out)
    finally:
        if not done:
            engine.cancel(handle)
