"""Calls into the C libraries without ctypes' per-argument cost.

A ctypes call converts every argument through its argtypes entry (2-4 us for a kernel's 5-8 arguments),
which is more than many kernels' work. The vg_call extension (extension/vg_call.c) takes the signature
once and converts the arguments in C: a NumPy array (its data pointer, read where `data_pointer.data_reader`
reads it), a Python int (a pointer or a size), None, a ctypes array or structure (by its address), a
float. It is built like the library (the system compiler, the user's cache
folder), with the running Python's headers, on Linux x86-64 and AArch64 (the calling conventions it
relies on). Where it cannot be built or loaded, or for a signature it does not take, a function stays the
ctypes function; `VERIGRAD_CTYPES=1` keeps them all so. A `tape()` records the calls made through it
for a compiled plan's replay (ir/replay.py).
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import platform
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ... import settings
from . import build as _build
from .data_pointer import data_offset

SOURCE = Path(__file__).resolve().parent / "extension" / "vg_call.c"
_INTEGERS = (
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int32,
    ctypes.c_uint64,
    ctypes.c_uint32,
    ctypes.c_size_t,
)
_RETURNS = {None: 0, ctypes.c_int: 1, ctypes.c_int64: 2}
MAX_INTS, MAX_DOUBLES = 16, 4  # vg_call.c's
_state: dict[str, Any] = {}


def supported() -> bool:
    """Whether vg_call's calling-convention rules hold here (System V x86-64, AArch64 on Linux)."""
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64", "aarch64")


def _loaded(name: str, load: Callable[[], tuple[Any, str]]) -> tuple[Any, str]:
    """`load()`'s (extension or None, how calls run), made once and kept under `name`."""
    if name not in _state:
        _state[name] = load()
    return _state[name]


def module() -> Any:
    """The loaded vg_call extension, or None (the reason in `status()`)."""
    return _loaded("vg_call", _load)[0]


def status() -> str:
    """How the kernels are called: "vg_call", or "ctypes (<why>)"."""
    return _loaded("vg_call", _load)[1]


def _load() -> tuple[Any, str]:
    if settings.env_flag("VERIGRAD_CTYPES", False):
        return None, "ctypes (VERIGRAD_CTYPES is set)"
    if not supported():
        return (
            None,
            f"ctypes (vg_call is for Linux x86-64 and AArch64, not {sys.platform} {platform.machine()})",
        )
    include = sysconfig.get_paths().get("include") or ""
    if not (Path(include) / "Python.h").exists():
        return None, "ctypes (no Python.h for the vg_call extension)"
    try:
        loaded = _extension("vg_call", (SOURCE,), (include,))
    except (_build.BuildError, ImportError, OSError) as e:
        return None, f"ctypes (vg_call: {e})"
    offset = data_offset()
    if offset is not None:  # arrays passed as they are, read in C where `data` reads them
        loaded.arrays(np.ndarray, offset)
        _state["arrays"] = True
        _state["layout"] = _layout_reader(loaded, offset)
    return loaded, "vg_call"


def _extension(name: str, sources: tuple[Path, ...], includes: tuple[str, ...]) -> Any:
    """The CPython extension `name` built from `sources` (one translation unit, in that order; once per
    Python: its version is in the source's hash) through `build.build`, as the library is, and imported;
    BuildError, ImportError or OSError."""
    text = f"/* {sys.version} */\n" + "\n".join(source.read_text() for source in sources)
    _, info = _build.build(name, text, includes=includes, load=False)
    loader = importlib.machinery.ExtensionFileLoader(name, info["path"])
    spec = importlib.util.spec_from_file_location(name, info["path"], loader=loader)
    if spec is None:
        raise ImportError(f"{name} could not be loaded")
    loaded = importlib.util.module_from_spec(spec)
    loader.exec_module(loaded)
    return loaded


# vg_eager's files, compiled as one module in this order: eager.h (what they share), eager_support.c (what
# the op call reads: attributes, scalars, the plan key's params), vg_eager.c (the module and the op call),
# eager_fast.c (the direct kernel calls), eager_copies.c (a reshape's and a concatenation's copies),
# eager_method.c (the Method descriptor) and backward.c (the backward engine's walk)
EAGER_FILES = (
    "eager.h",
    "eager_support.c",
    "vg_eager.c",
    "eager_fast.c",
    "eager_copies.c",
    "eager_method.c",
    "backward.c",
)
EAGER_SOURCES = tuple(Path(__file__).resolve().parent / "extension" / f for f in EAGER_FILES)


def eager_module() -> Any:
    """The vg_eager extension (extension/vg_eager.c: the eager call of an op in C), built with NumPy's
    headers where vg_call passes arrays; None otherwise (the reason in `eager_status()`)."""
    return _loaded("vg_eager", _load_eager)[0]


def eager_status() -> str:
    """How eager calls run: "vg_eager", or "python (<why>)"."""
    return _loaded("vg_eager", _load_eager)[1]


def _load_eager() -> tuple[Any, str]:
    if not passes_arrays():
        return None, f"python (vg_call does not pass arrays: {status()})"
    include = sysconfig.get_paths().get("include") or ""
    try:
        loaded = _extension("vg_eager", EAGER_SOURCES, (include, np.get_include()))
    except (_build.BuildError, ImportError, OSError) as e:
        return None, f"python (vg_eager: {e})"
    return loaded, "vg_eager"


def recording_test() -> Any:
    """vg_call's test of whether this thread records a tape (a capsule vg_eager calls), or None."""
    return getattr(module(), "recording_test", None)


_FLAGS = {"C_CONTIGUOUS": 0x1, "ALIGNED": 0x100, "WRITEABLE": 0x400}  # NumPy's flag bits


def expected_layout(items: tuple) -> bytes:
    """What vg_call's `layout` gives for `items` (arrays and Nones), from NumPy's own answers."""
    words: list[int] = []
    for a in items:
        if a is None:
            words.append(-1)
            continue
        flags = sum(bit for name, bit in _FLAGS.items() if a.flags[name])
        words.append(a.ndim | ord(a.dtype.char) << 8 | ord(a.dtype.byteorder) << 16 | flags << 24)
        for size, stride in zip(a.shape, a.strides):
            words += [size, stride]
    return np.array(words, np.int64).tobytes()


def _layout_reader(loaded: Any, offset: int) -> Any:
    """vg_call's `layout`, once the fields it reads (NumPy's array object after its data pointer: the
    dimension count, shape, strides, base, dtype and flags; a dtype's type character and byte order)
    give NumPy's own answers on sample arrays; None where they do not."""
    word = ctypes.sizeof(ctypes.c_void_p)
    loaded.layouts(
        offset + word, offset + 2 * word, offset + 3 * word, offset + 5 * word, offset + 6 * word, 25
    )
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    samples = (
        base,
        base[:, ::2].T,
        base.astype(np.float32)[1],
        np.zeros((), np.int64),
        np.frombuffer(bytearray(17), np.uint8, 16, 1).view(np.float32),
        np.ones(3, ">f8"),
        None,
        np.zeros((2, 0, 1), np.bool_),
    )
    try:
        same = all(loaded.layout((a,)) == expected_layout((a,)) for a in samples)
    except Exception:
        same = False
    if not same:
        loaded.layouts(0, 0, 0, 0, 0, 0)
        return None
    return loaded.layout


def layout_key() -> Any:
    """vg_call's `layout(tuple)` (bytes saying the layout of each array: see vg_call.c), or None."""
    module()
    return _state.get("layout")


def passes_arrays() -> bool:
    """Whether vg_call functions take NumPy arrays for pointer arguments (see `_ffi.Library.ptr`)."""
    return module() is not None and _state.get("arrays", False)


def signature(argtypes: list, restype: Any) -> tuple[str, int] | None:
    """vg_call's signature ('i' an integer or pointer, 'd' a double) and return kind for these ctypes
    types; None for one it does not take."""
    if restype not in _RETURNS or len(argtypes) > MAX_INTS + MAX_DOUBLES:
        return None
    letters = []
    for t in argtypes:
        if t is ctypes.c_double:
            letters.append("d")
        elif t in _INTEGERS or t is ctypes.c_int:
            letters.append("i")
        else:
            return None
    text = "".join(letters)
    if text.count("i") > MAX_INTS or text.count("d") > MAX_DOUBLES:
        return None
    return text, _RETURNS[restype]


def function(fn: Any, argtypes: list, restype: Any = None) -> Any:
    """The ctypes function `fn` (its argtypes and restype set to these) as a vg_call function where the
    extension is loaded and takes the signature; else `fn` itself."""
    loaded = module()
    found = signature(argtypes, restype)
    if loaded is None or found is None:
        return fn
    address = ctypes.cast(fn, ctypes.c_void_p).value or 0
    return loaded.function(address, found[0], found[1], fn)


def with_tuples(fn: Any, signature: str, fallback: Any) -> Any:
    """A vg_call function for the ctypes function `fn` of `signature`, whose 'p' parameters take tuples
    of NumPy arrays (and Nones) as C arrays of their data pointers (vg_call.c); an argument it does not
    take (an array not aligned to 8 bytes, say) goes to `fallback`, with all the arguments. None where
    vg_call does not pass arrays."""
    if not passes_arrays():
        return None
    address = ctypes.cast(fn, ctypes.c_void_p).value or 0
    return module().function(address, signature, 0, fallback)


def tape() -> Any:
    """A new vg_call Tape: the calls this thread makes while it records (`record`), to be made again by
    `tape.run(start, stop)` without Python (vg_call.c). None where vg_call does not pass arrays as they
    are (a tape holds the arrays its calls point into, so it cannot hold pointers made in Python)."""
    return module().Tape() if passes_arrays() else None


def record(tape: Any) -> None:
    """This thread's later vg_call calls also go onto `tape` (None: onto no tape)."""
    module().record(tape)
