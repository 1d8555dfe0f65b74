"""verigrad.nn: modules and their state, every layer against a NumPy computation, PyTorch's default
initialisations, and every module built from symbolic sizes and checked with `verigrad.check`."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn
from verigrad.models import digits_cnn

B = verigrad.dims("B")
H, W = verigrad.dims("H W", multiple_of=4)
D, V, T, C = verigrad.dims("nn_d nn_v nn_t nn_c")

TIGHT = {"rtol": 1e-12, "atol": 1e-12}  # f64 modules against f64 NumPy


def t64(a) -> verigrad.Tensor:
    return verigrad.tensor(np.asarray(a, dtype=np.float64))


def set_params(module: nn.Module, **arrays: np.ndarray) -> None:
    """Give named parameters (dots written as "__") chosen values."""
    module.load_state_dict({k.replace("__", "."): v for k, v in arrays.items()}, strict=False)


# Module: discovery, state, modes -------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = verigrad.ones(3, requires_grad=True)
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 3, bias=False)
        self.drop = nn.Dropout(0.5)
        self.register_buffer("seen", verigrad.zeros(1))
        self.factor = 2.0  # not a tensor: neither a parameter nor state

    def forward(self, x):
        return self.drop(self.fc2(self.act(self.fc1(x)))) * self.scale


def test_parameters_are_found_from_attributes_in_order():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]  # own first, then children
    params = list(net.parameters())
    expected = [net.scale, net.fc1.weight, net.fc1.bias, net.fc2.weight]
    assert len(params) == 4 and all(p is q for p, q in zip(params, expected))
    assert all(p.requires_grad for p in params)
    assert [n for n, _ in net.named_buffers()] == ["seen"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2", "drop"]


def test_state_dict_holds_detached_views_and_with_keep_vars_the_tensors_themselves():
    net = Net()
    state = net.state_dict()
    assert set(state) == {"scale", "fc1.weight", "fc1.bias", "fc2.weight", "seen"}
    weight = state["fc1.weight"]
    assert weight is not net.fc1.weight and not weight.requires_grad and net.fc1.weight.requires_grad
    weight.add_(1.0)  # shares the storage, as PyTorch's
    assert weight.tolist() == net.fc1.weight.tolist()
    kept = net.state_dict(keep_vars=True)
    assert kept["fc1.weight"] is net.fc1.weight and kept["seen"] is net.seen
    assert not net.seen.requires_grad and all(p is not net.seen for p in net.parameters())


def test_reassigning_an_attribute_replaces_what_it_registered():
    net = Net()
    net.fc2 = nn.Linear(8, 5)
    assert tuple(net.fc2.weight.shape) == (5, 8)
    assert "fc2.bias" in dict(net.named_parameters())
    net.fc2 = None  # no longer a module: its parameters go
    assert not any(n.startswith("fc2.") for n, _ in net.named_parameters())
    net.scale = verigrad.ones(3)  # a parameter's name keeps a tensor a parameter (frozen)
    assert (
        net.state_dict(keep_vars=True)["scale"] is net.scale
        and dict(net.named_parameters())["scale"] is net.scale
    )
    net.offset = verigrad.ones(3)  # a tensor without grad is a plain attribute, as in PyTorch
    assert "offset" not in net.state_dict() and not any(b is net.offset for b in net.buffers())
    net.seen = verigrad.ones(1)  # a buffer's name keeps a tensor a buffer
    assert net.state_dict(keep_vars=True)["seen"] is net.seen
    net.scale = None
    assert "scale" not in net.state_dict() and net.scale is None


def test_forgetting_super_init_is_a_clear_error():
    class Broken(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match=r"super\(\)\.__init__\(\)"):
        Broken()


def test_train_and_eval_reach_every_submodule():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.train(False)
    assert not net.drop.training


def test_eval_makes_dropout_the_identity_and_train_does_not():
    net = Net()
    x = verigrad.randn(64, 4)
    net.eval()
    a, b = net(x).numpy(), net(x).numpy()
    assert np.array_equal(a, b)
    net.train()
    assert not np.array_equal(net(x).numpy(), a)


def test_zero_grad_clears_every_gradient():
    net = Net()
    net(verigrad.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_load_state_dict_copies_values_in_place():
    a, b = Net(), Net()
    state = {k: v.numpy().copy() + 1 for k, v in a.state_dict().items()}
    weight = b.fc1.weight
    b.load_state_dict(state)
    assert b.fc1.weight is weight  # the same tensors, new values
    for k, v in b.state_dict().items():
        assert np.array_equal(v.numpy(), state[k]), k
    state["fc1.weight"][:] = 0  # a copy was taken
    assert not np.array_equal(b.fc1.weight.numpy(), state["fc1.weight"])
    c = Net()
    c.load_state_dict(b.state_dict())  # tensors work as well as arrays
    assert all(np.array_equal(c.state_dict()[k].numpy(), v.numpy()) for k, v in b.state_dict().items())


def test_load_state_dict_names_every_offending_tensor_and_copies_nothing():
    net = Net()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    state = {k: v + 1 for k, v in before.items()}
    del state["fc1.bias"]  # missing
    state["fc3.weight"] = np.zeros((2, 2), np.float32)  # unexpected
    state["fc2.weight"] = np.zeros((3, 9), np.float32)  # wrong shape
    state["scale"] = np.ones(3, np.float64)  # another dtype: cast when copied, as PyTorch's copy_
    with pytest.raises(ValueError) as info:
        net.load_state_dict(state)
    message = str(info.value)
    assert "missing: fc1.bias" in message
    assert "unexpected: fc3.weight" in message
    assert "fc2.weight: shape [3, 9] in the state, [3, 8] in the model" in message
    assert (
        "scale" not in message and "fc1.weight" not in message and "seen" not in message
    )  # the good ones are not named
    for k, v in net.state_dict().items():  # fc1.weight and seen were fine, and still not copied
        assert np.array_equal(v.numpy(), before[k]), k


def test_non_strict_load_allows_missing_and_extra_but_not_bad_shapes():
    net = Net()
    net.load_state_dict({"fc1.bias": np.full(8, 3.0, np.float32), "other": np.zeros(1)}, strict=False)
    assert np.array_equal(net.fc1.bias.numpy(), np.full(8, 3.0, np.float32))
    with pytest.raises(ValueError, match=r"fc1\.bias: shape"):
        net.load_state_dict({"fc1.bias": np.zeros(7, np.float32)}, strict=False)


# layers against NumPy ---------------------------------------------------------------------------------
def test_linear_forward_and_gradients(rng):
    layer = nn.Linear(5, 3, dtype="f64")
    w, b = rng.standard_normal((3, 5)), rng.standard_normal(3)
    set_params(layer, weight=w, bias=b)
    x, c = rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
    xt = t64(x).requires_grad_()
    y = layer(xt)
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, **TIGHT)
    (y * t64(c)).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), c.T @ x, **TIGHT)
    np.testing.assert_allclose(layer.bias.grad.numpy(), c.sum(0), **TIGHT)
    np.testing.assert_allclose(xt.grad.numpy(), c @ w, **TIGHT)
    no_bias = nn.Linear(5, 3, bias=False)
    assert no_bias.bias is None and [n for n, _ in no_bias.named_parameters()] == ["weight"]


def conv_reference(x, w, b, stride, padding, dilation):
    """Direct NCHW convolution: x [N, C, H, W], w [O, C, KH, KW]."""
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            for ki in range(kh):
                for kj in range(kw):
                    patch = xp[:, :, i * stride + ki * dilation, j * stride + kj * dilation]
                    out[:, :, i, j] += patch @ w[:, :, ki, kj].T
    return out + b[None, :, None, None]


@pytest.mark.parametrize(("stride", "padding", "dilation"), [(1, 1, 1), (2, 1, 1), (1, 2, 2)])
def test_conv2d_nchw_matches_a_direct_convolution(rng, stride, padding, dilation):
    conv = nn.Conv2d(3, 4, 3, stride=stride, padding=padding, dilation=dilation, dtype="f64")
    assert tuple(conv.weight.shape) == (4, 3, 3, 3)
    w, b = rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    set_params(conv, weight=w, bias=b)
    x = rng.standard_normal((2, 3, 7, 6))
    np.testing.assert_allclose(
        conv(t64(x)).numpy(), conv_reference(x, w, b, stride, padding, dilation), **TIGHT
    )


def test_conv2d_nhwc_is_nchw_with_moved_axes(rng):
    conv = nn.Conv2d(3, 4, (3, 2), padding=1, layout="NHWC", dtype="f64")
    assert tuple(conv.weight.shape) == (3, 2, 3, 4)  # [KH, KW, C, O]
    w, b = rng.standard_normal((3, 2, 3, 4)), rng.standard_normal(4)
    set_params(conv, weight=w, bias=b)
    x = rng.standard_normal((2, 6, 5, 3))
    y = conv(t64(x)).numpy()
    expected = conv_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), b, 1, 1, 1)
    np.testing.assert_allclose(y, expected.transpose(0, 2, 3, 1), **TIGHT)


def test_pooling_and_flatten(rng):
    x = rng.standard_normal((2, 3, 6, 8))
    windows = x.reshape(2, 3, 3, 2, 4, 2)
    np.testing.assert_array_equal(nn.MaxPool2d(2)(t64(x)).numpy(), windows.max(axis=(3, 5)))
    np.testing.assert_allclose(nn.AvgPool2d(2)(t64(x)).numpy(), windows.mean(axis=(3, 5)), **TIGHT)
    nhwc = x.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(
        nn.MaxPool2d(2, layout="NHWC")(t64(nhwc)).numpy(), windows.max(axis=(3, 5)).transpose(0, 2, 3, 1)
    )
    strided = nn.MaxPool2d(3, stride=1)(t64(x)).numpy()
    assert strided.shape == (2, 3, 4, 6) and strided[1, 2, 1, 3] == x[1, 2, 1:4, 3:6].max()
    assert nn.Flatten()(t64(x)).numpy().shape == (2, 144)
    np.testing.assert_array_equal(nn.Flatten()(t64(x)).numpy(), x.reshape(2, -1))
    np.testing.assert_array_equal(nn.Flatten(0, 1)(t64(x)).numpy(), x.reshape(6, 6, 8))


def test_dropout_is_seeded_scaled_and_the_identity_in_eval():
    drop = nn.Dropout(0.25)
    x = verigrad.ones(4000)
    verigrad.manual_seed(5)
    a = drop(x).numpy()
    verigrad.manual_seed(5)
    b = drop(x).numpy()
    verigrad.manual_seed(6)
    c = drop(x).numpy()
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert set(np.unique(a).tolist()) == {0.0, np.float32(1 / 0.75)}
    assert abs((a == 0).mean() - 0.25) < 0.03  # 4000 draws: sd of the fraction is 0.007
    drop.eval()
    y = verigrad.randn(3, 5)
    assert np.array_equal(drop(y).numpy(), y.numpy())
    for p in (1.1, -0.1):
        with pytest.raises(ValueError, match="dropout probability"):
            nn.Dropout(p)
    drop.train()
    assert nn.Dropout(1.0)(y).tolist() == [[0.0] * 5] * 3  # PyTorch's p=1: every element dropped


def test_dropout_gradient_is_the_mask():
    drop = nn.Dropout(0.5)
    x = verigrad.ones(200, requires_grad=True)
    y = drop(x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())


def batchnorm_reference(x, weight, bias, mean, var, eps=1e-5):
    shape = (1, -1, 1, 1)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * weight.reshape(
        shape
    ) + bias.reshape(shape)


def test_batchnorm2d_running_stats_and_outputs_match_numpy(rng):
    bn = nn.BatchNorm2d(3, dtype="f64")
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    assert np.array_equal(bn.running_mean.numpy(), np.zeros(3))
    assert np.array_equal(bn.running_var.numpy(), np.ones(3))
    w, b = rng.uniform(0.5, 2, 3), rng.standard_normal(3)
    set_params(bn, weight=w, bias=b)
    running_mean, running_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rng.standard_normal((4, 3, 5, 6)) * (step + 2) + rng.standard_normal((1, 3, 1, 1)) * 3
        y = bn(t64(x)).numpy()
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))  # biased var normalises in training
        np.testing.assert_allclose(y, batchnorm_reference(x, w, b, mean, var), **TIGHT)
        n = x.size // 3
        running_mean = 0.9 * running_mean + 0.1 * mean
        running_var = 0.9 * running_var + 0.1 * var * n / (n - 1)  # unbiased var in the running stats
        np.testing.assert_allclose(bn.running_mean.numpy(), running_mean, **TIGHT)
        np.testing.assert_allclose(bn.running_var.numpy(), running_var, **TIGHT)
    bn.eval()
    x = rng.standard_normal((2, 3, 4, 4))
    y = bn(t64(x)).numpy()
    np.testing.assert_allclose(y, batchnorm_reference(x, w, b, running_mean, running_var), **TIGHT)
    np.testing.assert_allclose(bn.running_mean.numpy(), running_mean, **TIGHT)  # eval does not update
    np.testing.assert_allclose(bn.running_var.numpy(), running_var, **TIGHT)


def test_batchnorm2d_f32_momentum_and_nhwc(rng):
    bn = nn.BatchNorm2d(2, momentum=0.3)
    bn_nhwc = nn.BatchNorm2d(2, momentum=0.3, layout="NHWC")
    x = rng.standard_normal((3, 2, 4, 5)).astype(np.float32) + 1.5
    y = bn(verigrad.tensor(x)).numpy()
    y_nhwc = bn_nhwc(verigrad.tensor(x.transpose(0, 2, 3, 1))).numpy()
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=(0, 2, 3)), x64.var(axis=(0, 2, 3))
    expected = batchnorm_reference(x64, np.ones(2), np.zeros(2), mean, var)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_nhwc, expected.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    for m in (bn, bn_nhwc):
        np.testing.assert_allclose(m.running_mean.numpy(), 0.3 * mean, rtol=1e-6)
        np.testing.assert_allclose(m.running_var.numpy(), 0.7 + 0.3 * var * 60 / 59, rtol=1e-6)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_batchnorm2d_compiled_keeps_the_running_stats_eager_keeps(rng, backend):
    """A compiled step is traced with a symbolic batch: Bessel's n / (n - 1) must still be applied to
    the running variance (it was 1 there), for every batch size the plan is bound to."""
    batches = [rng.standard_normal((n, 3, 5, 4)).astype(np.float32) * 2 + 1 for n in (4, 2, 4, 7)]
    stats = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        with verigrad.backend(backend):
            bn = nn.BatchNorm2d(3)
            step = verigrad.compile(lambda x: bn(x).sum()) if compiled else (lambda x: bn(x).sum())
            for x in batches:
                step(verigrad.tensor(x))
            stats.append([bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()])
    for eager, compiled in zip(*stats):
        assert eager.tobytes() == compiled.tobytes(), (eager, compiled)
    var = 1.0
    for x in batches:  # and they are the unbiased ones
        var = 0.9 * var + 0.1 * x.astype(np.float64).var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(stats[1][1], var, rtol=1e-5)


def test_layer_norm_and_rms_norm(rng):
    x = rng.standard_normal((2, 3, 6)) * 3 + 1
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    ln = nn.LayerNorm(6, dtype="f64")
    assert np.array_equal(ln.weight.numpy(), np.ones(6)) and np.array_equal(ln.bias.numpy(), np.zeros(6))
    set_params(ln, weight=w, bias=b)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(ln(t64(x)).numpy(), (x - mean) / np.sqrt(var + 1e-5) * w + b, **TIGHT)
    plain = nn.LayerNorm(6, elementwise_affine=False, dtype="f64")
    assert list(plain.parameters()) == []
    np.testing.assert_allclose(plain(t64(x)).numpy(), (x - mean) / np.sqrt(var + 1e-5), **TIGHT)
    rms = nn.RMSNorm(6, eps=1e-6, dtype="f64")
    set_params(rms, weight=w)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(rms(t64(x)).numpy(), expected, **TIGHT)


def test_embedding_picks_rows():
    emb = nn.Embedding(10, 4)
    idx = np.array([[1, 9, 1], [0, 3, 7]])
    out = emb(verigrad.tensor(idx)).numpy()
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, emb.weight.numpy()[idx])


@pytest.mark.parametrize(
    ("layer", "reference"),
    [
        (nn.ReLU(), lambda x: np.maximum(x, 0)),
        (nn.GELU(), lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
        (
            nn.GELU("tanh"),
            lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        ),
        (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
        (nn.Tanh(), np.tanh),
        (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    ],
    ids=["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"],
)
def test_activations(layer, reference, rng):
    x = rng.standard_normal((3, 7)) * 3
    np.testing.assert_allclose(layer(t64(x)).numpy(), reference(x), rtol=1e-12, atol=1e-14)


def test_cross_entropy_loss(rng):
    logits, target = rng.standard_normal((5, 4)) * 2, np.array([0, 3, 1, 1, 2])
    shifted = logits - logits.max(1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    per_item = -log_p[np.arange(5), target]
    for reduction, expected in (("mean", per_item.mean()), ("sum", per_item.sum()), ("none", per_item)):
        got = nn.CrossEntropyLoss(reduction=reduction)(t64(logits), verigrad.tensor(target)).numpy()
        np.testing.assert_allclose(got, expected, **TIGHT)
    lt = t64(logits).requires_grad_()
    nn.CrossEntropyLoss()(lt, verigrad.tensor(target)).backward()
    softmax = np.exp(log_p)
    np.testing.assert_allclose(lt.grad.numpy(), (softmax - np.eye(4)[target]) / 5, **TIGHT)


def test_mse_loss(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(nn.MSELoss()(t64(a), t64(b)).numpy(), ((a - b) ** 2).mean(), **TIGHT)
    np.testing.assert_allclose(
        nn.MSELoss(reduction="sum")(t64(a), t64(b)).numpy(), ((a - b) ** 2).sum(), **TIGHT
    )
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="max")
    with pytest.raises(TypeError, match="size_average must be a bool or None"):
        nn.MSELoss("sum")  # PyTorch's first argument is size_average: a string there is refused
    with pytest.warns(UserWarning, match="please use reduction='sum'"):
        summed = nn.MSELoss(size_average=False)
    assert summed.reduction == "sum"


def test_sequential_runs_in_order_and_indexes():
    seq = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    assert len(seq) == 3 and isinstance(seq[1], nn.Tanh) and list(seq) == [seq[0], seq[1], seq[2]]
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = verigrad.randn(3, 4)
    np.testing.assert_array_equal(seq(x).numpy(), seq[2](seq[1](seq[0](x))).numpy())
    with pytest.raises(NotImplementedError):
        nn.ModuleList(nn.ReLU())(x)


def test_module_lists_grow_and_take_iterables_as_in_pytorch():
    blocks = nn.ModuleList([nn.Linear(2, 3), nn.ReLU()])  # PyTorch's form: one iterable
    assert len(blocks) == 2 and isinstance(blocks[1], nn.ReLU)
    blocks.append(nn.Linear(3, 1)).extend([nn.Tanh()])
    assert [n for n, _ in blocks.named_children()] == ["0", "1", "2", "3"]
    assert [n for n, _ in blocks.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(nn.ModuleList()) == 0 and len(nn.ModuleList(nn.ReLU(), nn.Tanh())) == 2
    seq = nn.Sequential(nn.Linear(2, 2)).append(nn.ReLU())
    assert len(seq) == 2
    seq.add_module("head", nn.Linear(2, 1))
    assert seq(verigrad.randn(4, 2)).shape == (4, 1)
    with pytest.raises(TypeError, match="add_module needs a Module, got int"):
        seq.add_module("x", 3)


def test_apply_buffers_and_freezing():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm2d(4), nn.Linear(4, 2))
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "BatchNorm2d", "Linear", "Sequential"]  # children first
    assert [b.shape for b in model.buffers()] == [(4,), (4,), ()]
    with verigrad.no_grad():
        model.apply(lambda m: m.bias.zero_() if isinstance(m, nn.Linear) else None)
    assert not model[2].bias.numpy().any()

    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert net[0].requires_grad_(False) is net[0]
    opt = verigrad.optim.Adam(net.parameters(), lr=0.1)  # frozen parameters are accepted, and left alone
    frozen, trained = net[0].weight.numpy().copy(), net[2].weight.numpy().copy()
    for _ in range(2):
        opt.zero_grad()
        net(verigrad.randn(5, 3)).sum().backward()
        opt.step()
    assert net[0].weight.grad is None and np.array_equal(net[0].weight.numpy(), frozen)
    assert not np.array_equal(net[2].weight.numpy(), trained)
    with pytest.raises(ValueError, match="parameter 0 is a i64 tensor; optimizers train float tensors"):
        verigrad.optim.SGD([verigrad.tensor([1, 2])], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is list"):
        verigrad.optim.SGD([net[2].weight, [1.0]], lr=0.1)


def _train_three_steps(net, opt, compiled: bool, dtype: type = np.float32) -> list[np.ndarray]:
    """Three steps of summing the output, eagerly or compiled; the parameters after them."""

    def step(x):
        opt.zero_grad()
        loss = net(x).sum()
        loss.backward()
        opt.step()
        return loss

    run = verigrad.compile(step) if compiled else step
    x = verigrad.tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(dtype))
    for _ in range(3):
        run(x)
    return [p.numpy().copy() for p in net.parameters()]


def test_a_compiled_step_leaves_a_frozen_layer_as_the_eager_one_does():
    weights = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        net[0].requires_grad_(False)
        weights.append(_train_three_steps(net, verigrad.optim.Adam(net.parameters(), lr=0.1), compiled))
    for eager, compiled in zip(*weights):
        assert eager.tobytes() == compiled.tobytes()


@pytest.mark.parametrize("compiled", [False, True])
def test_an_optimizer_made_before_double_trains_as_one_made_after(compiled):
    """PyTorch makes the state at the first step, in the parameters' dtype then: so does verigrad for a
    parameter not updated yet (the state made with the optimizer was f32)."""
    weights = []
    for made_before in (True, False):
        verigrad.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        if made_before:
            opt = verigrad.optim.Adam(net.parameters(), lr=0.1)
        net.double()
        if not made_before:
            opt = verigrad.optim.Adam(net.parameters(), lr=0.1)
        weights.append(_train_three_steps(net, opt, compiled, np.float64))
        assert {t.dtype for s in opt.state.values() for name, t in s.items() if name != "step"} == {
            verigrad.f64
        }
    for before, after in zip(*weights):
        assert before.dtype == np.float64 and before.tobytes() == after.tobytes()


# initialisation -------------------------------------------------------------------------------------
def assert_uniform(values: np.ndarray, bound: float) -> None:
    """All within ±bound, and spread as U(-bound, bound): std bound/sqrt(3), half within bound/2."""
    v = values.ravel().astype(np.float64)
    assert np.abs(v).max() <= bound
    assert v.max() > 0.99 * bound and v.min() < -0.99 * bound
    std = bound / math.sqrt(3)
    assert abs(v.std() / std - 1) < 0.02, (v.std(), std)
    assert abs(v.mean()) < 6 * std / math.sqrt(v.size)
    assert abs((np.abs(v) < bound / 2).mean() - 0.5) < 0.02  # flat, not bell-shaped


def test_pytorchs_in_place_initialisers():
    verigrad.manual_seed(3)
    conv = nn.Conv2d(16, 32, 3)  # [O, C, KH, KW]: fan_in 16 * 9, fan_out 32 * 9
    assert nn.init.fans(conv.weight) == (144, 288)
    assert nn.init.kaiming_uniform_(conv.weight, nonlinearity="relu") is conv.weight
    assert_uniform(conv.weight.numpy(), math.sqrt(3) * math.sqrt(2) / math.sqrt(144))
    nn.init.xavier_uniform_(conv.weight, gain=nn.init.calculate_gain("tanh"))
    assert_uniform(conv.weight.numpy(), 5 / 3 * math.sqrt(6 / (144 + 288)))
    layer = nn.Linear(500, 400)
    nn.init.kaiming_normal_(layer.weight, mode="fan_out")  # leaky_relu with a = 0: gain sqrt(2)
    assert abs(layer.weight.numpy().std() / (math.sqrt(2) / math.sqrt(400)) - 1) < 0.02
    nn.init.normal_(layer.weight, mean=1.0, std=0.5)
    assert abs(layer.weight.numpy().mean() - 1.0) < 0.01 and abs(layer.weight.numpy().std() - 0.5) < 0.01
    nn.init.uniform_(layer.bias, -3.0, -2.0)
    assert (layer.bias.numpy() >= -3.0).all() and (layer.bias.numpy() < -2.0).all()
    nn.init.constant_(layer.bias, 0.25)
    assert (layer.bias.numpy() == 0.25).all() and layer.bias.requires_grad
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model.apply(lambda m: nn.init.zeros_(m.weight) if isinstance(m, nn.Linear) else None)
    assert not any(p.numpy().any() for n, p in model.named_parameters() if n.endswith("weight"))
    nn.init.ones_(model[2].bias)
    assert (model[2].bias.numpy() == 1).all()
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="unknown nonlinearity 'swish'"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="fans need a weight of at least 2 dimensions"):
        nn.init.xavier_uniform_(layer.bias)
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        nn.init.kaiming_uniform_(layer.weight, mode="in")


def test_linear_init_is_kaiming_uniform():
    layer = nn.Linear(300, 400)
    assert layer.weight.dtype.name == "f32" and tuple(layer.weight.shape) == (400, 300)
    assert_uniform(layer.weight.numpy(), 1 / math.sqrt(300))
    bias = layer.bias.numpy()
    assert np.abs(bias).max() <= 1 / math.sqrt(300) and bias.std() > 0.4 / math.sqrt(300)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_init_is_kaiming_uniform_over_in_channels_times_kernel(layout):
    conv = nn.Conv2d(64, 64, 3, layout=layout)
    assert_uniform(conv.weight.numpy(), 1 / math.sqrt(64 * 9))
    assert np.abs(conv.bias.numpy()).max() <= 1 / math.sqrt(64 * 9)


def test_embedding_init_is_standard_normal():
    w = nn.Embedding(1000, 64).weight.numpy().astype(np.float64)
    assert abs(w.std() - 1) < 0.02 and abs(w.mean()) < 0.02


def test_same_seed_same_weights_different_seed_different():
    def weights(seed: int) -> dict[str, np.ndarray]:
        verigrad.manual_seed(seed)
        return {k: v.numpy().copy() for k, v in digits_cnn().state_dict().items()}

    a, b, c = weights(3), weights(3), weights(4)
    assert a.keys() == b.keys() == c.keys()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not any(np.array_equal(a[k], c[k]) for k in a)
    assert not np.array_equal(a["0.weight"].ravel()[:10], a["3.weight"].ravel()[:10])  # fresh draws


# symbolic sizes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "shape", "expected"),
    [
        (lambda: nn.Linear(D, V), [B, T, D], [B, T, V]),
        (lambda: nn.Conv2d(C, 8, 3, padding=1), [B, C, H, W], [B, 8, H, W]),
        (lambda: nn.Conv2d(C, D, 3, padding=1, layout="NHWC"), [B, H, W, C], [B, H, W, D]),
        (lambda: nn.MaxPool2d(2), [B, C, H, W], [B, C, H / 2, W / 2]),
        (lambda: nn.AvgPool2d(2), [B, C, H, W], [B, C, H / 2, W / 2]),
        (lambda: nn.Flatten(), [B, C, H, W], [B, C * H * W]),
        (lambda: nn.Dropout(0.1), [B, D], [B, D]),
        (lambda: nn.BatchNorm2d(C), [B, C, H, W], [B, C, H, W]),
        (lambda: nn.BatchNorm2d(C, layout="NHWC"), [B, H, W, C], [B, H, W, C]),
        (lambda: nn.LayerNorm(D), [B, T, D], [B, T, D]),
        (lambda: nn.RMSNorm(D), [B, T, D], [B, T, D]),
        (lambda: nn.ReLU(), [B, D], [B, D]),
        (lambda: nn.GELU(), [B, D], [B, D]),
        (lambda: nn.SiLU(), [B, D], [B, D]),
        (lambda: nn.Tanh(), [B, D], [B, D]),
        (lambda: nn.Sigmoid(), [B, D], [B, D]),
        (lambda: nn.Sequential(nn.Linear(D, T), nn.ReLU(), nn.Linear(T, V)), [B, D], [B, V]),
    ],
    ids=[
        "linear",
        "conv2d",
        "conv2d_nhwc",
        "maxpool",
        "avgpool",
        "flatten",
        "dropout",
        "batchnorm",
        "batchnorm_nhwc",
        "layernorm",
        "rmsnorm",
        "relu",
        "gelu",
        "silu",
        "tanh",
        "sigmoid",
        "sequential",
    ],
)
def test_every_module_builds_from_symbols_and_checks(make, shape, expected):
    with verigrad.abstract():
        module = make()
    assert all(p.is_abstract for p in module.parameters())
    for training in (True, False):
        module.train(training)
        out = verigrad.check(module, verigrad.spec(shape))
        assert out == verigrad.spec(expected), (training, out)


def test_symbolic_parameters_have_symbolic_specs():
    with verigrad.abstract():
        layer, emb, bn = nn.Linear(D, V), nn.Embedding(V, D), nn.BatchNorm2d(C)
    assert layer.weight.spec == verigrad.spec([V, D]) and layer.bias.spec == verigrad.spec([V])
    assert emb.weight.spec == verigrad.spec([V, D])
    assert bn.running_var.spec == verigrad.spec([C])


def test_embedding_and_losses_check_symbolically():
    with verigrad.abstract():
        emb = nn.Embedding(V, D)
    assert verigrad.check(emb, verigrad.spec([B, T], "i64")) == verigrad.spec([B, T, D])
    ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
    assert verigrad.check(ce, verigrad.spec([B, V]), verigrad.spec([B], "i64")) == verigrad.spec([])
    assert verigrad.check(mse, verigrad.spec([B, D]), verigrad.spec([B, D])) == verigrad.spec([])


def test_digits_cnn_checks_for_every_size():
    with verigrad.abstract():
        model = digits_cnn(H, W)
    assert verigrad.check(model, verigrad.spec([B, 1, H, W])) == verigrad.spec([B, 10])
    assert model[7].weight.spec == verigrad.spec([10, 32 * (H / 4) * (W / 4)])
    concrete = digits_cnn(28, 28)
    assert verigrad.check(concrete, verigrad.spec([B, 1, 28, 28])) == verigrad.spec([B, 10])


def cnn_with_linear(in_features) -> nn.Sequential:
    """The digits CNN with a classifier taking `in_features` inputs (the right size or a wrong one)."""
    model = digits_cnn()
    model[7] = nn.Linear(in_features, 10)
    return model


def test_a_sequential_layer_is_replaced_by_index_keeping_its_name():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    model[1], model[-1] = nn.Tanh(), nn.Linear(3, 4)
    assert isinstance(model[1], nn.Tanh) and len(model) == 3
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert model(verigrad.zeros(5, 2)).shape == (5, 4)
    with pytest.raises(IndexError):
        model[3] = nn.ReLU()


def test_a_replaced_attribute_keeps_its_place_in_the_parameter_order():
    """As PyTorch's: `net.first = Linear(...)` does not move `first` after `second` (an optimizer built
    after it sees the parameters in the same order, and state_dict's keys stay in place)."""
    net = nn.Module()
    net.first, net.second = nn.Linear(2, 2), nn.Linear(2, 2)
    net.scale = verigrad.ones(2, requires_grad=True)
    net.first = nn.Linear(2, 3)
    net.scale = verigrad.zeros(2, requires_grad=True)
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "first.weight", "first.bias", "second.weight", "second.bias"
    ]  # fmt: skip
    assert list(net.state_dict())[:3] == ["scale", "first.weight", "first.bias"]


def test_a_wrong_linear_size_is_refused_naming_the_layer_and_the_line():
    with verigrad.abstract():
        good = cnn_with_linear(32 * (H / 4) * (W / 4))
        bad = cnn_with_linear(32 * (H / 4) * (W / 4) + 1)
    assert verigrad.check(good, verigrad.spec([B, 1, H, W])) == verigrad.spec([B, 10])
    with pytest.raises(verigrad.ShapeError) as info:
        line = inspect.currentframe().f_lineno + 1
        verigrad.check(bad, verigrad.spec([B, 1, H, W]))
    message = str(info.value)
    assert "in layer 7 (Linear(in_features=H*W*2+1, out_features=10" in message
    assert "H*W*2" in message and "matmul" in message
    assert f"{Path(__file__).name}:{line}" in message
    assert info.value.where.lineno == line


def test_a_wrong_int_linear_size_is_refused_in_check_and_in_eager_code():
    with verigrad.abstract():
        bad = cnn_with_linear(100)
    with pytest.raises(verigrad.ShapeError, match=r"in layer 7 \(Linear\(in_features=100"):
        verigrad.check(bad, verigrad.spec([B, 1, 8, 8]))
    eager = cnn_with_linear(100)
    with pytest.raises(verigrad.ShapeError) as info:
        line = inspect.currentframe().f_lineno + 1
        eager(verigrad.zeros(2, 1, 8, 8))
    assert "f32[2, 128]" in str(info.value) and "in layer 7 (Linear(in_features=100" in str(info.value)
    assert info.value.where.lineno == line


def test_nested_layers_are_named_by_their_path():
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.ReLU(), nn.Linear(7, 2)))
    with pytest.raises(verigrad.ShapeError, match=r"in layer 1\.1 \(Linear\(in_features=7"):
        model(verigrad.zeros(3, 4))


def test_subpackages_are_reachable_after_a_plain_import():
    code = (
        "import verigrad\n"
        "print(verigrad.nn.Linear, verigrad.optim.SGD, verigrad.data.DataLoader, verigrad.io.save,"
        " verigrad.models.digits_cnn)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_module_dtype_conversion_in_place():
    verigrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    weight = model[0].weight
    before = weight.numpy().copy()
    assert model.double() is model and model.to("cpu") is model
    assert model[0].weight is weight and weight.dtype is verigrad.f64 and weight.requires_grad
    np.testing.assert_array_equal(weight.numpy(), before.astype(np.float64))  # f32 -> f64 is exact
    opt = verigrad.optim.SGD(model.parameters(), lr=0.1)
    x = verigrad.randn(5, 3, dtype="f64")
    model(x).sum().backward()
    opt.step()
    assert model[0].weight.grad.dtype is verigrad.f64 and model(x).dtype is verigrad.f64
    bn = nn.BatchNorm2d(2).double()
    assert bn.running_var.dtype is verigrad.f64
    assert model.float()[2].bias.dtype is verigrad.f32
    with pytest.raises(verigrad.DTypeError, match=r"Module\.to only accepts floating point dtypes, not i64"):
        model.to("i64")
    B = verigrad.dims("B")
    with verigrad.abstract():
        symbolic = nn.Linear(3, 2).double()
    assert verigrad.check(symbolic, verigrad.spec([B, 3], "f64")) == verigrad.spec([B, 2], "f64")


def test_module_half_and_bfloat16_cast_parameters_buffers_and_grads_in_place():
    """As PyTorch's: floats round to nearest even (1/3 is 0x3555 in f16, 0x3EAB in bf16), the gradient is
    cast along (the same tensor), integer buffers stay."""
    layer = nn.Linear(1, 1)
    layer.weight.data.fill_(1 / 3)
    layer(verigrad.ones(1, 1)).sum().backward()
    layer.weight.grad.fill_(1 / 3)
    bn = nn.BatchNorm1d(1)
    weight, grad = layer.weight, layer.weight.grad
    assert layer.half() is layer and layer.weight is weight and weight.requires_grad
    assert weight.dtype is verigrad.f16 and weight.numpy().view(np.uint16)[0, 0] == 0x3555
    assert weight.grad is grad and grad.dtype is verigrad.f16 and grad.numpy()[0, 0] == np.float16(1 / 3)
    assert layer.float().bfloat16() is layer and weight.dtype is verigrad.bf16
    assert weight.payload[0, 0] == 0x3EAB and weight.grad is grad and grad.dtype is verigrad.bf16
    bn.register_buffer("steps", verigrad.tensor([3]))
    assert bn.half().running_mean.dtype is verigrad.f16 and bn.steps.dtype is verigrad.i64
    assert verigrad.tensor([1 / 3]).bfloat16().payload[0] == 0x3EAB


def test_transformer_encoder_layers_are_independent_copies_and_arguments_are_checked():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype="f64")
    encoder = nn.TransformerEncoder(layer, 3)
    weights = [m.linear1.weight for m in encoder.layers]
    assert len({id(w) for w in weights}) == 3 and all(w is not layer.linear1.weight for w in weights)
    np.testing.assert_array_equal(weights[0].numpy(), layer.linear1.weight.numpy())
    assert len(list(encoder.parameters())) == 3 * len(list(layer.parameters()))
    x = verigrad.tensor(np.random.default_rng(0).standard_normal((4, 2, 8)))
    out = encoder(x)
    assert out.shape == (4, 2, 8)
    out.sum().backward()
    assert all(w.grad is not None for w in weights) and layer.linear1.weight.grad is None
    with pytest.raises(ValueError, match="relu or gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(ValueError, match="multiple of num_heads"):
        nn.TransformerEncoderLayer(8, 3)
    with pytest.raises(ValueError, match="num_layers"):
        nn.TransformerEncoder(layer, 0)
    assert nn.LayerNorm(8, bias=False).bias is None and nn.LayerNorm(8).bias is not None


def test_forward_hooks_see_and_replace_arguments_and_output():
    layer = nn.Linear(3, 2, dtype="f64")
    x = verigrad.tensor(np.random.default_rng(1).standard_normal((4, 3)))
    calls = []
    pre = layer.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    post = layer.register_forward_hook(lambda m, args, out: calls.append((m, args[0].shape, out.shape)))
    doubled = layer(x)
    np.testing.assert_allclose(doubled.numpy(), (x * 2).numpy() @ layer.weight.numpy().T + layer.bias.numpy())
    assert calls == [(layer, (4, 3), (4, 2))]
    kw = layer.register_forward_hook(lambda m, args, kwargs, out: out * 0 + 7, with_kwargs=True)
    np.testing.assert_array_equal(layer(x).numpy(), np.full((4, 2), 7.0))
    for handle in (pre, post, kw):
        handle.remove()
    np.testing.assert_allclose(layer(x).numpy(), x.numpy() @ layer.weight.numpy().T + layer.bias.numpy())
    assert len(calls) == 2  # removed: not called again
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    shapes = []
    model[0].register_forward_hook(lambda m, a, o: shapes.append(o.shape))  # an inner layer's output
    model(verigrad.randn(5, 3))
    assert shapes == [(5, 3)]
    with pytest.raises(TypeError, match="must be a function"):
        layer.register_forward_hook(None)


def test_embedding_from_pretrained_and_softmax_dtype():
    table = np.arange(8.0).reshape(4, 2)
    frozen = nn.Embedding.from_pretrained(table)
    np.testing.assert_array_equal(frozen(verigrad.tensor([3, 0])).numpy(), table[[3, 0]])
    assert not frozen.weight.requires_grad  # frozen, yet a parameter (in state_dict), as PyTorch's
    assert next(frozen.parameters()) is frozen.weight and list(frozen.buffers()) == []
    table[0, 0] = 99.0  # a copy: the module does not change with the array
    assert frozen.weight.numpy()[0, 0] == 0.0
    trained = nn.Embedding.from_pretrained(verigrad.tensor(table), freeze=False, padding_idx=1)
    assert trained.weight.requires_grad and trained.padding_idx == 1
    np.testing.assert_array_equal(trained.weight.numpy()[1], table[1])  # the padding row as given
    with pytest.raises(verigrad.ShapeError, match="2-D table"):
        nn.Embedding.from_pretrained(np.ones(3))
    x = verigrad.tensor([1.0, 2.0, 3.0])
    assert F.softmax(x, dim=0, dtype=verigrad.f64).dtype == verigrad.f64
    assert F.log_softmax(x, 0, dtype=verigrad.f64).dtype == verigrad.f64


def test_full_backward_hooks_see_and_replace_the_gradients_by_hand():
    layer = nn.Linear(2, 1, bias=False, dtype="f64")
    layer.load_state_dict({"weight": np.array([[2.0, -1.0]])})
    seen = []
    layer.register_full_backward_pre_hook(lambda m, grad_output: (grad_output[0] * 10,))
    handle = layer.register_full_backward_hook(lambda m, gi, go: seen.append((gi[0].numpy(), go[0].numpy())))
    x = t64([[1.0, 3.0]]).requires_grad_()
    layer(x).sum().backward()
    np.testing.assert_array_equal(seen[0][1], [[10.0]])  # dL/dy = 1, times 10 by the pre-hook
    np.testing.assert_array_equal(seen[0][0], [[20.0, -10.0]])  # through the weight
    np.testing.assert_array_equal(x.grad.numpy(), [[20.0, -10.0]])
    np.testing.assert_array_equal(layer.weight.grad.numpy(), [[10.0, 30.0]])
    handle.remove()
    with pytest.raises(NotImplementedError, match="backward hooks run eagerly only"):
        verigrad.compile(lambda v: layer(v).sum())(t64([[1.0, 3.0]]))  # traced: a hook would run once
