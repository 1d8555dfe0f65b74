"""Eager calls in C (backends/cpu/extension/vg_eager.c): the same results, bits, errors and autograd
records as the Python code they replace (`eager.c_calls(False)` runs that code), the same plans, and
the Python code wherever the C path does not apply (another mode, a recording tape, grad mode off in
another thread)."""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import verigrad
from verigrad import eager
from verigrad.backends.cpu import fastcall
from verigrad.errors import DTypeError, ShapeError
from verigrad.ops import REGISTRY
from verigrad.ops._op import Op
from verigrad.tensor import Tensor


@pytest.fixture
def cpu():
    """The cpu backend, with the eager calls in C bound."""
    with verigrad.backend("cpu") as backend:
        if not backend.load() or not eager.install_c_calls():
            status = fastcall.eager_status()
            if "the C build failed" in status and "took over" not in status:  # a compiler's error: ours
                pytest.fail(f"vg_eager does not compile: {status}")
            pytest.skip(f"no C calls here: {status}")
        was = eager.c_calls(True)
        try:
            yield backend
        finally:
            eager.c_calls(was)


def both_ways(fn):
    """fn() with the C calls on, then off: (result on, result off), or the exceptions raised."""
    out = []
    for on in (True, False):
        was = eager.c_calls(on)
        try:
            out.append(fn())
        except Exception as e:  # compared below
            out.append(e)
        finally:
            eager.c_calls(was)
    return out


def same_tensor(a: Tensor, b: Tensor) -> None:
    """The same values to the bit, spec, grad flag and autograd record (op, the input tensors, params)."""
    assert type(a) is type(b) is Tensor
    assert a.spec == b.spec and a.payload.dtype == b.payload.dtype and a.payload.shape == b.payload.shape
    assert a.payload.tobytes() == b.payload.tobytes()
    assert a.requires_grad == b.requires_grad
    assert (a._node is None) == (b._node is None)
    if a._node is not None:
        assert a._node.op is b._node.op and a._node.params == b._node.params and not a._node.freed
        assert len(a._node.inputs) == len(b._node.inputs)
        for i, j in zip(a._node.inputs, b._node.inputs):
            assert i.spec == j.spec and i.payload.tobytes() == j.payload.tobytes()
            assert i.requires_grad == j.requires_grad


def same_outcome(fn) -> None:
    on, off = both_ways(fn)
    if isinstance(off, Exception):
        assert type(on) is type(off) and str(on) == str(off)
    else:
        same_tensor(on, off)


def test_the_calls_are_bound_in_c(cpu) -> None:
    assert type(Op.__dict__["__call__"]).__name__ == "Method"
    for name in ("__add__", "__radd__", "__truediv__", "__matmul__", "exp", "relu", "tanh", "__neg__"):
        method = Tensor.__dict__[name]
        assert type(method).__name__ == "Method", name
    x = verigrad.ones(2)
    assert x.exp.__self__ is x and Tensor.exp(x).tolist() == x.exp().tolist()
    assert inspect.signature(Tensor.__add__) == inspect.signature(Tensor.__add__.__wrapped__)
    assert Tensor.__add__.__name__ == "__add__" and Tensor.__add__.__qualname__ == "Tensor.__add__"


def test_c_and_python_share_one_plan_per_key(cpu) -> None:
    x = verigrad.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    calls = {
        "add": lambda: x + x,
        "div": lambda: x / 3.0,
        "sum": lambda: x.sum(dim=1, keepdim=True),
        "reshape": lambda: x.reshape(2, -1),
        "slice": lambda: x[1:3, ::2],
        "permute": lambda: x.transpose(0, 1),
        "pad": lambda: REGISTRY["pad"](x, widths=((1, 0), (0, 2)), value=-1.5),
        "concat": lambda: verigrad.cat([x, x], dim=-1),
    }
    for name, call in calls.items():
        REGISTRY[name]._eager_plans.clear()
        eager.c_calls(False)
        call()
        kept = len(REGISTRY[name]._eager_plans)
        eager.c_calls(True)
        call()
        assert kept >= 1 and len(REGISTRY[name]._eager_plans) == kept, name


UNARY = ("exp", "relu", "tanh", "neg", "abs", "sigmoid", "sqrt", "log")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
SHAPES = ((), (1,), (3,), (2, 3), (4, 1, 5), (0, 3))


@st.composite
def operands(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int64]))
    shape = draw(st.sampled_from(SHAPES))
    values = draw(st.lists(st.floats(-4, 4, width=32), min_size=64, max_size=64))
    a = np.resize(np.array(values, np.float64), int(np.prod(shape))).reshape(shape).astype(dtype)
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided", "scalar"]))
    if layout == "transposed" and a.ndim >= 2:
        a = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    elif layout == "strided" and a.ndim >= 1:
        a = np.repeat(a, 2, axis=-1)[..., ::2]
    elif layout == "scalar":
        a = a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), dtype)
    return a


def tensor_of(a: np.ndarray, grad: bool) -> Tensor:
    t = Tensor(verigrad.shapes.Spec(a.shape, verigrad.dtypes.from_numpy_dtype(a.dtype)), a)
    return t.requires_grad_(True) if grad and t.dtype.is_float else t


@settings(
    database=None,
    derandomize=True,
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # the backend stays the same throughout
)
@given(
    a=operands(),
    b=operands(),
    unary=st.sampled_from(UNARY),
    binary=st.sampled_from(BINARY),
    scalar=st.sampled_from([3.0, -0.0, 0.5, float("nan"), float("inf"), 2, -7, 2**70, True]),
    grads=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    swapped=st.booleans(),
)
def test_fuzz_c_calls_give_the_python_calls_results(cpu, a, b, unary, binary, scalar, grads, swapped) -> None:
    x, y = tensor_of(a, grads[0]), tensor_of(b, grads[1])
    with verigrad.set_grad_enabled(grads[2]):
        same_outcome(lambda: getattr(verigrad, unary)(x))
        same_outcome(lambda: getattr(x, unary)())
        same_outcome(lambda: REGISTRY[binary](x, y))
        same_outcome(lambda: REGISTRY[binary](x, scalar) if not swapped else REGISTRY[binary](scalar, x))
        same_outcome(lambda: x + scalar if not swapped else scalar - x)
        same_outcome(lambda: x * y)
        same_outcome(lambda: x.sum(dim=-1) if x.ndim else x.sum())
        same_outcome(lambda: verigrad.cat([x, y], dim=0))


def test_views_are_numpys_views_both_ways(cpu) -> None:
    base = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    arrays = [base, base.transpose(2, 0, 1), base[:, ::2], np.asfortranarray(base), base[..., :0]]
    for a in arrays:
        x = Tensor(verigrad.shapes.Spec(a.shape, verigrad.f32), a).requires_grad_(True)
        calls = [
            lambda: x.reshape(-1),
            lambda: x.reshape(a.shape[0], -1),
            lambda: x.permute(2, 0, 1),
            lambda: x.transpose(0, -1),
            lambda: x.mT,
            lambda: x.reshape(2, 3, 2, -1) if a.size else x.reshape(0, 5),
            lambda: x[1:, ::2],
            lambda: x[:, -2:5, 1:3],
            lambda: x[..., 1:1],
            lambda: verigrad.cat([x, x.detach() * 2.0], dim=-1),
            lambda: verigrad.cat((x, x, x), 0),
            lambda: verigrad.cat([x, x.double()], dim=1),  # two dtypes: the reference converts
        ]
        for call in calls:
            same_outcome(call)
            on, off = both_ways(call)
            if isinstance(on, Exception):
                continue
            assert on.payload.strides == off.payload.strides
            assert np.shares_memory(on.payload, a) == np.shares_memory(off.payload, a)
    same_outcome(lambda: x.reshape(5, 7))  # a refused shape: the same error
    same_outcome(lambda: x.permute(0, 0, 1))


@pytest.mark.parametrize("grad", [False, True])
def test_every_ops_samples_give_the_python_calls_outcome(cpu, grad: bool) -> None:
    """The registry's samples of every op (its params, its dtypes, its errors) through both calls."""
    for name, op in sorted(REGISTRY.items()):
        if op.samples is None:
            continue
        for sample in op.samples(np.random.default_rng(0)):
            args = [
                verigrad.tensor(a, requires_grad=grad and a.dtype.kind == "f") if type(a) is np.ndarray else a
                for a in sample.args
            ]
            on, off = both_ways(lambda op=op, args=args, params=sample.params: op(*args, **params))
            if isinstance(off, Exception) or isinstance(on, Exception):
                assert type(on) is type(off), name
                assert str(on).split("\n")[0] == str(off).split("\n")[0], name  # (each at its own line)
                continue
            pairs = zip(*[r if isinstance(r, tuple) else (r,) for r in (on, off)])
            for a, b in pairs:
                same_tensor(a, b)


def test_gradients_through_c_calls_match_the_python_calls(cpu) -> None:
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2)]

    def step() -> list[bytes]:
        x, w = (verigrad.tensor(d, requires_grad=True) for d in data)
        h = (x @ w).tanh() * 0.5 - x.exp() / 3.0
        loss = verigrad.nn.functional.softmax(h[:, 1:5], dim=-1).sum() + (2.0 - h).relu().mean()
        loss.backward()
        return [loss.payload.tobytes(), x.grad.payload.tobytes(), w.grad.payload.tobytes()]

    on, off = both_ways(step)
    assert on == off


def test_errors_are_the_python_calls_errors(cpu) -> None:
    x, y = verigrad.ones(2, 3), verigrad.ones(3, 2)
    same_outcome(lambda: x + y)
    same_outcome(lambda: x @ verigrad.ones(4, 4))
    same_outcome(lambda: verigrad.ones(2, dtype=verigrad.bool) - verigrad.ones(2, dtype=verigrad.bool))
    same_outcome(lambda: x + "a")
    same_outcome(lambda: verigrad.cat([], dim=0))
    on, off = both_ways(lambda: x + y)
    assert isinstance(on, ShapeError) and "test_eager_fastpath.py" in str(on)  # the user's line
    on, off = both_ways(lambda: x.sum(dim=True))
    assert type(on) is type(off) and str(on) == str(off)
    with pytest.raises(DTypeError):
        verigrad.ones(2, dtype=verigrad.bool) - verigrad.ones(2, dtype=verigrad.bool)


def test_other_modes_take_the_python_calls(cpu) -> None:
    with verigrad.abstract():
        x = verigrad.ones(2, 3)
        y = (x + 1.5).exp()
    assert y.payload is None and y.shape == (2, 3)

    def f(a):
        return (a * 2.0 + a).sum()

    program = verigrad.trace(f, verigrad.shapes.spec([3]))
    assert [i.name for i in program.instrs] == ["const", "mul", "add", "sum"]


def test_a_replaced_eager_run_gets_the_calls(cpu, monkeypatch) -> None:
    seen = []
    run = eager.EagerMode.run

    def counting(self, op, args, params, plan):
        seen.append(op.name)
        return run(self, op, args, params, plan)

    x = verigrad.ones(3)
    x + x  # planned
    monkeypatch.setattr(eager.EagerMode, "run", counting)
    assert (x + x).tolist() == [2.0] * 3 and (x * 2.0).exp().shape == (3,)
    assert seen == ["add", "mul", "exp"]


def test_a_mode_whose_own_run_is_replaced_gets_the_calls(cpu) -> None:
    # vg_eager keeps its check of EagerMode.run while the mode's dict and type stay as they were: an
    # attribute set on the mode itself is seen at the next call
    seen = []
    mode = eager.EAGER
    run = mode.run

    def counting(op, args, params, plan):
        seen.append(op.name)
        return run(op, args, params, plan)

    x = verigrad.ones(3)
    x + x
    x + x  # planned, and the check kept
    mode.run = counting  # (not monkeypatch: its undo would leave the bound method on the instance)
    try:
        assert (x + x).tolist() == [2.0] * 3
    finally:
        del mode.run
    x + x
    assert seen == ["add"] and "run" not in vars(mode)


def test_a_replaced_op_attribute_is_seen_at_the_next_call(cpu, monkeypatch) -> None:
    # the attributes vg_eager reads on every call are kept while the op's dict is unchanged: a replaced
    # reference (floor has no C kernel: its plan runs the reference) is called from the next call on
    op = REGISTRY["floor"]
    x = verigrad.tensor(np.array([1.5, -2.5], np.float32))
    for _ in range(3):
        assert verigrad.floor(x).tolist() == [1.0, -3.0]
    calls = []
    reference = op.reference

    def counting(a):
        calls.append(1)
        return reference(a) + 1

    monkeypatch.setattr(op, "reference", counting)
    assert verigrad.floor(x).tolist() == [2.0, -2.0] and len(calls) == 1
    assert verigrad.floor(x).tolist() == [2.0, -2.0] and len(calls) == 2
    monkeypatch.undo()
    assert verigrad.floor(x).tolist() == [1.0, -3.0] and len(calls) == 2


class _Shifted:
    """A reference plus a constant: a callable that is not a descriptor (a class attribute read as is)."""

    def __init__(self, reference, by: float) -> None:
        self.reference, self.by = reference, by

    def __call__(self, a):
        return self.reference(a) + self.by


def test_a_replaced_class_attribute_is_seen_at_the_next_call(cpu, monkeypatch) -> None:
    # an attribute read from the op's class (its own dict has no such key) is kept while the class is
    # unchanged: one set on the class afterwards is seen at the next call
    op = REGISTRY["floor"]
    x = verigrad.tensor(np.array([1.5, -2.5], np.float32))
    reference = op.reference
    monkeypatch.delattr(op, "reference")
    monkeypatch.setattr(Op, "reference", _Shifted(reference, 0.0), raising=False)
    for _ in range(3):
        assert verigrad.floor(x).tolist() == [1.0, -3.0]
    monkeypatch.setattr(Op, "reference", _Shifted(reference, 1.0))
    assert verigrad.floor(x).tolist() == [2.0, -2.0]
    assert verigrad.floor(x).tolist() == [2.0, -2.0]


def test_shape_and_its_items_are_read_in_c(cpu) -> None:
    assert type(Tensor.__dict__["shape"].fget).__name__ == "builtin_function_or_method"
    assert type(verigrad.Size.__dict__["__getitem__"]).__name__ == "Method"
    x = verigrad.tensor(np.ones((3, 4, 5), np.float32))
    assert x.shape is x.spec.size and x.shape[1] == 4


@pytest.mark.parametrize(
    "key", [0, 2, -1, -3, True, np.int64(1), slice(1, None), slice(None, None, -1), 3, -4, 1.0, "a"]
)
def test_shape_items_are_the_python_methods_both_ways(cpu, key) -> None:
    x = verigrad.tensor(np.ones((3, 4, 5), np.float32))

    def item():
        return type(x.shape), x.shape, x.shape[key], type(x.shape[key])

    on, off = both_ways(item)
    if isinstance(off, Exception):
        assert type(on) is type(off) and str(on) == str(off)
    else:
        assert on == off


def test_a_symbolic_shape_is_the_specs_both_ways(cpu) -> None:
    seen = []

    def f(x):
        seen.append(both_ways(lambda: (x.shape, x.shape[0], x.shape[1:])))
        return x * 2.0

    verigrad.trace(f, verigrad.shapes.spec("n 3"))
    (on, off) = seen[0]
    assert on == off and str(on[1]) == "n"


def test_grad_mode_is_read_per_thread(cpu) -> None:
    x = verigrad.ones(4, requires_grad=True)
    seen: dict[str, bool] = {}
    go, done = threading.Event(), threading.Event()

    def other() -> None:
        with verigrad.no_grad():
            go.set()
            done.wait(5)
            seen["other"] = (x * 2.0).requires_grad

    thread = threading.Thread(target=other)
    thread.start()
    go.wait(5)
    seen["main"] = (x * 2.0).requires_grad  # the other thread's no_grad is its own
    done.set()
    thread.join()
    assert seen == {"main": True, "other": False}


def test_a_recording_tape_gets_the_calls(cpu) -> None:
    tape = cpu.tape()
    if tape is None:
        pytest.skip("vg_call does not record here")
    x = verigrad.tensor(np.ones((4, 4), np.float32))
    with cpu.recording(tape):
        y = x + x
        z = (y / 3.0).exp()
    assert len(tape) == 3  # each kernel call went through vg_call onto the tape
    assert z.payload.tobytes() == np.exp(np.float32(2) / np.float32(3)).repeat(16).tobytes()


def test_python_floats_are_rounded_once_to_the_tensors_dtype(cpu) -> None:
    x = verigrad.tensor(np.array([1.0, -2.0, 0.0], np.float32))
    for value in (0.1, 1e40, -0.0, 3, -(2**40)):
        same_outcome(lambda value=value: x * value)
        same_outcome(lambda value=value: value / x)
    assert (x * 0.1).tolist() == (x.payload * np.float32(0.1)).tolist()


def test_without_vg_call_nothing_is_bound() -> None:
    """VERIGRAD_CTYPES=1 (kernels through ctypes): the Python calls, as before vg_eager."""
    import os
    import subprocess
    import sys

    code = (
        "import verigrad, numpy as np\n"
        "from verigrad.backends.cpu import fastcall\n"
        "from verigrad.ops._op import Op\n"
        "x = verigrad.tensor(np.ones((2, 2), np.float32))\n"
        "with verigrad.backend('cpu'):\n"
        "    y = (x + x).exp() / 3.0\n"
        "print(type(verigrad.Tensor.__dict__['__add__']).__name__, type(Op.__dict__['__call__']).__name__)\n"
        "print(fastcall.eager_status().split(' ')[0], y.tolist()[0][0])\n"
    )
    env = {**os.environ, "VERIGRAD_CTYPES": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["function", "function", "python", str(float(np.float32(np.exp(2)) / 3))]


REDUCTION_CALLS = {
    "all": lambda x: x.sum(),
    "dim": lambda x: x.sum(dim=1),
    "dims keepdim": lambda x: x.sum(dim=(0, -1), keepdim=True),
    "axis": lambda x: x.sum(axis=0),
    "no axes": lambda x: x.sum(axis=()),
    "dim () is all": lambda x: x.sum(dim=()),
    "dim [] is all": lambda x: x.sum(dim=[]),
    "dim over axis": lambda x: x.sum(dim=-1, axis=0),
    "keepdim 1": lambda x: x.sum(keepdim=1),
    "positional": lambda x: x.sum(1, True),
    "dtype": lambda x: x.sum(dtype=verigrad.f64),
    "out of range": lambda x: x.sum(dim=5),
    "bool dim": lambda x: x.sum(dim=True),
    "unknown keyword": lambda x: x.sum(foo=1),
    "a tensor dim": lambda x: x.sum(x),
    "mean": lambda x: x.mean(),
    "mean dim keepdim": lambda x: x.mean(dim=1, keepdim=True),
    "mean axis": lambda x: x.mean(axis=(0,)),
    "mean positional": lambda x: x.mean(0),
    "mean dtype": lambda x: x.mean(dtype=verigrad.f64),
}


def test_sum_and_mean_methods_are_bound_in_c(cpu) -> None:
    for name in ("sum", "mean"):
        method = Tensor.__dict__[name]
        assert type(method).__name__ == "Method" and method.__name__ == name, name
        assert inspect.signature(method) == inspect.signature(method.__wrapped__)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("shape", [(3, 4), (2, 1, 5), (0, 3), (3, 0)])
def test_sum_and_mean_give_the_python_methods_outcome(cpu, grad: bool, dtype, shape) -> None:
    """x.sum(...) and x.mean(...) in C: the bits, records and errors of the Python methods, whatever
    keywords, positional dims, dtypes, empty axes or wrong values the call has."""
    a = (np.arange(int(np.prod(shape))).reshape(shape) * 0.37 - 1).astype(dtype)
    x = tensor_of(a, grad)
    for name, call in REDUCTION_CALLS.items():
        on, off = both_ways(lambda call=call: call(x))
        if isinstance(off, Exception) or isinstance(on, Exception):
            assert type(on) is type(off) and str(on) == str(off), name
        else:
            same_tensor(on, off)


def test_gradients_through_c_sum_and_mean_match_the_python_methods(cpu) -> None:
    data = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)

    def step() -> list[bytes]:
        x = verigrad.tensor(data, requires_grad=True)
        loss = x.exp().sum(dim=1, keepdim=True).mean() + (x * x).mean(axis=0).sum()
        loss.backward()
        return [loss.payload.tobytes(), x.grad.payload.tobytes()]

    on, off = both_ways(step)
    assert on == off


def test_a_method_with_keywords_takes_only_self_and_those_keywords(cpu) -> None:
    """Method(..., keywords=): the op gets every keyword, the call's value or the default, in order; a
    call with another keyword or a second positional argument is the fallback's."""
    seen = []

    def fallback(*args, **kwargs):
        seen.append((len(args), sorted(kwargs)))
        return "fallback"

    ext = eager._C_CALLS["module"]
    method = ext.Method(REGISTRY["sum"], fallback, keywords={"axis": None, "keepdim": False})
    x = verigrad.tensor(np.ones((2, 3), np.float32))
    assert method(x, axis=1).tolist() == [3.0, 3.0] and method(x).tolist() == 6.0 and seen == []
    assert method(x, keepdim=True).shape == (1, 1)
    assert method(x, dim=1) == "fallback" and method(x, 1) == "fallback"
    assert seen == [(1, ["dim"]), (2, [])]
    with pytest.raises(TypeError, match="keywords must be a dict"):
        ext.Method(REGISTRY["sum"], fallback, keywords=["dim"])
    with pytest.raises(TypeError, match="a keyword must be a str"):
        ext.Method(REGISTRY["sum"], fallback, keywords={1: None})


def row_arrays(dtype) -> list[np.ndarray]:
    """softmax's operands: C-contiguous rows (the C call's) and everything the wrapper takes otherwise."""
    rng = np.random.default_rng(2)
    base = (rng.standard_normal((3, 4, 6)) * 30).astype(dtype)
    base[0, 0, :2] = [np.inf, -np.inf]
    base[1, 1, 3] = np.nan
    return [
        base,
        base[0],
        base[0, 0],
        base.transpose(2, 0, 1),
        base[:, ::2],
        np.asfortranarray(base),
        base[..., :0],
        base[0, 0, 0],  # 0-d
        (rng.standard_normal((2, 9000)) * 5).astype(dtype),  # a row past NumPy's 8192-element cast buffer
    ]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rows_in_c_give_the_python_calls_outcome(cpu, grad: bool, dtype) -> None:
    """F.softmax and F.log_softmax: the C call of rows.c's kernel gives the wrapper's bits, records and
    errors, over the last axis or another, on views, empty and 0-d arrays, with NumPy's cast buffer
    changed (f32 rows are summed in blocks of it)."""
    F = verigrad.nn.functional
    for a in row_arrays(dtype):
        x = tensor_of(a, grad)
        for dim in range(-max(a.ndim, 1), max(a.ndim, 1) + 1):
            for fn in (F.softmax, F.log_softmax):
                same_outcome(lambda fn=fn, dim=dim: fn(x, dim=dim))
    x = tensor_of(row_arrays(dtype)[-1], grad)
    was = np.getbufsize()
    try:
        np.setbufsize(1024)
        for fn in (F.softmax, F.log_softmax):
            same_outcome(lambda fn=fn: fn(x, dim=-1))
            on, _ = both_ways(lambda fn=fn: fn(x, dim=-1))
            eager.c_calls(False)
            try:
                assert on.payload.tobytes() == fn(x, dim=-1).payload.tobytes()
            finally:
                eager.c_calls(True)
    finally:
        np.setbufsize(was)


def test_softmax_plans_call_the_row_kernels_in_c(cpu) -> None:
    from verigrad.backends.cpu.rows import DIRECT_ROWS

    x = verigrad.tensor(np.ones((4, 5), np.float32))
    F = verigrad.nn.functional
    for name, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
        REGISTRY[name]._eager_plans.clear()
        fn(x, dim=1)
        (plan,) = [plan for _, plan in REGISTRY[name]._eager_plans.values()]
        assert plan.fast[0] == DIRECT_ROWS and plan.fast[2] == (name == "log_softmax"), name


def test_a_recording_tape_gets_the_row_kernels_calls(cpu) -> None:
    tape = cpu.tape()
    if tape is None:
        pytest.skip("vg_call does not record here")
    x = verigrad.tensor(np.ones((4, 4), np.float32))
    with cpu.recording(tape):
        y = verigrad.nn.functional.softmax(x, dim=-1)
    assert len(tape) == 1 and y.payload.tobytes() == np.full((4, 4), 0.25, np.float32).tobytes()


def reduce_arrays(dtype) -> list[np.ndarray]:
    """Reductions' operands: C-contiguous arrays (the C call's), signed zeros and NaNs (which the kernel
    leaves to the reference), views, empty and 0-d arrays."""
    rng = np.random.default_rng(3)
    base = (rng.standard_normal((3, 4, 5)) * 10).astype(dtype)
    zeros = np.full((2, 3), -0.0, dtype)
    nans = base.copy()
    nans[1, 2, 3] = np.nan
    long = (rng.standard_normal(20000) * 3).astype(dtype)  # past NumPy's 8192-element cast buffer
    quiet_nan = np.array(np.nan, dtype)
    signaling = np.array(
        0x7FA00001 if dtype == np.float32 else 0x7FF4000000000001,
        quiet_nan.view(f"u{quiet_nan.itemsize}").dtype,
    ).view(dtype)
    zero_d = [np.array(v, dtype) for v in (-0.0, 0.0, 3.5, -np.inf)] + [quiet_nan, signaling]
    # F-contiguous (their sums over every axis run in C as the reversed view's), one with NaN and -0.0
    odd = nans.T.copy().T
    odd[0, 0, 0] = -0.0
    f_order = [base.T, np.asfortranarray(base), zeros.T, odd, long.reshape(100, 200).T]
    return [
        base,
        zeros,
        nans,
        base.transpose(2, 0, 1),
        base[:, ::2],
        base[..., :0],
        base[0, 0, 0],
        long,
        *zero_d,
        *f_order,
    ]


REDUCE_CALLS = [
    lambda x: x.sum(),
    lambda x: x.sum(dim=-1),
    lambda x: x.sum(dim=(0, 1), keepdim=True),
    lambda x: x.mean(),
    lambda x: x.mean(dim=0, keepdim=True),
    lambda x: x.amax(dim=-1),
    lambda x: x.amin(dim=(0, -1)),
    lambda x: REGISTRY["sum"](x, axis=[0]),  # a list of axes: the wrapper's
]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_in_c_give_the_python_calls_outcome(cpu, grad: bool, dtype) -> None:
    """sum, mean, max and min: the C call of reduce.c's kernel (on a layout the wrapper described) gives
    the wrapper's bits, records and errors, the first call and the next, with NumPy's cast buffer changed
    (f32 sums are cut at it)."""
    for a in reduce_arrays(dtype):
        x = tensor_of(a, grad)
        for call in REDUCE_CALLS:
            for _ in range(2):  # the first call describes the layout, the next finds it
                same_outcome(lambda call=call: call(x))
    x = tensor_of(np.random.default_rng(5).standard_normal((3, 20000)).astype(dtype), grad)
    was = np.getbufsize()
    try:
        for size in (1024, 8192 * 2):
            np.setbufsize(size)
            for call in REDUCE_CALLS:
                same_outcome(lambda call=call: call(x))
    finally:
        np.setbufsize(was)


def test_reduction_plans_call_the_kernels_in_c(cpu) -> None:
    from verigrad.backends.cpu.reduce import DIRECT_REDUCE

    x = verigrad.tensor(np.ones((4, 5), np.float32))
    for name, call in (("sum", lambda: x.sum(dim=1)), ("mean", lambda: x.mean()), ("max", lambda: x.amax(1))):
        REGISTRY[name]._eager_plans.clear()
        call()
        (plan,) = [plan for _, plan in REGISTRY[name]._eager_plans.values()]
        assert plan.fast[0] == DIRECT_REDUCE and len(plan.fast[2]) >= 1, name


def test_sums_of_0d_and_f_contiguous_arrays_are_called_in_c(cpu) -> None:
    """A sum or mean of a 0-d tensor (the second sum of x.sum().sum()), and of a transposed one over every
    axis, enter no Python function after the first call."""
    x = verigrad.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    t, z = x.T, x.sum()
    for call in (
        lambda: z.sum(),
        lambda: z.mean(),
        lambda: t.sum(),
        lambda: t.mean(),
        lambda: t.sum((0, 1), True),
    ):
        assert python_frames(call) == []


def test_a_recording_tape_gets_the_reductions_calls(cpu) -> None:
    tape = cpu.tape()
    if tape is None:
        pytest.skip("vg_call does not record here")
    x = verigrad.tensor(np.ones((4, 4), np.float32))
    x.sum(dim=0)  # the layout described
    with cpu.recording(tape):
        y = x.sum(dim=0)
    assert len(tape) == 1 and y.payload.tobytes() == np.full(4, 4.0, np.float32).tobytes()


GETITEM_KEYS = [
    (slice(None), slice(1, 5)),
    slice(1, 3),
    slice(-2, None, 2),
    (slice(None), slice(None)),  # the tensor itself
    (),
    slice(None),
    (slice(None), slice(None), slice(None), slice(None)),  # too many: the error
    slice(None, None, -1),  # refused step
    slice(None, None, 0),
    slice("a", None),
    slice(2**70, None),
    0,
    -1,
    3,  # out of range for some axes
    (0, slice(1, 3)),
    (slice(None), -2),
    (slice(1, None), 1, slice(None, None, 2)),
    (1, 2, 3),
    (-3, -4, -5),
    (1, 2, 3, 4),  # too many
    (slice(None), 10),
    2**70,
    (slice(None), slice("a", None), 1),
    (5, slice("a", None)),  # the int's error first
    (slice(0, 1), Ellipsis),  # not ints and slices only: the Python code
    True,
    np.int64(1),
    None,
]


@pytest.mark.parametrize("grad", [False, True])
def test_getitem_ints_and_slices_in_c_give_the_python_calls_outcome(cpu, grad: bool) -> None:
    """x[ints and slices] in C: shaping.getitem's view (the same strides and memory), records (a slice,
    then a reshape where ints drop axes) and errors, and the tensor itself where every slice takes its
    axis whole."""
    assert type(Tensor.__dict__["__getitem__"]).__name__ == "Method"
    base = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    for a in (base, base.transpose(2, 0, 1), base[:, ::2], base[0, 0, 0], base[:0]):
        x = tensor_of(a, grad)
        for key in GETITEM_KEYS:
            same_outcome(lambda key=key: x[key])
            on, off = both_ways(lambda key=key: x[key])
            if not isinstance(on, Exception):
                assert (on is x) == (off is x), key
                assert on.payload.strides == off.payload.strides, key
                assert np.shares_memory(on.payload, a) == np.shares_memory(off.payload, a), key


def test_gradients_through_c_getitem_match_the_python_calls(cpu) -> None:
    data = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)

    def step() -> list[bytes]:
        x = verigrad.tensor(data, requires_grad=True)
        y = x.exp()
        loss = (y[1] * 2.0).sum() + y[:, 2:5].sum() + y[-1, 1:3].mean() + y[2, 3]
        loss.backward()
        node = y[0]._node
        return [loss.payload.tobytes(), x.grad.payload.tobytes(), node.op.name, node.inputs[0]._node.op.name]

    on, off = both_ways(step)
    assert on == off and on[2:] == ["reshape", "slice"]


def python_frames(fn) -> list[str]:
    """The Python functions a third fn() enters (their module's file name and name; the first two make the
    plan and read NumPy's settings), fn's own frame left out."""
    import gc
    import os
    import sys

    seen: list[str] = []

    def note(frame, event, arg) -> None:
        if event == "call":
            seen.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}")

    # no collection between the two calls or inside the second: a collection drops the layouts the
    # wrappers remember weakly (described again, in Python) and runs earlier tests' finalizers
    gc.collect()
    gc.disable()
    try:
        fn()  # makes the plan
        fn()  # the first call after NumPy's buffer size was read anew (a test before set it) describes again
        sys.setprofile(note)
        try:
            fn()
        finally:
            sys.setprofile(None)
    finally:
        gc.enable()
    return seen[1:]


def positional_calls(x: Tensor, y: Tensor) -> dict:
    """Op calls with params given after the operands, as PyTorch code gives them, and their wrong forms."""
    return {
        "concat": lambda: REGISTRY["concat"]([x, y], 0),
        "concat -1": lambda: REGISTRY["concat"]((x, y), -1),
        "concat axis and keyword": lambda: REGISTRY["concat"]([x, y], 0, axis=1),
        "concat too many": lambda: REGISTRY["concat"]([x, y], 0, 1),
        "concat out of range": lambda: REGISTRY["concat"]([x, y], 3),
        "stack": lambda: REGISTRY["stack"]([x, y], 1),
        "reshape": lambda: REGISTRY["reshape"](x, (-1, 2)),
        "reshape size": lambda: REGISTRY["reshape"](x, x.shape),
        "reshape wrong": lambda: REGISTRY["reshape"](x, (5, 7)),
        "reshape float": lambda: REGISTRY["reshape"](x, (2.0, -1)),
        "reshape twice": lambda: REGISTRY["reshape"](x, (2, -1), shape=(-1, 2)),
        "reshape too many": lambda: REGISTRY["reshape"](x, (2, -1), 1),
        "permute": lambda: REGISTRY["permute"](x, (1, 0)),
        "sum dim": lambda: REGISTRY["sum"](x, 1),
        "sum dim keepdim": lambda: REGISTRY["sum"](x, 1, True),
        "sum keyword after": lambda: REGISTRY["sum"](x, (0, 1), keepdim=True),
        "mean dim": lambda: REGISTRY["mean"](x, -1),
        "pad": lambda: REGISTRY["pad"](x, ((1, 0), (0, 2)), -1.5),
        "cast": lambda: REGISTRY["cast"](x, verigrad.f64),
        "a scalar operand": lambda: REGISTRY["add"](x, 2.0),
        "where": lambda: REGISTRY["where"](x > 0, x, 0.5) if "where" in REGISTRY else x,
    }


@pytest.mark.parametrize("grad", [False, True])
def test_params_by_position_in_c_give_the_python_calls_outcome(cpu, grad: bool) -> None:
    """An op's params given by position (`cat(xs, 0)`, `reshape(x, shape)`, `sum(x, 1, True)`) are named
    in C as Op.__call__ names them: the same bits, records, views and errors, and no Python frame."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25 - 1
    x, y = tensor_of(a, grad), tensor_of(a[::-1].copy(), grad)
    for call in positional_calls(x, y).values():
        same_outcome(call)
    with pytest.raises(TypeError, match="concat takes at most 1 params after the tensors"):
        verigrad.cat([x, y], 0, 1)  # PyTorch's TypeError (the 1 was dropped)
    for name in ("concat", "concat -1", "stack", "reshape", "reshape size", "permute", "sum dim", "pad"):
        frames = python_frames(positional_calls(x, y)[name])
        assert not frames[:1] or frames[0] != "_op.py:__call__", (name, frames)


def test_params_by_position_share_the_keyword_calls_plans(cpu) -> None:
    """`reshape(x, (2, -1))` in C keys its plan as the Python call with `shape=` does: one plan."""
    x = verigrad.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    calls = {
        "reshape": (lambda: REGISTRY["reshape"](x, (2, -1)), lambda: REGISTRY["reshape"](x, shape=(2, -1))),
        "concat": (lambda: verigrad.cat([x, x], 1), lambda: verigrad.cat([x, x], dim=1)),
        "sum": (lambda: REGISTRY["sum"](x, 1, True), lambda: REGISTRY["sum"](x, dim=1, keepdim=True)),
    }
    for name, (by_position, by_keyword) in calls.items():
        REGISTRY[name]._eager_plans.clear()
        eager.c_calls(False)
        by_position()
        kept = len(REGISTRY[name]._eager_plans)
        eager.c_calls(True)
        by_position()
        assert kept == 1 and len(REGISTRY[name]._eager_plans) == kept, name
        same_tensor(by_position(), by_keyword())


def shaping_calls(x: Tensor) -> dict:
    return {
        "reshape ints": lambda: x.reshape(-1, 2),
        "reshape tuple": lambda: x.reshape((2, -1)),
        "reshape list": lambda: x.reshape([-1]),
        "reshape size": lambda: x.reshape(x.shape),
        "reshape none": lambda: x.reshape(),
        "reshape wrong": lambda: x.reshape(5, 7),
        "reshape float": lambda: x.reshape(2.0, -1),
        "reshape keyword": lambda: x.reshape(shape=(2, -1)),
        "reshape numpy int": lambda: x.reshape(np.int64(2), -1),
        "view ints": lambda: x.view(-1, 2),
        "view tuple": lambda: x.view((2, -1)),
        "view list": lambda: x.view([-1]),
        "view wrong": lambda: x.view(5, 7),
        "view dtype": lambda: x.view(verigrad.i32) if not x.requires_grad else x.view(-1),
        "view str": lambda: x.view("int32") if not x.requires_grad else x.view(-1),
        "softmax": lambda: x.softmax(-1),
        "softmax 0": lambda: x.softmax(0),
        "softmax dim": lambda: x.softmax(dim=0),
        "softmax axis": lambda: x.softmax(axis=-1),
        "softmax dim over axis": lambda: x.softmax(1, dim=0),
        "softmax default": lambda: x.softmax(),
        "softmax dtype": lambda: x.softmax(-1, verigrad.f64),
        "softmax dtype keyword": lambda: x.softmax(dim=-1, dtype=verigrad.f64),
        "softmax dtype None": lambda: x.softmax(-1, None),
        "softmax out of range": lambda: x.softmax(5),
        "softmax twice": lambda: x.softmax(-1, axis=0),
        "softmax too many": lambda: x.softmax(-1, None, 1),
        "softmax unknown keyword": lambda: x.softmax(foo=1),
        "log_softmax": lambda: x.log_softmax(-1),
        "log_softmax dim": lambda: x.log_softmax(dim=0),
        "sum positional": lambda: x.sum(1),
        "sum positional keepdim": lambda: x.sum(-1, True),
        "sum dim twice": lambda: x.sum(1, dim=0),
        "sum too many": lambda: x.sum(1, True, False),
        "mean positional keyword": lambda: x.mean(0, keepdim=True),
    }


@pytest.mark.parametrize("grad", [False, True])
def test_reshape_view_softmax_methods_in_c_give_the_python_methods_outcome(cpu, grad: bool) -> None:
    """x.reshape(...), x.view(...), x.softmax(...), x.log_softmax(...) and x.sum(1) in C: the Python
    methods' bits, records, views and errors (a view of a transposed tensor, a dtype: Python's)."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5 - 3
    for a in (base, base.T, base[:, ::2], base[:0], base.astype(np.float64)):
        x = tensor_of(a, grad)
        for name, call in shaping_calls(x).items():
            same_outcome(call)
            on, off = both_ways(call)
            if not isinstance(on, Exception):
                assert on.payload.strides == off.payload.strides, name
                assert np.shares_memory(on.payload, a) == np.shares_memory(off.payload, a), name


def test_reshape_view_softmax_methods_are_bound_in_c(cpu) -> None:
    x = verigrad.tensor(np.ones((4, 6), np.float32))
    for name in ("reshape", "view", "softmax", "log_softmax"):
        method = Tensor.__dict__[name]
        assert type(method).__name__ == "Method" and method.__name__ == name, name
        assert inspect.signature(method) == inspect.signature(method.__wrapped__)
    calls = shaping_calls(x)
    for name in ("reshape ints", "reshape tuple", "view ints", "softmax", "softmax dim", "sum positional"):
        frames = python_frames(calls[name])
        # the kernel may be Python (softmax over axis 0 runs its reference), the call is not
        assert not frames[:1] or not frames[0].startswith(("tensor_methods.py", "_op.py")), (name, frames)


def test_method_positional_and_shaped_are_checked(cpu) -> None:
    ext = eager._C_CALLS["module"]
    with pytest.raises(TypeError, match="positional must be a tuple of interned keyword names"):
        ext.Method(REGISTRY["sum"], print, keywords={"dim": None}, positional=("keepdim",))
    with pytest.raises(ValueError, match=r"shaped must be 0, 1 \(reshape\) or 2 \(view\), got 3"):
        ext.Method(REGISTRY["reshape"], print, shaped=3)


def test_direct_calls_read_the_settings_in_force(cpu, monkeypatch) -> None:
    """The thread count, min_chunk and NumPy's buffer size a direct call passes are read without the
    Python readers' frames, and are what those give whenever set_threads, set_min_chunk, the variables or
    np.setbufsize change them (a stale value would change the chunks a kernel is cut into)."""
    from verigrad.backends import threads
    from verigrad.backends.cpu import _ffi

    ext = eager._C_CALLS["module"]

    def same() -> None:
        expected = (cpu.threads, _ffi.min_chunk(), _ffi.bufsize())
        assert ext.read(cpu, _ffi.min_chunk, _ffi.bufsize) == expected
        assert ext.read(cpu, _ffi.min_chunk, _ffi.NO_BLOCK.__index__)[2] == _ffi.NO_BLOCK

    same()
    try:
        for n in (1, 2, 3):
            verigrad.set_threads(n)
            same()
        verigrad.set_threads(None)
        monkeypatch.setenv("VERIGRAD_THREADS", "3")
        same()
        assert cpu.threads == 3
        monkeypatch.setenv("VERIGRAD_THREADS", "2")
        same()
        assert cpu.threads == 2
        monkeypatch.delenv("VERIGRAD_THREADS")
        same()
        _ffi.set_min_chunk(100)
        same()
        _ffi.set_min_chunk(None)
        monkeypatch.setenv("VERIGRAD_MIN_CHUNK", "77")
        same()
        assert _ffi.min_chunk() == 77
        monkeypatch.delenv("VERIGRAD_MIN_CHUNK")
        same()
        with np.errstate(all="ignore"):
            old = np.setbufsize(4096)
            try:
                same()
                assert _ffi.bufsize() == 4096
            finally:
                np.setbufsize(old)
        same()
    finally:
        verigrad.set_threads(None)
        _ffi.set_min_chunk(None)

    class Slower(type(cpu)):  # a backend of its own thread count: read through its property
        threads = property(lambda self: 5)

    slower = Slower.__new__(Slower)
    assert ext.read(slower, _ffi.min_chunk, _ffi.bufsize)[0] == 5
    assert threads.THREAD_COUNT.get() == cpu.threads


@pytest.mark.parametrize("n", [1, 2, 3])
def test_direct_calls_give_the_same_bits_on_1_to_3_threads(cpu, n: int) -> None:
    """Softmax, sums and element-wise kernels called from C, cut into small chunks on n threads: the
    Python calls' bits, which are the one-thread bits."""
    rng = np.random.default_rng(7)
    a = verigrad.tensor(rng.standard_normal((64, 300)).astype(np.float32))
    b = verigrad.tensor(rng.standard_normal((64, 300)).astype(np.float32))
    w = verigrad.tensor(rng.standard_normal((300, 70)).astype(np.float32))
    calls = [lambda: a + b, lambda: a.exp(), lambda: a.softmax(-1), lambda: a.sum(1), lambda: a.sum()]
    bias = verigrad.tensor(rng.standard_normal(300).astype(np.float32))
    calls += [lambda: a @ w, lambda: a + bias]
    verigrad.set_threads(1)
    one = [c().payload.tobytes() for c in calls]
    try:
        from verigrad.backends.cpu import _ffi

        verigrad.set_threads(n)
        _ffi.set_min_chunk(64)
        for call, bits in zip(calls, one):
            on, off = both_ways(call)
            assert on.payload.tobytes() == off.payload.tobytes() == bits
    finally:
        verigrad.set_threads(None)
        _ffi.set_min_chunk(None)


def test_reductions_remembered_layouts_follow_shape_axis_and_block(cpu) -> None:
    """vg_eager remembers the last layouts a sum found: calls that alternate over more shapes than it
    keeps, the same axes on other shapes, and a changed NumPy buffer size (the block an f32 sum is cut
    at, part of the remembered key) give the Python calls' bits every time."""
    rng = np.random.default_rng(8)
    shapes = [(3, 20000), (20000, 3), (5, 7), (7, 5), (2, 3, 4), (4, 3, 2), (1, 9), (9, 1), (6, 6), (11, 13)]
    xs = [verigrad.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    for _ in range(2):
        for x in xs:
            for call in (lambda: x.sum(1), lambda: x.sum(-1, True), lambda: x.sum(), lambda: x.sum(0)):
                same_outcome(call)
    for x in (xs[0], xs[1].T):  # rows, and columns (a strided layout)
        on = x.sum(1).payload.tobytes()
        with np.errstate(all="ignore"):
            old = np.setbufsize(1024)
            try:
                on_small, off_small = both_ways(lambda x=x: x.sum(1))
            finally:
                np.setbufsize(old)
        assert on_small.payload.tobytes() == off_small.payload.tobytes()
        on_again, off_again = both_ways(lambda x=x: x.sum(1))
        assert on_again.payload.tobytes() == off_again.payload.tobytes() == on


def matmul_operands(dtype) -> list[tuple[np.ndarray, np.ndarray]]:
    """Matrix products' operands: 2-D (C-contiguous, transposed and sliced views), a batch times one
    matrix (one product of all its rows), batches broadcast, vectors, a broadcast (zero-stride) operand
    BLAS cannot take, an unaligned one, empty ones, and a wrong inner size (the error)."""
    rng = np.random.default_rng(11)

    def r(*shape):
        return rng.standard_normal(shape).astype(dtype)

    a, b = r(6, 5), r(5, 7)
    raw = np.zeros(6 * 5 * np.dtype(dtype).itemsize + 1, np.uint8)[1:].view(dtype).reshape(6, 5)
    raw[...] = a
    return [
        (a, b),
        (r(7, 5).T, b),
        (a, r(7, 5).T),
        (r(6, 10)[:, ::2], b),
        (r(2, 3, 5), b),
        (r(2, 3, 5), r(7, 5).T),
        (r(2, 1, 3, 5), r(4, 5, 2)),
        (r(5), b),
        (a, r(5)),
        (r(5), r(5)),
        (np.broadcast_to(r(1, 5), (6, 5)), b),
        (raw, b),
        (r(0, 5), b),
        (a, r(5, 0)),
        (a, r(4, 7)),
    ]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_in_c_gives_the_python_calls_outcome(cpu, grad: bool, dtype) -> None:
    """x @ y called from C (vg_gemm through the plan matmul.py made) gives the kernel's bits, records and
    errors, the first call and the next, on the fast and the exact path."""
    from verigrad.backends.cpu import matmul

    for exact in (False, True):
        with matmul.exact_mode(exact):
            for a, b in matmul_operands(dtype):
                x, y = tensor_of(a, grad), tensor_of(b, grad)  # the views themselves, as made
                for _ in range(3):  # the first call makes the plan, the next find it
                    same_outcome(lambda: x @ y)


def test_matmul_plans_call_vg_gemm_in_c(cpu) -> None:
    """A repeated product of 2-D operands, of a batch by one matrix, and of batches enters no Python
    function; one whose operand BLAS cannot take as it is goes to the kernel's copy."""
    from verigrad.backends.cpu.matmul import DIRECT_MATMUL

    rng = np.random.default_rng(12)
    for xs, ys in (((4, 8), (8, 3)), ((2, 4, 8), (8, 3)), ((2, 4, 8), (2, 8, 3))):
        x = verigrad.tensor(rng.standard_normal(xs).astype(np.float32))
        y = verigrad.tensor(rng.standard_normal(ys).astype(np.float32))
        REGISTRY["matmul"]._eager_plans.clear()
        assert python_frames(lambda x=x, y=y: x @ y) == [], (xs, ys)
        (plan,) = [plan for _, plan in REGISTRY["matmul"]._eager_plans.values()]
        assert plan.fast[0] == DIRECT_MATMUL
    x = tensor_of(np.broadcast_to(np.ones(8, np.float32), (4, 8)), False)
    assert any("matmul" in f for f in python_frames(lambda: x @ y))


def test_matmul_remembered_layouts_follow_shapes_strides_and_exactness(cpu) -> None:
    """vg_eager remembers the last plans matmul found: products that alternate over more layouts than it
    keeps, the same shapes with other strides, and exact mode switched on and off give the Python calls'
    bits every time."""
    from verigrad.backends.cpu import matmul

    rng = np.random.default_rng(13)
    pairs = []
    sizes = ((3, 4, 5), (5, 4, 3), (4, 4, 4), (1, 7, 2), (2, 7, 1), (6, 2, 6), (9, 3, 2), (8, 1, 3))
    for m, k, n in sizes:
        a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        pairs.append((verigrad.tensor(a), verigrad.tensor(b)))
        pairs.append((verigrad.tensor(np.ascontiguousarray(a.T)).T, verigrad.tensor(b)))
    for _ in range(2):
        for exact in (False, True, False):
            with matmul.exact_mode(exact):
                for x, y in pairs:
                    same_outcome(lambda x=x, y=y: x @ y)


def cat_calls() -> list:
    """PyTorch's cat as programs call it: along each axis, of C-contiguous arrays (copied together in C),
    of views (NumPy's concatenate), of size-1 axes with any stride, of empty arrays, of other dtypes, a
    tuple, the legacy rule's 1-D empty tensor (Python's), and the errors."""
    rng = np.random.default_rng(14)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    strided = np.lib.stride_tricks.as_strided  # C-contiguous, with odd strides on their size-1 axes:
    col, row = strided(a[0, :3].copy(), (3, 1), (4, 40)), strided(a[0].copy(), (1, 4), (1000, 4))
    ints, flags = np.arange(12).reshape(3, 4), np.ones((1, 4), bool)
    cube = rng.standard_normal((2, 3, 4)).astype(np.float64)
    t = verigrad.tensor
    cat = verigrad.cat
    return [
        lambda g: cat([tensor_of(a, g), tensor_of(b, g)], dim=0),
        lambda g: cat([tensor_of(a, g), tensor_of(b, g), tensor_of(a, g)], 0),
        lambda g: cat((tensor_of(a, g), tensor_of(a, g)), dim=1),
        lambda g: cat([tensor_of(a, g), tensor_of(a, g)], dim=-1),
        lambda g: cat([tensor_of(a.T, g), tensor_of(a.T, g)], dim=0),
        lambda g: cat([tensor_of(col, g), tensor_of(col, g)], dim=1),
        lambda g: cat([tensor_of(col, g), tensor_of(col, g)], dim=0),
        lambda g: cat([tensor_of(row, g), tensor_of(row, g)], dim=0),
        lambda g: cat([tensor_of(row, g), tensor_of(row, g)], dim=1),
        lambda g: cat([tensor_of(row, g), tensor_of(a, g)], dim=0),
        lambda g: cat([tensor_of(a[:0], g), tensor_of(a[:0], g)], dim=0),
        lambda g: cat([tensor_of(a[:, :0], g), tensor_of(a, g)], dim=1),
        lambda g: cat([t(ints), t(ints)], dim=1),
        lambda g: cat([t(flags), t(flags)], dim=0),
        lambda g: cat([tensor_of(cube, g), tensor_of(cube[:, :1], g)], dim=1),
        lambda g: cat([tensor_of(cube, g)] * 9, dim=2),  # more operands than vg_eager takes
        lambda g: cat([tensor_of(a, g), tensor_of(np.zeros(0, np.float64), g)], dim=0),  # the legacy rule
        lambda g: cat([tensor_of(a, g)], dim=0),
        lambda g: cat([tensor_of(a, g), tensor_of(b, g)], dim=1),  # the shape error
        lambda g: cat([tensor_of(a, g), tensor_of(a, g)], dim=2),  # out of range
        lambda g: cat([], dim=0),
    ]


@pytest.mark.parametrize("grad", [False, True])
def test_cat_in_c_gives_the_python_calls_outcome(cpu, grad: bool) -> None:
    """verigrad.cat called from C (the legacy rule checked there, C-contiguous blocks copied together)
    gives the Python calls' bits, strides, records and errors."""
    for k, call in enumerate(cat_calls()):
        for _ in range(2):
            on, off = both_ways(lambda: call(grad))
            if isinstance(off, Exception):
                assert type(on) is type(off) and str(on) == str(off), k
            else:
                same_tensor(on, off)
                assert on.payload.strides == off.payload.strides and on.payload.flags.owndata, k


def test_cat_is_called_in_c(cpu) -> None:
    """cat([x, y], dim=0), repeated, enters no Python function, and its Python code stays reachable."""
    x, y = verigrad.tensor(np.ones((2, 3), np.float32)), verigrad.tensor(np.zeros((1, 3), np.float32))
    assert python_frames(lambda: verigrad.cat([x, y], dim=0)) == []
    assert python_frames(lambda: verigrad.concatenate((x, y), 0)) == []
    assert verigrad.cat.__name__ == "cat" and verigrad.cat.__doc__
    empty = verigrad.tensor(np.zeros(0, np.float64))
    assert "legacy_cat.py:__call__" in python_frames(lambda: verigrad.cat([x, empty]))


def broadcast_pairs(dtype) -> list[tuple[np.ndarray, np.ndarray]]:
    """Operands broadcast otherwise than one shape or a 0-d one: a bias over rows, a column, both ways,
    transposed and strided views, more layouts than vg_eager remembers, empty ones, and shapes that do
    not broadcast (the error)."""
    rng = np.random.default_rng(15)

    def r(*shape):
        return (rng.standard_normal(shape) * 4).astype(dtype)

    base = r(6, 5)
    return [
        (r(4, 3, 5), r(5)),
        (r(5), r(4, 3, 5)),
        (r(4, 1, 5), r(1, 3, 5)),
        (r(6, 1), r(1, 7)),
        (base.T, r(6)),
        (base[:, ::2], r(3)),
        (r(2, 3, 4, 5, 6), r(6)),
        (r(2, 1, 2, 1, 2, 1), r(2, 1, 2, 1, 2)),  # past the kernels' rank: the reference
        *[(r(k, 4), r(1, 4)) for k in range(2, 12)],
        (r(0, 5), r(5)),
        (r(3, 5), r(4)),
    ]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_broadcast_binary_in_c_gives_the_python_calls_outcome(cpu, grad: bool, dtype) -> None:
    """x + y, x * y, x - y and x / y on operands broadcast any way: the C call of the kernel's broadcast
    form (with the wrapper's layout) gives the wrapper's bits, records and errors, again and again."""
    if dtype == np.int64:
        grad = False
    for _ in range(2):
        for a, b in broadcast_pairs(dtype):
            x, y = tensor_of(a, grad), tensor_of(b, grad)
            for call in (lambda: x + y, lambda: x * y, lambda: x - y, lambda: y - x, lambda: x / y):
                same_outcome(call)


def test_broadcast_binary_is_called_in_c(cpu) -> None:
    """A repeated bias add (x [4, 3, 5] + b [5]) enters no Python function."""
    x = verigrad.tensor(np.ones((4, 3, 5), np.float32))
    b = verigrad.tensor(np.arange(5, dtype=np.float32))
    assert python_frames(lambda: x + b) == []
    assert python_frames(lambda: b * x) == []


@pytest.mark.parametrize("grad", [False, True])
def test_broadcast_to_in_c_gives_the_python_calls_view(cpu, grad: bool) -> None:
    """broadcast_to made in C from the strides the kernel remembered (of C-contiguous and strided
    operands: a reshaped broadcast gradient) is the Python call's read-only view: bits, shape, strides,
    memory and record; the repeated call enters no Python function."""
    op = REGISTRY["broadcast_to"]
    rng = np.random.default_rng(16)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    cases = [
        (a, (2, 3, 4)),
        (a[:, :1], (3, 5)),
        (a.T, (2, 4, 3)),
        (np.broadcast_to(a[:, :1], (3, 4)).reshape(3, 4, 1), (3, 4, 6)),
        (a[0], (5, 4)),
        (a, (4, 3)),  # not a broadcast of it: the error
    ]
    for array, shape in cases:
        x = tensor_of(array, grad)
        for _ in range(2):
            on, off = both_ways(lambda x=x, shape=shape: op(x, shape=shape))
            if isinstance(off, Exception):
                assert type(on) is type(off) and str(on) == str(off)
                continue
            same_tensor(on, off)
            assert on.payload.strides == off.payload.strides and not on.payload.flags.writeable
            assert np.shares_memory(on.payload, array) and on.payload.ctypes.data == off.payload.ctypes.data
        if not grad and not isinstance(off, Exception):
            assert python_frames(lambda x=x, shape=shape: op(x, shape=shape)) == [], array.strides
