"""The IR: trace a function into a Program, print it, verify it, transform it, plan it."""

from .program import Instr, Program, Value
from .trace import TraceMode, trace
from .verify import IRError, verify

__all__ = ["IRError", "Instr", "Program", "TraceMode", "Value", "trace", "verify"]
