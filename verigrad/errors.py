"""Errors verigrad raises before any work is done, and where in the user's code they point."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB_DIR = os.path.dirname(os.__file__)


def _is_internal(filename: str) -> bool:
    if filename.startswith(_PACKAGE_DIR) or filename.startswith("<frozen"):
        return True
    return filename.startswith(_STDLIB_DIR) and "site-packages" not in filename


@dataclass(frozen=True)
class UserFrame:
    """The first frame outside verigrad (and the standard library) on the current stack."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} (in {self.function})"


def user_frame() -> UserFrame | None:
    """Walk the stack outward and return the caller's frame that is not verigrad's own code."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not _is_internal(filename):
            return UserFrame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


class VerigradError(Exception):
    """Base class of every error verigrad raises on purpose."""


class _OpError(VerigradError):
    """An error an op's rule raises with only the reason; `Op.__call__` adds the op and shapes."""

    kind = "error"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.op: str | None = None
        self.operands: tuple[str, ...] = ()
        self.where: UserFrame | None = None
        self.layer: object = None  # set by nn.Module: the layer the op ran in

    def locate(self, op: str, operands: tuple[str, ...]) -> _OpError:
        """Attach the op name, the operands as written and the user's line; returns self."""
        self.op, self.operands, self.where = op, operands, user_frame()
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        if self.op is None:
            return self.reason
        text = f"{self.op}({', '.join(self.operands)}): {self.reason}"
        if isinstance(self.layer, str):
            text += f"\n  {self.layer}"
        return f"{text}\n  at {self.where}" if self.where else text


class ShapeError(_OpError, ValueError):
    """Operands whose shapes an op's rule refuses, for at least one value of the symbols."""


class DTypeError(_OpError, TypeError):
    """Operands whose dtypes an op does not accept."""


class AxisError(ShapeError, IndexError):
    """An axis (dim) out of range: a ShapeError, and PyTorch's IndexError."""


class IndexDTypeError(DTypeError, IndexError):
    """Index values of a dtype that cannot index (a float tensor): a DTypeError, and PyTorch's IndexError."""


class WeightFileError(VerigradError, ValueError):
    """A weight or data file that is missing, truncated or does not match what it should hold."""


class TemplateError(VerigradError, ValueError):
    """A chat template that does not parse, fails while rendering, or goes past a render limit."""


class KernelSyntaxError(VerigradError, ValueError):
    """A user kernel's Python outside the typed subset `verigrad.library.elementwise_kernel` compiles (a
    loop, an unknown function, attribute access, a missing annotation, ...); names the construct and its
    line."""
