"""Views of a tensor without history (a plain buffer) made before a value that requires grad is written
into its memory: the write gives each such view a history from the buffer's new one, as PyTorch
regenerates a view's (verigrad/inplace.py `note_view`, `_remake_views`; vg_eager's `note_view`). Gradients
by hand, with the views made in C and in Python; what the record costs in memory; the errors."""

from __future__ import annotations

import copy
import gc
import pickle
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verigrad
from verigrad import eager


@pytest.fixture(autouse=True, params=["python", "c"])
def _calls(request: pytest.FixtureRequest):
    """Every test with the views made by EagerMode.run (Python) and by vg_eager (C)."""
    with verigrad.backend("cpu") as backend:
        if not (backend.load() and eager.install_c_calls()):
            pytest.skip("the cpu backend's C calls could not be built here")
        was = eager.c_calls(request.param == "c")
        try:
            yield
        finally:
            eager.c_calls(was)


def _v(values=(0.5, -1.0, 2.0)) -> verigrad.Tensor:
    return verigrad.tensor(np.array(values, np.float64), requires_grad=True)


def _buf(*shape: int) -> verigrad.Tensor:
    return verigrad.zeros(*shape, dtype="f64")


@pytest.mark.parametrize(
    "write",
    [
        lambda buf, v: buf.__setitem__(0, v),
        lambda buf, v: buf[0].copy_(v),
        lambda buf, v: buf.add_(verigrad.stack([v, v * 0.0])),
        lambda buf, v: buf.copy_(verigrad.stack([v, v * 0.0])),
    ],
    ids=["buf[0] = v", "buf[0].copy_(v)", "buf.add_(v)", "buf.copy_"],
)
def test_a_view_made_before_a_write_with_grad_takes_the_gradient(write) -> None:
    buf, v = _buf(2, 3), _v()
    row, col, flat = buf[0], buf[:, 1], buf.t().reshape(6)  # the last: a copy, no view
    write(buf, v)
    assert row.requires_grad and col.requires_grad and not flat.requires_grad
    assert row.tolist() == [0.5, -1.0, 2.0] and flat.tolist() == [0.0] * 6
    (row * verigrad.tensor([1.0, 2.0, 3.0], dtype="f64") + col.sum() * 10.0).sum().backward()
    assert v.grad.tolist() == [1.0, 2.0 + 30.0, 3.0]


def test_views_of_views_and_of_the_view_written() -> None:
    buf, v = _buf(4, 3), _v()
    rows = buf[1:3]
    inner, outer, deeper = rows[0], buf[3], rows[0][1:].view(2, 1)
    rows[0].copy_(v)  # through a view of a view: rows and buf take the write's history
    assert rows.requires_grad and buf.requires_grad
    (inner.sum() + 2.0 * outer.sum() + 5.0 * deeper.sum()).backward()
    assert v.grad.tolist() == [1.0, 6.0, 6.0]


def test_a_view_used_after_two_writes() -> None:
    buf, v, w = _buf(3), _v(), _v((2.0, 3.0, 4.0))
    t = buf[None].t()  # [3, 1]
    buf.add_(v)
    buf.mul_(w)
    (t * 1.0).sum().backward()
    assert v.grad.tolist() == [2.0, 3.0, 4.0] and w.grad.tolist() == [0.5, -1.0, 2.0]


def test_ops_before_the_write_mean_the_view_as_it_was() -> None:
    buf, v, w = _buf(3), _v(), _v((2.0, 3.0, 4.0))
    u = buf[:]
    s = u + w  # u without history here: w's gradient only
    buf.copy_(v * 2.0)
    (s + u).sum().backward()
    assert w.grad.tolist() == [1.0] * 3 and v.grad.tolist() == [2.0] * 3
    buf, w = _buf(3), _v()
    u = buf[:]
    p = u * w  # mul keeps u's values for w's gradient: the write changes them
    buf.copy_(_v() * 2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        p.sum().backward()


def test_a_write_without_grad_gives_no_history_and_keeps_the_record() -> None:
    buf, v = _buf(2, 3), _v()
    row = buf[1]
    buf.add_(1.0)  # nothing requires grad
    with verigrad.no_grad():
        buf[1] = v
    assert not row.requires_grad and row.tolist() == [0.5, -1.0, 2.0]
    buf[0] = v * 3.0  # the first write with grad: the view made before all of them takes a history
    assert row.requires_grad
    (row * 1.0).sum().backward()
    assert v.grad.tolist() == [0.0] * 3  # (row 1 was written outside autograd)


def test_the_record_keeps_no_view_alive_and_stays_small() -> None:
    buf = _buf(100, 3)
    dead = weakref.ref(buf[0])
    gc.collect()
    assert dead() is None  # the buffer refers to its views weakly
    held = [buf[i] for i in range(100)]
    for _ in range(20):
        for i in range(100):
            buf[i]  # made and dropped: pruned from the list, amortized
    assert len(buf._views) <= 4 * len(held) + 16
    buf[5] = _v()
    assert all(h.requires_grad for h in held)  # every live view takes the history
    held[5].sum().backward()


def test_views_that_pytorch_gives_no_history_raise_its_errors() -> None:
    buf = _buf(2, 3)
    with verigrad.no_grad():
        early = buf[0]
    piece = buf.unbind(0)[1]
    part = buf.split(1)[0][0][1:]  # a view of a piece
    buf.copy_(verigrad.stack([_v(), _v()]))
    for view in (early, piece, part):
        with pytest.raises(RuntimeError, match="view was created in no_grad mode and its base or another"):
            view.sum().backward()
    buf = _buf(2, 3)
    with verigrad.no_grad():
        early = buf[0]
    with pytest.raises(RuntimeError, match=r"is being modified inplace with grad mode enabled\. Given that"):
        early.copy_(_v())
    with pytest.raises(RuntimeError, match="returns multiple views"):
        buf.chunk(2)[1].add_(_v())
    assert buf.tolist() == [[0.0] * 3] * 2  # refused before any write


def test_pieces_of_a_tensor_with_history_and_views_of_a_leaf_made_under_no_grad() -> None:
    v = _v()
    x = v.expand(2, 3) * 1.0
    first, second = x.unbind(0)
    with pytest.raises(RuntimeError, match=r"^Output 1 of Unbind is a view and is being modified inplace"):
        second.mul_(2.0)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match=r"^Output 0 of Unbind is a view and its base or another view"):
        first.sum().backward()
    (x * 1.0).sum().backward()  # the base itself is fine
    assert v.grad.tolist() == [2.0] * 3
    leaf = _v()
    with verigrad.no_grad():
        early = leaf[1:]
    with pytest.raises(RuntimeError, match="view was created in no_grad mode and is being modified"):
        early.add_(1.0)  # PyTorch's view requires grad: refused even without a value that does
    assert leaf.tolist() == [0.5, -1.0, 2.0]


def test_copies_and_pickles_are_no_views() -> None:
    buf = _buf(2, 3)
    row = buf[1]
    for copied in (copy.deepcopy(buf), pickle.loads(pickle.dumps(buf)), copy.copy(row)):
        assert not hasattr(copied, "_views") and not hasattr(copied, "_view")
    assert pickle.loads(pickle.dumps(row)).tolist() == [0.0] * 3
    buf.copy_(verigrad.stack([_v(), _v()]))
    assert row.requires_grad


def test_memory_shared_without_a_view_takes_the_history_alone() -> None:
    """As PyTorch's: a tensor sharing memory that is no view for autograd (from_numpy of an array's view,
    .detach() of a view) written with grad takes a history of its own; the tensor it shares memory with
    does not."""
    memory = np.zeros((2, 3))
    alias, v = verigrad.from_numpy(memory[1]), _v()
    alias.copy_(v * 2.0)
    assert memory[1].tolist() == [1.0, -2.0, 4.0]
    alias.sum().backward()
    assert v.grad.tolist() == [2.0] * 3
    buf = _buf(2, 3)
    d, row = buf.detach(), buf[1].detach()
    row.copy_(_v())
    assert row.requires_grad and not buf.requires_grad and not d.requires_grad
    buf.copy_(verigrad.stack([_v(), _v()]))
    assert not d.requires_grad and d.tolist()[0] == [0.5, -1.0, 2.0]


VIEWS = [
    lambda t: t[1:],
    lambda t: t[..., ::2],
    lambda t: t[0] if t.ndim > 1 else t[None],
    lambda t: t.transpose(0, -1),
    lambda t: t.reshape(-1),
    lambda t: t.unsqueeze(0),
    lambda t: t.expand(2, *t.shape),
]


@settings(database=None, derandomize=True, max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(range(len(VIEWS))), min_size=1, max_size=3), st.booleans())
def test_a_view_made_before_the_write_is_the_view_made_after(kinds, through_view) -> None:
    """The values and gradient through a chain of views made before the write are those of the same
    chain made after it, as PyTorch's."""
    results = []
    for before in (True, False):
        buf, v = _buf(3, 4), verigrad.tensor(np.arange(12.0).reshape(3, 4) - 5.0, requires_grad=True)

        def chain(buf=buf) -> verigrad.Tensor:
            t = buf
            for k in kinds:
                t = VIEWS[k](t)
            return t

        early = chain() if before else None
        if through_view:
            buf[1:].copy_(v[1:].exp())
        else:
            buf.add_(v * 2.0)
        view = early if before else chain()
        weights = verigrad.tensor(np.linspace(-1.0, 1.0, view.numel()).reshape(tuple(view.shape)))
        if view.requires_grad:
            (view * weights).sum().backward()
        results.append((view.tolist(), view.requires_grad, None if v.grad is None else v.grad.tolist()))
    assert results[0] == results[1]
