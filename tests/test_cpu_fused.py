"""The cpu backend's generated kernels for fused element-wise groups (verigrad/backends/cpu/fused.py):
random element-wise programs, traced and fused, whose fused kernels must give the group's `reference`'s
bits on special values, broadcast operands and strided views, for every thread count; one compiler call
for all the fused kernels of a plan; and the layouts and groups that run member by member instead."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import numpy as np
import pytest
from nan_loops import NAN_BINARY, NAN_UNARY

import verigrad
from verigrad.backends import cpu, verification
from verigrad.backends.active import lookup
from verigrad.backends.cpu import _ffi, elementwise, fused, numpy_loops
from verigrad.backends.kernel_table import EXACT
from verigrad.backends.verification import compare
from verigrad.ir import trace
from verigrad.ir.passes import optimize
from verigrad.ir.passes.fuse import is_fused, merge
from verigrad.ir.plan import Plan, bind
from verigrad.ops import REGISTRY
from verigrad.shapes import spec

SMALL_CHUNK = 5  # the min chunk the `small_chunks` fixture (conftest.py) sets

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

FLOAT_UNARY = ["neg", "abs", "relu", "relu_deriv", "sqrt", "rsqrt", "sigmoid_deriv", "tanh_deriv"]
FLOAT_UNARY += ["exp", "log", "expm1", "log1p", "sin", "cos", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"]
FLOAT_UNARY += ["silu_deriv", "gelu_deriv", "gelu_tanh_deriv"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
SHAPES = [(6, 7), (7,), (6, 1), (), (1, 7)]


def special(np_dtype: np.dtype) -> np.ndarray:
    fi = np.finfo(np_dtype)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -2.0, 3.0, 88.7, -745.0]
    values += [fi.tiny, -fi.smallest_subnormal, fi.max, -fi.max, fi.eps, 1e-30, -0.25]
    with np.errstate(over="ignore"):
        return np.array(values, dtype=np_dtype)


def operand(rng: np.random.Generator, shape: tuple, dtype: np.dtype, view: bool) -> np.ndarray:
    """Random values mixed with special ones (bool: random), as a strided view where `view` says."""
    if dtype == np.bool_:
        a = rng.random(shape) > 0.5
    else:
        a = (rng.standard_normal(shape) * rng.choice([0.5, 3.0, 50.0])).astype(dtype)
        flat = a.reshape(-1)
        picks = rng.random(flat.size) < 0.3
        flat[picks] = rng.choice(special(dtype), int(picks.sum()))
    if not view or not shape:
        return a
    if len(shape) == 2 and rng.random() < 0.5:  # transposed storage
        return np.ascontiguousarray(a.T).T
    wide = np.empty((*shape[:-1], shape[-1] * 2), dtype)  # every other element
    wide[..., ::2] = a
    return wide[..., ::2]


def random_program(rng: np.random.Generator):
    """A function of three tensors made of random element-wise ops, and the inputs' specs."""
    dtypes = [rng.choice(["f32", "f64"]) if rng.random() < 0.2 else "f32" for _ in range(3)]
    shapes = [SHAPES[rng.integers(len(SHAPES))] for _ in range(3)]
    shapes[0] = (6, 7)
    plan = []
    kinds = ["f"] * 3  # "f" float, "b" bool values
    for _ in range(rng.integers(2, 7)):
        floats = [i for i, k in enumerate(kinds) if k == "f"]
        bools = [i for i, k in enumerate(kinds) if k == "b"]
        choice = rng.random()
        if choice < 0.35:
            plan.append((FLOAT_UNARY[rng.integers(len(FLOAT_UNARY))], (rng.choice(floats),)))
            kinds.append("f")
        elif choice < 0.7:
            plan.append((FLOAT_BINARY[rng.integers(len(FLOAT_BINARY))], tuple(rng.choice(floats, 2))))
            kinds.append("f")
        elif choice < 0.8:
            plan.append((COMPARE[rng.integers(len(COMPARE))], tuple(rng.choice(floats, 2))))
            kinds.append("b")
        elif bools and choice < 0.9:
            plan.append(("where", (rng.choice(bools), *rng.choice(floats, 2))))
            kinds.append("f")
        elif bools:
            plan.append(("cast", (rng.choice(bools),)))
            kinds.append("f")
        else:
            plan.append(("cast", (rng.choice(floats),)))
            kinds.append("f")
    cast_to = "f64" if rng.random() < 0.3 else "f32"

    def fn(*xs):
        values = list(xs)
        for name, refs in plan:
            args = [values[i] for i in refs]
            if name == "cast":
                values.append(REGISTRY["cast"](args[0], cast_to))
            else:
                values.append(REGISTRY[name](*args))
        return values[-1]

    return fn, [spec(s, d) for s, d in zip(shapes, dtypes)]


def every_op() -> list:
    """A small program per member op and float dtype: each op in a group of two or three."""
    programs = []
    for dtype in ("f32", "f64"):
        specs = [spec((6, 7), dtype), spec((7,), dtype), spec((6, 1), dtype)]
        for name in FLOAT_UNARY:
            programs.append((lambda x, y, z, op=REGISTRY[name]: op(x) * y - z, specs))
        for name in FLOAT_BINARY:
            programs.append((lambda x, y, z, op=REGISTRY[name]: op(x, y) + z, specs))
        for name in COMPARE:
            programs.append((lambda x, y, z, op=REGISTRY[name]: verigrad.where(op(x, y), x, z), specs))
            programs.append((lambda x, y, z, op=REGISTRY[name]: op(x + z, y).cast("f32"), specs))
        programs.append((lambda x, y, z: ((x > y) | (z < 0.5)) & ~(x == z), specs))
    return programs


def fused_instrs(program):
    return [instr for instr in program.instrs if is_fused(instr)]


def arrays_for(rng: np.random.Generator, instr, view: bool) -> list[np.ndarray]:
    return [operand(rng, tuple(a.spec.shape), a.spec.dtype.np, view) for a in instr.args]


def check(kernel, instr, arrays: list[np.ndarray], threads: tuple[int, ...] = (1,)) -> None:
    params = instr.params["params"]
    with np.errstate(all="ignore"):
        expected = instr.op.reference(*arrays, params=params)
    results = []
    for n in threads:
        verigrad.set_threads(n)
        with np.errstate(all="ignore"):
            results.append(kernel(*arrays, params=params))
    verigrad.set_threads(1)
    for actual in results:
        verdict = compare(actual, np.asarray(expected), EXACT)
        assert not verdict.message, f"{instr.op!r}: {verdict.message}"
        assert actual.tobytes() == results[0].tobytes()


def test_random_fused_groups_give_the_references_bits(small_chunks):
    """Random programs: every fused group the generator takes is exact, on contiguous operands and on
    views, at 1, 2 and 3 threads (chunks of 5 elements: every chunk boundary mid-row). Here it is made
    to take every group of exact members, also those the backend leaves unfused (`libm_members`): those
    whose routines are the C library's, and where those are not NumPy's, NumPy's loops (`staged_ops`)."""
    rng = np.random.default_rng(5)
    libm = fused.libm_members(cpu.cpu)
    exact = {key for key, (_, exactness) in cpu.cpu.registered().items() if exactness.is_exact}
    groups = []
    for fn, specs in every_op() + [random_program(rng) for _ in range(100)]:
        for instr in fused_instrs(optimize(trace(fn, *specs))):
            native = cpu.cpu.native(instr.op, instr.out.spec.dtype)
            assert (native is None) == (fused.supported(instr.op.group, libm) is not None)
            kernel = fused.kernel(cpu.cpu, instr.op.group, libm=frozenset(exact))  # AVX2-path ops too
            if kernel is None:  # only where a routine is neither NumPy's nor NumPy's loops were found
                assert any(
                    (m.name, d.name) not in exact for m, d in zip(instr.op.group.ops, instr.op.group.dtypes)
                )
                continue
            groups.append((kernel, instr))
    staged = fused.staged_ops(frozenset(exact))
    with_numpys = [k for k, i in groups if any(m.name in staged for m in i.op.group.ops)]
    assert len(groups) > (120 if "exp" in elementwise.C_LIBRARY_EXACT or staged else 90)
    assert len(with_numpys) > 30 if staged else not with_numpys  # 41 of 143 on an AVX-512 machine
    builds = len(fused.BATCHES.builds)
    for k, (kernel, instr) in enumerate(groups):
        assert kernel.exactness == EXACT
        check(kernel, instr, arrays_for(rng, instr, view=False), threads=(1, 2, 3))
        check(kernel, instr, arrays_for(rng, instr, view=True), threads=(1, 3))
        if k == 0:
            assert len(fused.BATCHES.builds) <= builds + 1  # all pending kernels in one build
    assert len(fused.BATCHES.builds) <= builds + 1


def test_a_compiled_training_update_runs_each_group_in_one_step():
    """SGD with momentum on a weight: one fused step per group on cpu, where the members would be four
    steps; one build for all the plan's fused kernels; a second plan of the same program builds
    nothing; the results are the reference backend's bits."""
    rng = np.random.default_rng(1)
    w, g, v = (verigrad.tensor(rng.standard_normal((64, 300)).astype(np.float32)) for _ in range(3))
    b = verigrad.tensor(rng.standard_normal(300).astype(np.float32))

    def update(w, g, v, b):
        v2 = v * 0.9 + g
        return w - v2 * 0.01, v2 * 2.0, verigrad.relu(w + b) * (g > 0).cast("f32")

    program = optimize(trace(update, w.spec, g.spec, v.spec, b.spec))
    assert len(fused_instrs(program)) == 3
    arrays = [t.payload for t in (w, g, v, b)]
    builds = len(fused.BATCHES.builds)
    plan = Plan(program, bind(program, [w, g, v, b]), cpu.cpu)
    out = plan.run(arrays)[0]
    assert len(fused.BATCHES.builds) <= builds + 1
    assert [s.op.name for s in plan.steps].count("fused") == 3
    reference = Plan(program, bind(program, [w, g, v, b]), lookup("reference"))
    assert len(reference.steps) > len(plan.steps)
    for actual, expected in zip(out, reference.run(arrays)[0]):
        assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes()
    again = Plan(program, bind(program, [w, g, v, b]), cpu.cpu)
    built = len(fused.BATCHES.builds)
    for actual, expected in zip(again.run(arrays)[0], out):
        assert actual.tobytes() == expected.tobytes()
    assert len(fused.BATCHES.builds) == built


def test_a_new_trace_of_the_same_step_finds_its_kernels_without_generating_them(monkeypatch):
    """Each trace makes new fused ops; groups of the same structure (members, wiring, dtypes,
    one-element inputs) get the function generated for the first, without generating C again."""
    rng = np.random.default_rng(9)
    w, g = (verigrad.tensor(rng.random((40, 500), dtype=np.float32)) for _ in range(2))

    def update(w, g):
        return (w * g + g * g).sqrt() - w

    first = optimize(trace(update, w.spec, g.spec))
    kernels = [cpu.cpu.native(i.op, i.out.spec.dtype) for i in fused_instrs(first)]
    generated = []
    real = fused.function
    monkeypatch.setattr(fused, "function", lambda *a: generated.append(a) or real(*a))
    again = optimize(trace(update, w.spec, g.spec))
    [instr] = fused_instrs(again)
    assert instr.op is not fused_instrs(first)[0].op
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    assert not generated and kernel.name == kernels[0].name
    params = instr.params["params"]
    assert (
        kernel(w.payload, g.payload, params=params).tobytes()
        == instr.op.reference(w.payload, g.payload, params=params).tobytes()
    )


def _group(fn, *specs):
    [instr] = fused_instrs(optimize(trace(fn, *specs)))
    return instr


@contextlib.contextmanager
def numpy_routine(routine: str, loop):
    """Every generated library calls `loop` in place of NumPy's `routine`."""
    which = numpy_loops.ROUTINES.index(routine)
    try:
        for cdll in fused.BATCHES.libraries:
            fused.use_numpy_loop(cdll, which, loop)
        yield
    finally:
        for cdll in fused.BATCHES.libraries:
            fused.use_numpy_loop(cdll, which, *elementwise.NUMPY_LOOPS[which])


def test_members_whose_routine_is_numpys_own_run_numpys_loop_in_the_kernel(small_chunks):
    """Where NumPy's f64 exp and power are its own (not the C library's) and their loops were found, a
    group holding them is still fused: its kernel calls NumPy's loops over stages of each block (a NaN
    stand-in here makes every result NaN; pow's bias correction, computed once per call, too), on every
    thread count and layout; with NumPy's loops back, the reference's bits."""
    if not {"exp", "pow"} <= fused.staged_ops(fused.libm_members(cpu.cpu)):
        pytest.skip("the C library's exp and pow are NumPy's here, or NumPy's loops were not found")
    instr = _group(
        lambda x, y, t: verigrad.exp(x - y) * (1.0 - 0.9**t) + verigrad.sigmoid(y),
        spec((70, 300), "f64"),
        spec((300,), "f64"),
        spec((), "f64"),
    )
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    assert kernel is not None  # fused, not run member by member
    rng = np.random.default_rng(8)
    arrays = arrays_for(rng, instr, view=True)
    params = instr.params["params"]
    check(kernel, instr, arrays, threads=(1, 2, 3))
    for routine, loop in (("exp", NAN_UNARY), ("power", NAN_BINARY)):
        with numpy_routine(routine, loop), np.errstate(all="ignore"):
            assert np.isnan(kernel(*arrays, params=params)).all()
    check(kernel, instr, arrays_for(rng, instr, view=False), threads=(1, 3))


def _first_nan(a: np.ndarray, result: np.ndarray) -> np.ndarray:
    """x86's add and mul of a and b where a is a NaN: a's NaN."""
    return np.where(np.isnan(a), a, result)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_two_nans_meeting_in_add_or_mul_give_the_first_ones_bits_on_every_thread_count(dtype, small_chunks):
    """NaNs of both signs meet in products and a sum (log(-1) is -NaN): x86 gives the first operand's
    NaN, but the compiler put either operand first, differently in a loop's vector body and its scalar
    tail, so an element's NaN depended on where its block started, so on the thread count. Now the
    first operand's, as x86 and NumPy's contiguous loops give it, on 1-3 threads."""
    instr = _group(
        lambda x, y: verigrad.log(x) * verigrad.exp(y) + verigrad.log1p(y) * verigrad.expm1(x),
        spec((1001,), dtype),
        spec((1001,), dtype),
    )
    exact = {key for key, (_, exactness) in cpu.cpu.registered().items() if exactness.is_exact}
    kernel = fused.kernel(cpu.cpu, instr.op.group, libm=frozenset(exact))
    assert kernel is not None
    rng = np.random.default_rng(3)
    nans = np.where(rng.random((2, 1001)) < 0.5, -np.nan, np.nan)
    x = np.where(rng.random(1001) < 0.5, nans[0], -1.0).astype(instr.args[0].spec.dtype.np)
    y = np.where(rng.random(1001) < 0.5, nans[1], 1.0).astype(x.dtype)
    members = {name: REGISTRY[name].reference for name in ("log", "exp", "log1p", "expm1")}
    with np.errstate(all="ignore"):
        a, b = members["log"](x), members["exp"](y)
        c, d = members["log1p"](y), members["expm1"](x)
        left, right = _first_nan(a, a * b), _first_nan(c, c * d)
        want = _first_nan(left, left + right)
    assert np.isnan(want).all() and np.signbit(want).any() and not np.signbit(want).all()
    for n in (1, 2, 3):
        verigrad.set_threads(n)
        with np.errstate(all="ignore"):
            assert kernel(x, y, params=instr.params["params"]).tobytes() == want.tobytes(), n


def test_the_ops_with_a_routine_are_those_of_vg_math():
    """elementwise.ROUTINE_OF names each op whose formula calls one routine, as vg_math.h's
    VG_ROUTINE_OPS does (and pow, with NumPy's power)."""
    text = (Path(cpu.__file__).parent / "vg_math.h").read_text()
    listed = text[text.index("#define VG_ROUTINE_OPS(X)") :].split("\n\n")[0]
    pairs = dict(re.findall(r"X\((\w+), (\w+)\)", listed))
    assert {**pairs, "pow": "power"} == elementwise.ROUTINE_OF
    assert set(elementwise.ROUTINE_OF.values()) == set(numpy_loops.ROUTINES)


def test_layouts_the_kernel_does_not_take_run_the_members():
    """Rank 5 that does not collapse, an unaligned array, and operands of another dtype than traced:
    the members' NumPy kernels, the same bits; a view strided alike in every dimension collapses."""
    instr = _group(lambda a, b: verigrad.relu(a * b - a), spec((2, 3, 2, 3, 2)), spec((2, 3, 2, 3, 2)))
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    y = rng.standard_normal((2, 3, 2, 3, 2, 2)).astype(np.float32)[..., 0]  # every other element
    z = x.transpose(4, 3, 2, 1, 0).copy().transpose(4, 3, 2, 1, 0)  # column-major
    assert _ffi.collapse(x.shape, (x, y)) == [1, 1, 1, 72, 0, 0, 0, 1, 0, 0, 0, 2]
    assert _ffi.collapse(x.shape, (z, x)) is None
    unaligned = np.frombuffer(bytearray(4 * 73), np.float32, count=72, offset=1).reshape(x.shape)
    unaligned[...] = x
    for arrays in ([x, y], [z, x], [unaligned, x], [x, x.astype(np.float64)]):
        check(kernel, instr, arrays)


def test_a_kernel_writes_into_out_even_one_of_its_inputs(small_chunks):
    """`out=`: an input of the result's shape (each element read before it is written), any thread
    count, and an array the C function does not take (a view: computed, then copied in)."""
    instr = _group(lambda a, b: (a * b + b * b).sqrt() - b, spec((64, 300)), spec((300,)))
    assert len(instr.args) == 2
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    params = instr.params["params"]
    rng = np.random.default_rng(6)
    a, b = rng.random((64, 300), dtype=np.float32), rng.random(300, dtype=np.float32)
    expected = instr.op.reference(a, b, params=params)
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        into = a.copy()
        assert kernel(into, b, params=params, out=into) is into
        assert into.tobytes() == expected.tobytes()
    verigrad.set_threads(1)
    wide = np.zeros((64, 600), np.float32)
    assert kernel(a, b, params=params, out=wide[:, ::2]).base is wide
    assert wide[:, ::2].tobytes() == expected.tobytes() and not wide[:, 1::2].any()


def test_merged_groups_give_each_groups_bits_in_one_call(small_chunks):
    """Three groups, the last reading the others' results (as an Adam update reads the new moments),
    merged: one call gives all three results, each the bits of its group's reference, also written
    over the inputs it replaces and at any thread count; a layout the C function does not take runs
    the members, with the same bits."""

    def update(a, b, c):
        m = a * 0.9 + b * 0.1
        v = c * 0.5 + b * b
        return (v.sqrt() / (m + 2.0) + a).cast("f64") * 3.0, m, v

    specs = (spec((64, 300)), spec((64, 300)), spec((300,)))
    instrs = fused_instrs(optimize(trace(update, *specs)))
    assert len(instrs) == 3
    results = [instr.out for instr in instrs]
    op, keys, params = merge([(i.op, i.args, i.params["params"]) for i in instrs], results)
    assert op.group.roots[-1] == len(op.group.ops) - 1 and len(op.group.roots) == 3
    kernel = cpu.cpu.native(op, instrs[-1].out.spec.dtype)
    rng = np.random.default_rng(8)
    values = {a: rng.standard_normal(tuple(a.spec.shape)).astype(a.spec.dtype.np) for a in keys}
    expected = {}
    with np.errstate(all="ignore"):
        for instr in instrs:
            arrays = [values[a] if a in values else expected[a] for a in instr.args]
            expected[instr.out] = instr.op.reference(*arrays, params=instr.params["params"])
    wanted = [expected[r] for r in results]
    assert [w.dtype for w in wanted] == [np.float32, np.float32, np.float64]
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        got = kernel(*[values[a] for a in keys], params=params)
        assert all(g.tobytes() == w.tobytes() and g.dtype == w.dtype for g, w in zip(got, wanted))
        copies = {a: v.copy() for a, v in values.items()}
        first, second = (copies[a] for a in keys if a.spec.shape == (64, 300))
        got = kernel(*[copies[a] for a in keys], params=params, out=(first, second, None))
        assert got[0] is first and got[1] is second  # written over the inputs a and b
        assert all(g.tobytes() == w.tobytes() for g, w in zip(got, wanted))
    verigrad.set_threads(1)
    strided = {a: np.repeat(v[..., None], 2, -1)[..., 0] for a, v in values.items()}  # every other one
    unaligned = np.frombuffer(bytearray(4 * 64 * 300 + 1), np.float32, 64 * 300, offset=1).reshape(64, 300)
    unaligned[...] = values[keys[0]]
    strided[keys[0]] = unaligned  # the members' NumPy kernels
    with np.errstate(all="ignore"):
        got = kernel(*[strided[a] for a in keys], params=params)
    assert all(g.tobytes() == w.tobytes() for g, w in zip(got, wanted))


@pytest.mark.parametrize(("rows", "row"), [(120, 16), (4, 256), (4, 257), (5, 600)])
def test_blocks_of_several_short_rows_and_parts_of_long_ones(rows, row, small_chunks):
    """Rows of at most half a block (VG_BLOCK 512) are computed several to a call, each input read in
    place where it is one run of memory, else copied row by row (a broadcast value, a row repeated, a
    strided or transposed view); longer rows a block at a time. Every layout, at 1, 2 and 3 threads with
    chunks starting mid-row, and into one of the inputs, gives the reference's bits."""
    shape = (rows // 4, 4, row) if rows > 4 else (rows, row)
    instr = _group(
        lambda x, b, y, w: verigrad.relu(x + b) * y - w,
        spec(shape),
        spec((*shape[:-1], 1)),
        spec(shape),
        spec((row,)),
    )
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    rng = np.random.default_rng(9)
    x, y = (operand(rng, shape, np.float32, False) for _ in range(2))
    b, w = operand(rng, (*shape[:-1], 1), np.float32, False), operand(rng, (row,), np.float32, False)
    transposed = np.ascontiguousarray(y.T).T
    strided = np.empty((*shape[:-1], 2 * row), np.float32)[..., ::2]
    strided[...] = y
    args = [x, b, y, w]
    dims = _ffi.collapse(shape, args)
    assert (dims[3] * 2 <= fused.BLOCK) == (row <= 256)  # the rows the kernel walks: of `row` elements
    for a in ([x, b, y, w], [x, b, transposed, w], [strided, b, x, w], [transposed, b, strided, w]):
        check(kernel, instr, list(a), threads=(1, 2, 3))
    params = instr.params["params"]
    with np.errstate(all="ignore"):  # infinities of opposite signs among the special values
        expected = instr.op.reference(*args, params=params)
    for threads in (1, 3):
        verigrad.set_threads(threads)
        into = x.copy()
        assert kernel(into, b, y, w, params=params, out=into) is into
        assert into.tobytes() == expected.tobytes()
    verigrad.set_threads(1)


def test_broadcast_views_collapse_to_few_dimensions():
    a = np.zeros((4, 5, 6), np.float32)
    row = np.zeros(6, np.float32)
    col = np.zeros((4, 1, 1), np.float32)
    assert _ffi.collapse((4, 5, 6), (a, row)) == [1, 1, 20, 6, 0, 0, 6, 1, 0, 0, 0, 1]
    assert _ffi.collapse((4, 5, 6), (a, col)) == [1, 1, 4, 30, 0, 0, 30, 1, 0, 0, 1, 0]
    assert _ffi.collapse((4, 5, 6), (np.zeros((), np.float32),)) == [1, 1, 1, 120, 0, 0, 0, 0]


def test_bool_results_and_where():
    rng = np.random.default_rng(3)
    instr = _group(lambda a, b: (a * 2.0 > b) & (b < 1.0), spec((50, 40)), spec((40,)))
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    arrays = arrays_for(rng, instr, view=True)
    check(kernel, instr, arrays)
    assert kernel(*arrays, params=instr.params["params"]).dtype == np.bool_
    instr = _group(
        lambda c, a, b: verigrad.where(c, a + 1.0, b.cast("f64")),
        *(spec((9, 8), d) for d in ("bool", "f32", "f32")),
    )
    kernel = cpu.cpu.native(instr.op, instr.out.spec.dtype)
    check(kernel, instr, arrays_for(rng, instr, view=True))


def test_groups_the_generator_does_not_take_have_no_kernel():
    for fn, dtype in [
        (lambda a, b: (a + b) * a, "i64"),  # integer arithmetic
        (lambda a, b: (a + b) * a, "f16"),
    ]:
        instr = _group(fn, spec((4, 4), dtype), spec((4, 4), dtype))
        assert cpu.cpu.native(instr.op, instr.out.spec.dtype) is None
        assert fused.supported(instr.op.group, frozenset()) is not None
    exp = _group(lambda a: verigrad.exp(a) * 2.0, spec((4,)))
    assert fused.supported(exp.op.group, frozenset()) == "exp in f32: not exact here, or faster unfused"
    if cpu.vectorized():  # the AVX2 path of f32 exp is faster than a fused kernel's scalar formula
        assert cpu.cpu.native(exp.op, exp.out.spec.dtype) is None


def test_members_of_one_element_inputs_are_computed_once_with_the_same_bits():
    """An Adam-like update: the bias corrections of a 0-d step count are computed once per call, before
    the loop over the weight, and the result is still the reference's bits (NaN and inf steps too)."""

    def update(w, m, t):
        return w - m / (1.0 - 0.9**t) * verigrad.sqrt(1.0 - 0.999**t)

    program = optimize(trace(update, spec((40, 30)), spec((40, 30)), spec(())))
    [instr] = fused_instrs(program)
    scalar = fused.scalars(instr.op.group)
    same, _ = fused.uniform(instr.op.group, scalar)
    once = sorted(m.name for m, one in zip(instr.op.group.ops, same) if one)
    assert once == ["pow", "pow", "sqrt", "sub", "sub"]  # 0.9**t, 1 - ..., 0.999**t, 1 - ..., sqrt
    # made to take pow also where the C library's is not NumPy's (then held to the reference only on the
    # steps where the two agree on 0.9**t and 0.999**t)
    kernel = fused.kernel(cpu.cpu, instr.op.group, libm=fused.libm_members(cpu.cpu) | {("pow", "f32")})
    pow_kernel = cpu.cpu.native(REGISTRY["pow"], verigrad.f32)
    step = [a.id for a in instr.args].index(program.inputs[2].id)
    rng = np.random.default_rng(4)
    held = 0
    for t in (1.0, 7.0, 0.0, np.nan, np.inf, -3.5):
        bases, steps = np.array([0.9, 0.999], np.float32), np.full(2, t, np.float32)
        with np.errstate(all="ignore"):
            if pow_kernel(bases, steps).tobytes() != REGISTRY["pow"].reference(bases, steps).tobytes():
                continue
        arrays = arrays_for(rng, instr, view=True)
        arrays[step] = np.array(np.float32(t))
        check(kernel, instr, arrays, threads=(1, 2))
        held += 1
    assert held >= (6 if cpu.cpu.exactness("pow", "f32").is_exact else 4)


def test_a_checked_backend_holds_fused_kernels_to_their_reference(monkeypatch):
    """verification.CheckedBackend checks each call of a fused kernel against its group's reference at the
    kernel's stated exactness: the right kernels pass, one off by an ulp is caught."""
    rng = np.random.default_rng(6)
    w, g = (rng.standard_normal((64, 300)).astype(np.float32) for _ in range(2))
    program = optimize(trace(lambda w, g: w - (w * 0.9 + g) * 0.01, spec((64, 300)), spec((64, 300))))
    tensors = [verigrad.tensor(w), verigrad.tensor(g)]
    checked = verification.CheckedBackend(cpu.cpu)
    Plan(program, bind(program, tensors), checked).run([w, g])
    assert checked.calls == {("fused", "f32"): 1} and checked.failures == []
    right = fused.FusedKernel.__call__
    monkeypatch.setattr(
        fused.FusedKernel,
        "__call__",
        lambda self, *a, params: np.nextafter(right(self, *a, params=params), np.float32(9)),
    )
    checked = verification.CheckedBackend(cpu.cpu)
    Plan(program, bind(program, tensors), checked).run([w, g])
    assert len(checked.failures) == 1 and "other bits than the reference" in checked.failures[0]
