"""The normalization layers' and functions' API against PyTorch's: BatchNorm's buffers and options
(num_batches_tracked, momentum=None, affine, track_running_stats), F.batch_norm, RMSNorm's eps,
F.rms_norm's signature, InstanceNorm's options and LocalResponseNorm; values, dtypes and f64 gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

RNG = np.random.default_rng(5)
TIGHT = {"rtol": 1e-12, "atol": 1e-12}


def _close(ours: verigrad.Tensor, theirs: torch.Tensor) -> None:
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **TIGHT)
    assert ours.shape == tuple(theirs.shape)


def _steps(ours, theirs, shape: tuple, steps: int = 3) -> None:
    """Training steps (outputs, input and parameter gradients, every buffer), then eval, as PyTorch's."""
    ours.double(), theirs.double()
    for _ in range(steps):
        x = RNG.standard_normal(shape)
        a, t = verigrad.tensor(x).requires_grad_(), torch.tensor(x, requires_grad=True)
        y, yt = ours(a), theirs(t)
        _close(y, yt)
        (y * y).sum().backward()
        (yt * yt).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    assert list(ours_state) == list(theirs_state)
    for k in theirs_state:
        assert ours_state[k].dtype.np == theirs_state[k].numpy().dtype, k
        np.testing.assert_allclose(ours_state[k].numpy(), theirs_state[k].numpy(), **TIGHT, err_msg=k)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12)
    ours.eval(), theirs.eval()
    x = RNG.standard_normal(shape)
    _close(ours(verigrad.tensor(x)), theirs(torch.tensor(x)))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"momentum": None},
        {"affine": False},
        {"track_running_stats": False},
        {"affine": False, "track_running_stats": False, "momentum": None},
        {"bias": False},
    ],
)
@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("BatchNorm1d", (4, 3)),
        ("BatchNorm1d", (2, 3, 5)),
        ("BatchNorm2d", (2, 3, 2, 3)),
        ("BatchNorm3d", (2, 3, 2, 2, 2)),
    ],
)
def test_batch_norm_options(name, shape, kwargs) -> None:
    _steps(getattr(nn, name)(3, **kwargs), getattr(torch.nn, name)(3, **kwargs), shape)


def test_num_batches_tracked_is_an_i64_buffer_that_loads_both_ways() -> None:
    ours, theirs = nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert ours.num_batches_tracked.dtype.name == "i64" and ours.num_batches_tracked.shape == ()
    theirs(torch.randn(4, 2)), theirs(torch.randn(4, 2))
    ours.load_state_dict({k: verigrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    assert int(ours.num_batches_tracked.item()) == 2
    ours(verigrad.randn(4, 2))
    back = torch.nn.BatchNorm1d(2)
    back.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    assert int(back.num_batches_tracked) == 3


def test_one_value_per_channel_in_training_raises() -> None:
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        torch.nn.BatchNorm1d(2)(torch.ones(1, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(2)(verigrad.ones(1, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(verigrad.ones(1, 2, 1), None, None, training=True)
    ours, theirs = nn.BatchNorm1d(2).eval(), torch.nn.BatchNorm1d(2).eval()  # eval takes one
    _close(ours(verigrad.ones(1, 2)), theirs(torch.ones(1, 2)))


@pytest.mark.parametrize("training", [True, False])
def test_functional_batch_norm(training) -> None:
    x, w, b = RNG.standard_normal((4, 3, 2)), RNG.standard_normal(3), RNG.standard_normal(3)
    rm, rv = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3)
    ours_stats = [verigrad.tensor(rm), verigrad.tensor(rv)]
    theirs_stats = [torch.tensor(rm), torch.tensor(rv)]
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.batch_norm(x, *ours_stats, w, b, training, 0.2, 1e-3),
        lambda x, w, b: TF.batch_norm(x, *theirs_stats, w, b, training, 0.2, 1e-3),
    )
    for o, t in zip(ours_stats, theirs_stats):
        np.testing.assert_allclose(o.numpy(), t.numpy(), **TIGHT)
    _check(
        {"x": x},
        lambda x: F.batch_norm(x, None, None, training=True),
        lambda x: TF.batch_norm(x, None, None, training=True),
    )


def test_batch_norm_f32_dtypes() -> None:
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = RNG.standard_normal((2, 3, 2, 2)).astype(np.float32)
    y, yt = ours(verigrad.tensor(x)), theirs(torch.tensor(x))
    assert y.dtype.name == "f32" and yt.dtype == torch.float32
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)


def test_rms_norm_default_eps_is_the_dtypes_epsilon() -> None:
    x = np.array([[1e-3, 2e-3]])
    for dtype, tdt in (("f32", torch.float32), ("f64", torch.float64)):
        ours = nn.RMSNorm(2, dtype=dtype)(verigrad.tensor(x, dtype=dtype))
        theirs = torch.nn.RMSNorm(2, dtype=tdt)(torch.tensor(x, dtype=tdt))
        assert ours.dtype.name == dtype
        np.testing.assert_allclose(
            ours.numpy(), theirs.detach().numpy(), rtol=1e-6 if dtype == "f32" else 1e-12
        )
    np.testing.assert_allclose(
        nn.RMSNorm(2)(verigrad.tensor(x, dtype="f32")).numpy(), [[0.6179, 1.2358]], atol=1e-4
    )
    assert repr(nn.RMSNorm(2)) == repr(torch.nn.RMSNorm(2))


@pytest.mark.parametrize("eps", [None, 1e-3])
@pytest.mark.parametrize("shape", [(4,), (3, 4)])
def test_functional_rms_norm_takes_the_shape_second(shape, eps) -> None:
    x, w = RNG.standard_normal((2, *shape)), RNG.standard_normal(shape)
    _check(
        {"x": x, "w": w},
        lambda x, w: F.rms_norm(x, shape, w, eps),
        lambda x, w: TF.rms_norm(x, shape, w, eps),
    )
    _check({"x": x}, lambda x: F.rms_norm(x, shape, eps=eps), lambda x: TF.rms_norm(x, shape, eps=eps))
    _check(
        {"x": x, "w": w},
        lambda x, w: nn.RMSNorm(shape, eps).double()(x) * w,
        lambda x, w: torch.nn.RMSNorm(shape, eps).double()(x) * w,
    )


def test_functional_rms_norm_refuses_a_weight_in_the_shapes_place() -> None:
    x = verigrad.ones(2, 3)
    with pytest.raises(TypeError, match="normalized_shape"):
        F.rms_norm(x, verigrad.ones(3))


@pytest.mark.parametrize("kwargs", [{}, {"elementwise_affine": False}, {"bias": False}])
def test_layer_norm_options(kwargs) -> None:
    ours, theirs = nn.LayerNorm((2, 3), **kwargs).double(), torch.nn.LayerNorm((2, 3), **kwargs).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _check({"x": RNG.standard_normal((4, 2, 3))}, lambda x: ours(x), lambda x: theirs(x))
    x, w, b = RNG.standard_normal((4, 5)), RNG.standard_normal(5), RNG.standard_normal(5)
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.layer_norm(x, (5,), w, b, 1e-3),
        lambda x, w, b: TF.layer_norm(x, (5,), w, b, 1e-3),
    )
    _check({"x": x}, lambda x: F.layer_norm(x, [5]), lambda x: TF.layer_norm(x, [5]))


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_options(affine) -> None:
    ours, theirs = (
        nn.GroupNorm(2, 4, affine=affine).double(),
        torch.nn.GroupNorm(2, 4, affine=affine).double(),
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _check({"x": RNG.standard_normal((3, 4, 5))}, lambda x: ours(x), lambda x: theirs(x))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"affine": True},
        {"track_running_stats": True},
        {"affine": True, "track_running_stats": True, "momentum": 0.3},
    ],
)
@pytest.mark.parametrize(
    ("name", "shape"),
    [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm2d", (2, 3, 2, 3)), ("InstanceNorm3d", (2, 3, 2, 2, 3))],
)
def test_instance_norm_options(name, shape, kwargs) -> None:
    _steps(
        getattr(nn, name)(3, **kwargs),
        getattr(torch.nn, name)(3, **kwargs),
        shape,
    )


@pytest.mark.parametrize(
    ("size", "shape"), [(3, (2, 5, 4)), (2, (2, 4, 3, 2)), (5, (1, 3, 2, 2, 2)), (1, (2, 3, 3))]
)
def test_local_response_norm(size, shape) -> None:
    x = RNG.standard_normal(shape)
    _check(
        {"x": x},
        lambda x: F.local_response_norm(x, size, 1e-2, 0.6, 2.0),
        lambda x: TF.local_response_norm(x, size, 1e-2, 0.6, 2.0),
    )
    ours, theirs = nn.LocalResponseNorm(size), torch.nn.LocalResponseNorm(size)
    _check({"x": x}, lambda x: ours(x), lambda x: theirs(x))
    assert repr(nn.LocalResponseNorm(size)) == repr(torch.nn.LocalResponseNorm(size))


def test_a_state_without_num_batches_tracked_loads_as_in_torch() -> None:
    state = {
        "weight": np.ones(2),
        "bias": np.zeros(2),
        "running_mean": np.zeros(2),
        "running_var": np.ones(2),
    }
    theirs = torch.nn.BatchNorm1d(2).double()
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    ours = nn.BatchNorm1d(2).double()
    ours.load_state_dict(state)
    assert int(ours.num_batches_tracked.item()) == int(theirs.num_batches_tracked) == 0
    with pytest.raises(ValueError, match="missing: running_var"):
        ours.load_state_dict({k: v for k, v in state.items() if k != "running_var"})


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("LayerNorm", ((2, 3),), {}),
        ("LayerNorm", (4,), {"bias": False}),
        ("LayerNorm", (4,), {"elementwise_affine": False}),
        ("GroupNorm", (2, 4), {}),
        ("GroupNorm", (2, 4), {"bias": False}),
        ("GroupNorm", (2, 4), {"affine": False}),
        ("InstanceNorm1d", (3,), {}),
        ("InstanceNorm2d", (3,), {"affine": True, "bias": False}),
        ("BatchNorm1d", (3,), {"bias": False, "momentum": None}),
        ("RMSNorm", ((2, 3),), {"eps": 1e-3, "elementwise_affine": False}),
    ],
)
def test_reprs_and_state_keys(name, args, kwargs) -> None:
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
