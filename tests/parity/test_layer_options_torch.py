"""Layers' options and data utilities against PyTorch, as programs use them: each layer built in both
libraries with PyTorch's weights loaded into verigrad's, its outputs, gradients and state after some
steps compared; samplers, loaders and datasets compared value by value, raising or not."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
import torch.utils.data as TD

import verigrad
import verigrad.nn.functional as VF
import verigrad.utils.data as VD

TOL = {"rtol": 1e-9, "atol": 1e-9}


def _build(lib: Any, name: str, args: tuple, kw: dict) -> Any:
    return getattr(lib.nn, name)(*args, **kw)


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def _check_layer(
    name: str, args: tuple, kw: dict, shape: tuple, *, train: bool = False, steps: int = 1,
    call: Callable[[Any, Any], Any] = lambda m, x: m(x),
) -> None:  # fmt: skip
    """Outputs, state after `steps` calls and the gradients of input and parameters, in f64."""
    x = np.random.default_rng(0).standard_normal(shape)
    torch.manual_seed(0)
    theirs = _build(torch, name, args, kw).double().train(train)
    ours = _build(verigrad, name, args, kw).double()
    ours.load_state_dict({k: verigrad.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    ours.train(train)
    tx, vx = (
        torch.from_numpy(x.copy()).requires_grad_(True),
        verigrad.from_numpy(x.copy()).requires_grad_(True),
    )
    for _ in range(steps):
        expected, out = _first(call(theirs, tx)), _first(call(ours, vx))
    assert tuple(out.shape) == tuple(expected.shape)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), **TOL)
    ours_state = ours.state_dict()
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours_state[k].numpy(), v.numpy(), **TOL, err_msg=k)
    cotangent = np.random.default_rng(1).standard_normal(out.numpy().shape)
    expected.backward(torch.from_numpy(cotangent.copy()))
    out.backward(verigrad.from_numpy(cotangent.copy()))
    np.testing.assert_allclose(vx.grad.numpy(), tx.grad.numpy(), **TOL, err_msg="d/dx")
    for (k, p), (_, q) in zip(theirs.named_parameters(), ours.named_parameters()):
        if p.grad is not None:
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), **TOL, err_msg=f"d/d{k}")


LAYERS = {
    "conv1d same even kernel, dilation": (
        "Conv1d",
        (2, 3, 4),
        {"padding": "same", "dilation": 3},
        (2, 2, 11),
    ),
    "conv2d same even kernel": (
        "Conv2d",
        (2, 3, (2, 4)),
        {"padding": "same", "dilation": (2, 1)},
        (2, 2, 7, 8),
    ),
    "conv3d same": ("Conv3d", (2, 2, 2), {"padding": "same"}, (1, 2, 4, 5, 5)),
    **{
        f"conv2d {mode}": (
            "Conv2d",
            (2, 3, 3),
            {"padding": (1, 2), "padding_mode": mode, "stride": 2},
            (2, 2, 7, 8),
        )
        for mode in ("reflect", "replicate", "circular")
    },
    "conv2d same circular": (
        "Conv2d",
        (2, 3, 4),
        {"padding": "same", "padding_mode": "circular"},
        (2, 2, 7, 8),
    ),
    "conv2d depthwise": ("Conv2d", (4, 8, 3), {"groups": 4, "padding": 1}, (2, 4, 6, 6)),
    "conv1d stride > kernel": ("Conv1d", (2, 3, 2), {"stride": 5, "padding": 1}, (2, 2, 13)),
    "conv_transpose1d": (
        "ConvTranspose1d",
        (2, 4, 3),
        {"stride": 3, "output_padding": 2, "groups": 2, "dilation": 2},
        (2, 2, 5),
    ),
    "conv_transpose2d": (
        "ConvTranspose2d",
        (4, 6, 3),
        {"stride": 2, "output_padding": 1, "groups": 2, "dilation": 2, "padding": 1},
        (2, 4, 5, 5),
    ),
    "max_pool2d ceil, padding": (
        "MaxPool2d",
        (4,),
        {"stride": 3, "padding": 2, "ceil_mode": True},
        (1, 1, 9, 9),
    ),
    "avg_pool2d ceil, padding, no pad count": (
        "AvgPool2d",
        (3,),
        {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (1, 2, 6, 6),
    ),
    "avg_pool3d ceil, padding": (
        "AvgPool3d",
        (3,),
        {"stride": 2, "padding": 1, "ceil_mode": True},
        (1, 1, 6, 5, 6),
    ),
    "avg_pool2d divisor_override": (
        "AvgPool2d",
        (3,),
        {"stride": 2, "padding": 1, "ceil_mode": True, "divisor_override": 2},
        (1, 2, 6, 6),
    ),
    "adaptive_max_pool3d": ("AdaptiveMaxPool3d", ((3, 3, 3),), {}, (1, 2, 7, 7, 7)),
    "adaptive_avg_pool2d None": ("AdaptiveAvgPool2d", ((None, 3),), {}, (1, 2, 5, 7)),
    "lp_pool1d ceil": ("LPPool1d", (2, 3), {"stride": 2, "ceil_mode": True}, (1, 2, 10)),
    "group_norm": ("GroupNorm", (2, 4), {"affine": False, "eps": 1e-3}, (2, 4, 5)),
    "layer_norm no bias": ("LayerNorm", ((3, 5),), {"bias": False}, (2, 3, 5)),
    "rms_norm eps None": ("RMSNorm", (5,), {"eps": None}, (2, 3, 5)),
    "upsample nearest-exact": ("Upsample", (), {"scale_factor": 1.7, "mode": "nearest-exact"}, (1, 2, 5, 5)),
    "upsample bicubic align_corners": (
        "Upsample",
        (),
        {"size": (7, 9), "mode": "bicubic", "align_corners": True},
        (1, 2, 5, 5),
    ),
    "fold": ("Fold", ((5, 6), (2, 3)), {"dilation": (1, 2), "padding": 1, "stride": (2, 1)}, (2, 12, 12)),
    # unbatched columns and images, as PyTorch takes them (verigrad refused them)
    "fold unbatched": ("Fold", ((4, 4), 2), {}, (8, 9)),
    "unfold unbatched": ("Unfold", (2,), {"padding": 1}, (2, 5, 6)),
}


@pytest.mark.parametrize("case", LAYERS, ids=str)
def test_layer_options(case: str) -> None:
    name, args, kw, shape = LAYERS[case]
    _check_layer(name, args, kw, shape)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize(
    ("name", "kw", "shape"),
    [
        ("BatchNorm2d", {"momentum": None}, (4, 3, 2, 2)),
        ("BatchNorm2d", {"track_running_stats": False}, (4, 3, 2, 2)),
        ("BatchNorm3d", {"affine": False}, (2, 3, 2, 2, 2)),
        ("InstanceNorm2d", {"track_running_stats": True}, (2, 3, 4, 4)),
        # momentum=None: PyTorch's instance norm keeps its running statistics still (verigrad raised)
        ("InstanceNorm1d", {"track_running_stats": True, "affine": True, "momentum": None}, (2, 3, 4)),
    ],
)
def test_norms_and_their_running_statistics(name: str, kw: dict, shape: tuple, train: bool) -> None:
    _check_layer(name, (3,), kw, shape, train=train, steps=3)


RECURRENT = {
    "lstm proj_size bidirectional batch_first": (
        "LSTM",
        (3, 5, 2),
        {"proj_size": 2, "bidirectional": True, "batch_first": True},
        (2, 4, 3),
        lambda m, x: m(x)[0],
    ),
    "lstm h_n with proj_size": (
        "LSTM",
        (3, 4, 2),
        {"bidirectional": True, "proj_size": 3},
        (4, 2, 3),
        lambda m, x: m(x)[1][0],
    ),
    "lstm dropout in eval": (
        "LSTM",
        (3, 4, 2),
        {"dropout": 0.5, "bidirectional": True},
        (4, 2, 3),
        lambda m, x: m(x)[0],
    ),
    "gru batch_first h0": (
        "GRU",
        (3, 4, 2),
        {"batch_first": True, "bidirectional": True},
        (2, 5, 3),
        lambda m, x: m(x, x.new_ones(4, 2, 4) * 0.1)[0],
    ),
    "rnn relu": (
        "RNN",
        (3, 4),
        {"nonlinearity": "relu", "bidirectional": True, "batch_first": True},
        (2, 5, 3),
        lambda m, x: m(x)[1],
    ),
    "lstm_cell no hidden": ("LSTMCell", (3, 4), {}, (3,), lambda m, x: m(x)[1]),
    "gru_cell no hidden": ("GRUCell", (3, 4), {}, (2, 3), lambda m, x: m(x)),
}


@pytest.mark.parametrize("case", RECURRENT, ids=str)
def test_recurrent_options(case: str) -> None:
    name, args, kw, shape, call = RECURRENT[case]
    _check_layer(name, args, kw, shape, call=call)


@pytest.mark.parametrize(
    "kw",
    [
        {"scale_factor": 1.7, "recompute_scale_factor": True},
        {"scale_factor": 0.45, "mode": "bilinear", "recompute_scale_factor": False},
        {"scale_factor": 0.45, "mode": "bilinear", "antialias": True},
        {"scale_factor": 1.3, "mode": "nearest-exact", "recompute_scale_factor": True},
        {"size": (3, 2), "mode": "area"},
    ],
    ids=str,
)
def test_interpolate_options(kw: dict) -> None:
    x = np.random.default_rng(2).standard_normal((1, 2, 7, 6))
    expected = TF.interpolate(torch.from_numpy(x), **kw).numpy()
    np.testing.assert_allclose(VF.interpolate(verigrad.from_numpy(x), **kw).numpy(), expected, **TOL)


def _value(o: Any) -> Any:
    """A loader's batch as plain Python: tensors as (dtype, shape, values), containers kept by kind."""
    if hasattr(o, "shape") and hasattr(o, "numpy"):
        a = np.asarray(o.numpy())
        return str(a.dtype), a.shape, a.tolist()
    if isinstance(o, dict):
        return {k: _value(v) for k, v in o.items()}
    if isinstance(o, tuple) and hasattr(o, "_fields"):
        return type(o).__name__, tuple(_value(v) for v in o)
    if isinstance(o, list | tuple):
        return type(o).__name__, [_value(v) for v in o]
    return type(o).__name__, o


def _outcome(call: Callable[[Any], Any], lib: Any) -> Any:
    torch.manual_seed(0)
    try:
        return _value(call(TD if lib is torch else VD))
    except Exception:  # the kind of error differs between the libraries; raising or not must not
        return "raises"


Pair = collections.namedtuple("Pair", "a b")
SAMPLES = {
    "ints": [1, 2, 3, 4],
    "floats": [1.5, 2.5, 3.0, 4.0],
    "bools": [True, False, True, True],
    "numpy f32": [np.ones(2, np.float32) * i for i in range(4)],
    "numpy i16 scalars": [np.int16(i) for i in range(4)],
    "numpy f16 scalars": [np.float16(i) for i in range(4)],
    "numpy 0-d": [np.array(i) for i in range(4)],
    "dicts": [{"x": i, "y": float(i), "s": "a"} for i in range(4)],
    "tuples": [(i, float(i)) for i in range(4)],
    "namedtuples": [Pair(i, np.float64(i)) for i in range(4)],
    "nested": [{"a": (i, [float(i)])} for i in range(4)],
}
LOADERS: dict[str, Callable[[Any], Any]] = {
    **{f"collate {k}": (lambda D, s=s: list(D.DataLoader(s, batch_size=3))) for k, s in SAMPLES.items()},
    **{
        f"batch_size=None {k}": (lambda D, s=s: list(D.DataLoader(s, batch_size=None)))
        for k, s in SAMPLES.items()
    },
    "drop_last and len": lambda D: (
        len(D.DataLoader(range(5), batch_size=2, drop_last=True)),
        list(D.DataLoader(range(5), batch_size=2, drop_last=True)),
    ),
    "batch_sampler": lambda D: list(
        D.DataLoader(range(7), batch_sampler=D.BatchSampler(D.SequentialSampler(range(7)), 3, True))
    ),
    "batch_sampler with batch_size": lambda D: D.DataLoader(
        range(7), batch_size=2, batch_sampler=D.BatchSampler(range(7), 3, True)
    ),
    "batch_size=None with drop_last": lambda D: D.DataLoader(range(7), batch_size=None, drop_last=True),
    "weighted sampler never draws a zero weight": lambda D: sorted(
        set(D.WeightedRandomSampler([0.0, 1.0, 0.0], 5))
    ),
    "weighted sampler without replacement": lambda D: sorted(
        D.WeightedRandomSampler([1.0] * 4, 4, replacement=False)
    ),
    # invalid weights: PyTorch refuses them (verigrad drew from them)
    "weighted sampler negative weight": lambda D: list(D.WeightedRandomSampler([-1.0, 1.0], 4)),
    "weighted sampler zero weights": lambda D: list(D.WeightedRandomSampler([0.0, 0.0], 4)),
    "weighted sampler NaN weight": lambda D: list(D.WeightedRandomSampler([float("nan"), 1.0], 4)),
    "weighted sampler infinite weight": lambda D: list(D.WeightedRandomSampler([float("inf"), 1.0], 4)),
    # NumPy arrays PyTorch cannot convert either raise (verigrad's passed through unconverted)
    "batch_size=None datetime64": lambda D: list(
        D.DataLoader([np.array(["2020-01-01"], "datetime64[D]")], batch_size=None)
    ),
    "random_split fractions": lambda D: [len(s) for s in D.random_split(range(11), [0.1, 0.2, 0.3, 0.4])],
    "random_split a permutation": lambda D: sorted(
        i for s in D.random_split(range(10), [0.5, 0.5]) for i in s
    ),
    "random_split bad fractions": lambda D: D.random_split(range(10), [0.3, 0.6]),
    # float lengths adding up: PyTorch refuses them (verigrad truncated [2.5, 2.5] to [2, 2])
    "random_split float lengths": lambda D: [len(s) for s in D.random_split(range(5), [2.5, 2.5])],
    "random_split integer tensor lengths": lambda D: [
        len(s) for s in D.random_split(range(7), (torch if D is TD else verigrad).tensor([3, 4]))
    ],
    "subset": lambda D: (len(D.Subset(list(range(10)), [1, 3, 5])), D.Subset(list(range(10)), [1, 3, 5])[-1]),
    "concat": lambda D: (
        len(D.ConcatDataset([range(3), range(4)])),
        D.ConcatDataset([range(3), range(4)])[-7],
    ),
    "concat out of range": lambda D: D.ConcatDataset([range(3), range(4)])[-8],
    "tensor dataset": lambda D: D.TensorDataset(
        torch.arange(6).reshape(3, 2) if D is TD else verigrad.arange(6).reshape(3, 2)
    )[-1],
}


@pytest.mark.parametrize("case", LOADERS, ids=str)
def test_data_utilities(case: str) -> None:
    call = LOADERS[case]
    assert _outcome(call, verigrad) == _outcome(call, torch)


def test_multinomial_refuses_invalid_weights_as_torch() -> None:
    for weights in ([-1.0, 1.0], [[1.0, 1.0], [0.0, 0.0]], [float("inf"), 1.0]):
        for lib in (torch, verigrad):
            with pytest.raises((RuntimeError, ValueError)):
                lib.multinomial(lib.tensor(weights, dtype=lib.float64), 1, True)


@pytest.mark.parametrize("lib", [torch, verigrad], ids=lambda lib: lib.__name__)
def test_rms_norm_default_eps_of_f16_is_f32s_as_torch(lib: Any) -> None:
    """PyTorch computes f16 in f32, with f32's epsilon (f16's, 8192 times larger, swamped small rows)."""
    x = lib.from_numpy(np.random.default_rng(3).standard_normal((4, 8)).astype(np.float16) * 1e-3)
    f32_eps = float(np.finfo(np.float32).eps)
    functional = lib.nn.functional
    np.testing.assert_array_equal(
        functional.rms_norm(x, (8,)).numpy(), functional.rms_norm(x, (8,), eps=f32_eps).numpy()
    )


def test_instance_norm_refuses_one_spatial_element_when_training_as_torch() -> None:
    for lib in (torch, verigrad):
        with pytest.raises(ValueError, match="more than 1 spatial element"):
            lib.nn.InstanceNorm1d(3)(lib.ones(2, 3, 1))
        lib.nn.InstanceNorm1d(3, track_running_stats=True).eval()(lib.ones(2, 3, 1))  # running stats: no need


def test_instance_norm_warns_of_unused_num_features_as_torch() -> None:
    for lib in (torch, verigrad):
        with pytest.warns(UserWarning, match="does not match num_features"):
            lib.nn.InstanceNorm1d(3)(lib.ones(2, 4, 5))


@pytest.mark.parametrize(
    ("shape", "kernel", "padding", "refused"),
    [
        ((1, 1, 3, 5, 5), (4, 2, 2), 1, True),
        ((2, 3, 3, 3), 4, 2, True),
        ((1, 1, 4, 5, 5), (4, 2, 2), 1, False),
    ],
)
def test_avg_pool3d_refuses_an_input_smaller_than_its_kernel_as_torch(
    shape, kernel, padding, refused
) -> None:
    """Even where padding makes room: PyTorch's avg_pool3d checks the unpadded input (its 2-D does not)."""
    x = np.random.default_rng(4).standard_normal(shape)
    for lib in (torch, verigrad):
        call = lambda: lib.nn.functional.avg_pool3d(lib.from_numpy(x.copy()), kernel, 1, padding)
        if refused:
            with pytest.raises((RuntimeError, ValueError), match="smaller than kernel size"):
                call()
        else:
            call()


def test_loader_refuses_complex_arrays_as_the_readme_says() -> None:
    """verigrad has no complex dtype: a complex sample raises a TypeError (batched or not), never passes
    through as a NumPy array."""
    sample = np.ones(2, np.complex64)
    for batch_size in (None, 2):
        with pytest.raises(TypeError, match="complex64"):
            list(VD.DataLoader([sample, sample], batch_size=batch_size))


@pytest.mark.parametrize(
    ("shape", "widths", "mode"),
    [
        ((2, 2, 2), (-3, 1), "constant"),  # more cropped than there is: PyTorch's narrow refuses it
        ((2, 2, 1, 1), (2, -2, 0, -1), "constant"),
        ((2, 2, 4), (-2, -2), "replicate"),  # nothing left: refused
        ((2, 2, 4), (-2, -2), "reflect"),
        ((1, 1, 3, 3), (-3, 0, -3, 0), "reflect"),
        ((1, 1, 3, 3), (-3, 0, 0, 0), "replicate"),  # one padded axis keeps its elements: taken
        ((2, 2, 1, 1, 1), (1, 2, -2, 1, 1, -1), "replicate"),
        ((2, 3), (-1, -2), "constant"),
        ((2, 5), (-2, 3), "reflect"),
    ],
)
def test_pad_crops_and_empties_as_torch(shape, widths, mode) -> None:
    x = np.random.default_rng(5).standard_normal(shape)
    results = []
    for lib in (torch, verigrad):
        try:
            results.append(lib.nn.functional.pad(lib.from_numpy(x.copy()), widths, mode=mode).numpy())
        except (RuntimeError, ValueError):
            results.append(None)
    theirs, ours = results
    assert (ours is None) == (theirs is None), f"verigrad: {ours}, torch: {theirs}"
    if theirs is not None:
        np.testing.assert_array_equal(ours, theirs)


def test_identity_takes_and_ignores_any_arguments_as_torch() -> None:
    """PyTorch's documented example: nn.Identity(54, unused_argument1=0.1, unused_argument2=False)."""
    x = np.random.default_rng(6).standard_normal((2, 3))
    for lib in (torch, verigrad):
        layer = lib.nn.Identity(54, unused_argument1=0.1, unused_argument2=False)
        np.testing.assert_array_equal(layer(lib.from_numpy(x.copy())).numpy(), x)


@pytest.mark.parametrize("output_size", [(1, 1, 6, 6), (7, 7), (1, 6, 6), (4, 4), (8, 8), (9, 9)])
def test_max_unpool_output_size_as_torch(output_size) -> None:
    """PyTorch takes 2 or 4 sizes, each strictly within a stride of the default (verigrad took any)."""
    x = np.random.default_rng(9).standard_normal((1, 2, 6, 6))
    results = []
    for lib in (torch, verigrad):
        F = lib.nn.functional
        values, indices = F.max_pool2d(lib.from_numpy(x.copy()), 2, return_indices=True)
        try:
            results.append(F.max_unpool2d(values, indices, 2, output_size=output_size).numpy())
        except ValueError:
            results.append(None)
    theirs, ours = results
    assert (ours is None) == (theirs is None)
    if theirs is not None:
        np.testing.assert_array_equal(ours, theirs)


def test_grid_sample_and_affine_grid_warn_of_their_default_as_torch() -> None:
    theta = np.random.default_rng(10).standard_normal((1, 2, 3))
    for lib in (torch, verigrad):
        F, t = lib.nn.functional, lib.from_numpy(theta.copy())
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            grid = F.affine_grid(t, [1, 1, 3, 3])
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            F.grid_sample(lib.ones(1, 1, 3, 3, dtype=lib.float64), grid)
