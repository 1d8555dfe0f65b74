"""In-place writes under autograd against PyTorch: each program runs on both libraries in f64 from the same
values, and the results and every leaf's gradient must agree (to 1e-12); the errors PyTorch raises
(a leaf written in place, memory a node needs changed since) are raised with PyTorch's words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 5))
W1, B1 = RNG.normal(size=(5, 6)), RNG.normal(size=6)
W2, B2 = RNG.normal(size=(6, 3)), RNG.normal(size=3)
V = RNG.normal(size=(2, 6))


def _leaves(lib: Any) -> list[Any]:
    return [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in (X, W1, B1, W2, B2, V)]


def _run(lib: Any, program: Callable[..., Any]) -> tuple[np.ndarray, list[np.ndarray | None]]:
    leaves = _leaves(lib)
    out = program(lib, *leaves)
    (out * out).sum().backward()
    grads = [None if t.grad is None else np.array(t.grad.tolist()) for t in leaves]
    return np.array(out.detach().tolist()), grads


def _agree(program: Callable[..., Any]) -> None:
    theirs, ours = _run(torch, program), _run(verigrad, program)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12, atol=1e-12)
    for i, (mine, want) in enumerate(zip(ours[1], theirs[1])):
        assert (mine is None) == (want is None), f"leaf {i}: gradient {mine} vs PyTorch's {want}"
        if want is not None:
            np.testing.assert_allclose(mine, want, rtol=1e-12, atol=1e-12, err_msg=f"leaf {i}")


def _hidden(lib: Any, x: Any, w1: Any, b1: Any) -> Any:
    return x @ w1 + b1


def mlp_relu_module(lib, x, w1, b1, w2, b2, v):
    return lib.nn.ReLU(inplace=True)(_hidden(lib, x, w1, b1)) @ w2 + b2


def mlp_functional_relu(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    lib.nn.functional.relu(h, inplace=True)  # the result not used: h itself was written
    return h @ w2 + b2


def residual_add_(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    r = h.tanh()
    h.add_(r, alpha=0.5)  # r was computed from h before the write
    return h @ w2 + b2


def setitem_value_with_grad(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h[lib.tensor([3, 0])] = v * 2.0
    return h @ w2


def setitem_into_constant(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(4, 6, dtype=lib.float64)
    buf[1:3] = v.exp()
    buf[0, 2] = v[1, 1]
    return buf @ w2 + _hidden(lib, x, w1, b1) @ w2


def masked_fill_activation(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h.masked_fill_(h > 0.6, 0.0)
    h.masked_fill_(h < -0.5, v[0, 0])
    return h @ w2


def mask_setitem_activation(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h[h < 0] = 0
    return h @ w2


def chain_to_sigmoid_(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h.mul_(0.5).div_(1.5).clamp_(-0.8, 0.9).sub_(b1).mul_(b1).div_(w1[0].exp())
    h += 1.0
    h *= b1
    h.sigmoid_()
    return h @ w2


def chain_to_tanh_(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h.clamp_(min=-0.3).add_(v[1], alpha=-2.0).tanh_()
    return h @ w2


def chain_to_exp_(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h.clamp_(max=0.7).mul_(v[0]).exp_()
    return h @ w2


def write_through_column_view(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h[:, 0].mul_(2.0)
    h[1:3, 2:5].add_(v[:, :3].sin())
    return h @ w2


def write_through_flat_view(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    flat = h.view(-1)
    flat.add_(1.0)
    flat[5:9].mul_(v[0, :4])
    return h.relu() @ w2 + flat.reshape(4, 6)[:, :3]


def write_through_transpose_then_base(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    h.t()[2].copy_(v[0, :4])
    h.mul_(h.detach() + 1.0)
    return h @ w2


def disjoint_view_made_before(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    right = h[:, 3:]
    h[:, :3].mul_(3.0)
    return h @ w2 + right.sum()


def view_made_before_its_base_was_written(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    row, col = h[1], h[:, 2:4]
    h.mul_(w1[0])
    col.add_(1.0)  # its history made again from h as written (PyTorch regenerates it)
    row.mul_(v[1])
    h[2:].tanh_()
    return h @ w2


def views_used_after_a_write_through_a_sibling(lib, x, w1, b1, w2, b2, v):
    h = _hidden(lib, x, w1, b1)
    left, middle = h[:, :3], h[1:3]
    early = (left * 2.0).sum()
    h[:, 2:5].mul_(v[0, :3])
    middle.add_(1.0)
    return left @ w2[:3] + middle.sum() + early + h @ w2


def zero_fill_copy(lib, x, w1, b1, w2, b2, v):
    a = _hidden(lib, x, w1, b1)
    a.zero_()
    b = x * 2.0
    b.fill_(1.5)
    c = x * 3.0
    c.copy_(v[:, :5].sum(0))  # broadcast into c
    return a @ w2 + (b + c).sum()


def saved_but_only_by_a_constant(lib, x, w1, b1, w2, b2, v):
    y = _hidden(lib, x, w1, b1)
    b = y * 2.0  # mul by a number keeps no value of y
    y.add_(1.0)
    return b @ w2 + y @ w2


def exp_then_write(lib, x, w1, b1, w2, b2, v):
    y = _hidden(lib, x, w1, b1)
    a = y.exp()  # exp keeps its result, not y
    y.add_(1.0)
    return a @ w2 + y @ w2


def write_into_a_constant_through_its_view_of_no_history(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(2, 6, dtype=lib.float64)
    buf.mul_(v)  # a constant written with a value that requires grad
    return buf.sum() * w2


PROGRAMS = [
    mlp_relu_module,
    mlp_functional_relu,
    residual_add_,
    setitem_value_with_grad,
    setitem_into_constant,
    masked_fill_activation,
    mask_setitem_activation,
    chain_to_sigmoid_,
    chain_to_tanh_,
    chain_to_exp_,
    write_through_column_view,
    write_through_flat_view,
    write_through_transpose_then_base,
    disjoint_view_made_before,
    view_made_before_its_base_was_written,
    views_used_after_a_write_through_a_sibling,
    zero_fill_copy,
    saved_but_only_by_a_constant,
    exp_then_write,
    write_into_a_constant_through_its_view_of_no_history,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_in_place_program_gives_pytorchs_values_and_gradients(program) -> None:
    _agree(program)


def test_the_written_tensor_is_the_same_object_and_memory_as_torchs() -> None:
    for lib in (torch, verigrad):
        x = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
        h = x * 1.0
        alias = h.view(2)
        assert h.relu_() is h and h.add_(1.0) is h
        assert alias.tolist() == [2.0, 1.0]  # a view of its memory sees the writes
        assert not h.is_leaf and h.requires_grad


def _raises_alike(program: Callable[[Any], Any]) -> tuple[str, str]:
    messages = []
    for lib in (torch, verigrad):
        with pytest.raises(RuntimeError) as caught:
            program(lib)
        messages.append(str(caught.value))
    return messages[0], messages[1]


def test_a_leaf_that_requires_grad_is_refused_with_pytorchs_message() -> None:
    def program(lib: Any) -> None:
        lib.ones(3, dtype=lib.float64, requires_grad=True).add_(1.0)

    theirs, ours = _raises_alike(program)
    assert ours == theirs == "a leaf Variable that requires grad is being used in an in-place operation."

    def view_of_leaf(lib: Any) -> None:
        lib.ones(3, dtype=lib.float64, requires_grad=True)[:2].mul_(2.0)

    theirs, ours = _raises_alike(view_of_leaf)
    assert ours == theirs


def _version_error_head(message: str) -> str:
    """PyTorch's version error up to "instead" (its op names capitalised: Exp for verigrad's exp)."""
    return message[: message.index("instead") + len("instead")].lower()


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda lib, y: y.add_(1.0), id="under no_grad"),
        pytest.param(lambda lib, y: y.detach().mul_(2.0), id="through detach"),
    ],
)
def test_a_saved_value_changed_outside_the_graph_raises_pytorchs_version_error(write) -> None:
    def program(lib: Any) -> None:
        x = lib.tensor([0.5, 1.5, 2.0], dtype=lib.float64, requires_grad=True)
        y = x.exp()  # exp's backward reads y
        with lib.no_grad():
            write(lib, y)
        y.sum().backward()

    theirs, ours = _raises_alike(program)
    assert _version_error_head(ours) == _version_error_head(theirs)
    assert "is at version 1; expected version 0 instead" in ours


def test_an_input_changed_through_an_alias_raises_pytorchs_version_error() -> None:
    def program(lib: Any) -> None:
        x = lib.tensor([0.5, 1.5, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([2.0, 3.0, 4.0], dtype=lib.float64, requires_grad=True)
        y = x * 1.0
        z = y[:2] * w[:2]  # mul keeps y[:2] for w's gradient
        y.detach()[0] = 7.0  # y's memory changed, not recorded
        z.sum().backward()

    theirs, ours = _raises_alike(program)
    assert ours.startswith("one of the variables needed for gradient computation has been modified by an")
    assert "is at version 1; expected version 0 instead" in ours and "is at version 1" in theirs


def test_a_value_saved_before_the_tensor_itself_was_written_raises_as_pytorch() -> None:
    def program(lib: Any) -> None:
        x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
        y = x * 2.0
        a = y.sin()  # sin's backward reads y
        y.add_(1.0)
        a.sum().backward()

    theirs, ours = _raises_alike(program)
    # PyTorch names the op of the tensor's newest version (add_), verigrad the op that made the value
    assert ours.split(", which is")[0] == theirs.split(", which is")[0]
    assert "is at version 1; expected version 0 instead" in ours and "is at version 1" in theirs


def test_second_derivatives_through_in_place_writes() -> None:
    results = []
    for lib in (torch, verigrad):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        y = x * x
        y.mul_(x)  # x cubed
        y[1:].add_(x[1:].sin())
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        results.append((g.tolist(), gg.tolist()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-14)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-14)


def test_a_model_trains_with_inplace_relus_as_in_pytorch() -> None:
    losses = []
    for lib in (torch, verigrad):
        lib.manual_seed(0)
        model = lib.nn.Sequential(
            lib.nn.Linear(5, 8), lib.nn.ReLU(inplace=True), lib.nn.Linear(8, 3), lib.nn.ReLU(inplace=True)
        ).double()
        for p, a in zip(model.parameters(), _weights()):
            with lib.no_grad():
                p.copy_(lib.tensor(a, dtype=lib.float64))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        run = []
        for _ in range(3):
            opt.zero_grad()
            loss = model(lib.tensor(X, dtype=lib.float64)).pow(2).mean()
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-12)


def _weights() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.normal(size=s) for s in ((8, 5), (8,), (3, 8), (3,))]


def test_hooks_registered_before_a_write_see_the_old_version_retain_grad_the_new() -> None:
    results = []
    for lib in (torch, verigrad):
        x = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=True)
        y = x * 2.0
        seen = []
        y.register_hook(lambda g, seen=seen: seen.append(("before", g.tolist())))
        y.retain_grad()
        y.mul_(3.0)
        y.register_hook(lambda g, seen=seen: seen.append(("after", g.tolist())))
        (y * y).sum().backward()
        results.append((seen, y.grad.tolist(), x.grad.tolist()))
    assert results[1] == results[0]


def test_values_changed_under_no_grad_where_no_backward_reads_them_as_pytorch() -> None:
    # the straight-through estimator: values rounded outside autograd, the history kept
    results = []
    for lib in (torch, verigrad):
        x = lib.tensor([0.3, -1.7, 2.2], dtype=lib.float64, requires_grad=True)
        y = x * 2.0
        with lib.no_grad():
            y.copy_(y.round())
        z = x * 3.0
        z.data.add_(1.0)
        w = (y + z) * 1.0
        v = w[:2]
        with lib.no_grad():
            w[0] = 5.0
        (v * 2.0 + w.sum()).sum().backward()
        results.append((v.tolist(), w.tolist(), x.grad.tolist()))
    assert results[1] == results[0]


@pytest.mark.parametrize(
    "make",
    [lambda x: x[:], lambda x: x[...], lambda x: x[:, :], lambda x: x.float(), lambda x: x.type_as(x)],
    ids=["[:]", "[...]", "[:, :]", "float()", "type_as(self)"],
)
def test_identity_of_whole_views_and_same_dtype_casts_as_pytorch(make):
    """x[:] was x itself (PyTorch: a new view), and x.float() of an f32 tensor a copy (PyTorch: x itself):
    a write or requires_grad_ through the result then reached, or missed, x where PyTorch's does the
    opposite, silently."""
    t, v = torch.ones(2, 3), verigrad.ones(2, 3)
    ty, vy = make(t), make(v)
    assert (ty is t) == (vy is v)
    ty.add_(1)
    vy.add_(1)
    np.testing.assert_array_equal(v.numpy(), t.numpy())


# views of a tensor without history (a plain buffer), made before a value that requires grad is written
# into its memory: PyTorch regenerates each view's history from the buffer's new one (AsStridedBackward of
# CopySlices), so the value's gradient reaches it through the view
VIEW_KINDS: dict[str, Callable[[Any], Any]] = {
    "[1]": lambda b: b[1],
    "[:, 2:5]": lambda b: b[:, 2:5],
    "[:, ::2]": lambda b: b[:, ::2],
    "[-1, 1:]": lambda b: b[-1, 1:],
    "[..., None]": lambda b: b[..., None],
    "[None]": lambda b: b[None],
    "[:]": lambda b: b[:],
    "view": lambda b: b.view(3, 4),
    "view(-1)": lambda b: b.view(-1),
    "view_as": lambda b: b.view_as(b.new_zeros(3, 4)),
    "reshape": lambda b: b.reshape(12),
    "flatten": lambda b: b.flatten(),
    "transpose": lambda b: b.transpose(0, 1),
    "permute": lambda b: b.permute(1, 0),
    "t": lambda b: b.t(),
    "T": lambda b: b.T,
    "mT": lambda b: b.mT,
    "movedim": lambda b: b.movedim(0, 1),
    "narrow": lambda b: b.narrow(1, 1, 3),
    "select": lambda b: b.select(1, 2),
    "expand": lambda b: b.expand(3, 2, 6),
    "unsqueeze": lambda b: b.unsqueeze(1),
    "squeeze": lambda b: b[None].squeeze(0),
    "diagonal": lambda b: b.diagonal(1),
    "diagonal of a view": lambda b: b[None].diagonal(-1, 1, 2),
    "view of a view": lambda b: b[1][2:].view(2, 2),
    "transpose of a slice": lambda b: b[:, 1:4].transpose(0, 1),
}
WRITES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "copy_": lambda lib, buf, v: buf.copy_(v * 2.0),
    "add_": lambda lib, buf, v: buf.add_(v.exp()),
    "setitem row": lambda lib, buf, v: buf.__setitem__(1, v[0] * 3.0),
    "setitem all": lambda lib, buf, v: buf.__setitem__(slice(None), v.sin()),
    "copy_ into a view": lambda lib, buf, v: buf[:, 1:4].copy_(v[:, :3] * 2.0),
    "mul_ of a view's view": lambda lib, buf, v: buf[0:2][1].add_(1.0).mul_(v[1]),
}
_WEIGHTS = np.linspace(-1.0, 2.0, 64)


def _weighted(lib: Any, *parts: Any) -> Any:
    """The parts flattened and joined, each element scaled by its own weight (every gradient differs)."""
    flat = lib.cat([p.reshape(-1) for p in parts])
    return flat * lib.tensor(_WEIGHTS[: flat.shape[0]], dtype=lib.float64)


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
@pytest.mark.parametrize("kind", VIEW_KINDS.values(), ids=VIEW_KINDS.keys())
def test_a_view_of_a_plain_buffer_made_before_a_write_with_grad_as_pytorch(kind, write) -> None:
    def program(lib, x, w1, b1, w2, b2, v):
        buf = lib.zeros(2, 6, dtype=lib.float64)
        view = kind(buf)
        write(lib, buf, v)
        assert view.requires_grad
        return _weighted(lib, view)

    _agree(program)


def views_and_siblings_around_a_write_into_a_view(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(4, 6, dtype=lib.float64)
    a, b, c = buf[0], buf[1:3], buf[:, 0]
    inner = b[1]  # a view of the view written
    buf[1:3].copy_(v * 2.0)
    return _weighted(lib, a, b, c, inner, buf)


def a_view_used_after_two_writes(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(2, 6, dtype=lib.float64)
    t = buf.t()
    buf.add_(v)
    buf.mul_(v.exp())
    return _weighted(lib, t)


def rows_written_one_by_one(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(3, 6, dtype=lib.float64)
    first, last, col = buf[0], buf[2], buf[:, 4]
    buf[0] = b1 * 2.0
    buf[2] = b1.tanh()
    buf[1].copy_(v[0])
    return _weighted(lib, first, last, col)


def ops_on_the_view_before_the_write_keep_their_meaning(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(2, 6, dtype=lib.float64)
    u = buf[0]
    s = u + b1  # u was zeros without history here: b1's gradient only
    buf[0] = b1 * 2.0
    return _weighted(lib, s, u)


def detach_and_data_are_no_views_for_autograd(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(2, 6, dtype=lib.float64)
    d, e = buf.detach(), buf.data
    copy = buf.t().reshape(12)  # a copy (the transpose is not contiguous)
    buf.copy_(v * 2.0)
    assert not d.requires_grad and not e.requires_grad and not copy.requires_grad
    return _weighted(lib, d, e, copy, buf)


def a_write_under_no_grad_then_one_with_grad(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(2, 6, dtype=lib.float64)
    u = buf[0]
    with lib.no_grad():
        buf.add_(1.0)  # changes no history
    buf[1] = b1
    return _weighted(lib, u, buf)


def a_filled_buffer_read_through_a_view(lib, x, w1, b1, w2, b2, v):
    h = lib.zeros(4, 6, dtype=lib.float64)
    head = h[:, :3]
    for t in range(4):
        h[t] = (x[t] @ w1 + b1).tanh()
    return _weighted(lib, head @ w2[:3])


def a_detached_view_written_with_grad_takes_the_history_alone(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(2, 6, dtype=lib.float64)
    row = buf[1].detach()  # memory shared, no view for autograd
    row.copy_(b1 * 2.0)
    assert row.requires_grad and not buf.requires_grad
    return _weighted(lib, row, buf)


def a_write_through_a_diagonal(lib, x, w1, b1, w2, b2, v):
    buf = lib.zeros(3, 3, dtype=lib.float64)
    row = buf[1]
    buf.diagonal().add_(b1[:3] * 2.0)  # a view: buf takes the write, and the row made before it
    return _weighted(lib, row, buf)


def a_view_read_by_the_value_written(lib, x, w1, b1, w2, b2, v):
    buf = lib.ones(3, 6, dtype=lib.float64)
    top, mid = buf[0], buf[1]
    buf[1] = top + b1 * 2.0 + mid  # the value reads two views of the memory written (add saves none)
    buf[2].add_(mid)
    return _weighted(lib, top, mid, buf)


VIEW_PROGRAMS = [
    a_write_through_a_diagonal,
    a_view_read_by_the_value_written,
    a_detached_view_written_with_grad_takes_the_history_alone,
    views_and_siblings_around_a_write_into_a_view,
    a_view_used_after_two_writes,
    rows_written_one_by_one,
    ops_on_the_view_before_the_write_keep_their_meaning,
    detach_and_data_are_no_views_for_autograd,
    a_write_under_no_grad_then_one_with_grad,
    a_filled_buffer_read_through_a_view,
]


@pytest.mark.parametrize("program", VIEW_PROGRAMS, ids=lambda p: p.__name__)
def test_views_of_a_plain_buffer_give_pytorchs_values_and_gradients(program) -> None:
    _agree(program)


def test_a_view_saved_by_a_node_then_written_raises_pytorchs_version_error() -> None:
    def program(lib: Any) -> None:
        buf = lib.zeros(3, dtype=lib.float64)
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        u = buf[0:3]
        s = u * w  # mul keeps u for w's gradient
        buf.copy_(w.exp())
        s.sum().backward()

    theirs, ours = _raises_alike(program)
    assert ours.startswith("one of the variables needed for gradient computation has been modified by an")
    assert "is at version 1; expected version 0 instead" in ours and "is at version 1" in theirs


def _made_under_no_grad(lib: Any, buf: Any) -> Any:
    with lib.no_grad():
        return buf[0]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_made_under_no_grad, id="made under no_grad"),
        pytest.param(lambda lib, buf: buf.unbind(0)[0], id="unbind"),
        pytest.param(lambda lib, buf: buf.split(1)[0], id="split"),
        pytest.param(lambda lib, buf: buf.chunk(2)[0][0], id="a view of chunk's piece"),
    ],
)
def test_views_pytorch_gives_no_history_raise_its_errors(make) -> None:
    """A view made under no_grad, or a piece of split/chunk/unbind of a tensor without history: PyTorch
    refuses to use it after its base was written with grad (verigrad: in backward), and to write into it."""

    def base_written(lib: Any) -> None:
        buf = lib.zeros(2, 3, dtype=lib.float64)
        view = make(lib, buf)
        buf.copy_(lib.ones(2, 3, dtype=lib.float64, requires_grad=True) * 2.0)
        view.sum().backward()

    theirs, ours = _raises_alike(base_written)
    assert ours == theirs

    def written(lib: Any) -> None:
        buf = lib.zeros(2, 3, dtype=lib.float64)
        make(lib, buf).copy_(lib.ones(3, dtype=lib.float64, requires_grad=True) * 2.0)

    theirs, ours = _raises_alike(written)
    assert ours == theirs


def test_a_view_made_under_no_grad_of_a_tensor_with_history_raises_as_pytorch() -> None:
    def base_written(lib: Any) -> None:
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True) * 1.0
        with lib.no_grad():
            view = x[0]
        x.add_(lib.ones(2, 3, dtype=lib.float64, requires_grad=True))
        view.sum().backward()

    theirs, ours = _raises_alike(base_written)
    assert ours == theirs

    def written(lib: Any) -> None:
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True) * 1.0
        with lib.no_grad():
            view = x[0]
        view.mul_(lib.ones(3, dtype=lib.float64, requires_grad=True))

    theirs, ours = _raises_alike(written)
    assert ours == theirs


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda x: x.unbind(0), id="unbind"),
        pytest.param(lambda x: x.split(1), id="split"),
        pytest.param(lambda x: x.split([1, 1]), id="split sizes"),
        pytest.param(lambda x: x.chunk(2), id="chunk"),
    ],
)
def test_pieces_of_a_tensor_with_history_raise_as_pytorch_after_a_write(cut) -> None:
    """PyTorch's multi-output views: a piece used after its base was written in place, or written itself,
    raises (verigrad regenerated it and gave a gradient)."""

    def base_written(lib: Any) -> None:
        v = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        x = v * 1.0
        piece = cut(x)[1]
        x.add_(v)
        piece.sum().backward()

    theirs, ours = _raises_alike(base_written)
    assert ours == theirs

    def written(lib: Any) -> None:
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True) * 1.0
        cut(x)[1].mul_(2.0)

    theirs, ours = _raises_alike(written)
    assert ours == theirs


def test_a_write_into_a_view_made_under_no_grad_of_a_leaf_raises_as_pytorch() -> None:
    """PyTorch's view of a leaf that requires grad requires grad too: a write into it with grad mode on is
    refused even of values without grad (verigrad wrote the leaf's memory unrecorded)."""

    def program(lib: Any) -> None:
        leaf = lib.zeros(2, 3, dtype=lib.float64, requires_grad=True)
        with lib.no_grad():
            view = leaf[0]
        view.add_(1.0)

    theirs, ours = _raises_alike(program)
    assert ours == theirs
