"""In-place writes under autograd (verigrad/inplace.py, verigrad/versions.py): gradients by hand, writes
through views, the errors (a leaf, a stale view, memory a node needs changed since), the version counter,
and a fuzz of in-place programs against the same programs written out of place."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verigrad
from verigrad import eager, versions


@pytest.fixture(autouse=True, params=["reference", "cpu"])
def _backend(request: pytest.FixtureRequest):
    """Every test on the reference backend, and on the cpu one with its eager calls in C (vg_eager makes
    the nodes there: each must keep the write clock's reading as Node() does)."""
    with verigrad.backend(request.param) as backend:
        if request.param == "cpu" and not (backend.load() and eager.install_c_calls()):
            pytest.skip("the cpu backend's C calls could not be built here")
        yield


def _x(values=(0.5, -1.0, 2.0)) -> verigrad.Tensor:
    return verigrad.tensor(np.array(values, np.float64), requires_grad=True)


def _grad(t: verigrad.Tensor) -> list[float]:
    return t.grad.tolist()


def test_relu_on_an_activation_by_hand() -> None:
    x = _x()
    h = x * 2.0
    assert h.relu_() is h and h.tolist() == [1.0, 0.0, 4.0]
    h.sum().backward()
    assert _grad(x) == [2.0, 0.0, 2.0]


def test_residual_add_keeps_the_old_values_for_nodes_made_before() -> None:
    x = _x()
    h = x * x
    r = h * 3.0
    h.add_(x)  # h = x^2 + x
    (h * r).sum().backward()  # (x^2 + x) * 3x^2: 12x^3 + 9x^2
    np.testing.assert_allclose(_grad(x), [12 * v**3 + 9 * v**2 for v in (0.5, -1.0, 2.0)], rtol=1e-15)


def test_mul_by_a_tensor_that_requires_grad_gives_both_gradients() -> None:
    x, w = _x(), _x((3.0, 4.0, 5.0))
    y = x * 1.0
    y.mul_(w).mul_(w)  # x w^2
    y.sum().backward()
    assert _grad(x) == [9.0, 16.0, 25.0]
    np.testing.assert_allclose(_grad(w), [2 * 0.5 * 3.0, 2 * -1.0 * 4.0, 2 * 2.0 * 5.0], rtol=1e-15)


def test_a_value_that_requires_grad_written_into_a_constant() -> None:
    v = _x()
    out = verigrad.zeros(2, 3, dtype="f64")
    out[1] = v * v
    out[0, 1:] = v[:2]
    assert out.requires_grad and not out.is_leaf
    (out * out).sum().backward()  # v^4 per element, plus v0^2 + v1^2
    np.testing.assert_allclose(_grad(v), [4 * 0.125 + 1.0, -4.0 - 2.0, 32.0], rtol=1e-15)


def test_writes_through_views_give_the_base_a_new_history() -> None:
    x = verigrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x * 1.0
    y[:, 0].mul_(3.0)  # a column: its elements times 3
    y.view(-1)[4:].add_(y[0, 1:].detach())  # no gradient from the value
    y.t()[2].mul_(2.0)  # the last column again
    y.sum().backward()
    assert _grad(x) == [[3.0, 1.0, 2.0], [3.0, 1.0, 2.0]]


def test_a_view_of_a_view_written_twice() -> None:
    x = _x((1.0, 2.0, 3.0, 4.0))
    y = x * 1.0
    v = y[1:]
    v[1:].mul_(5.0)
    v.mul_(2.0)
    (y * y).sum().backward()  # y = [x0, 2x1, 10x2, 10x3]
    assert _grad(x) == [2.0, 16.0, 600.0, 800.0]
    assert y.tolist() == [1.0, 4.0, 30.0, 40.0]


def test_zero_fill_and_copy_give_the_old_history_zeros() -> None:
    x, v = _x(), _x((7.0, 8.0, 9.0))
    a, b = x * 2.0, x * 3.0
    a.zero_()
    b.copy_(v)
    (a + b).sum().backward()
    assert _grad(x) == [0.0, 0.0, 0.0] and _grad(v) == [1.0, 1.0, 1.0]


def test_a_tensor_written_from_its_own_memory() -> None:
    x = _x((1.0, 2.0, 3.0, 4.0))
    y = x * 1.0
    y.copy_(y)
    with pytest.raises(RuntimeError, match="single memory location"):
        y[1:].copy_(y[:-1])  # overlapping: refused, as PyTorch refuses it
    y[1:].copy_(y[:-1].clone())  # y = [x0, x0, x1, x2]
    y.add_(y)
    assert y.tolist() == [2.0, 2.0, 4.0, 6.0]
    (y * y).sum().backward()
    assert _grad(x) == [16.0, 16.0, 24.0, 0.0]


def test_a_leaf_and_a_view_of_a_leaf_are_refused() -> None:
    w = _x()
    with pytest.raises(RuntimeError, match=r"^a leaf Variable that requires grad is being used in an in-"):
        w.add_(1.0)
    with pytest.raises(RuntimeError, match=r"^a view of a leaf Variable that requires grad"):
        w[1:].mul_(2.0)
    with verigrad.no_grad():
        w.add_(1.0)  # an update outside autograd
    assert w.tolist() == [1.5, 0.0, 3.0] and w.is_leaf


def test_a_value_with_grad_into_a_view_of_a_constant_gives_the_constant_a_history() -> None:
    buf = verigrad.zeros(2, 3, dtype="f64")
    x = _x()
    buf[0].copy_(x)  # as PyTorch's CopySlices: buf takes x's gradient in row 0
    assert buf.requires_grad and buf.tolist() == [[0.5, -1.0, 2.0], [0.0] * 3]
    (buf * buf).sum().backward()
    assert _grad(x) == [1.0, -2.0, 4.0]


def test_a_view_made_before_its_base_was_written_is_made_again_when_written() -> None:
    x = _x()
    y = x * 1.0
    v = y[:2]
    early = v * 1.0  # made from v before the write: v as it was
    y.mul_(2.0)
    v.add_(1.0)  # v's history made again from y as written: y = [2 x0 + 1, 2 x1 + 1, 2 x2]
    assert y.tolist() == [2.0, -1.0, 4.0]
    (y * y + early.sum()).sum().backward()
    assert _grad(x) == [4.0 * 2.0 + 3.0, 4.0 * -1.0 + 3.0, 16.0]


def test_a_view_written_before_and_stale_since_is_refused_when_written_again() -> None:
    y = _x() * 1.0
    v = y[:2]
    v.mul_(2.0)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="verigrad does not regenerate its history"):
        v.add_(1.0)


def test_views_made_before_a_write_through_a_sibling_are_made_again_in_backward() -> None:
    x = _x((1.0, 2.0, 3.0, 4.0))
    y = x * 1.0
    left = y[:2]
    early = left * 3.0  # made before the write: left as it was
    y[1:3].mul_(10.0)  # changes left[1]
    (left.sum() + early.sum()).backward()  # left = [x0, 10 x1] now
    assert _grad(x) == [4.0, 13.0, 0.0, 0.0]
    x = _x((1.0, 2.0, 3.0, 4.0))
    y = x * 1.0
    left = y[:2]
    y[2:].mul_(10.0)  # disjoint: left keeps its history
    (left.sum() + y.sum()).backward()
    assert _grad(x) == [2.0, 2.0, 10.0, 10.0]


def test_a_saved_value_changed_under_no_grad_raises_the_version_error() -> None:
    x = _x()
    y = x.exp()  # its VJP reads y
    with verigrad.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError) as caught:
        y.sum().backward()
    assert str(caught.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.DoubleTensor [3]], which is output 0 of exp, is at version 1; expected version 0 instead."
    )
    assert x.grad is None  # raised before any gradient


def test_an_input_changed_through_an_alias_raises_the_version_error() -> None:
    x, w = _x(), _x((2.0, 3.0, 4.0))
    y = x * 1.0
    z = y * w
    y.detach()[0] = 7.0
    with pytest.raises(RuntimeError, match=r"\[torch.DoubleTensor \[3\]\], which is output 0 of mul, is at"):
        z.sum().backward()


def test_version_counts_writes_of_the_memory_and_views_share_it() -> None:
    t = verigrad.zeros(4, dtype="f64")
    start = versions.version(t.payload)
    t.add_(1.0)
    t[1:3].mul_(2.0)
    assert versions.version(t.payload) == versions.version(t[2:].payload) == start + 2
    other = verigrad.zeros(4, dtype="f64")
    assert versions.version(other.payload) == 0


def test_written_after_tells_regions_apart_and_forgets_dead_memory() -> None:
    a = np.zeros((4, 6))
    before = versions.clock
    versions.note_write(a[:, 0])
    assert versions.written_after(a[:, 0], before) == (1, 0)
    assert versions.written_after(a[:, 1], before) is None  # interleaved, not shared
    assert versions.written_after(a, before) == (1, 0)
    assert versions.written_after(a[:, 0], versions.clock) is None  # a node made after the write
    key = id(a)
    del a
    gc.collect()
    assert key not in versions._MEMORY


def test_an_op_call_does_not_tick_the_clock_and_a_node_keeps_its_reading() -> None:
    x = _x()
    before = versions.clock
    y = (x * 2.0).exp()
    assert versions.clock == before and y.grad_fn.stamp == before
    y.mul_(3.0)
    assert versions.clock == before + 1 and y.grad_fn.stamp == before + 1


def test_retain_graph_and_higher_order_through_a_write() -> None:
    x = _x()
    y = x * x
    y.mul_(x)  # x^3
    (g,) = verigrad.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.tolist(), [3 * v * v for v in (0.5, -1.0, 2.0)], rtol=1e-15)
    (gg,) = verigrad.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.tolist(), [6 * v for v in (0.5, -1.0, 2.0)], rtol=1e-15)


def test_the_old_history_is_kept_alive_only_while_the_tensor_is() -> None:
    x = _x()
    y = x * 2.0
    y.relu_()
    key = id(y)
    assert key in versions.REDIRECTS
    del y
    gc.collect()
    assert key not in versions.REDIRECTS


# fuzz: a program of in-place writes against the same program out of place ---------------------------
KEYS = [(slice(None),), (1,), (slice(None), 2), (slice(1, 3), slice(0, 4, 2)), (slice(None), slice(1, 4))]
STEPS = ["add", "mul", "mul_w", "relu", "tanh", "sigmoid", "clamp", "sub_w"]


def _step(name: str, v: verigrad.Tensor, w: verigrad.Tensor) -> verigrad.Tensor:
    """The value of step `name` on v (out of place)."""
    return {
        "add": lambda: v + 0.75,
        "mul": lambda: v * -1.5,
        "mul_w": lambda: v * w,
        "relu": lambda: v.relu(),
        "tanh": lambda: v.tanh(),
        "sigmoid": lambda: v.sigmoid(),
        "clamp": lambda: v.clamp(-0.5, 0.8),
        "sub_w": lambda: v - w * w,
    }[name]()


def _in_place(name: str, v: verigrad.Tensor, w: verigrad.Tensor) -> None:
    {
        "add": lambda: v.add_(0.75),
        "mul": lambda: v.mul_(-1.5),
        "mul_w": lambda: v.mul_(w),
        "relu": lambda: v.relu_(),
        "tanh": lambda: v.tanh_(),
        "sigmoid": lambda: v.sigmoid_(),
        "clamp": lambda: v.clamp_(-0.5, 0.8),
        "sub_w": lambda: v.sub_(w * w),
    }[name]()


def _program(x0: np.ndarray, steps: list[tuple[str, int]], in_place: bool) -> tuple[list, list, float]:
    x = verigrad.tensor(x0, requires_grad=True)
    w = verigrad.tensor(np.float64(1.25), requires_grad=True)
    h = x * 1.0
    for name, k in steps:
        key = KEYS[k]
        if in_place:
            _in_place(name, h[key], w)
        else:
            inside = np.zeros(h.shape, bool)
            inside[key] = True
            h = verigrad.where(verigrad.tensor(inside), _step(name, h, w), h)
    (h * h).sum().backward()
    return h.tolist(), x.grad.tolist(), 0.0 if w.grad is None else float(w.grad.item())


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(
    st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, len(KEYS) - 1)), min_size=1, max_size=6),
    st.integers(0, 2**31 - 1),
)
def test_in_place_programs_give_the_out_of_place_gradients(steps, seed) -> None:
    x0 = np.random.default_rng(seed).normal(size=(3, 5))
    got, want = _program(x0, steps, True), _program(x0, steps, False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)


# fuzz: views kept across writes, writes under no_grad: the gradient is the derivative of the values
# (central differences), or a RuntimeError, never another number ---------------------------------------
SMOOTH = ["add", "mul", "mul_w", "tanh", "sigmoid", "sub_w"]
ACTIONS = ["write", "write_view", "keep_view", "no_grad_add", "use_view"]


def _actions_program(x0: np.ndarray, w0: float, actions: list[tuple[str, int, str]], grad: bool) -> tuple:
    """Run `actions` on h = x * 1; the loss sums h and the kept views used along the way."""
    x = verigrad.tensor(x0, requires_grad=grad)
    w = verigrad.tensor(np.float64(w0), requires_grad=grad)
    h = x * 1.0
    kept: list[verigrad.Tensor] = []
    loss = verigrad.tensor(np.float64(0.0))
    for action, k, step in actions:
        key = KEYS[k]
        if action == "write":
            _in_place(step, h[key], w)
        elif action == "write_view" and kept:
            _in_place(step, kept[-1], w)
        elif action == "keep_view":
            kept.append(h[key])
        elif action == "no_grad_add":
            with verigrad.no_grad():
                h[key].add_(0.25)
        elif action == "use_view" and kept:
            loss = loss + (kept[0] * 0.5).tanh().sum()
    loss = loss + (h * h).sum()
    return loss, x, w


def _value(x0: np.ndarray, w0: float, actions: list) -> float:
    with verigrad.no_grad():
        return float(_actions_program(x0, w0, actions, False)[0].item())


@settings(max_examples=50, deadline=None, database=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(ACTIONS), st.integers(0, len(KEYS) - 1), st.sampled_from(SMOOTH)),
        min_size=1,
        max_size=7,
    ),
    st.integers(0, 2**31 - 1),
)
def test_writes_with_views_kept_give_the_derivative_or_raise(actions, seed) -> None:
    rng = np.random.default_rng(seed)
    x0, u = rng.normal(size=(3, 5)) * 0.5, rng.normal(size=(3, 5))
    w0, eps = 0.8, 1e-6
    try:
        loss, x, w = _actions_program(x0, w0, actions, True)
        loss.backward()
    except RuntimeError as e:  # a refusal, each with its reason
        assert "inplace operation" in str(e) or "in-place" in str(e) or "in place" in str(e), str(e)
        return
    along = (_value(x0 + eps * u, w0, actions) - _value(x0 - eps * u, w0, actions)) / (2 * eps)
    got = 0.0 if x.grad is None else float((x.grad.numpy() * u).sum())
    np.testing.assert_allclose(got, along, rtol=1e-5, atol=1e-6)
    want_w = (_value(x0, w0 + eps, actions) - _value(x0, w0 - eps, actions)) / (2 * eps)
    np.testing.assert_allclose(0.0 if w.grad is None else w.grad.item(), want_w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "make", [lambda ps: verigrad.optim.SGD(ps, lr=0.1, momentum=0.9), verigrad.optim.Adam]
)
def test_an_optimizer_step_is_a_write_of_its_parameters(make) -> None:
    """As PyTorch's: a graph that saved a parameter's value before `step()` raises in backward after it
    (the cpu backend's fused update kernels wrote the parameters without a version tick: the backward
    then used the new weights, silently)."""
    w = verigrad.nn.Parameter(verigrad.tensor([1.0, 2.0]))
    opt = make([w])
    (w * w).sum().backward()
    y = (w * w).sum()
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    z = (w * w).sum()  # a graph made after the step is fine
    opt.zero_grad()
    z.backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * w.detach().numpy())
