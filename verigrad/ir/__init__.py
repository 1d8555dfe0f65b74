"""The IR: trace a function into a Program, print it, validate it, transform it, plan it. Its names are
imported on first use (_lazy.py): nn's modules read ir.guards alone, and a program that compiles nothing
reads no more of it."""

from .. import _lazy

_NAMES = {"program": "Instr Program Value", "trace": "TraceMode trace", "validate": "IRError validate"}
__getattr__, __dir__ = _lazy.attach(__name__, _lazy.table(_NAMES))
__all__ = ["IRError", "Instr", "Program", "TraceMode", "Value", "trace", "validate"]
