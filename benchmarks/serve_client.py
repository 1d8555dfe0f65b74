"""The serve benchmark's clients: concurrent streaming chat completions from one asyncio loop in one
process, as cheap as a client can be, so that the server, on the same cores, keeps them.

Each client is a task on a shared `httpx.AsyncClient` (a kept-alive connection each); a request's body is
JSON made once per question; a response is read as raw bytes, split into server-sent events, and parsed
only as far as the figures need: whether an event carries text (the first token's time, and a count of
the pieces where no usage comes), and the usage's completion tokens. One such client serves both servers
(OpenAI's stream: `"content":` with or without a space after the colon).
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx

_TEXT = re.compile(rb'"content": ?"[^"]')  # a non-empty delta's content (empty: `""` or null)
_USAGE = re.compile(rb'"completion_tokens": ?(\d+)')


def chat_body(model: str, question: str, max_tokens: int) -> bytes:
    """A greedy streaming chat completion's body, with the usage in its last chunk."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(body).encode()


def read_events(data: bytes, first: float | None, pieces: int, usage: int | None):
    """Update (time of the first text, text pieces, usage's completion tokens) from whole events."""
    for event in data.split(b"\n\n"):
        if _TEXT.search(event):
            pieces += 1
            if first is None:
                first = time.perf_counter()
        elif b'"usage"' in event and (found := _USAGE.search(event)):
            usage = int(found.group(1))
    return first, pieces, usage


async def one_request(client: httpx.AsyncClient, url: str, body: bytes) -> tuple[float, float, int]:
    """(seconds to the first token, total seconds, completion tokens) of one streaming chat completion."""
    t0 = time.perf_counter()
    first, pieces, usage, rest = None, 0, None, b""
    headers = {"content-type": "application/json"}
    async with client.stream("POST", f"{url}/v1/chat/completions", content=body, headers=headers) as r:
        r.raise_for_status()
        async for data in r.aiter_raw():
            whole, _, rest = (rest + data).rpartition(b"\n\n")
            if whole:
                first, pieces, usage = read_events(whole, first, pieces, usage)
    first, pieces, usage = read_events(rest, first, pieces, usage)
    end = time.perf_counter()
    return (first or end) - t0, end - t0, usage if usage is not None else pieces


async def _clients(
    url: str, bodies: list[list[bytes]], seconds: float | None
) -> list[list[tuple[float, float, int]]]:
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    deadline = None if seconds is None else time.perf_counter() + seconds
    # loopback HTTP: no TLS, so no certificates to load (23 ms of CPU per client made)
    async with httpx.AsyncClient(limits=limits, timeout=600, verify=False) as client:

        async def one_client(mine: list[bytes]) -> list[tuple[float, float, int]]:
            if deadline is None:
                return [await one_request(client, url, body) for body in mine]
            done, j = [], 0
            while time.perf_counter() < deadline:  # a request started before the deadline runs to its end
                done.append(await one_request(client, url, mine[j % len(mine)]))
                j += 1
            return done

        return list(await asyncio.gather(*(one_client(mine) for mine in bodies)))


def run_clients(
    url: str, bodies: list[list[bytes]], seconds: float | None = None
) -> list[list[tuple[float, float, int]]]:
    """Client i sends `bodies[i]` one after the other, all clients at once (with `seconds`, it cycles
    through them and starts new requests until that many seconds have passed); each client's requests'
    figures."""
    return asyncio.run(_clients(url, bodies, seconds))
