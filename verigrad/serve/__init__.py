"""`verigrad serve`: an OpenAI-compatible HTTP server (app.py, on Starlette and uvicorn, the `serve` extra)
over an engine that batches every running request's decode step (engine.py)."""

from .engine import Engine, Event, QueueFull, Request, TokenLogprob

__all__ = ["Engine", "Event", "QueueFull", "Request", "TokenLogprob"]
