"""OpenAI's API as the server speaks it: request bodies checked and turned into engine `Request`s (an
`APIError` names the parameter, its value and what is allowed), and the JSON of responses and stream
chunks (`/v1/completions`, `/v1/chat/completions`).

Log-probabilities are those of the model's own distribution (the log softmax of the raw logits, before
penalties, temperature and top-p: vLLM's default). A parameter verigrad does not implement (n > 1, tools,
logit_bias, echo, ...) is refused with a 400 rather than ignored.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .engine import Event, Request, TokenLogprob


class APIError(Exception):
    """An error answered as OpenAI's JSON `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


IGNORED = {"user", "metadata", "store", "service_tier"}  # bookkeeping fields with no effect on the output
_COMMON = {"model", "max_tokens", "temperature", "top_p", "seed", "stop", "presence_penalty"}
_COMMON |= {"frequency_penalty", "stream", "stream_options", "n", "logprobs"}
COMPLETION_FIELDS = _COMMON | {"prompt", "echo", "suffix", "best_of", "logit_bias"} | IGNORED
CHAT_FIELDS = _COMMON | {"messages", "top_logprobs", "max_completion_tokens", "logit_bias", "tools"}
CHAT_FIELDS |= {"tool_choice", "response_format", "parallel_tool_calls"} | IGNORED


@dataclass
class Parsed:
    """A checked request: the engine's request, whether to stream, and what the response reports;
    `created` is the Unix time every chunk of its answer gives (OpenAI's: each chunk the same)."""

    request: Request
    stream: bool
    include_usage: bool
    chat: bool
    created: int = field(default_factory=lambda: int(time.time()))


def _bad(message: str, param: str | None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def _number(body: dict, key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(f"'{key}' must be a number, got {value!r:.40}", key)
    if not low <= value <= high:
        raise _bad(f"'{key}' must be between {low} and {high}, got {value}", key)
    return float(value)


def _integer(body: dict, key: str, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"'{key}' must be an integer, got {value!r:.40}", key)
    if not low <= value <= high:
        raise _bad(f"'{key}' must be between {low} and {high}, got {value}", key)
    return value


def _check_fields(body: Any, allowed: set[str]) -> dict:
    if not isinstance(body, dict):
        raise _bad(f"the request body must be a JSON object, got {type(body).__name__}", None)
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _bad(f"unrecognized request argument(s): {', '.join(unknown)}", unknown[0])
    for key, off in (("n", 1), ("best_of", 1), ("echo", False), ("suffix", None), ("tools", None)):
        if body.get(key, off) not in (off, None) and not (key == "tools" and body[key] == []):
            raise _bad(f"'{key}' = {body[key]!r:.40} is not supported by this server (only {off!r})", key)
    if body.get("logit_bias"):
        raise _bad("'logit_bias' is not supported by this server", "logit_bias")
    if body.get("tool_choice") not in (None, "none", "auto"):
        raise _bad("'tool_choice' is not supported by this server (no tools)", "tool_choice")
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise _bad('\'response_format\' other than {"type": "text"} is not supported', "response_format")
    return body


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not (
        isinstance(stops, list) and 1 <= len(stops) <= 4 and all(isinstance(s, str) and s for s in stops)
    ):
        raise _bad(f"'stop' must be a non-empty string or a list of 1 to 4 of them, got {stop!r:.60}", "stop")
    return tuple(stops)


def _stream(body: dict) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        raise _bad(f"'stream' must be true or false, got {stream!r:.40}", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise _bad(f"'stream_options' may only hold include_usage, got {options!r:.60}", "stream_options")
    if options and not stream:
        raise _bad("'stream_options' is only allowed when 'stream' is true", "stream_options")
    return bool(stream), bool(options.get("include_usage"))


def parse(
    body: Any, chat: bool, encode: Callable[[Any], list[int]], capacity: int, default_max: int | None = 16
) -> Parsed:
    """The engine request for a JSON body; `encode` turns the prompt (a string, or the chat messages)
    into token ids; `capacity` is the positions a sequence holds (prompt and completion)."""
    body = _check_fields(body, CHAT_FIELDS if chat else COMPLETION_FIELDS)
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0:
        top_p, temperature = 1.0, 0.0  # only the most likely token is left: greedy
    presence = _number(body, "presence_penalty", 0.0, -2.0, 2.0)
    frequency = _number(body, "frequency_penalty", 0.0, -2.0, 2.0)
    seed = _integer(body, "seed", -(2**63), 2**63 - 1)
    if chat:
        logprobs = body.get("logprobs")
        if not isinstance(logprobs, bool | None):
            raise _bad(f"'logprobs' must be true or false, got {logprobs!r:.40}", "logprobs")
        top = _integer(body, "top_logprobs", 0, 20)
        if top is not None and not logprobs:
            raise _bad("'top_logprobs' needs 'logprobs' set to true", "top_logprobs")
        alternatives = (top or 0) if logprobs else None
        prompt = encode(_messages(body.get("messages")))
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        max_tokens = _integer(body, key, 1, 2**31)
        default = None
    else:
        alternatives = _integer(body, "logprobs", 0, 5)
        prompt = _prompt(body.get("prompt"), encode)
        key, max_tokens, default = "max_tokens", _integer(body, "max_tokens", 0, 2**31), default_max
        if max_tokens == 0:
            raise _bad("'max_tokens' must be at least 1 (echo, which 0 serves, is not supported)", key)
    what = "messages" if chat else "prompt"
    if not prompt:
        raise _bad(f"the {what} make(s) no tokens: give some text", what)
    room = capacity - len(prompt)
    if room < 1:
        raise _bad(
            f"this server's context holds {capacity} tokens, and the {what} take {len(prompt)}: shorten them",
            what,
            "context_length_exceeded",
        )
    if max_tokens is None:
        max_tokens = room if default is None else min(default, room)
    elif max_tokens > room:
        raise _bad(
            f"this server's context holds {capacity} tokens; you requested {len(prompt) + max_tokens} "
            f"({len(prompt)} in the {what}, {max_tokens} in the completion): lower '{key}' to {room} or less",
            key,
            "context_length_exceeded",
        )
    stream, include_usage = _stream(body)
    request = Request(
        prompt, max_tokens, temperature, top_p, seed, _stop(body), presence, frequency, alternatives
    )
    return Parsed(request, stream, include_usage, chat)


def _prompt(prompt: Any, encode: Callable[[Any], list[int]]) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one prompt
    if isinstance(prompt, str):
        return encode(prompt)
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        return list(prompt)
    raise _bad(
        f"'prompt' must be a string or a list of token ids (one prompt: n > 1 is not supported), "
        f"got {prompt!r:.60}",
        "prompt",
    )


def _messages(messages: Any) -> list[dict]:
    """The messages with their content as text (a list of text parts joined)."""
    if not (isinstance(messages, list) and messages):
        raise _bad(f"'messages' must be a non-empty list of messages, got {messages!r:.60}", "messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not (isinstance(m, dict) and isinstance(m.get("role"), str)):
            raise _bad(f"{where} must be an object with a 'role' string, got {m!r:.60}", where)
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):  # fmt: skip
                raise _bad(f"{where}.content: only text parts are supported", f"{where}.content")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise _bad(f"{where}.content must be a string or text parts, got {content!r:.60}", where)
        out.append({"role": m["role"], "content": content})
    return out


# responses --------------------------------------------------------------------------------------------
def new_id(chat: bool) -> str:
    return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex


def usage(last: Event) -> dict:
    return {
        "prompt_tokens": last.prompt_tokens,
        "completion_tokens": last.completion_tokens,
        "total_tokens": last.prompt_tokens + last.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": last.cached_tokens},
    }


def finish_reason(reason: str | None) -> str | None:
    return None if reason is None else ("length" if reason == "length" else "stop")


def chat_logprobs(items: Sequence[TokenLogprob], tokenizer: Any) -> dict:
    """OpenAI's chat `logprobs`: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}."""

    def entry(token: int, logprob: float) -> dict:
        data = tokenizer.token_bytes(token)
        return {"token": data.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(data)}

    return {
        "content": [
            {**entry(lp.token, lp.logprob), "top_logprobs": [entry(t, p) for t, p in lp.top]} for lp in items
        ],
        "refusal": None,
    }


def completion_logprobs(items: Sequence[TokenLogprob], tokenizer: Any, offset: int = 0) -> dict:
    """OpenAI's completions `logprobs`: tokens, token_logprobs, top_logprobs (token: logprob), text_offset."""
    tokens = [tokenizer.token_bytes(lp.token).decode("utf-8", "replace") for lp in items]
    offsets = []
    for t in tokens:
        offsets.append(offset)
        offset += len(t)
    top = [{tokenizer.token_bytes(t).decode("utf-8", "replace"): p for t, p in lp.top} for lp in items]
    return {
        "tokens": tokens,
        "token_logprobs": [lp.logprob for lp in items],
        "top_logprobs": top,
        "text_offset": offsets,
    }


def response(
    parsed: Parsed, rid: str, model: str, text: str, last: Event, items: list, tokenizer: Any
) -> dict:
    """The whole answer of a request that does not stream."""
    logprobs = None
    if parsed.request.logprobs is not None:
        logprobs = (chat_logprobs if parsed.chat else completion_logprobs)(items, tokenizer)
    if parsed.chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None}}
        kind = "chat.completion"
    else:
        choice, kind = {"index": 0, "text": text}, "text_completion"
    choice |= {"logprobs": logprobs, "finish_reason": finish_reason(last.finish_reason)}
    return {
        "id": rid,
        "object": kind,
        "created": parsed.created,
        "model": model,
        "choices": [choice],
        "usage": usage(last),
    }


def chunk(parsed: Parsed, rid: str, model: str, event: Event | None, tokenizer: Any, offset: int = 0) -> dict:
    """A stream chunk carrying an event's text (None: the chat's first chunk, the assistant's role)."""
    if parsed.chat:
        delta: dict = {"role": "assistant", "content": ""} if event is None else {"content": event.text}
        if event is not None and event.finish_reason and not event.text:
            delta = {}
        choice: dict = {"index": 0, "delta": delta}
        kind = "chat.completion.chunk"
    else:
        choice, kind = {"index": 0, "text": event.text if event else ""}, "text_completion"
    logprobs = None
    if event is not None and parsed.request.logprobs is not None and event.logprobs:
        if parsed.chat:
            logprobs = chat_logprobs(event.logprobs, tokenizer)
        else:
            logprobs = completion_logprobs(event.logprobs, tokenizer, offset)
    choice |= {"logprobs": logprobs, "finish_reason": finish_reason(event.finish_reason if event else None)}
    out = {"id": rid, "object": kind, "created": parsed.created, "model": model, "choices": [choice]}
    if parsed.include_usage:
        out["usage"] = None
    return out


def usage_chunk(parsed: Parsed, rid: str, model: str, last: Event) -> dict:
    """The stream's last chunk when stream_options.include_usage: no choices, the usage."""
    kind = "chat.completion.chunk" if parsed.chat else "text_completion"
    return {
        "id": rid,
        "object": kind,
        "created": parsed.created,
        "model": model,
        "choices": [],
        "usage": usage(last),
    }
