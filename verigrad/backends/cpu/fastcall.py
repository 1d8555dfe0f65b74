"""Calls into the C libraries without ctypes' per-argument cost.

A ctypes call converts every argument through its argtypes entry (2-4 us for a kernel's 5-8 arguments),
which is more than many kernels' work. The vg_call extension (extension/vg_call.c) takes the signature
once and converts the arguments in C: a NumPy array (its data pointer, read where `_ffi.data_reader`
reads it), a Python int (a pointer or a size), None, a ctypes array or structure (by its address), a
float. It is built like the library (the system compiler, the user's cache
folder), with the running Python's headers, on Linux x86-64 and AArch64 (the calling conventions it
relies on). Where it cannot be built or loaded, or for a signature it does not take, a function stays the
ctypes function; `VERIGRAD_CTYPES=1` keeps them all so.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import platform
import sys
import sysconfig
from pathlib import Path
from typing import Any

import numpy as np

from . import _ffi
from . import build as _build

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


def module() -> Any:
    """The loaded vg_call extension, or None (the reason in `status()`)."""
    if "module" not in _state:
        _state["module"], _state["status"] = _load()
    return _state["module"]


def status() -> str:
    """How the kernels are called: "vg_call", or "ctypes (<why>)"."""
    module()
    return _state["status"]


def _load() -> tuple[Any, str]:
    if os.environ.get("VERIGRAD_CTYPES", "") not in ("", "0"):
        return None, "ctypes (VERIGRAD_CTYPES is set)"
    if not supported():
        return (
            None,
            f"ctypes (vg_call is for Linux x86-64 and AArch64, not {sys.platform} {platform.machine()})",
        )
    include = sysconfig.get_paths().get("include") or ""
    if not (Path(include) / "Python.h").exists():
        return None, "ctypes (no Python.h for the vg_call extension)"
    source = f"/* {sys.version} */\n" + SOURCE.read_text()  # one build per Python
    try:
        _, info = _build.build("vg_call", source, includes=(include,), load=False)
        loader = importlib.machinery.ExtensionFileLoader("vg_call", info["path"])
        spec = importlib.util.spec_from_file_location("vg_call", info["path"], loader=loader)
        if spec is None:
            return None, "ctypes (vg_call could not be loaded)"
        loaded = importlib.util.module_from_spec(spec)
        loader.exec_module(loaded)
    except (_build.BuildError, ImportError, OSError) as e:
        return None, f"ctypes (vg_call: {e})"
    offset = _ffi.data_offset()
    if offset is not None:  # arrays passed as they are, read in C where `data` reads them
        loaded.arrays(np.ndarray, offset)
        _state["arrays"] = True
    return loaded, "vg_call"


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
