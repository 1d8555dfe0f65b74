"""A backend: a kernel table keyed by (op, dtype), with the reference as the fallback for the rest, and
the exactness each kernel states.

A backend registers kernels with `Backend.register`; `kernel(op, dtype)` returns its own kernel or the
op's NumPy reference. `report()` says which ops are native and which fall back.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ops import REGISTRY
from .threads import THREAD_COUNT

Kernel = Callable[..., Any]


@dataclass(frozen=True)
class Exactness:
    """How close a kernel's results are to its op's reference: the same bits (`EXACT`), within `ulps`
    units in the last place, or within `rtol * |reference| + atol` (for kernels that sum in another
    order). NaN must meet NaN in every case."""

    ulps: int = 0
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def is_exact(self) -> bool:
        return self.ulps == 0 and self.rtol == 0.0 and self.atol == 0.0

    def __str__(self) -> str:
        if self.is_exact:
            return "exact"
        if self.ulps:
            return f"ulp({self.ulps})"
        return f"rtol={self.rtol:g}, atol={self.atol:g}"


EXACT = Exactness()


def ulp(k: int) -> Exactness:
    """Within `k` units in the last place of the reference."""
    return Exactness(ulps=int(k))


def tolerance(rtol: float, atol: float = 0.0) -> Exactness:
    """Within `rtol * |reference| + atol`: for kernels that sum in another order than the reference."""
    return Exactness(rtol=float(rtol), atol=float(atol))


class Backend:
    """A named kernel table; every op it lacks runs its reference.

    `stamp` is a new object whenever a kernel is registered or the table replaced: an eager call's
    remembered kernel (eager.py) stands while the stamp it was chosen under does (read the stamp before
    the kernel: a registration between them then shows). Threads may register while others look up.
    """

    def __init__(self, name: str, description: str = "") -> None:
        self.name = name
        self.description = description
        self._kernels = {}  # see the property: replacing the table renews `stamp`
        self._exactness: dict[tuple[str, str | None], Exactness] = {}
        self._optimizers: dict[tuple[str, str], Kernel] = {}
        self._chosen: dict[tuple[Any, Any], tuple[Kernel, bool]] = {}  # (op, dtype) -> (kernel, native)
        self._chosen_from = self._kernels  # the table those answers came from
        self._lock = threading.Lock()  # registering, and remembering an answer of the table's

    @property
    def _kernels(self) -> dict[tuple[str, str | None], Kernel]:
        return self._table

    @_kernels.setter
    def _kernels(self, table: dict[tuple[str, str | None], Kernel]) -> None:
        self._table = table
        self.stamp = object()

    @property
    def threads(self) -> int:
        """The threads its kernels may use now: one setting for every backend (`set_threads`)."""
        return THREAD_COUNT.get()

    def register(
        self, op: str, kernel: Kernel, dtype: str | None = None, exactness: Exactness = EXACT
    ) -> None:
        """Add a kernel for `op` (for one dtype name, or every dtype when None), stating how close it is
        to the op's reference; the verification suite holds it to that."""
        with self._lock:
            self._kernels[(op, dtype)] = kernel
            self._exactness[(op, dtype)] = exactness
            self._chosen.clear()
            self.stamp = object()

    def register_optimizer(self, name: str, dtype: str, kernel: Kernel) -> None:
        """Add a whole-vector update for optimizer `name` ("adam") on `dtype`; see verigrad.optim."""
        self._optimizers[(name, dtype)] = kernel

    def optimizer_kernel(self, name: str, dtype: str) -> Kernel | None:
        """The update kernel registered for (optimizer, dtype), or None (the update then runs as ops)."""
        return self._optimizers.get((name, dtype))

    def load(self) -> bool:
        """Make the kernels available (a backend that builds them on first use does it here)."""
        return True

    def paths(self, op: str, dtype: str | None) -> tuple[str, ...]:
        """The code paths of the (op, dtype) kernel this machine can take, the default first; each must
        give the same bits (the verification runs each). One path, unnamed, unless a backend says more."""
        return ("",)

    @contextlib.contextmanager
    def on_path(self, path: str) -> Iterator[None]:
        """Kernels take `path` (one of `paths`) inside the block."""
        yield

    def modes(self, op: str, dtype: str | None) -> dict[str, Kernel | None]:
        """The modes a caller can select for the (op, dtype) kernel, the default first, each stating its
        own exactness while selected, and each with the function whose bits it gives (None: only its
        stated exactness holds); the verification runs each. One mode, unnamed, unless a backend says
        more."""
        return {"": None}

    @contextlib.contextmanager
    def in_mode(self, mode: str) -> Iterator[None]:
        """Kernels run in `mode` (one of `modes`) inside the block."""
        yield

    @contextlib.contextmanager
    def rows_apart(self) -> Iterator[None]:
        """Inside the block, in this thread, each row of a product has the bits it has alone, however many
        rows the call has (a server's batched steps). The reference's products already do."""
        yield

    def write_rows(self, stores: list[np.ndarray], news: list[np.ndarray], at: np.ndarray) -> None:
        """stores[p][b, :, at[b]] = news[p][b] for every pair p and row b < len(at): a batched step's new
        keys and values (news [B, H, D]) into their cache rows (stores [B', H, A, D]), every layer's."""
        rows = np.arange(len(at))
        for store, new in zip(stores, news):
            store[rows, :, at] = new

    def samples(self, op: str, rng: np.random.Generator) -> list[Any]:
        """Inputs (the ops' `Sample`s) the verification adds to `op`'s own for this backend's kernel:
        sizes from which the kernel takes another code path. None unless a backend says more."""
        return []

    def reruns(self) -> int:
        """How many results of fast kernels held an infinity or a NaN and were computed again on a path
        that cannot overflow (an f32 partial sum may overflow where the reference's does not), so far.
        Where the inputs cannot overflow, each one hides a bug: the verification fails it."""
        return 0

    def tape(self) -> Any:
        """A recorder of this backend's kernel calls, for a plan's replay (ir/replay.py); None here."""
        return None

    @contextlib.contextmanager
    def recording(self, tape: Any) -> Iterator[None]:
        """While inside, this thread's kernel calls also go onto `tape` (one `tape()` gave)."""
        yield

    def settings(self) -> tuple:
        """What the kernels read at every call besides their arguments: a replay recorded under other
        settings is recorded again."""
        return (self.threads,)

    def registered(self) -> dict[tuple[str, str | None], tuple[Kernel, Exactness]]:
        """Every kernel it has: (op, dtype name, or None for every dtype) -> (kernel, stated exactness)."""
        self.load()
        return {key: (kernel, self._exactness[key]) for key, kernel in self._kernels.items()}

    def exactness(self, op: str, dtype: str) -> Exactness:
        """What `register` stated for the kernel that runs `op` on `dtype` (EXACT for the reference)."""
        return self._exactness.get((op, dtype)) or self._exactness.get((op, None)) or EXACT

    def native(self, op: Any, dtype: Any) -> Kernel | None:
        return self._kernels.get((op.name, dtype.name)) or self._kernels.get((op.name, None))

    def kernel(self, op: Any, dtype: Any) -> Kernel:
        """The kernel that runs `op` on `dtype` here: the native one, else the op's reference (remembered
        until a kernel is registered or the table replaced; a fused group's generated kernel is looked
        up every time)."""
        if self._chosen_from is not self._kernels:
            with self._lock:
                self._chosen.clear()
                self._chosen_from = self._kernels
        chosen = self._chosen.get((op, dtype))
        if chosen is not None and (chosen[1] or chosen[0] is op.reference):  # a reference may be replaced
            return chosen[0]
        stamp = self.stamp
        native = self.native(op, dtype)
        kernel = native or op.reference or _composite_reference(op)
        if not op.is_fused:
            with self._lock:
                if self.stamp is stamp:  # else a kernel was registered meanwhile: not remembered
                    self._chosen[(op, dtype)] = (kernel, native is not None)
        return kernel

    def report(self) -> dict[str, list[str]]:
        names = sorted(REGISTRY)
        native = [n for n in names if any(k[0] == n for k in self._kernels)]
        return {"native": native, "fallback": [n for n in names if n not in native]}

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


def _composite_reference(op: Any) -> Kernel:
    raise LookupError(f"{op.name} is a composite op: run its decomposition")
