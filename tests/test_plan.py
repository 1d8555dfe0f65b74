"""Plans: the same bits as eager mode, kernel results checked on the first run, one plan per binding,
and every op's `fast` kernel equal to its reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import verigrad
from verigrad import nn
from verigrad.backends import Backend
from verigrad.backends.active import lookup
from verigrad.backends.cpu import available as cpu_available
from verigrad.cli.trainer import training_step
from verigrad.ir import trace
from verigrad.ir.passes import optimize
from verigrad.ir.plan import Merged, Plan, bind
from verigrad.nn import functional as F
from verigrad.optim import SGD, Adam

OPS = dict(sorted(verigrad.REGISTRY.items()))
# merged calls are of the cpu backend's fused kernels: without a C compiler it runs the references
needs_cc = pytest.mark.skipif(not cpu_available(), reason="the cpu backend could not be built here")


def _same(actual: Any, expected: Any) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected, strict=True)


def _plan(fn, specs, args, backend=None) -> tuple[Plan, Any]:
    """A plan that runs checked once, then in its loop twice, then as its generated function."""
    program = optimize(trace(fn, *specs))
    plan = Plan(program, bind(program, args), backend or verigrad.get_backend())
    plan.generate_after = 3
    return plan, program


def _run(plan: Plan, program: Any, args: list) -> tuple[list, dict]:
    return plan.run([a.payload for a in args] + [t.payload for t in program.captured])


def test_steps_the_binding_fixes_become_constants():
    """A mean over a symbolic batch counts its elements with `numel_of`, and cross-entropy's
    decomposition (inlined by the plan on the reference backend) makes an `arange`: both are known
    once the batch is bound, so the plan holds their values instead of steps; the bits are eager's."""
    rng = np.random.default_rng(3)
    logits = verigrad.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    target = verigrad.tensor(rng.integers(0, 3, 5))

    def loss(x, y):
        return F.cross_entropy(x, y) + x.mean()

    specs = (verigrad.spec(["B", 3]), verigrad.spec(["B"], "i64"))
    plan, program = _plan(loss, specs, (logits, target), lookup("reference"))
    names = {step.op.name for step in plan.steps}
    assert "cross_entropy" in {i.name for i in program.instrs} and "exp" in names  # inlined
    assert not names & {"numel_of", "arange"} and plan.consts
    for _ in range(4):
        (out,), _ = _run(plan, program, [logits, target])
        _same(out, loss(logits, target).numpy())


# the same bits as eager ------------------------------------------------------------------------
def _training_pair(make_model, make_opt, x_shape, classes, steps=3):
    """The same model trained `steps` steps eagerly and through `verigrad.compile`: the losses and
    every parameter and optimizer state must agree bit for bit."""
    rng = np.random.default_rng(0)
    batches = [
        (rng.random(x_shape, dtype=np.float32), rng.integers(0, classes, x_shape[0])) for _ in range(steps)
    ]
    runs = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        model = make_model()
        opt = make_opt(model.parameters())
        loss_fn = nn.CrossEntropyLoss()

        step = training_step(model, opt, loss_fn)

        run = verigrad.compile(step) if compiled else step
        losses = [run(verigrad.tensor(x), verigrad.tensor(y)).numpy().copy() for x, y in batches]
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        state.update({k: t.numpy().copy() for k, t in opt.state_tensors()})
        runs.append((losses, state))
    (eager_losses, eager_state), (plan_losses, plan_state) = runs
    for a, b in zip(plan_losses, eager_losses):
        _same(a, b)
    assert plan_state.keys() == eager_state.keys()
    for k in eager_state:
        _same(plan_state[k], eager_state[k])


def test_mlp_training_step_matches_eager_bit_for_bit():
    _training_pair(
        lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
        lambda params: SGD(params, lr=0.1, momentum=0.9),
        (5, 4),
        2,
    )


def test_cnn_training_step_with_adam_matches_eager_bit_for_bit():
    _training_pair(
        lambda: verigrad.models.digits_cnn(8, 8, channels=(4, 8)),
        lambda params: Adam(params, lr=1e-2),
        (6, 1, 8, 8),
        10,
    )


def test_mixed_dtypes_scalars_and_composites_match_eager():
    """Promotion (int with float, bool), 0-d results, reductions to a scalar, where, softmax."""

    def fn(x, i, m):
        y = (x * 2 + i).softmax(-1)  # i64 + f32, a composite without a kernel
        z = verigrad.where(m, y, -1.0).sum() / 3  # a 0-d result
        w = (x.cast("f64") @ x.T.cast("f64")).amax(axis=1, keepdim=True)
        return y, z, (i > 1).cast("f32") + z, w.exp() - w

    rng = np.random.default_rng(1)
    args = [
        verigrad.tensor(rng.standard_normal((3, 5), dtype=np.float32)),
        verigrad.tensor(rng.integers(-3, 3, (3, 5))),
        verigrad.tensor(rng.random((3, 5)) > 0.5),
    ]
    expected = fn(*args)
    plan, program = _plan(fn, [a.spec for a in args], args)
    for _ in range(4):  # the checked first run, the loop, then the generated function
        outputs, _ = _run(plan, program, args)
        assert len(outputs) == len(expected)
        for o, e in zip(outputs, expected):
            _same(o, e.numpy())
    assert plan.source is not None and "softmax" not in plan.source  # inlined as its primitives


# the first run checks each kernel's result -----------------------------------------------------
def _fake_backend(kernel) -> Backend:
    fake = Backend("fake-for-tests", "a backend made by a test")
    fake.register("add", kernel)
    return fake


def _add_program():
    n = verigrad.dims("n")
    x = verigrad.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    return (lambda a: (a + 1) * 2), [verigrad.spec([n, 2])], [x]


def test_first_run_converts_a_result_of_the_wrong_dtype_and_keeps_converting():
    fn, specs, args = _add_program()
    plan, program = _plan(fn, specs, args, _fake_backend(lambda a, b: np.add(a, b, dtype=np.float64)))
    expected = (args[0].numpy() + np.float32(1)) * np.float32(2)
    for _ in range(4):
        (out,), _ = _run(plan, program, args)
        _same(out, expected)
    assert [s.fix for s in plan.steps if s.op.name == "add"] == ["conform"]
    assert "conform(" in plan.source


def test_first_run_refuses_a_result_of_the_wrong_shape():
    fn, specs, args = _add_program()
    plan, program = _plan(fn, specs, args, _fake_backend(lambda a, b: np.add(a, b)[:1]))
    with pytest.raises(AssertionError, match=r"add produced shape \[1, 2\] but its rule says \[3, 2\]"):
        _run(plan, program, args)
    assert not plan.checked  # the next run checks again
    with pytest.raises(AssertionError):
        _run(plan, program, args)


def test_after_the_first_run_kernels_are_called_unchecked():
    fn, specs, args = _add_program()
    calls = []

    def add(a, b):
        calls.append(1)
        return np.add(a, b) if len(calls) == 1 else np.add(a, b)[:1]  # wrong only after the check

    plan, program = _plan(fn, specs, args, _fake_backend(add))
    (first,), _ = _run(plan, program, args)
    (second,), _ = _run(plan, program, args)
    assert first.shape == (3, 2) and second.shape == (1, 2)  # a trusted kernel is not checked again


def test_numpy_scalars_from_a_kernel_become_arrays():
    fn = lambda a: a.sum() + 1  # 0-d operands: NumPy ufuncs give NumPy scalars
    args = [verigrad.tensor(np.ones((2, 3), np.float32))]
    plan, program = _plan(fn, [a.spec for a in args], args)
    for _ in range(4):
        (out,), _ = _run(plan, program, args)
        assert type(out) is np.ndarray
        _same(out, fn(*args).numpy())


def test_a_backends_own_kernel_for_a_composite_op_is_used_not_its_decomposition():
    def fn(x):
        return x.softmax(-1) * 2

    args = [verigrad.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))]
    calls = []

    def softmax(x, axis):
        calls.append(axis)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    fake = Backend("fake-for-tests", "a backend made by a test")
    fake.register("softmax", softmax)
    plan, program = _plan(fn, [a.spec for a in args], args, fake)
    assert [s.op.name for s in plan.steps] == ["softmax", "mul"]
    _run(plan, program, args)
    assert calls == [1]
    plan, program = _plan(fn, [a.spec for a in args], args)  # the reference backend: inlined
    assert "softmax" not in [s.op.name for s in plan.steps]


def test_a_decomposition_that_cannot_be_traced_runs_eagerly_in_the_plan():
    from verigrad.ops import REGISTRY as OPS
    from verigrad.ops import Op

    def decompose(x):
        if not isinstance(x.payload, np.ndarray):  # reads data: it only runs eagerly
            raise TypeError("needs data")
        return x * float(np.abs(x.payload).max())

    op = Op(
        "test_scale_by_max",
        shape=lambda s: s,
        dtype=lambda d: d,
        decompose=decompose,
        vjp=lambda g, out, x: (g,),  # a vjp keeps the op whole in the trace
    )
    try:
        args = [verigrad.tensor(np.array([[1.0, -3.0], [2.0, 0.5]], np.float32))]
        plan, program = _plan(op, [a.spec for a in args], args)
        assert [s.op.name for s in plan.steps] == ["test_scale_by_max"]
        for _ in range(4):
            (out,), _ = _run(plan, program, args)
            _same(out, op(*args).numpy())
    finally:
        OPS.pop("test_scale_by_max")


def test_decompositions_are_cached_only_under_keys_that_tell_params_apart():
    from verigrad.ir.passes.lower import param_key

    assert param_key(0.0) != param_key(-0.0)
    assert len({param_key(1), param_key(1.0), param_key(True)}) == 3
    assert param_key((1, (2.5, "a"))) == param_key((1, (2.5, "a")))
    with pytest.raises(TypeError):
        param_key([1, 2])


# one plan per binding of the symbols -----------------------------------------------------------
def test_plans_are_reused_per_binding():
    f = verigrad.compile(lambda x: (x * 2).relu().sum(axis=1))
    for rows in (4, 4, 8, 4, 8, 3):
        x = verigrad.tensor(np.ones((rows, 5), np.float32))
        _same(f(x).numpy(), np.full(rows, 10, np.float32))
    assert f.stats() == {"traces": 1, "plans": 3, "hits": 3}


def test_plan_source_reads_as_one_line_per_kernel_call():
    fn, specs, args = _add_program()
    plan, program = _plan(fn, specs, args)
    plan.generate_after = 1
    _run(plan, program, args)
    body = [ln for ln in plan.source.splitlines()[1:] if "=" in ln and "return" not in ln]
    assert len(body) == plan.instructions == 2
    assert body[0].strip().endswith("# add") and body[1].strip().endswith("# mul")


# fast kernels give their reference's exact results ---------------------------------------------
def _fast_cases() -> list[Any]:
    return [pytest.param(name, id=name) for name, op in OPS.items() if op.fast is not None and op.samples]


@pytest.mark.parametrize("name", _fast_cases())
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fast_kernel_equals_reference(name: str, dtype: Any) -> None:
    op = OPS[name]
    used = 0
    for sample in op.samples(np.random.default_rng(0)):
        arrays = [np.asarray(a) for a in sample.args]
        arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
        tensors = [verigrad.from_numpy(a.copy()) for a in arrays]
        params = dict(sample.params)
        if op.canonical_params is not None:
            params = op.canonical_params(*(t.spec for t in tensors), **params)
        out = op.spec(*tensors, **params)
        kernel = op.fast(out.dtype, tuple(t.dtype for t in tensors), **params)
        if kernel is None:
            continue
        with np.errstate(all="ignore"):
            expected = op.reference(*arrays, **params)
            actual = kernel(*arrays)
        assert type(actual) is type(expected)
        _same(actual, expected)
        used += 1
    assert used, f"{name}: no sample took the fast kernel"


# in place: a ufunc step writes into an input that dies there, with the same bits ----------------
def _chain(a, b):
    """Element-wise steps in a row (each may write into the last one's array), a broadcast operand,
    and intermediates read later, through a view, or returned: those must not be overwritten."""
    t = a + 1
    kept = t * b  # returned: never written into
    u = (kept - 0.5).exp() * 3
    view = u[:, 1:4]  # a view of u, read after the next step
    w = u / 2
    v = (w[:, :3] + view).tanh() * w.max()
    return v, kept, verigrad.ops.maximum(a * 2, 0.25) + b.sum()  # the op lifts a number


def _chain_args(shape=(5, 7)):
    rng = np.random.default_rng(3)
    return [
        verigrad.tensor(rng.standard_normal(shape, dtype=np.float32)),
        verigrad.tensor(rng.standard_normal(shape[1:], dtype=np.float32)),
    ]


def test_an_elementwise_chain_runs_in_place_with_the_same_bits():
    args = _chain_args()
    before = [a.numpy().copy() for a in args]
    expected = [e.numpy() for e in _chain(*args)]
    results = {}
    for inplace in (True, False):
        plan, program = _plan(_chain, [a.spec for a in args], args)
        plan.inplace = inplace
        results[inplace] = [_run(plan, program, args)[0] for _ in range(5)]  # checked, loop, generated
        assert bool(plan.inplace_steps) == inplace
        if inplace:
            assert all(f"out=x{s.into})" in plan.source for s in plan.inplace_steps)
    for on, off in zip(results[True], results[False]):
        for a, b, e in zip(on, off, expected):
            _same(a, b)
            _same(a, e)
    for a, b in zip(args, before):
        _same(a.numpy(), b)  # the inputs are never written


def test_an_inplace_step_writes_into_its_inputs_array():
    args = _chain_args()
    fn = lambda a: ((a + 1) * 2).sqrt() - 1  # add allocates; mul, sqrt and sub write into its array
    plan, program = _plan(fn, [a.spec for a in args[:1]], args[:1])
    made = []
    add = plan.steps[0].kernel
    assert add is np.add
    plan.steps[0].kernel = lambda *arrays: made.append(add(*arrays)) or made[-1]
    for _ in range(5):
        (out,), _ = _run(plan, program, args[:1])
        _same(out, fn(*args[:1]).numpy())
    assert [s.op.name for s in plan.inplace_steps] == ["mul", "sqrt", "sub"]
    assert out is made[-1] and not np.shares_memory(out, made[-2])  # one array per run, reused in it
    assert not any(np.shares_memory(out, a.payload) for a in args)


def test_no_step_writes_into_what_is_read_later_or_returned():
    """The plan's own liveness: a slot written into is never read again, nor returned."""
    plan, _ = _cnn_plan()
    assert plan.inplace_steps
    kept = set(plan.output_slots) | set(plan.update_slots.values()) | set(plan.input_slots)
    program = plan.program
    names = [v.name for v in program.inputs]
    written = 0
    for k, step in enumerate(plan.steps):
        if step.into is None:
            continue
        assert step.into not in plan.consts
        assert all(step.into not in later.ins for later in plan.steps[k + 1 :]), step
        if step.into in plan.input_slots:  # an optimizer's update, into the tensor it updates
            name = names[plan.input_slots.index(step.into)]
            assert plan.input_slots.index(step.into) >= program.n_args and plan.update_slots[name] == step.out
            written += 1
            continue
        assert step.into not in kept
        producer = next(s for s in plan.steps if s.out == step.into)
        assert isinstance(producer.kernel, np.ufunc)  # an array a ufunc allocated in this run
    # every parameter, moment and step count is updated in place (a count's sum of no dimensions is
    # a NumPy scalar; into `out=` it is the count's own array)
    assert written == len(plan.update_slots) == 25
    assert any(n.endswith("steps") for n in plan.update_slots)


def test_other_layouts_than_the_first_runs_turn_in_place_off():
    n = verigrad.dims("n")
    fn = lambda a: ((a + 1) * 2).exp()
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    plan, _ = _plan(fn, [verigrad.spec([n, 4])], [verigrad.tensor(x)])
    expected = fn(verigrad.tensor(x)).numpy()
    for k, array in enumerate((x, x, x, np.asfortranarray(x), x, x)):
        (out,), _ = plan.run([array])
        _same(out, expected)
        assert out.strides == np.add(array, 1).strides  # the layout an allocated result has
        assert bool(plan.inplace_steps) == (k < 3)  # turned off by the Fortran-ordered argument


def _decay_step(p, g):
    """An update of a captured tensor from itself and an argument (a fused group on the cpu backend),
    and a result that reads the argument after the update."""

    def step(x):
        p.assign((p * 0.9 + x * 0.1).sqrt())
        return (x * g).sum()

    return step


def _written_into_inputs(plan: Plan) -> list[tuple[int, int]]:
    return [(s.into, s.out) for s in plan.inplace_steps if s.into in plan.input_slots]


def test_an_update_is_written_into_its_tensor_with_the_same_bits():
    rng = np.random.default_rng(4)
    start = rng.random(20000, dtype=np.float32)  # over the cpu backend's ufunc_below: its fused kernel
    p, p_eager, g = verigrad.tensor(start), verigrad.tensor(start), verigrad.tensor(start[::-1].copy())
    array = p.payload
    compiled, eager = verigrad.compile(_decay_step(p, g)), _decay_step(p_eager, g)
    for _ in range(5):
        x = verigrad.tensor(rng.random(20000, dtype=np.float32))
        _same(compiled(x).numpy(), eager(x).numpy())
        _same(p.numpy(), p_eager.numpy())
    (plan,) = compiled._plans.values()
    (name,) = plan.update_names
    assert _written_into_inputs(plan) == [(plan.input_slots[-2], plan.update_slots[name])]
    assert p.payload is array  # the tensor's own array, updated in place: nothing to copy back


def test_an_update_is_not_written_in_place_when_an_argument_shares_its_memory():
    """An argument that is the updated tensor's own array: writing the update into it would change
    what the step reads afterwards, so from that run on the plan writes into no input."""
    rng = np.random.default_rng(5)
    start = rng.random(20000, dtype=np.float32)
    p, p_eager, g = verigrad.tensor(start), verigrad.tensor(start), verigrad.tensor(start[::-1].copy())
    compiled, eager = verigrad.compile(_decay_step(p, g)), _decay_step(p_eager, g)
    for k in range(6):
        x = verigrad.tensor(rng.random(20000, dtype=np.float32))
        x, x_eager = (verigrad.from_numpy(p.payload), verigrad.tensor(p_eager.numpy())) if k >= 3 else (x, x)
        _same(compiled(x).numpy(), eager(x_eager).numpy())
        _same(p.numpy(), p_eager.numpy())
        (plan,) = compiled._plans.values()
        assert bool(_written_into_inputs(plan)) == (k < 3)


def test_in_place_is_rechecked_when_a_captured_array_changes():
    """What a run checks of the captured tensors' arrays is kept while they are the same objects; one
    replaced by another written one (two tensors on one array) turns the check false, as does an
    argument sharing a written array's memory."""
    rng = np.random.default_rng(6)
    start = rng.random(20000, dtype=np.float32)
    p, g = verigrad.tensor(start), verigrad.tensor(start[::-1].copy())
    with verigrad.backend("cpu"):
        compiled = verigrad.compile(_decay_step(p, g))
        for _ in range(3):
            compiled(verigrad.tensor(rng.random(20000, dtype=np.float32)))
    (plan,) = compiled._plans.values()
    assert plan._written
    x = rng.random(20000, dtype=np.float32)
    arrays = [x] + [t.payload for t in plan.program.captured]
    assert plan._inplace_holds(arrays)
    (w,) = plan._written
    other = next(i for i in range(1, len(arrays)) if i != w)
    swapped = list(arrays)
    swapped[other] = arrays[w]  # another captured tensor on the written array
    assert not plan._inplace_holds(swapped)
    assert plan._inplace_holds(arrays)
    view = arrays[w][:]
    assert view.strides == x.strides and not plan._inplace_holds([view, *arrays[1:]])  # an argument on it


def _adam_steps(backend: str, steps: int = 6) -> tuple[list, list, Any]:
    """Adam on one parameter of 20,000 elements (over the cpu backend's `ufunc_below`, so its update's
    fused groups get kernels), compiled on `backend`: the losses, the final state, the plan."""
    rng = np.random.default_rng(7)
    with verigrad.backend(backend):
        p = verigrad.tensor(rng.standard_normal(20000).astype(np.float32), requires_grad=True)
        opt = Adam([p], lr=1e-2)

        def step(x: Any) -> Any:
            loss = (p * x).sum() + (p * p).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        compiled = verigrad.compile(step)
        losses = [compiled(verigrad.tensor(rng.standard_normal(20000).astype(np.float32)))]
        (plan,) = compiled._plans.values()
        plan.generate_after = 4  # the checked run, the loop, then the generated function
        for _ in range(steps - 1):
            losses.append(compiled(verigrad.tensor(rng.standard_normal(20000).astype(np.float32))))
    state = [p.numpy().copy()] + [t.numpy().copy() for _, t in opt.state_tensors()]
    return [loss.numpy().copy() for loss in losses], state, plan


@needs_cc
def test_members_a_backend_cannot_fuse_computed_from_one_element_values_are_hoisted(monkeypatch) -> None:
    """Adam where the cpu backend may not fuse pow (as where the C library's pow is not NumPy's, on
    AVX-512 machines): the bias corrections, computed from the 0-d step count, become steps of their own,
    and the rest of the update is still fused, its three groups one merged call; the reference's bits."""
    from verigrad.backends.cpu import fused

    real = fused.libm_members
    monkeypatch.setattr(fused, "_LIBM", {})
    monkeypatch.setattr(fused, "libm_members", lambda b: real(b) - {("pow", "f32"), ("pow", "f64")})
    losses, state, plan = _adam_steps("cpu")
    expected_losses, expected_state, _ = _adam_steps("reference")
    for a, b in zip(losses + state, expected_losses + expected_state):
        _same(a, b)
    pows = [step for step in plan.steps if step.op.name == "pow"]
    assert len(pows) == 2 and all(step.spec.shape == () for step in pows)  # 0.9**t and 0.999**t
    (merged,) = [call for call in plan.calls if isinstance(call, Merged)]
    assert len(merged.parts) == 3 and all(m.name != "pow" for m in merged.op.group.ops)


@needs_cc
@pytest.mark.parametrize("inplace", [True, False])
def test_an_adam_update_is_one_merged_call_with_the_reference_bits(inplace: bool, monkeypatch) -> None:
    """The new moments and the new parameter, three fused groups where the last reads the others'
    results, run as one kernel call after the first run (written into the tensors' own arrays, or
    into new ones with in place off); the bits are the reference backend's."""
    monkeypatch.setattr(Plan, "inplace", inplace)
    losses, state, plan = _adam_steps("cpu")
    expected_losses, expected_state, _ = _adam_steps("reference")
    for a, b in zip(losses + state, expected_losses + expected_state):
        _same(a, b)
    (merged,) = [call for call in plan.calls if isinstance(call, Merged)]
    assert len(merged.parts) == 3 and len(plan.calls) == len(plan.steps) - 2
    moments = [
        plan.update_slots[name] for name in plan.update_names if name.endswith(("exp_avg", "exp_avg_sq"))
    ]
    assert set(merged.outs[:2]) == set(moments) and len(moments) == 2
    captured = set(plan.input_slots[plan.program.n_args :])
    assert all((into in captured) == inplace for into in merged.intos)
    assert "out=(" in plan.source


def _cnn_plan(batch: int = 8):
    """A compiled Adam training step of a small digits CNN, run three times; its plan."""
    verigrad.manual_seed(0)
    model = verigrad.models.digits_cnn(8, 8, channels=(4, 8))
    opt = Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    step = training_step(model, opt, loss_fn)

    compiled = verigrad.compile(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        compiled(
            verigrad.tensor(rng.random((batch, 1, 8, 8), dtype=np.float32)),
            verigrad.tensor(rng.integers(0, 10, batch)),
        )
    (plan,) = compiled._plans.values()
    return plan, model


def _cnn_training(batches: list, backend: str = "reference") -> tuple[list, list, Plan]:
    """A digits CNN trained with Adam by a compiled step on `batches` (the arguments checked unwritten
    after each): the losses, the parameters and optimizer state after, and the plan."""
    verigrad.manual_seed(0)
    model = verigrad.models.digits_cnn(8, 8, channels=(4, 8))
    opt = Adam(model.parameters(), lr=1e-2)
    compiled = verigrad.compile(training_step(model, opt, nn.CrossEntropyLoss()))
    losses = []
    with verigrad.backend(backend):
        for k, (x, y) in enumerate(batches):
            xt, yt = verigrad.tensor(x), verigrad.tensor(y)
            losses.append(compiled(xt, yt).numpy().copy())
            _same(xt.numpy(), x)  # the arguments are never written
            if k == 0:
                (plan,) = compiled._plans.values()
                plan.generate_after = 3  # the checked run, the loop, then the generated function
    state = [p.numpy().copy() for p in model.parameters()] + [
        t.numpy().copy() for _, t in opt.state_tensors()
    ]
    return losses, state, plan


def _cnn_batches(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.random((8, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, 8)) for _ in range(5)]


def test_cnn_adam_training_runs_in_place_with_the_same_bits(monkeypatch):
    batches = _cnn_batches(1)
    runs = []
    for inplace in (True, False):
        monkeypatch.setattr(Plan, "inplace", inplace)
        losses, state, plan = _cnn_training(batches)
        assert bool(plan.inplace_steps) == inplace
        runs.append((losses, state))
    (l_on, s_on), (l_off, s_off) = runs
    for a, b in zip(l_on + s_on, l_off + s_off):
        _same(a, b)
    assert len({float(loss) for loss in l_on}) == len(batches)  # the steps did change the model


@needs_cc
def test_small_parameters_updates_are_merged_with_the_same_bits(monkeypatch):
    """Parameters smaller than the cpu backend's `ufunc_below`: their update groups keep their fused
    kernels (not member by member) so that each parameter's update is one merged call; the bits are
    those of the same steps unmerged."""
    batches = _cnn_batches(3)
    runs = []
    for merge in (True, False):
        monkeypatch.setattr(Plan, "merge", merge)
        losses, state, plan = _cnn_training(batches, "cpu")
        merged = [call for call in plan.calls if isinstance(call, Merged)]
        assert len(merged) == (6 if merge else 0)  # one per parameter
        assert all(len(call.parts) == 3 for call in merged)
        assert ("out=(" in plan.source) == merge
        runs.append(losses + state)
    for a, b in zip(*runs):
        _same(a, b)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ufuncs_give_the_same_bits_into_their_input(dtype: Any) -> None:
    """What in place relies on: `ufunc(a, b, a)` equals the allocated `ufunc(a, b)`, bit for bit."""
    rng = np.random.default_rng(2)
    for size in (1, 7, 16, 33, 1000):
        a = (rng.standard_normal(size) * 3).astype(dtype)
        b = (rng.standard_normal(size) * 3).astype(dtype)
        with np.errstate(all="ignore"):
            for f in (np.exp, np.log, np.sqrt, np.tanh, np.sin, np.cos, np.negative, np.abs):
                x = a.copy()
                _same(f(x, out=x), f(a))
            for f in (np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum, np.power):
                x = a.copy()
                _same(f(x, b, out=x), f(a, b))
                y = b.copy()
                _same(f(a, y, out=y), f(a, b))


def test_a_run_drops_each_result_after_its_last_reader():
    """A chain of products: each result is read by the next call alone, so a run (the checked one, the
    loop's, as eager mode) holds two or three of them at a time, not the whole chain to its end; the
    bits are eager's."""
    import tracemalloc

    rng = np.random.default_rng(0)
    x = verigrad.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    weights = [verigrad.tensor(rng.standard_normal((256, 256)).astype(np.float32) / 16) for _ in range(10)]

    def chain(x):
        for w in weights:
            x = x @ w
        return x.sum()

    def peak(call) -> tuple[Any, int]:
        tracemalloc.start()
        try:
            return call(), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    plan, program = _plan(chain, (x.spec,), (x,))
    plan.replay = False
    _, product = peak(lambda: x @ weights[0])  # one product's result and scratch
    one = 256 * 256 * 4
    for _ in range(2):  # the checked run, then the loop's
        ((out,), _), held = peak(lambda: _run(plan, program, [x]))
        assert held < product + 2 * one, f"a run held {(held - product) / one:.1f} more products"
        _same(out, chain(x).payload)


def test_every_update_of_a_trained_mlp_is_written_in_place():
    """The second layer's weight gradient is a product of the first layer's output, itself a product of
    the first weight, read by the second update after the first: a product allocates its result (the
    first run checks it), so it does not keep the first weight from being written in place (it was
    taken to be a possible view of it, and the weight was copied back after the run). Every update goes
    into its own array; the bits are eager's."""
    rng = np.random.default_rng(0)
    batches = [(rng.random((16, 32), dtype=np.float32), rng.integers(0, 4, 16)) for _ in range(3)]
    runs = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64, bias=False), nn.Linear(64, 4, bias=False))
        step = training_step(model, SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss())
        run = verigrad.compile(step) if compiled else step
        arrays = [p.payload for p in model.parameters()]
        losses = [run(verigrad.tensor(x), verigrad.tensor(y)).numpy().copy() for x, y in batches]
        runs.append((losses, [p.numpy().copy() for p in model.parameters()]))
    (plan,) = run._plans.values()
    assert len(_written_into_inputs(plan)) == len(plan.update_slots)  # the weights, biases, step counts
    assert all(p.payload is a for p, a in zip(model.parameters(), arrays))  # nothing copied back
    for eager, planned in zip(*runs):
        for a, b in zip(eager, planned):
            _same(b, a)


def test_a_kernel_that_gives_its_operand_turns_in_place_off(monkeypatch):
    """The memory plan takes a product's result to be a new array. A kernel that breaks that (here a
    "product" that returns a view of its second operand, the weight) is found by the first run, and the
    plan then writes into nothing: the weight's update, written in place, would have changed the
    product read after it."""
    from verigrad.ir import plan as plan_module

    rng = np.random.default_rng(1)
    w = verigrad.tensor(rng.random((8, 8), dtype=np.float32))

    def step(x):
        h = x @ w
        w.copy_(w * 0.5)
        return h * 2.0

    real = plan_module.kernel_choice.choose

    def choose(backend, op, *rest):
        if op.name == "matmul":
            return (lambda a, b: b[...]), None  # a view of w
        return real(backend, op, *rest)

    monkeypatch.setattr(plan_module.kernel_choice, "choose", choose)
    compiled = verigrad.compile(step)
    x = verigrad.tensor(rng.random((8, 8), dtype=np.float32))
    for _ in range(3):
        before = w.numpy().copy()
        _same(compiled(x).numpy(), before * np.float32(2.0))  # the "product" is the weight before the step
        _same(w.numpy(), before * np.float32(0.5))
    (plan,) = compiled._plans.values()
    assert plan.inplace_steps == []
