"""The IR: trace a function into a Program, print it, validate it, transform it, plan it."""

from .program import Instr, Program, Value
from .trace import TraceMode, trace
from .validate import IRError, validate

__all__ = ["IRError", "Instr", "Program", "TraceMode", "Value", "trace", "validate"]
