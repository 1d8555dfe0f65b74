"""The layers (convolution, pooling, normalization, padding, resampling, embedding, softmax) against
PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

RNG = np.random.default_rng(11)


PRED = RNG.standard_normal((4, 5))


def test_identity_softmax_and_log_softmax_modules() -> None:
    _check({"x": PRED}, lambda x: nn.Softmax(0)(nn.Identity()(x)), lambda x: torch.nn.Softmax(0)(x))
    _check({"x": PRED}, lambda x: nn.LogSoftmax(dim=1)(x), lambda x: torch.nn.LogSoftmax(dim=1)(x))


@pytest.mark.parametrize("output_size", [1, (2, 3), (4, 6), 2])
def test_adaptive_avg_pool(output_size) -> None:
    x = RNG.standard_normal((2, 3, 4, 6))
    _check(
        {"x": x},
        lambda x: nn.AdaptiveAvgPool2d(output_size)(x),
        lambda x: torch.nn.AdaptiveAvgPool2d(output_size)(x),
    )
    nhwc = nn.AdaptiveAvgPool2d(output_size, layout="NHWC")
    _check(
        {"x": x},
        lambda x: nhwc(x.permute(0, 2, 3, 1)),
        lambda x: torch.nn.AdaptiveAvgPool2d(output_size)(x).permute(0, 2, 3, 1),
    )


def test_layer_norm_over_several_axes_and_in_pytorchs_argument_order() -> None:
    x, w, b = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.layer_norm(x, (4, 5), w, b, 1e-3),
        lambda x, w, b: TF.layer_norm(x, (4, 5), w, b, 1e-3),
    )
    ours, theirs = nn.LayerNorm([3, 4, 5], dtype="f64"), torch.nn.LayerNorm([3, 4, 5], dtype=torch.float64)
    _check({"x": x}, lambda x: ours(x), lambda x: theirs(x))


@pytest.mark.parametrize("settings", [{}, {"stride": 2, "padding": 1}, {"dilation": 2, "padding": 2}])
def test_conv1d_and_1d_pools(settings) -> None:
    x, w, b = RNG.standard_normal((2, 3, 11)), RNG.standard_normal((4, 3, 3)), RNG.standard_normal(4)
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.conv1d(x, w, b, **settings),
        lambda x, w, b: TF.conv1d(x, w, b, **settings),
    )
    _check({"x": x}, lambda x: nn.MaxPool1d(3, 2, 1)(x), lambda x: torch.nn.MaxPool1d(3, 2, 1)(x))
    _check({"x": x}, lambda x: nn.AvgPool1d(2)(x), lambda x: torch.nn.AvgPool1d(2)(x))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
def test_batch_norm_1d(shape) -> None:
    """Three training steps (outputs, gradients, running statistics), then eval, as PyTorch's."""
    x = RNG.standard_normal((3, *shape))
    ours, theirs = nn.BatchNorm1d(3, momentum=0.3).double(), torch.nn.BatchNorm1d(3, momentum=0.3).double()
    for step in x:
        a, t = verigrad.tensor(step).requires_grad_(), torch.tensor(step, requires_grad=True)
        y, yt = ours(a), theirs(t)
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
        (y * y).sum().backward()
        (yt * yt).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-10)
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(
        ours(verigrad.tensor(x[0])).numpy(), theirs(torch.tensor(x[0])).detach().numpy()
    )


@pytest.mark.parametrize(("groups", "shape"), [(2, (3, 4, 5)), (3, (2, 6, 2, 3)), (1, (2, 3))])
def test_group_norm(groups, shape) -> None:
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal(shape[1]), RNG.standard_normal(shape[1])
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.group_norm(x, groups, w, b),
        lambda x, w, b: TF.group_norm(x, groups, w, b),
    )
    assert repr(nn.GroupNorm(groups, shape[1])) == repr(torch.nn.GroupNorm(groups, shape[1]))


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # PyTorch's, about its copy
@pytest.mark.parametrize(("kernel", "dilation"), [((3, 3), 1), ((2, 4), 1), ((3, 2), 2)])
def test_convolution_with_same_padding(kernel, dilation) -> None:
    """The even kernels' extra row or column of padding goes after, as in PyTorch."""
    arrays = {"x": RNG.standard_normal((2, 3, 7, 6)), "w": RNG.standard_normal((4, 3, *kernel))}
    _check(
        arrays,
        lambda x, w: F.conv2d(x, w, padding="same", dilation=dilation),
        lambda x, w: TF.conv2d(x, w, padding="same", dilation=dilation),
    )
    _check(
        {"x": arrays["x"][:, :, 0], "w": arrays["w"][:, :, 0]},
        lambda x, w: F.conv1d(x, w, padding="same"),
        lambda x, w: TF.conv1d(x, w, padding="same"),
    )


def test_embedding_padding_row_is_zero_and_untrained() -> None:
    ours = nn.Embedding(6, 3, padding_idx=2).double()
    theirs = torch.nn.Embedding(6, 3, padding_idx=2).double()
    assert not ours.weight.numpy()[2].any()
    theirs.load_state_dict({"weight": torch.from_numpy(ours.weight.numpy().copy())})
    idx = np.array([[2, 0, 5], [2, 2, 1]])
    out, expected = ours(verigrad.tensor(idx)), theirs(torch.tensor(idx))
    np.testing.assert_array_equal(out.numpy(), expected.detach().numpy())
    cot = RNG.standard_normal(out.shape)
    (out * verigrad.tensor(cot)).sum().backward()
    (expected * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)
    assert not ours.weight.grad.numpy()[2].any()


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode: str) -> None:
    x = RNG.standard_normal((2, 3, 4, 5))
    for array, pad in [(x[0], (1, 2)), (x, (2, 1, 3, 0)), (x, (0, 0, 1, 1))]:  # PyTorch's combinations
        _check(
            {"x": array}, lambda x, p=pad: F.pad(x, p, mode=mode), lambda x, p=pad: TF.pad(x, p, mode=mode)
        )
    ours = {"reflect": nn.ReflectionPad2d, "replicate": nn.ReplicationPad2d}.get(mode)
    if ours is not None:
        theirs = {"reflect": torch.nn.ReflectionPad2d, "replicate": torch.nn.ReplicationPad2d}[mode]
        _check({"x": x}, lambda x: ours((1, 2, 0, 3))(x), lambda x: theirs((1, 2, 0, 3))(x))


def test_pixel_shuffle_unfold_and_fold() -> None:
    x = RNG.standard_normal((2, 8, 3, 4))
    _check({"x": x}, lambda x: nn.PixelShuffle(2)(x), lambda x: torch.nn.PixelShuffle(2)(x))
    _check(
        {"x": x},
        lambda x: nn.PixelUnshuffle(2)(x[:, :, :2]),
        lambda x: torch.nn.PixelUnshuffle(2)(x[:, :, :2]),
    )
    for window in [
        {"kernel_size": 2},
        {"kernel_size": (2, 3), "padding": 1, "stride": (1, 2), "dilation": 1},
    ]:
        _check({"x": x}, lambda x, w=window: nn.Unfold(**w)(x), lambda x, w=window: torch.nn.Unfold(**w)(x))
        cols = torch.nn.functional.unfold(torch.tensor(x), **window).numpy()
        _check(
            {"c": cols},
            lambda c, w=window: nn.Fold((3, 4), **w)(c),
            lambda c, w=window: torch.nn.Fold((3, 4), **w)(c),
        )
    _check({"x": x}, lambda x: nn.ZeroPad2d(1)(x), lambda x: torch.nn.ZeroPad2d(1)(x))


@pytest.mark.parametrize(
    "window",
    [{}, {"stride": 2}, {"stride": 2, "padding": 1, "output_padding": 1}, {"stride": (2, 1), "dilation": 2}],
)
def test_conv_transpose2d(window: dict) -> None:
    """Values and the gradients of the image, the weight [in, out, kh, kw] and the bias; the module loads
    PyTorch's state dict and gives its output."""
    x, w, b = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((3, 2, 3, 2)), RNG.standard_normal(2)
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.conv_transpose2d(x, w, b, **window),
        lambda x, w, b: TF.conv_transpose2d(x, w, b, **window),
    )
    theirs = torch.nn.ConvTranspose2d(3, 2, (3, 2), **window).double()
    ours = nn.ConvTranspose2d(3, 2, (3, 2), **window).double()
    ours.load_state_dict({k: verigrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(
        ours(verigrad.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("groups", [2, 4])
def test_grouped_and_depthwise_conv2d(groups: int) -> None:
    x, w, b = (
        RNG.standard_normal((2, 4, 5, 5)),
        RNG.standard_normal((8, 4 // groups, 3, 3)),
        RNG.standard_normal(8),
    )
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.conv2d(x, w, b, padding=1, stride=(1, 2), groups=groups),
        lambda x, w, b: TF.conv2d(x, w, b, padding=1, stride=(1, 2), groups=groups),
    )
    theirs = torch.nn.Conv2d(4, 8, 3, groups=groups).double()
    ours = nn.Conv2d(4, 8, 3, groups=groups).double()
    assert ours.weight.shape == tuple(theirs.weight.shape)
    ours.load_state_dict({k: verigrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(
        ours(verigrad.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(
    "resize",
    [
        {"scale_factor": 2},
        {"size": (7, 3)},
        {"size": (7, 3), "align_corners": True},
        {"scale_factor": (1.5, 0.5)},
        {"scale_factor": 3, "align_corners": True},
    ],
)
def test_bilinear_interpolation(resize: dict) -> None:
    x = RNG.standard_normal((2, 3, 4, 5))
    _check(
        {"x": x},
        lambda x: F.interpolate(x, mode="bilinear", **resize),
        lambda x: TF.interpolate(x, mode="bilinear", **resize),
    )
    _check(
        {"x": x},
        lambda x: nn.Upsample(mode="bilinear", **resize)(x),
        lambda x: torch.nn.Upsample(mode="bilinear", **resize)(x),
    )


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("rank", [3, 4])
def test_instance_norm(rank, affine) -> None:
    """InstanceNorm1d/2d: output and gradients as PyTorch's; with track_running_stats, the running
    statistics after two training calls, and eval() normalising by them."""
    shape = (2, 3, 5) if rank == 3 else (2, 3, 4, 5)
    name = "InstanceNorm1d" if rank == 3 else "InstanceNorm2d"
    ours = getattr(nn, name)(3, affine=affine, track_running_stats=True, dtype="f64")
    theirs = getattr(torch.nn, name)(3, affine=affine, track_running_stats=True, dtype=torch.float64)
    if affine:
        state = {"weight": RNG.uniform(0.5, 2, 3), "bias": RNG.standard_normal(3)}
        ours.load_state_dict(state | {"running_mean": np.zeros(3), "running_var": np.ones(3)})
        theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    x = RNG.standard_normal(shape) * 2 + 1
    _check({"x": x}, lambda x: ours(x), lambda x: theirs(x))
    ours(verigrad.tensor(x * 3))
    theirs(torch.from_numpy(x * 3))
    for buffer in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, buffer).numpy(), getattr(theirs, buffer).numpy(), rtol=1e-12)
    ours.eval(), theirs.eval()
    _check({"x": x}, lambda x: ours(x), lambda x: theirs(x))
    _check({"x": x}, lambda x: F.instance_norm(x), lambda x: TF.instance_norm(x))


def test_bilinear_and_softmax2d() -> None:
    ours, theirs = nn.Bilinear(3, 4, 2, dtype="f64"), torch.nn.Bilinear(3, 4, 2, dtype=torch.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 4))
    _check({"a": a, "b": b}, lambda a, b: ours(a, b), lambda a, b: theirs(a, b))
    bound = 1 / math.sqrt(3)
    assert np.abs(nn.Bilinear(3, 4, 2).weight.numpy()).max() <= bound
    x = RNG.standard_normal((2, 3, 4, 5))
    _check({"x": x}, lambda x: nn.Softmax2d()(x) * x, lambda x: torch.nn.Softmax2d()(x) * x)


POOL_WINDOWS = [(3, 2, 1, 1), (2, 2, 0, 1), (3, 1, 1, 1), ((2, 3), (2, 1), (1, 0), 1), (3, 3, 1, 2)]


@pytest.mark.parametrize(("kernel", "stride", "padding", "dilation"), POOL_WINDOWS)
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_options_and_unpool(kernel, stride, padding, dilation, ceil_mode) -> None:
    """max_pool2d with ceil_mode and return_indices (the indices equal PyTorch's), and max_unpool2d of
    them (overlapping windows included): values and gradients as PyTorch's."""
    x = RNG.standard_normal((2, 3, 7, 9))
    window = (kernel, stride, padding, dilation)
    ours_v, ours_i = F.max_pool2d(verigrad.tensor(x), *window, ceil_mode, True)
    theirs_v, theirs_i = TF.max_pool2d(torch.from_numpy(x), *window, ceil_mode=ceil_mode, return_indices=True)
    np.testing.assert_array_equal(ours_v.numpy(), theirs_v.numpy())
    np.testing.assert_array_equal(ours_i.numpy(), theirs_i.numpy())
    _check(
        {"x": x},
        lambda x: F.max_pool2d(x, *window, ceil_mode),
        lambda x: TF.max_pool2d(x, *window, ceil_mode),
    )
    if dilation == 1:
        unpool = {"kernel_size": kernel, "stride": stride, "padding": padding, "output_size": x.shape[2:]}
        _check(
            {"v": theirs_v.numpy()},
            lambda v: nn.MaxUnpool2d(kernel, stride, padding)(v, ours_i, x.shape[2:]),
            lambda v: TF.max_unpool2d(v, theirs_i, **unpool),
        )


@pytest.mark.parametrize(("kernel", "stride", "padding"), [(3, 2, 1), (2, 3, 1), ((3, 2), (2, 2), (1, 0))])
@pytest.mark.parametrize(
    ("ceil_mode", "count_include_pad", "divisor_override"),
    [(True, True, None), (True, False, None), (False, False, None), (False, True, 5)],
)
def test_avg_pool_options(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override) -> None:
    x = RNG.standard_normal((2, 3, 7, 9))
    options = (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    _check({"x": x}, lambda x: F.avg_pool2d(x, *options), lambda x: TF.avg_pool2d(x, *options))
    ours, theirs = nn.AvgPool2d(*options), torch.nn.AvgPool2d(*options)
    _check({"x": x}, lambda x: ours(x), lambda x: theirs(x))


@pytest.mark.parametrize("output_size", [(3, 4), 5, (7, 9), (4, None), 1])
def test_adaptive_pools_to_any_size(output_size) -> None:
    x = RNG.standard_normal((2, 3, 7, 9))
    _check(
        {"x": x},
        lambda x: F.adaptive_avg_pool2d(x, output_size),
        lambda x: TF.adaptive_avg_pool2d(x, output_size),
    )
    _check(
        {"x": x},
        lambda x: nn.AdaptiveMaxPool2d(output_size)(x),
        lambda x: torch.nn.AdaptiveMaxPool2d(output_size)(x),
    )


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm(dim) -> None:
    """nn.utils.weight_norm on a Linear and a Conv2d: PyTorch's weight_g/weight_v, the output, and the
    gradients of input, g and v; remove_weight_norm gives the weight back."""
    import warnings

    for ours, theirs, shape in [
        (nn.Linear(4, 3, dtype="f64"), torch.nn.Linear(4, 3, dtype=torch.float64), (5, 4)),
        (nn.Conv2d(2, 3, 3, dtype="f64"), torch.nn.Conv2d(2, 3, 3, dtype=torch.float64), (1, 2, 5, 5)),
    ]:
        ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's weight_norm is deprecated for its parametrization
            torch.nn.utils.weight_norm(theirs, dim=dim)
        nn.utils.weight_norm(ours, dim=dim)
        assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
        for key, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-14, err_msg=key)
        _check({"x": RNG.standard_normal(shape)}, lambda x: ours(x), lambda x: theirs(x))
        for name in ("weight_g", "weight_v"):
            np.testing.assert_allclose(
                getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(), rtol=1e-12, atol=1e-12
            )
        nn.utils.remove_weight_norm(ours)
        torch.nn.utils.remove_weight_norm(theirs)
        assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
        np.testing.assert_allclose(ours.weight.numpy(), theirs.weight.detach().numpy(), rtol=1e-14)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_and_affine_grid(mode, padding_mode, align_corners) -> None:
    """A spatial transformer: affine_grid's positions and grid_sample's values as PyTorch's, and the
    gradients of the image and of theta (through the grid; bilinear only: nearest's grid has none)."""
    x = RNG.standard_normal((2, 3, 5, 6))
    theta = RNG.standard_normal((2, 2, 3)) * 0.8
    theta[:, :, 2] *= 0.3  # some positions outside the image, most inside
    settings = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}

    def ours(x, theta):
        return F.grid_sample(x, F.affine_grid(theta, (2, 3, 4, 7), align_corners), **settings)

    def theirs(x, theta):
        return TF.grid_sample(x, TF.affine_grid(theta, (2, 3, 4, 7), align_corners), **settings)

    if mode == "bilinear":
        _check({"x": x, "theta": theta}, ours, theirs)
    else:
        t = verigrad.tensor(theta)
        _check({"x": x}, lambda x: ours(x, t), lambda x: theirs(x, torch.from_numpy(theta)))
