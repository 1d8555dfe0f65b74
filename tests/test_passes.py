"""The IR passes: each one's effect on a small program (printed before and after, against a golden file
in tests/golden/; `VERIGRAD_UPDATE_GOLDEN=1` rewrites them), the same bits before and after on the
reference backend, `verify` after every pass, and the whole pipeline on a CNN training step."""

from __future__ import annotations

import difflib
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import Backend, get_backend
from verigrad.cli.trainer import training_step
from verigrad.ir import IRError
from verigrad.ir.passes import (
    PIPELINE,
    constfold,
    cse,
    dce,
    fuse,
    loss_step,
    lower,
    memplan,
    optimize,
    simplify,
)
from verigrad.ir.passes.simplify import refines
from verigrad.ir.plan import Plan, bind
from verigrad.models import digits_cnn
from verigrad.nn import CrossEntropyLoss
from verigrad.ops import REGISTRY
from verigrad.optim import Adam

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("VERIGRAD_UPDATE_GOLDEN") == "1"


def golden(name: str, *programs) -> None:
    """The programs' printed forms, one after another, compared with tests/golden/NAME.txt."""
    text = "\n\n".join(str(p) for p in programs) + "\n"
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no golden file {path}; run with VERIGRAD_UPDATE_GOLDEN=1 to write it"
    expected = path.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "now"))
    assert text == expected, f"{path.name} differs (VERIGRAD_UPDATE_GOLDEN=1 rewrites it):\n{diff}"


def names(program) -> Counter:
    return Counter(i.name for i in program)


def execute(program, *arrays: np.ndarray) -> list[np.ndarray]:
    """The program run by the executor on the active (reference) backend: outputs, then updates."""
    args = [vg.from_numpy(a) for a in arrays]
    plan = Plan(program, bind(program, args), get_backend())
    outputs, updates = plan.run([*arrays, *(t.payload for t in program.captured)])
    return [*outputs, *(updates[k] for k in sorted(updates))]


def same_bits(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes(), (x, y)


def check(run, program, *arrays):
    """`run(program)`, verified, giving the same bits as `program` on `arrays`."""
    after = run(program).verify()
    same_bits(execute(program, *arrays), execute(after, *arrays))
    return after


# dead code -------------------------------------------------------------------------------------
def test_dce_drops_what_no_result_needs(rng):
    def f(x):
        unused = (x * 3.0).exp()  # noqa: F841
        y = x + 1.0
        return y.relu()

    p = vg.trace(f, vg.spec([4, 3])).verify()
    after = check(dce.run, p, rng.standard_normal((4, 3)).astype(np.float32))
    golden("dce", p, after)
    assert len(p) - len(after) == 3 and "exp" not in names(after)


# common subexpressions -------------------------------------------------------------------------
def test_cse_merges_repeats_and_equal_constants(rng):
    n = vg.dims("n")

    def f(x):
        a = (x * 2.0).exp()
        b = (x * 2.0).exp()  # the same twice: merged, with its constant
        c = x + 0.0
        d = x + -0.0  # -0.0 is another constant
        e = x.sum(axis=1) + x.sum(axis=0, keepdim=True).sum()  # other params: kept
        g = vg.ops.pad(x, ((0, 1),), 0.0) - vg.ops.pad(x, ((0, 1),), -0.0)  # so are these
        return a + b + c + d, e, g

    p = vg.trace(f, vg.spec([n, 3])).verify()
    after = check(cse.run, p, rng.standard_normal((5, 3)).astype(np.float32))
    golden("cse", p, after)
    before, now = names(p), names(after)
    assert before["mul"] - now["mul"] == 1 and before["exp"] - now["exp"] == 1
    assert before["const"] - now["const"] == 1  # the second 2.0; 0.0 and -0.0 both stay
    zeros = [i.params["value"] for i in after if i.name == "const" and i.params["value"] == 0]
    assert sorted(np.signbit(z).item() for z in zeros) == [False, True]
    assert now["sum"] == before["sum"] == 3 and now["pad"] == before["pad"] == 2


def test_cse_merges_random_ops_only_with_the_same_seed():
    def f(x):
        a = vg.rand(2, 3, generator=vg.Generator(7))
        b = vg.rand(2, 3, generator=vg.Generator(7))  # the same seed: the same bits
        c = vg.rand(2, 3)  # the default generator: another seed
        d = vg.rand(2, 3)
        return x + a + b + c + d

    p = vg.trace(f, vg.spec([2, 3])).verify()
    seeds = [i.params["seed"] for i in p if i.name == "rand"]
    assert len(seeds) == 4 and len(set(seeds)) == 3
    after = check(cse.run, p, np.zeros((2, 3), np.float32))
    assert names(after)["rand"] == 3


# simplification --------------------------------------------------------------------------------
def test_simplify_removes_identities_and_composes_movement(rng):
    n = vg.dims("n")

    def f(x, w):
        a = x.exp()  # computed here, so compact: the identities below may go
        b = (1.0 * (a * 1.0) / 1.0 - 0.0).cast("f32")
        c = b.permute((1, 0)).permute((1, 0))  # the identity
        d = c.reshape((2, 2, n)).reshape((4, n))  # [n,4] -> [2,2,n] is no split: kept
        e = d.reshape((4, n)).broadcast_to((4, n))
        f_ = e.reshape((2, 2, n)).reshape((4, 1, n)).reshape((2, 2, 1, n))  # splits: composed
        g = x.permute((1, 0)).permute((1, 0)).permute((1, 0))  # composed to one
        return f_.sum(axis=3) + 0.0, g @ w

    p = vg.trace(f, vg.spec([n, 4]), vg.spec([n, 3])).verify()
    x = rng.standard_normal((5, 4)).astype(np.float32)
    after = check(simplify.run, p, x, rng.standard_normal((5, 3)).astype(np.float32))
    tidy = check(dce.run, after, x, rng.standard_normal((5, 3)).astype(np.float32))
    golden("simplify", p, after, tidy)
    before, now = names(p), names(tidy)
    for op in ("mul", "div", "sub", "cast", "broadcast_to"):
        assert before[op] and not now[op], op
    assert before["permute"] == 5 and now["permute"] == 1
    assert before["reshape"] == 6 and now["reshape"] == 3  # [n,4] -> [2,2,n] -> [4,n], then one split
    assert now["add"] == 1  # `sum + 0.0`: the sum could be -0.0


def test_simplify_keeps_x_plus_zero_where_x_may_be_negative_zero():
    def f(x):
        m = -x  # may be -0.0
        a = x.abs()  # never -0.0
        sums = [m + 0.0, a + 0.0, m + -0.0, m - 0.0, m - -0.0, 0.0 + m, -0.0 + m]
        return tuple(-s for s in sums)  # read by a neg each (a result itself is never replaced)

    p = vg.trace(f, vg.spec([4])).verify()
    x = np.array([0.0, -0.0, 1.5, -2.0], np.float32)
    after = check(simplify.run, p, x)
    producer = {i.out.id: i for i in after}
    reads = [producer[producer[o.id].args[0].id].name for o in after.outputs]
    assert reads == ["add", "abs", "neg", "neg", "sub", "add", "neg"]
    # what removing `m + 0.0` would change: -(-0.0 + 0.0) is -0.0, but -(-0.0) is +0.0 (x itself)
    assert execute(p, x)[0].tobytes() != x.tobytes()

    def g(i):
        return ((i * 3) + 0) * 1 - 0 + 5

    ints = vg.trace(g, vg.spec([3], "i64")).verify()
    after = check(simplify.run, ints, np.array([-1, 0, 7]))
    assert names(after)["mul"] == 1 and names(after)["add"] == 1 and names(after)["sub"] == 0


def test_simplify_leaves_layouts_alone():
    """`x * 1` on a broadcast x would hand the sum a zero-strided view instead of a fresh array, and
    NumPy sums those in another order: other bits. Such x are not compact, so the multiply stays."""
    row = np.random.default_rng(0).standard_normal((1, 300))
    view = np.broadcast_to(row, (64, 300))
    assert np.sum(view, axis=1).tobytes() != np.sum(np.array(view), axis=1).tobytes()

    def f(r):
        return (r.broadcast_to((64, 300)) * 1.0).sum(axis=1), (r.exp() * 1.0).sum(axis=1)

    p = vg.trace(f, vg.spec([1, 300], "f64")).verify()
    after = check(simplify.run, p, row)
    assert names(p)["mul"] == 2 and names(after)["mul"] == 1  # exp's result is fresh: its multiply goes


def test_simplify_never_replaces_a_result():
    def f(x):
        e = x.exp()
        return e * 1.0, e.T.T, e.reshape((1, 2, 3))

    p = vg.trace(f, vg.spec([2, 3])).verify()
    after = check(simplify.run, p, np.ones((2, 3), np.float32))
    assert [after_producer(after, o) for o in after.outputs] == ["mul", "permute", "reshape"]
    assert names(dce.run(after))["permute"] == 1  # composed, to the identity, but kept: a result


def after_producer(program, v) -> str:
    return next(i.name for i in program if i.out is v)


def test_refines_is_a_split_of_every_dimension():
    n = vg.dims("n")
    assert refines((n * 4, 3), (n, 4, 3)) and refines((4, n), (2, 2, 1, n)) and refines((1, 6), (6,))
    assert not refines((4, n), (2, 2, 1)) and not refines((6, 2), (4, 3)) and not refines((2, 3), (6,))
    assert not refines((n, 4), (4, n))


def test_a_reshape_after_a_split_has_the_strides_of_one_reshape(rng):
    """The fact the reshape rule rests on, checked on NumPy views of every kind."""
    x0 = rng.standard_normal((4, 6))
    views = [x0, x0.T.copy().T, x0[::1, ::2].repeat(2, 1), np.broadcast_to(x0[:1], (4, 6)), x0[:, :6]]
    views += [np.asfortranarray(x0), rng.standard_normal((8, 12))[::2, ::2]]
    for x in views:
        for split in [(2, 2, 6), (4, 2, 3), (2, 2, 1, 3, 2), (4, 1, 6)]:
            assert refines(x.shape, split)
            inner = x.reshape(split)
            assert np.shares_memory(inner, x)
            for target in [(24,), (6, 4), (2, 12), (4, 6), (3, 8), (2, 3, 4)]:
                a, b = inner.reshape(target), x.reshape(target)
                assert np.shares_memory(a, x) == np.shares_memory(b, x)
                sized = [(s, t) for d, s, t in zip(a.shape, a.strides, b.strides) if d > 1]
                assert all(s == t for s, t in sized), (x.strides, split, target)


# constant folding ------------------------------------------------------------------------------
def test_constfold_folds_shape_arithmetic_and_const_only_instructions(rng):
    n = vg.dims("n")

    def f(x):
        rows = vg.ops.numel_of(x, axis=(1,))  # 4: known
        all_ = vg.ops.numel_of(x, axis=(0, 1))  # 4 n: known only for a binding
        steps = vg.arange(3).cast("f32").reshape((3, 1))  # const-only
        big = vg.zeros(40, 40)  # 1600 elements: left to run
        noise = vg.rand(3, 1, generator=vg.Generator(3))  # random: left to run
        return x.sum() / rows / all_ + steps.sum() + big.sum() + noise.sum() + vg.full((n,), 2.0).sum()

    p = vg.trace(f, vg.spec([n, 4])).verify()
    x = rng.standard_normal((5, 4)).astype(np.float32)
    after = check(constfold.run, p, x)
    bound = check(lambda q: constfold.run(q, {"n": 5}), p, x)
    golden("constfold", p, after)
    assert names(p)["numel_of"] == 2 and names(after)["numel_of"] == 1 and "numel_of" not in names(bound)
    assert not {"arange", "cast"} & set(names(after)) and names(after)["reshape"] == 0
    assert names(after)["full"] == 2 and names(after)["rand"] == 1  # the big one, and [n] of 2.0
    assert len(after) == len(p)
    folded = {i.out.id: i.params["value"] for i in after if i.name == "const"}
    counts = [i for i in p if i.name == "numel_of"]
    assert folded[counts[0].out.id].tolist() == 4.0 and folded[counts[0].out.id].dtype == np.float32


def test_constfold_leaves_results_alone():
    p = vg.trace(lambda x: (x + 1.0, vg.ones(2, 2) * 3.0), vg.spec([2]))
    after = check(constfold.run, p, np.zeros(2, np.float32))
    assert after_producer(after, after.outputs[1]) == "mul"  # would hand the caller the program's array
    assert names(after)["full"] == 0  # the ones were folded


# fusion ----------------------------------------------------------------------------------------
def test_fuse_makes_trees_of_elementwise_ops_one_instruction(rng):
    n = vg.dims("n")

    def f(x, y, b):
        h = (x + b).relu()  # b [4] broadcast to [n,4]
        s = h.sum(axis=1)  # h is read twice: it ends a group
        g = (h * 2.0 - y).exp().where(y > 0, 0.0)  # where, a comparison, a constant
        k = (s.reshape((n, 1)).broadcast_to((n, 4)) * g).cast("f64")
        return k, h.max()

    p = vg.trace(f, vg.spec([n, 4]), vg.spec([n, 4]), vg.spec([4])).verify()
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(5, 4), (5, 4), (4,)]]
    after = check(fuse.run, p, *arrays)
    golden("fuse", p, after)
    fused = [i for i in after if i.name == "fused"]
    assert len(fused) == 2 and names(after)["sum"] == 1 and names(after)["max_of_all"] == 1
    assert [i.name for i in after if i.name not in ("const",)] == [
        "fused",  # relu(add(x, b))
        "sum",
        "reshape",
        "fused",  # cast(mul(broadcast_to(s), where(gt(y, 0), exp(sub(mul(h, 2), y)), 0)))
        "max_of_all",  # h.max(): PyTorch's max of every element
    ]
    first, second = fused
    assert [op.name for op in first.op.group.ops] == ["add", "relu"]  # in program order, the root last
    assert {op.name for op in second.op.group.ops} == {
        "mul",
        "sub",
        "exp",
        "gt",
        "where",
        "broadcast_to",
        "cast",
    }
    assert "{relu(add(%0, %2))}" in str(after)


def test_a_bias_add_and_relu_fuse_in_a_training_step():
    """relu's VJP reads its output (relu(x) > 0 exactly where x > 0), so the backward pass does not keep
    the bias add's result and the add and the relu are one fused group of the step."""
    n = vg.dims("n")
    w, b = vg.tensor(np.ones((3, 4), np.float32), requires_grad=True), vg.tensor(np.ones(4, np.float32))
    b.requires_grad = True

    def step(x):
        loss = (x @ w + b).relu().sum()
        loss.backward()
        return loss, w.grad, b.grad

    p = optimize(vg.trace(step, vg.spec([n, 3])))
    fused = [[op.name for op in i.op.group.ops] for i in p if i.name == "fused"]
    assert ["add", "relu"] in fused, fused
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 2.5, -3.0], np.float32)
    deriv = REGISTRY["relu_deriv"].reference
    assert deriv(x).tobytes() == deriv(REGISTRY["relu"].reference(x)).tobytes()


def test_fused_op_is_a_kernel_the_backend_runs_unchanged(rng):
    p = fuse.run(vg.trace(lambda x: (x.exp() + 1.0).sqrt(), vg.spec([3])))
    (instr,) = [i for i in p if i.name == "fused"]
    op = instr.op
    assert op.name == "fused" and not op.is_composite and not op.differentiable
    assert "fused" not in REGISTRY and op not in REGISTRY.values()
    backend = get_backend()
    assert backend.kernel(op, instr.out.spec.dtype) is op.reference
    x = rng.random(3).astype(np.float32)
    want = np.sqrt(np.exp(x.astype(np.float64)).astype(np.float32) + np.float32(1.0))  # f32 exp: f64, rounded
    assert op.reference(x, np.array(1.0, np.float32), **instr.params).tobytes() == want.tobytes()
    fast = op.fast(instr.out.spec.dtype, (vg.f32, vg.f32), **instr.params)
    assert fast(x, np.array(1.0, np.float32)).tobytes() == want.tobytes()
    assert not fuse.backend_absorbs_reductions(backend, vg.f32)

    scalars = fuse.run(vg.trace(lambda t: (t * 2.0).exp(), vg.spec([], "f64")))
    (instr,) = [i for i in scalars if i.name == "fused"]
    out = instr.op.reference(np.array(0.5), np.array(2.0), **instr.params)
    assert type(out) is np.ndarray and out.dtype == np.float64  # NumPy gives scalars: made arrays


def test_fused_rules_are_checked_by_verify():
    p = fuse.run(vg.trace(lambda x, y: (x * y).exp(), vg.spec([2, 3]), vg.spec([3])))
    (instr,) = [i for i in p if i.name == "fused"]
    assert instr.op.spec(*(vg.Tensor(a.spec, None) for a in instr.args), **instr.params) == instr.out.spec
    y = instr.args[1]
    wrong = p.copy([type(instr)(instr.op, (y, y), instr.params, instr.out)])  # [3] * [3] is no [2,3]
    with pytest.raises(IRError, match=r"rules give f32\[3\]"):
        wrong.verify()


# lowering for a backend and a binding ------------------------------------------------------------
def test_lower_inlines_what_the_backend_lacks_with_concrete_sizes():
    from verigrad.backends.reference import reference

    n = vg.dims("n")
    program = optimize(vg.trace(lambda x: (x.softmax(-1) * 2.0 + 1.0).relu(), vg.spec([n, 4])))
    assert {"softmax", "fused"} <= {i.name for i in program}
    lowered = lower.run(program, {"n": 3}, reference).verify()  # no kernel for either here
    names = [i.name for i in lowered]
    assert "softmax" not in names and "fused" not in names and {"exp", "relu"} <= set(names)
    assert [(v.id, v.name, v.spec) for v in lowered.inputs] == [(0, "x", vg.spec([3, 4]))]
    assert lowered.outputs[0].spec == vg.spec([3, 4])  # a member's value: the group was split
    fake = Backend("fake-softmax-for-tests", "a backend made by a test")
    fake.register("softmax", lambda x, axis: x)
    (kept,) = [i for i in lower.run(program, {"n": 3}, fake) if i.name == "softmax"]  # its own kernel
    (traced,) = [i for i in program if i.name == "softmax"]
    assert kept.out.id == traced.out.id and kept.out.spec == vg.spec([3, 4])  # the program's value


# memory planning -------------------------------------------------------------------------------
def test_memplan_by_hand(rng):
    def f(x, w):
        a = x @ w  # [4,8] f32, 128 bytes: buffer 0
        s = a.sum(axis=0)  # [8], 32 bytes: buffer 1 (a is read here, so buffer 0 is free only after)
        v = s.reshape((2, 4))  # a view of buffer 1, which stays live while v is
        b = (x @ w.T).exp()  # the product takes buffer 0; exp runs in it, in place (its input dies)
        c = b.sum()  # 4 bytes: buffer 0 is being read, buffer 1 is v's: a new buffer 2
        return c + v.sum()  # v.sum(): buffer 0 (b died; at least as large); the add: buffer 2, in place

    p = optimize(vg.trace(f, vg.spec([4, 8]), vg.spec([8, 8])), [dce.run, memplan.run], verify=True)
    assert [(i.name, p.buffers.get(i.out.id)) for i in p] == [
        ("matmul", 0),
        ("sum", 1),
        ("reshape", None),  # a view
        ("permute", None),  # a view of an input
        ("matmul", 0),
        ("exp", 0),
        ("sum", 2),
        ("sum", 0),
        ("add", 2),
    ]
    assert p.buffer_bytes == [128, 32, 4]
    assert p.inplace == {p.instrs[5].out.id, p.instrs[8].out.id}
    naive = 128 + 32 + 128 + 128 + 4 + 4 + 4
    assert p.memory({}) == {"planned": 164, "naive": naive, "buffers": 3, "values": 7, "inplace": 2}
    arrays = [rng.random((4, 8)).astype(np.float32), rng.random((8, 8)).astype(np.float32)]
    same_bits(execute(vg.trace(f, vg.spec([4, 8]), vg.spec([8, 8])), *arrays), execute(p, *arrays))


def test_memplan_never_writes_over_inputs_or_through_views(rng):
    n = vg.dims("n")

    def f(x):
        a = x.exp()  # x is an input: not in place
        b = a.permute((1, 0)).exp()  # its input is a view: not in place
        c = (b + b.T.T).exp()  # b dies at the add, but is read there through a view too: not in place
        return c.sum() * 2.0  # exp of the add, and the product of the sum: in place

    p = vg.trace(f, vg.spec([n, 4]))
    planned = optimize(p, [memplan.run], verify=True)
    inplace = {}
    for i in planned:
        inplace.setdefault(i.name, []).append(i.out.id in planned.inplace)
    assert inplace["exp"] == [False, False, True] and inplace["add"] == [False] and inplace["mul"] == [True]
    x = rng.random((5, 4)).astype(np.float32)
    same_bits(execute(p, x), execute(planned, x))
    assert planned.memory({"n": 5}) == {
        # a (then the add and its exp), b; the sum (then the product): b's n*16 bytes may be 0 < 4
        "planned": 2 * 5 * 16 + 4,
        "naive": 4 * 5 * 16 + 2 * 4,
        "buffers": 3,
        "values": 6,
        "inplace": 2,
    }
    golden("memplan", p, memplan.describe(planned))


def cnn_step(optimize: bool, seed: int = 0):
    """A compiled training step (forward, backward, Adam) of a fresh digits CNN, and its model."""
    vg.manual_seed(seed)
    model = digits_cnn()
    optimizer = Adam(model.parameters(), lr=1e-2)
    step = training_step(model, optimizer, CrossEntropyLoss())
    return vg.compile(step, optimize=optimize), model, optimizer


def batches(count: int, size: int = 32):
    rng = np.random.default_rng(5)
    return [
        (vg.tensor(rng.random((size, 1, 8, 8)).astype(np.float32)), vg.tensor(rng.integers(0, 10, size)))
        for _ in range(count)
    ]


def test_the_pipeline_on_a_cnn_training_step():
    step, _, _ = cnn_step(optimize=False)
    x, y = batches(1)[0]
    program = step.program(x, y).verify()
    counts = [len(program)]
    for run in PIPELINE:
        program = run(program).verify()
        counts.append(len(program))
    before, after = names(step.program(x, y)), names(program)
    assert counts[-1] < counts[0] / 2, counts
    assert after["fused"] >= 20 and after["permute"] < before["permute"]
    assert after["const"] < before["const"] / 2 and "arange" not in after and "full" not in after
    # conv2d's VJP forms no gradient for the input image (it needs none): one input gradient, conv2's
    assert before["conv2d_input_grad"] == after["conv2d_input_grad"] == 1
    memory = program.memory({"B": 32})
    # 62%: the backward of max_pool2d and conv2d are single ops (max_pool2d_grad, conv2d_input_grad,
    # conv2d_weight_grad) whose large temporaries (the columns) are not the program's values to reuse
    assert memory["planned"] < 0.65 * memory["naive"] and memory["inplace"] > 0, memory
    again = optimize(program, verify=True)  # the pipeline finds nothing more to do
    assert [i.name for i in again] == [i.name for i in program] and again.buffers == program.buffers


def test_an_optimized_cnn_training_step_gives_the_same_bits():
    runs = []
    for optimized in (False, True):
        step, model, optimizer = cnn_step(optimized)
        losses = [step(x, y).numpy().copy() for x, y in batches(3)]
        state = [t.numpy().copy() for _, t in optimizer.state_tensors()]
        runs.append((losses, [p.numpy().copy() for p in model.parameters()], state))
        assert (names(step.program(*batches(1)[0]))["fused"] > 0) == optimized
    (l0, p0, s0), (l1, p1, s1) = runs
    same_bits(l0, l1)
    same_bits(p0, p1)
    same_bits(s0, s1)
    assert len({loss.item() for loss in l0}) == 3  # the steps did change the model


def test_the_pipeline_order():
    assert [constfold.run, simplify.run, cse.run, dce.run, loss_step.run, fuse.run, memplan.run] == PIPELINE
