"""Dtypes, type promotion and integer semantics of every public op, against PyTorch, outside CI:
`python tools/dtype_sweep.py [--names NAME ...] [--no-auto] [--no-cases] [--verbose]`.

Two parts, each a call written once against a library (`lib` is `torch` or `verigrad`):

- auto: every function of torch's namespace and every Tensor method that verigrad also has, called with
  one tensor of each dtype (values with negatives, zeros and, in floats, NaN and inf), then with a second
  operand that is a Python number (bool, int, float, negative), a 0-d tensor of another dtype, or a
  tensor of another dtype. A call torch refuses for every dtype is skipped.
- cases: the hand-written edges (`//` and `%` with negatives and zeros, shifts, overflow, `pow` with
  negative exponents, reductions' dtypes, `round(decimals=)`, sort ties and NaN, `unique`, `nan_to_num`,
  `out=` of another dtype, `dtype=` of reductions and factories, `tensor()` of mixed lists).

Each call is classified as agree (same dtype, shape and values: integers and bools exactly, floats with
`torch.testing.assert_close`'s tolerances and NaN in the same places; both raising agrees), raises
(verigrad refuses what PyTorch answers), or SILENT (another dtype, shape or value, or an answer where
PyTorch raises). The differences are printed, one line each, then the totals.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import verigrad

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
VALUES = {
    "bool": [True, False, True, True, False, False],
    "int": [-3, -1, 0, 1, 2, 7],
    "uint8": [0, 1, 2, 3, 200, 255],
    "float": [-2.5, -0.5, 0.0, 1.5, math.nan, math.inf],
}
# Names whose answers are random, or which are not ops on a tensor's values.
SKIP = {
    "bernoulli",
    "multinomial",
    "normal",
    "poisson",
    "rand_like",
    "randint_like",
    "randn_like",
    "rand",
    "randn",
    "randint",
    "randperm",
    "dropout",
    "alpha_dropout",
    "feature_alpha_dropout",
    "rrelu",
    "empty_like",
    "empty",
    "new_empty",
    "new",  # uninitialised memory in PyTorch
    "uniform_",
    "normal_",
    "random_",
    "cauchy_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "bernoulli_",
    "data_ptr",
    "storage",
    "untyped_storage",
    "storage_offset",
    "register_hook",
    "backward",
    "set_",
    "share_memory_",
    "pin_memory",
    "numpy",
    "tolist",
    "item",
    "element_size",
    "nbytes",
    "itemsize",
    "save",
    "load",
    "manual_seed",
    "seed",
    "set_default_dtype",
    "set_printoptions",
    "is_grad_enabled",
    "set_grad_enabled",
    "compile",
    "jit",
    "vmap",
    "cond",
    "resize_",
    "resize_as_",
    "empty_strided",
    "new_empty_strided",
    "unique_consecutive",
    "__repr__",
    "__str__",
    "__format__",
    "__hash__",
    "__reduce_ex__",
    "__dir__",
    "__sizeof__",
    "__array__",
    "__deepcopy__",
    "__setstate__",
    "__getstate__",
    "__init__",
    "__new__",
    "__class__",
    "__del__",
    "__iter__",
    "__len__",
    "__bool__",
    "__index__",
    "__int__",
    "__float__",
    "__complex__",
    "__setitem__",
    "__getitem__",
    "__contains__",
    "__array_wrap__",
    "__reversed__",
    "__init_subclass__",
    "__subclasshook__",
    "__array_priority__",
    "__dlpack__",
    "__dlpack_device__",
    "__torch_function__",
    "apply_",
    "map_",
    "to_dense",
    "is_nonzero",
    "get_device",
    "device",
    "cpu",
    "cuda",
    "type",
    "dim_order",
    "_version",
    "as_strided",
    "as_strided_",
    "as_strided_scatter",
    "from_file",
    "frombuffer",
    "from_numpy",
    "from_dlpack",
    "is_storage",
    "is_tensor",
    "typename",
    "abs_",
    "fill_uninitialized_",
}


DTYPE_NAMES = {
    "f32": "float32",
    "f64": "float64",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
}


def as_result(value: Any) -> Any:
    """A library's answer as plain data: ("tensor", dtype name, shape, float64/int64 values), tuples of
    these, or the Python value."""
    if isinstance(value, torch.Tensor | verigrad.Tensor):
        name = str(value.dtype).replace("torch.", "")
        name = DTYPE_NAMES.get(name, name)
        value = value.detach()
        if name in ("float16", "bfloat16", "float32"):
            data = np.asarray(value.double().numpy())
        else:
            data = np.asarray(value.numpy())
        return ("tensor", name, tuple(value.shape), data)
    if isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor | verigrad.Tensor):
        return tuple(as_result(v) for v in value)
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, torch.dtype | verigrad.dtypes.DType):
        return DTYPE_NAMES.get(str(value).replace("torch.", ""), str(value).replace("torch.", ""))
    return value


def outcome(call: Callable[[Any], Any], lib: Any) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", as_result(call(lib)))
    except Exception as e:
        return ("raises", f"{type(e).__name__}: {str(e)[:90]}")


def differ(ours: Any, theirs: Any) -> str | None:
    """Why two results differ, or None."""
    if isinstance(theirs, tuple) and theirs and theirs[0] == "tensor":
        if not (isinstance(ours, tuple) and ours and ours[0] == "tensor"):
            return f"verigrad {type(ours).__name__}"
        _, td, ts, tv = theirs
        _, od, os_, ov = ours
        if od != td:
            return f"dtype {od} vs {td}"
        if os_ != ts:
            return f"shape {os_} vs {ts}"
        if tv.dtype.kind == "f":
            try:
                tol = {"float16": 1e-3, "bfloat16": 1.6e-2, "float32": 1.3e-6, "float64": 1e-7}[td]
                torch.testing.assert_close(
                    torch.from_numpy(np.asarray(ov, np.float64)),
                    torch.from_numpy(np.asarray(tv, np.float64)),
                    rtol=tol,
                    atol=1e-5 if td != "float64" else 1e-7,
                    equal_nan=True,
                )
            except AssertionError:
                return f"values {ov.ravel()[:6]} vs {tv.ravel()[:6]}"
            return None
        if not np.array_equal(ov, tv):
            return f"values {ov.ravel()[:6]} vs {tv.ravel()[:6]}"
        return None
    if isinstance(theirs, tuple) and theirs and isinstance(theirs[0], tuple):
        if not isinstance(ours, tuple) or len(ours) != len(theirs):
            return f"{ours!r:.60} vs {theirs!r:.60}"
        for o, t in zip(ours, theirs):
            why = differ(o, t)
            if why:
                return why
        return None
    try:
        same = ours == theirs or (isinstance(ours, float) and math.isnan(ours) and math.isnan(theirs))
    except Exception:
        same = False
    return None if same else f"{ours!r:.60} vs {theirs!r:.60}"


def classify(call: Callable[[Any], Any]) -> tuple[str, str]:
    theirs, ours = outcome(call, torch), outcome(call, verigrad)
    if theirs[0] == "raises":
        return ("agree", "") if ours[0] == "raises" else ("SILENT", f"torch raises {theirs[1]}")
    if ours[0] == "raises":
        return "raises", ours[1]
    why = differ(ours[1], theirs[1])
    return ("SILENT", why) if why else ("agree", "")


def tensor(lib: Any, dtype: str, n: int = 6) -> Any:
    kind = (
        "bool" if dtype == "bool" else "uint8" if dtype == "uint8" else "int" if "int" in dtype else "float"
    )
    return lib.tensor(VALUES[kind][:n], dtype=getattr(lib, dtype))


SECONDS: dict[str, Callable[[Any], Any]] = {
    "True": lambda lib: True,
    "2": lambda lib: 2,
    "-2": lambda lib: -2,
    "2.5": lambda lib: 2.5,
    "0-d i64": lambda lib: lib.tensor(3),
    "0-d f64": lambda lib: lib.tensor(1.5, dtype=lib.float64),
    "0-d bool": lambda lib: lib.tensor(True),
    "0-d i8": lambda lib: lib.tensor(-2, dtype=lib.int8),
    "u8[6]": lambda lib: tensor(lib, "uint8"),
    "i8[6]": lambda lib: tensor(lib, "int8"),
    "i32[6]": lambda lib: tensor(lib, "int32"),
    "f16[6]": lambda lib: tensor(lib, "float16"),
    "f64[6]": lambda lib: tensor(lib, "float64"),
    "bool[6]": lambda lib: tensor(lib, "bool"),
}


def public_names() -> list[tuple[str, Callable[[Any], Any]]]:
    """(label, getter of the function in a library) for torch's functions and Tensor methods verigrad has."""
    out = []
    for name in sorted(dir(torch)):
        if name.startswith("_") or name in SKIP or not callable(getattr(torch, name, None)):
            continue
        if isinstance(getattr(torch, name), type) or not hasattr(verigrad, name):
            continue
        out.append((f"torch.{name}", lambda lib, n=name: getattr(lib, n)))
    for name in sorted(dir(torch.Tensor)):
        if (
            name in SKIP
            or (name.startswith("_") and not name.startswith("__"))
            or not hasattr(verigrad.Tensor, name)
        ):
            continue
        if not callable(getattr(torch.Tensor, name, None)):
            continue
        out.append((f"Tensor.{name}", lambda lib, n=name: lambda x, *a: getattr(x, n)(*a)))
    return out


def auto_calls(names: set[str] | None) -> Iterator[tuple[str, Callable[[Any], Any]]]:
    for label, get in public_names():
        if names and label.split(".", 1)[1] not in names:
            continue
        unary_ok = any(outcome(lambda lib, d=d: get(lib)(tensor(lib, d)), torch)[0] == "ok" for d in DTYPES)
        if unary_ok:
            for d in DTYPES:
                yield f"{label}({d})", lambda lib, d=d, get=get: get(lib)(tensor(lib, d))
        binary_ok = any(
            outcome(lambda lib, d=d: get(lib)(tensor(lib, d), tensor(lib, d)), torch)[0] == "ok"
            for d in ("float32", "int64", "bool")
        )
        if not binary_ok:
            continue
        for d in DTYPES:
            for sname, second in SECONDS.items():
                yield (
                    f"{label}({d}, {sname})",
                    lambda lib, d=d, get=get, s=second: get(lib)(tensor(lib, d), s(lib)),
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", nargs="*", help="only these functions / methods (auto part)")
    parser.add_argument("--no-auto", action="store_true")
    parser.add_argument("--no-cases", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="print the raising calls too")
    args = parser.parse_args(argv)
    from dtype_sweep_cases import CASES  # the hand-written edges, beside this file

    calls: list[tuple[str, Callable[[Any], Any]]] = []
    if not args.no_cases:
        calls += list(CASES.items())
    if not args.no_auto:
        calls += list(auto_calls(set(args.names) if args.names else None))
    totals: collections.Counter[str] = collections.Counter()
    for label, call in calls:
        kind, why = classify(call)
        totals[kind] += 1
        if kind == "SILENT" or (kind == "raises" and args.verbose):
            print(f"{kind:6} {label}: {why}", flush=True)
    print(dict(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
