"""PyTorch's own op suite (`op_db`, the OpInfos of `torch.testing`) run against verigrad, outside CI:
`python tools/opinfo_sweep.py [--ops NAME ...] [--present] [--samples N] [--stride K] [--dtypes ...]
[--silent FILE] [--list-missing]`.

Each OpInfo's samples, in f32, f64 and the integer and bool dtypes the op supports on the CPU, run through
PyTorch and, converted, through verigrad (the op found by its name in `verigrad`, `verigrad.nn.functional`,
`verigrad.linalg`, `verigrad.special`, `verigrad.fft`, else the Tensor method, else for an aten operator
(torch.ops.aten.NAME.OVERLOAD) `verigrad.ops.aten`'s; an OpInfo whose op is a lambda of torch's test suite
runs that lambda with `torch` bound to verigrad). Every call is classified:

- agree: the same values (`torch.testing.assert_close`'s tolerances for the dtype, NaN at the same
  positions), dtype and shape, and, where both support autograd, the same gradients for a random cotangent;
  a call both refuse agrees too;
- missing: verigrad has no such function, or refuses with AttributeError or NotImplementedError;
- raises: verigrad raises another error where PyTorch answers (the call or its backward);
- SILENT: PyTorch refuses and verigrad answers (torch-raises), or the values, dtype or shape, or the
  gradients differ.

It prints a table by category, the ops with SILENT or raising calls, and the agreement rate; `--silent FILE`
writes every SILENT case there, one JSON object a line. `--list-missing` runs nothing: it lists the OpInfos
verigrad has no function for, most calls first, with the number of calls each would make (its samples are
generated, not run). `tests/parity/test_opinfo_torch.py` runs it on a
fixed subset of samples of the ops verigrad has.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import verigrad

DTYPES = (
    torch.float32,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
)
DTYPE_NAMES = {d: str(d).removeprefix("torch.") for d in DTYPES}
NAMESPACES = ("", "nn.functional.", "linalg.", "special.", "fft.")
# Ops torch's suite runs under a fixed seed whose values are no random draw (attention without dropout, the
# identity of dropout outside training): their values are compared. The variants of these that do draw
# (RANDOM_VARIANTS) are random, as every other op run under a seed: held to PyTorch's dtype and shape only.
DETERMINISTIC_WITH_SEED = {
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.multi_head_attention_forward",
    "nn.functional.feature_alpha_dropout",  # "without_train" is the identity
}
# Ops answering positions, where equal values tie: (the position of `dim` in the sample's args, its default).
TIE_OPS = {
    "sort": (0, -1),
    "argsort": (0, -1),
    "msort": (99, 0),
    "topk": (1, -1),
    "kthvalue": (1, -1),
    "mode": (0, -1),
    "median": (0, None),
    "nanmedian": (0, None),
    "max": (0, None),
    "min": (0, None),
    "cummax": (0, None),
    "cummin": (0, None),
}
# Ops whose answer is unique up to signs: compared through the sample's output_process_fn_grad.
GAUGE_OPS = {"svd", "linalg.svd", "linalg.eigh", "linalg.eig", "svd_lowrank", "pca_lowrank"}
RANDOM_VARIANTS = {("nn.functional.feature_alpha_dropout", "with_train")}
RANDOM_NAMES = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
CATEGORIES = (
    "agree",
    "missing",
    "raises",
    "SILENT torch-raises",
    "SILENT values",
    "SILENT dtype/shape",
    "SILENT gradients",
)


class Difference(Exception):
    """A silent difference: its category and what differs."""

    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category


@dataclass
class Result:
    op: str  # name.variant
    dtype: str
    sample: int
    category: str
    detail: str = ""


@dataclass
class Sweep:
    results: list[Result] = field(default_factory=list)

    def counts(self) -> collections.Counter:
        return collections.Counter(r.category for r in self.results)

    def rate(self) -> float:
        """Calls that agree, of all calls swept."""
        return self.counts()["agree"] / max(1, len(self.results))

    def silent(self) -> list[Result]:
        return [r for r in self.results if r.category.startswith("SILENT")]


# ---------------------------------------------------------------------------------------------------------
# Finding verigrad's op


def _attribute(root: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


def _rebound(fn: types.FunctionType) -> Callable[..., Any]:
    """`fn` (a lambda of torch's test suite) with the global name `torch` bound to verigrad."""
    glob = dict(fn.__globals__)
    glob["torch"] = verigrad
    return types.FunctionType(fn.__code__, glob, fn.__name__, fn.__defaults__, fn.__closure__)


def full_name(opinfo: Any) -> str:
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


def verigrad_op(opinfo: Any) -> Callable[..., Any] | None:
    """verigrad's function for `opinfo`, or None where verigrad has none."""
    op = opinfo.op
    if isinstance(op, types.FunctionType) and op.__module__.startswith("torch.testing"):
        return _rebound(op)
    name = opinfo.name.removeprefix("torch.")
    if name.startswith("__"):  # a reflected operator: a Tensor method
        return getattr(verigrad.Tensor, name, None)
    for space in NAMESPACES:
        try:
            if space and not name.startswith(space):
                continue
            return _attribute(verigrad, name)
        except AttributeError:
            pass
    if "." not in name and hasattr(verigrad.Tensor, name):
        method = name
        return lambda x, *args, **kwargs: getattr(x, method)(*args, **kwargs)
    if isinstance(op, torch._ops.OpOverload | torch._ops.OpOverloadPacket):  # torch.ops.aten.NAME[.OVERLOAD]
        with contextlib.suppress(AttributeError):
            return _attribute(verigrad.ops, str(op))
    return None


def _positional_dropout(opinfo: Any, sample: Any) -> bool:
    """multi_head_attention_forward's dropout_p is its tenth argument (after the query, args[9]): in training
    a non-zero one draws."""
    if opinfo.name != "nn.functional.multi_head_attention_forward" or len(sample.args) < 10:
        return False
    return bool(sample.args[9]) and bool(sample.kwargs.get("training", True))


def is_random(opinfo: Any) -> bool:
    if opinfo.name in RANDOM_NAMES or (opinfo.name, opinfo.variant_test_name) in RANDOM_VARIANTS:
        return True
    code = getattr(opinfo.op, "__code__", None)
    return (
        code is not None
        and "wrapper_set_seed" in code.co_names
        and opinfo.name not in DETERMINISTIC_WITH_SEED
    )


# ---------------------------------------------------------------------------------------------------------
# Converting PyTorch's arguments


def _snapshot(x: Any) -> Any:
    """The sample's arguments with each tensor as (a NumPy copy, requires_grad), before PyTorch runs; a
    contiguous view of another tensor also with its base and its place there (as_strided reads the base)."""
    if isinstance(x, torch.Tensor):
        array = _Array(x.detach().cpu().resolve_conj().resolve_neg().numpy().copy(), x.requires_grad, x.dtype)
        base = x._base
        if base is not None and x.is_contiguous() and base.is_contiguous() and base.dtype == x.dtype:
            array.base = (_snapshot(base), x.storage_offset() - base.storage_offset())
        return array
    if isinstance(x, list | tuple) and not isinstance(x, torch.Size):
        return (
            type(x)(_snapshot(v) for v in x) if not hasattr(x, "_fields") else tuple(_snapshot(v) for v in x)
        )
    if isinstance(x, dict):
        return {k: _snapshot(v) for k, v in x.items()}
    return x


@dataclass
class _Array:
    array: np.ndarray
    requires_grad: bool
    dtype: torch.dtype
    base: tuple[Any, int] | None = None  # (the base's _Array, the view's offset in it): a contiguous view


class Unconvertible(Exception):
    """An argument verigrad has no counterpart of (a complex tensor, a generator)."""


def _to_verigrad(x: Any, leaves: list[Any]) -> Any:
    if isinstance(x, _Array):
        if x.dtype not in DTYPE_NAMES:
            raise Unconvertible(f"a {x.dtype} tensor")
        if x.base is not None:  # the same view of the same base
            base, offset = x.base
            whole = verigrad.from_numpy(base.array.copy()).requires_grad_(base.requires_grad)
            t = whole.reshape(-1)[offset : offset + x.array.size].reshape(x.array.shape)
            if x.requires_grad:
                if not t.requires_grad:  # a view made where no gradient was recorded: a leaf
                    t.requires_grad_(True)
                leaves.append(t)
            return t
        t = verigrad.from_numpy(x.array.copy())
        if x.requires_grad:
            t.requires_grad_(True)
            leaves.append(t)
        return t
    if isinstance(x, torch.Size):
        return verigrad.Size(x)
    if isinstance(x, list | tuple):
        return type(x)(_to_verigrad(v, leaves) for v in x)
    if isinstance(x, dict):
        return {k: _to_verigrad(v, leaves) for k, v in x.items()}
    if isinstance(x, torch.dtype):
        if x not in DTYPE_NAMES and x not in (torch.float16, torch.bfloat16):
            raise Unconvertible(f"dtype {x}")
        return getattr(verigrad, str(x).removeprefix("torch."))
    if isinstance(x, torch.device):
        return verigrad.device(str(x))
    if isinstance(x, torch.memory_format):
        return getattr(verigrad, str(x).removeprefix("torch."))
    if isinstance(x, torch.Generator | torch.layout):
        raise Unconvertible(type(x).__name__)
    if isinstance(x, torch.nn.PairwiseDistance):  # a distance_function argument
        return verigrad.nn.PairwiseDistance(x.norm, x.eps, x.keepdim)
    if callable(x) and getattr(x, "__module__", "") == "torch.nn.functional":
        return getattr(verigrad.nn.functional, x.__name__)
    if isinstance(x, torch.nn.Module):
        raise Unconvertible(type(x).__name__)
    if isinstance(x, complex):
        raise Unconvertible("a complex number")
    return x


def _torch_leaves(x: Any) -> Iterator[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        if x.requires_grad:
            yield x
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _torch_leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _torch_leaves(v)


# ---------------------------------------------------------------------------------------------------------
# Comparing answers


def _compare(ours: Any, theirs: Any, where: str) -> None:
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, verigrad.Tensor):
            raise Difference("SILENT dtype/shape", f"{where}: a tensor expected, got {type(ours).__name__}")
        if theirs.dtype not in DTYPE_NAMES and theirs.dtype not in (torch.float16, torch.bfloat16):
            raise Unconvertible(f"a {theirs.dtype} result")
        want_dtype = str(theirs.dtype).removeprefix("torch.")
        if ours.dtype != getattr(verigrad, want_dtype):
            raise Difference("SILENT dtype/shape", f"{where}: dtype {ours.dtype}, PyTorch's {theirs.dtype}")
        if tuple(ours.shape) != tuple(theirs.shape):
            raise Difference(
                "SILENT dtype/shape", f"{where}: shape {tuple(ours.shape)}, PyTorch's {tuple(theirs.shape)}"
            )
        got = torch.from_numpy(np.array(ours.detach().numpy(), copy=True))
        want = theirs.detach().resolve_conj().resolve_neg()
        if want.layout != torch.strided:
            want = want.to_dense()
        atol = None
        if want.dtype == torch.float32 and want.numel():
            # assert_close's f32 atol, scaled by the result's largest finite entry: an entry of a sum carries
            # the rounding of the largest terms, whatever the order of summation
            finite = want[torch.isfinite(want)].abs()
            atol = 1e-5 * max(1.0, float(finite.max()) if finite.numel() else 1.0)
        try:
            torch.testing.assert_close(
                got,
                want.to(got.dtype),
                equal_nan=True,
                check_stride=False,
                atol=atol,
                rtol=None if atol is None else 1.3e-6,
            )
        except AssertionError as e:
            raise Difference("SILENT values", f"{where}: {' '.join(str(e).split())[:400]}") from None
        return
    if isinstance(theirs, list | tuple):
        if not isinstance(ours, list | tuple) or len(ours) != len(theirs):
            raise Difference(
                "SILENT dtype/shape",
                f"{where}: {type(ours).__name__}, PyTorch's {type(theirs).__name__} of {len(theirs)}",
            )
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _compare(a, b, f"{where}[{i}]")
        return
    if isinstance(theirs, bool | int | float):
        if isinstance(ours, verigrad.Tensor) or type(ours) is not type(theirs):
            raise Difference(
                "SILENT dtype/shape",
                f"{where}: {type(ours).__name__} {ours!r:.60}, PyTorch's {type(theirs).__name__} {theirs!r}",
            )
        if not (
            ours == theirs or (ours != ours and theirs != theirs) or np.isclose(ours, theirs, 1e-6, 1e-6)
        ):
            raise Difference("SILENT values", f"{where}: {ours!r}, PyTorch's {theirs!r}")
        return
    if isinstance(theirs, torch.dtype):
        if getattr(ours, "name", None) != str(theirs).removeprefix("torch."):
            raise Difference("SILENT values", f"{where}: {ours!r}, PyTorch's {theirs}")
        return
    if theirs is None or isinstance(theirs, str):
        if ours != theirs:
            raise Difference("SILENT values", f"{where}: {ours!r:.60}, PyTorch's {theirs!r:.60}")
        return
    raise Unconvertible(f"a {type(theirs).__name__} result")


def _float_outputs(x: Any) -> list[Any]:
    if isinstance(x, torch.Tensor | verigrad.Tensor):
        return [x] if x.requires_grad else []
    if isinstance(x, list | tuple):
        return [t for v in x for t in _float_outputs(v)]
    return []


# ---------------------------------------------------------------------------------------------------------
# One call


def _refusal(e: BaseException) -> str:
    return "missing" if isinstance(e, AttributeError | NotImplementedError) else "raises"


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def _processed(sample: Any, out: Any) -> Any:
    """The sample's `output_process_fn_grad` of `out`: where an answer is unique only up to signs (the
    vectors of svd, eigh), what PyTorch's own suite compares (|U|, U Vh, ...)."""
    return sample.output_process_fn_grad(out)


def _index_output(x: Any) -> tuple[Any, Any]:
    """(the indices of an op returning positions, the rest of its answer)."""
    if isinstance(x, tuple | list):
        return x[1], x[0]
    return x, None


def _same_positions(opinfo: Any, sample: Any, ours: Any, theirs: torch.Tensor) -> bool:
    """Whether `ours` (indices) points at the values `theirs` points at: where equal values tie, either index
    is the answer (PyTorch does not say which, sort(stable=False) and mode among them)."""
    position, default = TIE_OPS[opinfo.name]
    args, kwargs = sample.args, sample.kwargs
    x = sample.input.detach()
    dim = kwargs.get("dim", args[position] if len(args) > position else default)
    if not isinstance(dim, int) or x.ndim == 0:
        return False
    keepdim = kwargs.get("keepdim", args[position + 1] if len(args) > position + 1 else False)
    mine = torch.from_numpy(np.array(ours.numpy(), copy=True))
    want = theirs
    if mine.ndim < x.ndim and not keepdim:
        mine, want = mine.unsqueeze(dim), want.unsqueeze(dim)
    if mine.shape != want.shape or mine.dtype != want.dtype:
        return False
    if mine.numel() and (mine.min() < 0 or mine.max() >= max(1, x.shape[dim])):
        return False
    a, b = torch.take_along_dim(x, mine, dim), torch.take_along_dim(x, want, dim)
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def run_sample(opinfo: Any, fn: Callable[..., Any], sample: Any, grad: bool, random: bool) -> tuple[str, str]:
    """(category, detail) of one sample."""
    wrapper = getattr(opinfo, "gradcheck_wrapper", None)
    if getattr(wrapper, "__name__", "") == "gradcheck_wrapper_hermitian_input":
        # PyTorch's own tests call such an op on input + input.mH (its input must be Hermitian): so do we
        x = sample.input
        sample.input = (x + x.mH).detach().requires_grad_(x.requires_grad)
    args = _snapshot((sample.input, *sample.args))
    kwargs = _snapshot(sample.kwargs)
    try:
        theirs = opinfo.op(sample.input, *sample.args, **sample.kwargs)
    except Exception as e:
        their_error: Exception | None = e
    else:
        their_error = None
    leaves: list[Any] = []
    try:
        our_args = _to_verigrad(args, leaves)
        our_kwargs = _to_verigrad(kwargs, leaves)
    except Unconvertible as e:
        return "skip", str(e)
    try:
        ours = fn(*our_args, **our_kwargs)
    except Exception as e:
        if their_error is not None:
            return "agree", f"both refuse: {_error(e)}"
        return _refusal(e), _error(e)
    if their_error is not None:
        return "SILENT torch-raises", f"PyTorch refuses ({_error(their_error)}), verigrad answers"
    random = random or bool(sample.kwargs.get("dropout_p", 0)) or _positional_dropout(opinfo, sample)
    try:
        if random:
            _compare_structure(ours, theirs, "result")
            return "agree", "random: dtype and shape"
        if opinfo.name in GAUGE_OPS:
            theirs, ours = _processed(sample, theirs), _processed(sample, ours)
        try:
            _compare(ours, theirs, "result")
        except Difference:
            if opinfo.name not in TIE_OPS:
                raise
            (our_idx, our_rest), (their_idx, their_rest) = _index_output(ours), _index_output(theirs)
            if their_rest is not None:
                _compare(our_rest, their_rest, "result[0]")
            _compare_structure(our_idx, their_idx, "indices")
            if not _same_positions(opinfo, sample, our_idx, their_idx):
                raise
    except Difference as d:
        return d.category, str(d)
    except Unconvertible as e:
        return "skip", str(e)
    if not grad:
        return "agree", ""
    their_outs = _float_outputs(theirs)
    their_leaves = list(_torch_leaves((sample.input, sample.args, sample.kwargs)))
    if not their_outs or not their_leaves:
        return "agree", ""
    rng = np.random.default_rng(0)
    # each cotangent rounded to its output's dtype (bf16 too), then given to both libraries
    cots = [torch.from_numpy(rng.standard_normal(tuple(o.shape))).to(o.dtype) for o in their_outs]
    try:
        their_grads = torch.autograd.grad(
            their_outs,
            their_leaves,
            cots,
            allow_unused=True,
        )
    except Exception:
        return "agree", "PyTorch has no gradient here"
    if all(g is None for g in their_grads):
        return "agree", ""
    our_outs = _float_outputs(ours)
    if len(our_outs) != len(their_outs):
        return "SILENT gradients", f"{len(our_outs)} outputs require grad, PyTorch's {len(their_outs)}"
    if len(leaves) != len(their_leaves):
        return "raises", "the inputs requiring grad differ in number"
    try:
        our_grads = verigrad.autograd.grad(
            our_outs,
            leaves,
            [verigrad.from_numpy(c.double().numpy()).to(o.dtype) for c, o in zip(cots, our_outs)],
            allow_unused=True,
        )
    except Exception as e:
        return _refusal(e), f"backward: {_error(e)}"
    try:
        for i, (mine, want, leaf) in enumerate(zip(our_grads, their_grads, their_leaves)):
            want = torch.zeros_like(leaf) if want is None else want
            mine = verigrad.zeros_like(leaves[i]) if mine is None else mine
            _compare(mine, want, f"grad of input {i}")
    except Difference as d:
        return "SILENT gradients", str(d)
    return "agree", ""


def _compare_structure(ours: Any, theirs: Any, where: str) -> None:
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, verigrad.Tensor) or tuple(ours.shape) != tuple(theirs.shape):
            raise Difference(
                "SILENT dtype/shape", f"{where}: {ours!r:.60}, PyTorch's shape {tuple(theirs.shape)}"
            )
        if ours.dtype != getattr(verigrad, str(theirs.dtype).removeprefix("torch."), None):
            raise Difference("SILENT dtype/shape", f"{where}: dtype {ours.dtype}, PyTorch's {theirs.dtype}")
    elif isinstance(theirs, list | tuple):
        if not isinstance(ours, list | tuple) or len(ours) != len(theirs):
            raise Difference("SILENT dtype/shape", f"{where}: {ours!r:.60}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _compare_structure(a, b, f"{where}[{i}]")


# ---------------------------------------------------------------------------------------------------------
# The sweep


def op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return list(db)


def _chosen(opinfo: Any, dtype: torch.dtype, samples: int | None, stride: int) -> list[Any]:
    """Of the OpInfo's samples in `dtype`, every `stride`-th, at most `samples`."""
    grad = opinfo.supports_autograd and dtype.is_floating_point
    chosen: list[Any] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, s in enumerate(opinfo.sample_inputs("cpu", dtype, requires_grad=grad)):
            if samples is not None and len(chosen) >= samples:
                break
            if i % stride == 0:
                chosen.append(s)
    return chosen


def missing_calls(
    opinfos: list[Any], samples: int | None = None, stride: int = 1, dtypes: tuple[torch.dtype, ...] = DTYPES
) -> dict[str, int]:
    """{OpInfo name: its calls} of the OpInfos verigrad has no function for, most first; nothing runs."""
    counts: dict[str, int] = {}
    for opinfo in opinfos:
        if verigrad_op(opinfo) is not None:
            continue
        supported = opinfo.supported_dtypes("cpu")
        calls = 0
        for dtype in dtypes:
            if dtype in supported:
                # as in the sweep, a sample generator that fails makes no call
                with contextlib.suppress(Exception):
                    calls += len(_chosen(opinfo, dtype, samples, stride))
        counts[full_name(opinfo)] = calls
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def sweep(
    opinfos: list[Any],
    samples: int | None = None,
    only_present: bool = False,
    stride: int = 1,
    dtypes: tuple[torch.dtype, ...] = DTYPES,
    progress: bool = False,
) -> Sweep:
    """Run each OpInfo's samples on both libraries: of each dtype's, every `stride`-th, at most `samples`."""
    out = Sweep()
    for opinfo in opinfos:
        name = full_name(opinfo)
        fn = verigrad_op(opinfo)
        if fn is None and only_present:
            continue
        start = time.perf_counter()
        supported = opinfo.supported_dtypes("cpu")
        for dtype in dtypes:
            if dtype not in supported:
                continue
            grad = opinfo.supports_autograd and dtype.is_floating_point
            try:
                chosen = _chosen(opinfo, dtype, samples, stride)
            except Exception as e:
                out.results.append(Result(name, DTYPE_NAMES[dtype], -1, "skip", f"samples: {_error(e)}"))
                continue
            for i, sample in enumerate(chosen):
                if fn is None:
                    out.results.append(Result(name, DTYPE_NAMES[dtype], i, "missing", "no such function"))
                    continue
                torch.manual_seed(0)
                verigrad.manual_seed(0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        category, detail = run_sample(opinfo, fn, sample, grad, is_random(opinfo))
                    except Exception as e:  # the harness itself: reported, never hidden
                        category, detail = "raises", f"harness: {_error(e)}"
                if category != "skip":
                    out.results.append(Result(name, DTYPE_NAMES[dtype], i, category, detail))
        if progress:
            print(f"{name}: {time.perf_counter() - start:.2f} s", file=sys.stderr, flush=True)
    return out


def sweep_ops(names: tuple[str, ...] | list[str]) -> list[Result]:
    """Every call of the OpInfos named (by `name` or `full_name`), on one torch thread (the tests' suites)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return sweep([o for o in op_db() if o.name in names or full_name(o) in names]).results
    finally:
        torch.set_num_threads(threads)


def disagreements(results: list[Result], op: str) -> tuple[int, list[str]]:
    """How many of `results` are calls of `op` (or of its variants `op.*`), and those that do not agree."""
    calls = [r for r in results if r.op == op or r.op.startswith(op + ".")]
    bad = [
        f"{r.op} {r.dtype} sample {r.sample}: {r.category}: {r.detail}"
        for r in calls
        if r.category != "agree"
    ]
    return len(calls), bad


def report(result: Sweep) -> str:
    counts = result.counts()
    total = sum(v for k, v in counts.items() if k != "skip")
    lines = [f"{'category':<22}{'calls':>8}{'share':>9}"]
    for c in CATEGORIES:
        lines.append(f"{c:<22}{counts[c]:>8}{counts[c] / max(1, total):>9.1%}")
    lines.append(f"{'total':<22}{total:>8}")
    present = total - counts["missing"]
    lines.append(
        f"agreement: {counts['agree'] / max(1, total):.1%} of all calls, "
        f"{counts['agree'] / max(1, present):.1%} of the calls of ops verigrad has"
    )
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in result.results:
        if r.category.startswith("SILENT") or r.category == "raises":
            by_op[r.op]["SILENT" if r.category.startswith("SILENT") else "raises"] += 1
    if by_op:
        lines.append("")
        lines.append(f"{'op':<48}{'SILENT':>8}{'raises':>8}")
        for op, c in sorted(by_op.items(), key=lambda kv: (-kv[1]["SILENT"], -kv[1]["raises"], kv[0])):
            lines.append(f"{op:<48}{c['SILENT']:>8}{c['raises']:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="*", help="OpInfo names (name or name.variant); all by default")
    parser.add_argument("--samples", type=int, default=None, help="at most N samples of each dtype")
    parser.add_argument("--stride", type=int, default=1, help="every Kth sample (of each dtype)")
    parser.add_argument("--present", action="store_true", help="only the ops verigrad has")
    parser.add_argument("--dtypes", nargs="*", default=None, help="by name (float32 ...); all by default")
    parser.add_argument("--silent", default=None, help="write the SILENT cases to this file (JSON lines)")
    parser.add_argument("--raises", action="store_true", help="list each raising call's error too")
    parser.add_argument("--progress", action="store_true", help="each op's time, on stderr")
    parser.add_argument(
        "--list-missing", action="store_true", help="only list the ops verigrad lacks, with their calls"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    opinfos = op_db()
    if args.ops:
        opinfos = [o for o in opinfos if o.name in args.ops or full_name(o) in args.ops]
    dtypes = DTYPES if not args.dtypes else tuple(getattr(torch, name) for name in args.dtypes)
    if args.list_missing:
        missing = missing_calls(opinfos, args.samples, args.stride, dtypes)
        for name, calls in missing.items():
            print(f"{name:<56}{calls:>8}")
        print(f"{len(missing)} ops missing, {sum(missing.values())} calls")
        return 0
    result = sweep(opinfos, args.samples, args.present, args.stride, dtypes, args.progress)
    print(report(result))
    if args.raises:
        for r in result.results:
            if r.category in ("raises",):
                print(f"raises {r.op} {r.dtype} #{r.sample}: {r.detail}")
    if args.silent:
        with open(args.silent, "w") as f:
            for r in result.silent():
                f.write(json.dumps(r.__dict__) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
