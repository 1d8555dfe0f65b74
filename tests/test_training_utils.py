"""Losses, gradient clipping and learning-rate schedules: values by hand and against NumPy, compiled
steps against eager ones, and the refusals. PyTorch's values: tests/parity/test_training_utils_torch.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn
from verigrad.cli.trainer import training_step
from verigrad.optim import SGD, Adam, lr_scheduler


def test_losses_by_hand() -> None:
    x, t = verigrad.tensor([0.5, -1.0, 3.0]), verigrad.tensor([0.0, 1.0, 1.0])
    assert F.mse_loss(x, t).item() == pytest.approx((0.25 + 4 + 4) / 3)
    assert F.l1_loss(x, t, reduction="sum").item() == pytest.approx(0.5 + 2 + 2)
    np.testing.assert_allclose(F.smooth_l1_loss(x, t, reduction="none").numpy(), [0.125, 1.5, 1.5])
    np.testing.assert_allclose(F.huber_loss(x, t, reduction="none", delta=2.0).numpy(), [0.125, 2.0, 2.0])
    log_probs = verigrad.tensor(np.log([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]]))
    classes = verigrad.tensor([1, 0, -100])
    assert F.nll_loss(log_probs, classes).item() == pytest.approx(-(np.log(0.8) + np.log(0.6)) / 2)
    np.testing.assert_allclose(
        F.nll_loss(log_probs, classes, reduction="none").numpy(), [-np.log(0.8), -np.log(0.6), 0]
    )
    p, y = verigrad.tensor([0.9, 0.2]), verigrad.tensor([1.0, 0.0])
    assert F.binary_cross_entropy(p, y).item() == pytest.approx(-(np.log(0.9) + np.log(0.8)) / 2, rel=1e-6)
    logits = verigrad.tensor([800.0, -800.0, 0.0])  # no overflow either way
    np.testing.assert_allclose(
        F.binary_cross_entropy_with_logits(
            logits, verigrad.tensor([1.0, 1.0, 0.0]), reduction="none"
        ).numpy(),
        [0.0, 800.0, np.log(2.0)],
        rtol=1e-6,
    )


def test_loss_modules_and_their_refusals() -> None:
    x, t = verigrad.tensor([[1.0, 2.0]]), verigrad.tensor([[0.0, 0.0]])
    assert nn.MSELoss(reduction="sum")(x, t).item() == 5.0
    assert nn.L1Loss()(x, t).item() == 1.5
    assert nn.MSELoss(reduction="none")(x, t).shape == (1, 2)
    assert nn.SmoothL1Loss(beta=0.5).beta == 0.5 and repr(nn.SmoothL1Loss(beta=0.5)) == "SmoothL1Loss()"
    with pytest.raises(ValueError, match="reduction must be one of mean, sum, none, got 'avg'"):
        nn.L1Loss(reduction="avg")
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.mse_loss(x, t, reduction="avg")
    log_probs = verigrad.tensor(np.log([[0.5, 0.5]]))
    with pytest.raises(IndexError, match="target 2 is out of range for 2 classes"):
        F.nll_loss(log_probs, verigrad.tensor([2]))
    with pytest.raises(TypeError, match="classes must be int64"):
        F.nll_loss(log_probs, verigrad.tensor([1.0]))
    with pytest.raises(ValueError, match=r"for input \[2\] the class indices must be \[\], got \[1\]"):
        F.nll_loss(verigrad.tensor([0.1, 0.9]), verigrad.tensor([1]))


def _model_and_data(seed: int = 0):
    verigrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    rng = np.random.default_rng(seed)
    return (
        model,
        verigrad.tensor(rng.standard_normal((6, 4)).astype(np.float32)),
        verigrad.tensor(rng.integers(0, 3, 6)),
    )


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_compiled_steps_follow_a_schedule_and_clip_as_eager_ones_do(backend) -> None:
    """The schedule writes the rate compiled steps read; the clip is part of the traced step."""
    weights = []
    for compiled in (False, True):
        with verigrad.backend(backend):
            model, x, y = _model_and_data()
            opt = Adam(model.parameters(), lr=0.05)
            schedule = lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.001)

            def step(x, y):
                loss = nn.CrossEntropyLoss()(model(x), y)
                opt.zero_grad()
                loss.backward()
                norm = nn.utils.clip_grad_norm_(model.parameters(), 0.3)
                opt.step()
                return norm

            run = verigrad.compile(step) if compiled else step
            norms = []
            for _ in range(7):
                norms.append(run(x, y).item())
                schedule.step()
            weights.append(([p.numpy().copy() for p in model.parameters()], norms))
    (eager, eager_norms), (compiled, compiled_norms) = weights
    assert max(eager_norms) > 0.3  # the clip did something
    np.testing.assert_allclose(compiled_norms, eager_norms, rtol=1e-5)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_compiled_steps_follow_a_cycled_momentum_as_eager_ones_do(optimizer) -> None:
    """OneCycleLR changes SGD's momentum (Adam's beta1) every step: a compiled step reads it from a
    tensor, as it reads the rate, and gives the eager step's bits without being traced again."""
    weights = []
    for compiled in (False, True):
        with verigrad.backend("cpu"):
            model, x, y = _model_and_data()
            opt = (
                verigrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                if optimizer == "SGD"
                else Adam(model.parameters())
            )
            schedule = lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=8)
            step = training_step(model, opt, nn.CrossEntropyLoss())
            run = verigrad.compile(step) if compiled else step
            for _ in range(8):
                run(x, y)
                schedule.step()
            if compiled:
                assert run.stats()["traces"] == 1
            weights.append([p.numpy().copy() for p in model.parameters()])
    for a, b in zip(*weights):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_one_cycle_by_hand() -> None:
    opt = verigrad.optim.SGD([verigrad.zeros(2, requires_grad=True)], lr=0.3, momentum=0.5)
    schedule = lr_scheduler.OneCycleLR(
        opt, max_lr=1.0, total_steps=4, pct_start=0.5, anneal_strategy="linear"
    )
    group = opt.param_groups[0]
    assert (group["lr"], group["momentum"]) == (1.0 / 25, 0.95)  # the optimizer's own rate is replaced
    assert group.tensors["momentum"].item() == 0.95
    schedule.step()
    assert (group["lr"], group["momentum"]) == (1.0, 0.85)  # the top: pct_start of 4 steps, less one
    for _ in range(3):
        schedule.step()
    with pytest.raises(ValueError, match="stepped 5 times; the schedule has 4"):
        schedule.step()
    with pytest.raises(ValueError, match="needs total_steps, or epochs and steps_per_epoch"):
        lr_scheduler.OneCycleLR(opt, max_lr=1.0, epochs=3)
    with pytest.raises(ValueError, match="anneal_strategy must be 'cos' or 'linear'"):
        lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3, anneal_strategy="step")
    adagrad = verigrad.optim.Adagrad([verigrad.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match="cycle_momentum needs an optimizer with a momentum or betas; Adag"):
        lr_scheduler.OneCycleLR(adagrad, max_lr=1.0, total_steps=3)
    lr_scheduler.OneCycleLR(adagrad, max_lr=1.0, total_steps=3, cycle_momentum=False)


def test_clip_grad_norm_by_hand() -> None:
    a, b = verigrad.zeros(2, requires_grad=True), verigrad.zeros(1, requires_grad=True)
    a.grad, b.grad = verigrad.tensor([3.0, 0.0]), verigrad.tensor([4.0])
    norm = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert norm.item() == 5.0
    np.testing.assert_allclose(a.grad.numpy(), [3 / (5 + 1e-6), 0.0], rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [4 / (5 + 1e-6)], rtol=1e-6)
    assert nn.utils.clip_grad_norm_([a, b], 10.0, norm_type=math.inf).item() == pytest.approx(4 / 5, rel=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [4 / (5 + 1e-6)], rtol=1e-6)  # under max_norm: unchanged
    c = verigrad.zeros(1, requires_grad=True)
    assert nn.utils.clip_grad_norm_(c, 1.0).item() == 0.0  # no gradients: norm 0, nothing to do
    c.grad = verigrad.tensor([np.inf])
    with pytest.raises(RuntimeError, match=r"total 2\.0-norm of the gradients is inf"):
        nn.utils.clip_grad_norm_(c, 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="norm_type must be positive"):
        nn.utils.clip_grad_norm_(c, 1.0, norm_type=0)


def test_schedules_by_hand_and_their_state() -> None:
    opt = SGD([verigrad.zeros(1, requires_grad=True)], lr=1.0)
    schedule = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rates = []
    for _ in range(6):
        rates.append(schedule.get_last_lr()[0])
        schedule.step()
    assert rates == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert opt.param_groups[0].lr.item() == 0.125 and opt.param_groups[0]["lr"] == 0.125
    saved = schedule.state_dict()
    other = lr_scheduler.StepLR(SGD([verigrad.zeros(1, requires_grad=True)], lr=1.0), step_size=2, gamma=0.5)
    other.load_state_dict(saved)
    other.optimizer.load_state_dict(opt.state_dict())  # the rates are the optimizer's, as in PyTorch
    other.step()
    schedule.step()
    assert other.get_last_lr() == schedule.get_last_lr() == [0.125]
    opt.param_groups[0]["lr"] = 0.3  # PyTorch's way of setting it by hand
    assert opt.lr == 0.3 and opt.param_groups[0].lr.item() == 0.3
    warm = lr_scheduler.LinearLR(
        SGD([verigrad.zeros(1, requires_grad=True)], lr=0.1), 0.5, 1.0, total_iters=2
    )
    seen = []
    for _ in range(4):
        seen.append(warm.get_last_lr()[0])
        warm.step()
    np.testing.assert_allclose(seen, [0.05, 0.075, 0.1, 0.1])
    with pytest.raises(ValueError, match="step_size must be a positive integer"):
        lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max must be a positive integer"):
        lr_scheduler.CosineAnnealingLR(opt, T_max=2.5)
    with pytest.raises(TypeError, match="needs a verigrad optimizer"):
        lr_scheduler.ExponentialLR(object(), 0.9)


def test_activations_one_hot_and_pad_by_hand() -> None:
    x = verigrad.tensor([-2.0, 0.0, 0.5, 7.0])
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(x).numpy(), [-0.2, 0.0, 0.5, 7.0])
    np.testing.assert_allclose(nn.ELU()(x).numpy(), [np.expm1(-2.0), 0.0, 0.5, 7.0], rtol=1e-6)
    np.testing.assert_allclose(nn.Hardtanh()(x).numpy(), [-1.0, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(nn.ReLU6()(x).numpy(), [0.0, 0.0, 0.5, 6.0])
    np.testing.assert_allclose(
        F.softplus(x, threshold=5.0).numpy(),
        [np.log1p(np.exp(-2.0)), np.log(2.0), np.log1p(np.exp(0.5)), 7.0],
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        nn.Mish()(x).numpy(), x.numpy() * np.tanh(np.log1p(np.exp(x.numpy()))), rtol=1e-6
    )
    assert "negative_slope=0.1" in repr(nn.LeakyReLU(0.1))
    np.testing.assert_array_equal(F.one_hot(verigrad.tensor([2, 0]), 3).numpy(), [[0, 0, 1], [1, 0, 0]])
    with pytest.raises(TypeError, match="one_hot takes integer classes"):
        F.one_hot(verigrad.tensor([1.0]))
    B = verigrad.dims("B")
    assert verigrad.check(lambda t: F.one_hot(t, 4), verigrad.spec([B], "i64")) == verigrad.spec(
        [B, 4], "i64"
    )
    with pytest.raises(ValueError, match="needs num_classes"):
        verigrad.check(lambda t: F.one_hot(t), verigrad.spec([B], "i64"))
    padded = F.pad(verigrad.ones(1, 2), (2, 0, 1, 1), value=3.0).numpy()
    np.testing.assert_array_equal(padded, [[3, 3, 3, 3], [3, 3, 1, 1], [3, 3, 3, 3]])
    with pytest.raises(ValueError, match=r"pad needs \(before, after\) pairs for at most 2 axes"):
        F.pad(verigrad.ones(1, 2), (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="pad: reflect padding must be smaller than the size 2"):
        F.pad(verigrad.ones(1, 2), (2, 1), mode="reflect")


def test_adaptive_pooling_and_wide_layer_norm_refusals() -> None:
    B, H, W = verigrad.dims("B H W")
    pooled = verigrad.check(lambda x: nn.AdaptiveAvgPool2d(1)(x), verigrad.spec([B, 8, H, W]))
    assert pooled == verigrad.spec([B, 8, 1, 1])  # the global mean: any size, symbols too
    x = verigrad.ones(1, 2, 5, 4)
    with pytest.raises(
        verigrad.ShapeError, match="of known sizes"
    ):  # windows that do not divide: sizes needed
        verigrad.check(lambda x: F.adaptive_avg_pool2d(x, 2), verigrad.spec([B, 8, H, W]))
    np.testing.assert_array_equal(F.adaptive_avg_pool2d(x, 2).numpy(), np.ones((1, 2, 2, 2)))
    np.testing.assert_array_equal(F.adaptive_avg_pool2d(x, (5, 2)).numpy(), np.ones((1, 2, 5, 2)))
    with pytest.raises(
        verigrad.ShapeError, match=r"layer_norm over \[5, 4\], but the input ends in \[2, 5\]"
    ):
        F.layer_norm(verigrad.ones(3, 2, 5), (5, 4))
    out = nn.LayerNorm((5, 4))(x * verigrad.arange(0, 20).reshape(5, 4))
    np.testing.assert_allclose(out.numpy().reshape(2, 20).mean(1), [0, 0], atol=1e-6)


def test_conv1d_module_and_symbolic_lengths() -> None:
    B, L = verigrad.dims("B L")
    with verigrad.abstract():
        conv = nn.Conv1d(3, 8, 5, padding=2)
    assert verigrad.check(conv, verigrad.spec([B, 3, L])) == verigrad.spec([B, 8, L])
    verigrad.manual_seed(0)
    conv = nn.Conv1d(2, 1, 3, bias=False)
    assert conv.weight.shape == (1, 2, 3) and conv.bias is None
    x = verigrad.ones(1, 2, 5)
    np.testing.assert_allclose(conv(x).numpy(), np.full((1, 1, 3), conv.weight.numpy().sum()), rtol=1e-6)
    np.testing.assert_array_equal(
        nn.MaxPool1d(2)(verigrad.arange(0, 6).reshape(1, 1, 6).float()).numpy(), [[[1, 3, 5]]]
    )


def test_multihead_attention_shapes_and_refusals() -> None:
    B, T = verigrad.dims("B T")
    with verigrad.abstract():
        attention = nn.MultiheadAttention(16, 4, batch_first=True)
    out = verigrad.check(lambda x: attention(x, x, x)[0], verigrad.spec([B, T, 16]))
    assert out == verigrad.spec([B, T, 16])
    weights = verigrad.check(
        lambda x: attention(x, x, x, average_attn_weights=False)[1], verigrad.spec([B, T, 16])
    )
    assert weights == verigrad.spec([B, 4, T, T])
    verigrad.manual_seed(0)
    causal = nn.MultiheadAttention(4, 2)
    x = verigrad.randn(3, 1, 4)
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    _, w = causal(x, x, x, attn_mask=mask, is_causal=True)
    np.testing.assert_array_equal(np.triu(w.numpy()[0], 1), np.zeros((3, 3)))  # no weight on later keys
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        causal(x, x, x, is_causal=True)  # as PyTorch
    with pytest.raises(ValueError, match="not a multiple of num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\]"):
        nn.MultiheadAttention(8, 2, dropout=-0.1)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_attentions_default_scale_follows_a_symbolic_head_size(backend) -> None:
    """1/sqrt(D) where D is a symbol of the compiled function's specs (it was 1 there): outputs and
    gradients equal the eager ones for two head sizes, and those use 1/sqrt(D)."""
    B, D = verigrad.dims("B D")
    rng = np.random.default_rng(0)

    def causal(q, k, v, scale=None):
        return verigrad.ops.attention(q, k, v, scale=scale)

    def masked(q, k, v, scale=None):  # not the attention op: written with ops
        mask = verigrad.tensor(np.tril(np.ones((3, 3), bool), 1))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)

    with verigrad.backend(backend):
        for fn in (causal, masked):
            both = verigrad.value_and_grad(lambda q, k, v, fn=fn: (fn(q, k, v) ** 2).sum(), argnums=(0, 1, 2))
            spec = verigrad.spec([B, 2, 3, D])
            compiled = verigrad.compile(both, specs=(spec, spec, spec))
            for d in (4, 9):
                args = [
                    verigrad.tensor(rng.standard_normal((2, 2, 3, d)).astype(np.float32)) for _ in range(3)
                ]
                by_hand = fn(*args, scale=1 / math.sqrt(d)).numpy()
                assert fn(*args).numpy().tobytes() == by_hand.tobytes()
                (value, grads), (value_c, grads_c) = both(*args), compiled(*args)
                assert value.numpy().tobytes() == value_c.numpy().tobytes()
                for g, g_c in zip(grads, grads_c):
                    assert g.numpy().tobytes() == g_c.numpy().tobytes()


def test_pytorchs_import_path_for_the_functional_module() -> None:
    import verigrad.nn.functional as nnF

    assert (
        nnF.cross_entropy is F.cross_entropy
        and nnF.scaled_dot_product_attention is F.scaled_dot_product_attention
    )
    assert set(nnF.__all__) == set(F.__all__) and all(hasattr(nnF, name) for name in F.__all__)


def test_pytorchs_dtype_names_threads_and_creation_helpers() -> None:
    assert (verigrad.float32, verigrad.float64, verigrad.float16, verigrad.bfloat16) == (
        verigrad.f32,
        verigrad.f64,
        verigrad.f16,
        verigrad.bf16,
    )
    assert (verigrad.long, verigrad.int64, verigrad.int32, verigrad.bool) == (
        verigrad.i64,
        verigrad.i64,
        verigrad.i32,
        verigrad.bool_,
    )
    assert verigrad.zeros(2, dtype=verigrad.float).dtype is verigrad.f32 and verigrad.double is verigrad.f64
    names: dict = {}
    exec("from verigrad import *", names)  # Python's float and bool stay Python's
    assert "float" not in names and "bool" not in names and names["float32"] is verigrad.f32
    before = verigrad.get_num_threads()
    verigrad.set_num_threads(1)
    assert verigrad.get_num_threads() == 1 == verigrad.get_backend().threads
    verigrad.set_num_threads(before)
    x = verigrad.tensor([[1.0, 2.0]], dtype=verigrad.float64)
    assert x.new_zeros(2, 3).dtype is verigrad.f64 and x.new_zeros((2, 3)).shape == (2, 3)
    assert x.new_ones(2).numpy().tolist() == [1.0, 1.0] and x.new_full((1,), 7).numpy().tolist() == [7.0]
    assert x.new_tensor([1, 2]).dtype is verigrad.f64 and x.new_empty(3, dtype="i64").dtype is verigrad.i64
    assert x.type() == "torch.DoubleTensor" and x.type(verigrad.float32).dtype is verigrad.f32
    verigrad.manual_seed(3)
    p = verigrad.randperm(50)
    assert p.dtype is verigrad.i64 and sorted(p.numpy().tolist()) == list(range(50))
    verigrad.manual_seed(3)
    assert verigrad.randperm(50).numpy().tolist() == p.numpy().tolist()  # seeded
    assert p.numpy().tolist() != list(range(50))


def test_products_norms_and_their_refusals() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    ta, tb = verigrad.tensor(a), verigrad.tensor(b)
    np.testing.assert_allclose(verigrad.bmm(ta, tb).numpy(), a @ b, rtol=1e-6)
    np.testing.assert_allclose(ta[0].mm(tb[0]).numpy(), a[0] @ b[0], rtol=1e-6)
    np.testing.assert_allclose(
        verigrad.outer(ta[0, 0], tb[0, 0]).numpy(), np.outer(a[0, 0], b[0, 0]), rtol=1e-6
    )
    assert ta[0].t().shape == (4, 3) and verigrad.tensor([1.0, 2.0]).t().shape == (2,)
    for call, words in [
        (lambda: ta.mm(tb), "mm multiplies two matrices"),
        (lambda: ta[0].bmm(tb[0]), "bmm multiplies two batches"),
        (lambda: verigrad.outer(ta[0], tb[0, 0]), "outer multiplies two vectors"),
        (lambda: ta.t(), "t\\(\\) takes at most 2 dimensions"),
    ]:
        with pytest.raises(verigrad.ShapeError, match=words):
            call()
    x = rng.standard_normal((3, 4))
    t = verigrad.tensor(x)
    for p, expected in [(2, np.linalg.norm(x, axis=1)), (1, np.abs(x).sum(1)), (math.inf, np.abs(x).max(1))]:
        np.testing.assert_allclose(t.norm(p, dim=1).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(t.norm(-math.inf, 1).numpy(), np.abs(x).min(1), rtol=1e-6)
    np.testing.assert_allclose(
        t.norm(3, 0, keepdim=True).numpy(), (np.abs(x) ** 3).sum(0, keepdims=True) ** (1 / 3), rtol=1e-5
    )
    assert t.norm(0).item() == 12 and verigrad.norm(t).item() == pytest.approx(np.linalg.norm(x), rel=1e-6)
    zero = verigrad.zeros(2, 3, requires_grad=True)
    zero.norm(dim=1).sum().backward()
    assert zero.grad.numpy().tolist() == [[0.0] * 3] * 2  # not NaN: PyTorch's 0 at the zero vector
    with pytest.raises(verigrad.DTypeError, match="norm needs"):
        verigrad.tensor([1, 2]).norm()
    n, d = verigrad.dims("n d")
    assert verigrad.check(lambda v: F.normalize(v, dim=1), verigrad.spec([n, d])) == verigrad.spec([n, d])
    u = rng.standard_normal((3, 4))
    cos = F.cosine_similarity(t, verigrad.tensor(u)).numpy()
    np.testing.assert_allclose(
        cos, (x * u).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(u, axis=1), rtol=1e-5
    )


def test_in_place_activations_zero_grad_to_zeros_and_dim_names() -> None:
    x = verigrad.tensor([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x and x.numpy().tolist() == [0.0, 2.0]  # written in place
    w = verigrad.tensor([-1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        nn.ReLU(inplace=True)(w)  # as PyTorch: a leaf that requires grad is not written in place
    h = w * 1.0
    y = nn.ReLU(inplace=True)(h)  # a non-leaf: written, and recorded for backward
    assert y is h and y.numpy().tolist() == [0.0, 2.0] and w.numpy().tolist() == [-1.0, 2.0]
    y.sum().backward()
    assert w.grad.numpy().tolist() == [0.0, 1.0]
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)" and repr(nn.ReLU()) == "ReLU()"
    z = verigrad.tensor([-3.0, 0.5])
    assert nn.LeakyReLU(0.5, inplace=True)(z) is z and z.numpy().tolist() == [-1.5, 0.5]
    m = verigrad.tensor([1.0, 2.0, 3.0])
    assert m.masked_fill_(m > 1.5, 0.0) is m and m.numpy().tolist() == [1.0, 0.0, 0.0]

    layer = nn.Linear(2, 2)
    opt = SGD(layer.parameters(), lr=0.1)
    layer(verigrad.ones(1, 2)).sum().backward()
    grad = layer.weight.grad
    opt.zero_grad(set_to_none=False)
    assert layer.weight.grad is grad and not grad.numpy().any()  # zeros, in the same tensor
    opt.zero_grad()
    assert layer.weight.grad is None

    a, b = verigrad.ones(2, 3), verigrad.zeros(2, 3)
    assert verigrad.cat([a, b], dim=1).shape == (2, 6) and verigrad.stack([a, b], dim=2).shape == (2, 3, 2)


def test_batch_norm_1d_module_containers_and_parameters() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 3, 5)).astype(np.float32)
    bn = nn.BatchNorm1d(3)
    y = bn(verigrad.tensor(x)).numpy()
    mean, var = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.var((0, 2), ddof=1), rtol=1e-5)
    assert bn(verigrad.tensor(x[:, :, 0])).shape == (8, 3)
    with pytest.raises(verigrad.ShapeError, match="BatchNorm1d takes 2-D or 3-D input"):
        bn(verigrad.zeros(2, 3, 4, 5))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.Linear(2, 1)})
            self.scale = nn.Parameter(verigrad.ones(3))
            self.extra = nn.ParameterList([verigrad.zeros(2), verigrad.ones(1)])

    net = Net()
    names = {name for name, _ in net.named_parameters()}
    assert names == {"scale", "extra.0", "extra.1"} | {
        f"heads.{h}.{w}" for h in "ab" for w in ("weight", "bias")
    }
    assert "a" in net.heads and len(net.heads) == 2 and list(net.heads) == ["a", "b"]
    assert len(net.extra) == 2 and net.extra[1].requires_grad and net.scale.requires_grad
    with pytest.raises(TypeError, match="Parameter takes a tensor"):
        nn.Parameter([1.0])


def test_arange_with_float_bounds_and_rounding_ops() -> None:
    for args in [(0, 1, 0.1), (-1.5, 2.3, 0.37), (5, 0, -0.5), (2.5,)]:
        start, stop, step = (0, args[0], 1) if len(args) == 1 else args
        count = max(0, math.ceil((stop - start) / step))
        expected = (np.arange(count) * float(step) + start).astype(np.float32)  # f64, rounded once
        assert verigrad.arange(*args).numpy().tobytes() == expected.tobytes()
    assert verigrad.arange(0, 1, 0.25, dtype=verigrad.f64).numpy().tolist() == [0.0, 0.25, 0.5, 0.75]
    assert verigrad.arange(4).dtype is verigrad.i64 and verigrad.arange(3, 3, 0.5).shape == (0,)
    with pytest.raises(ValueError, match="inconsistent with step sign"):  # PyTorch's error
        verigrad.arange(3, 1, 0.5)
    with pytest.raises(ValueError, match="non-zero step"):
        verigrad.arange(0, 1, 0.0)
    x = verigrad.tensor([-1.5, -0.5, 0.5, 1.5, 2.5, 2.675])
    assert x.round().numpy().tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0, 3.0]  # halves to even
    assert x.floor().numpy().tolist() == [-2.0, -1.0, 0.0, 1.0, 2.0, 2.0]
    assert x.ceil().numpy().tolist() == [-1.0, -0.0, 1.0, 2.0, 3.0, 3.0]
    assert x.trunc().numpy().tolist() == [-1.0, -0.0, 0.0, 1.0, 2.0, 2.0]
    assert x.sign().numpy().tolist() == [-1.0, -1.0, 1.0, 1.0, 1.0, 1.0]
    assert x.round(decimals=1).numpy()[-1] == np.float32(np.round(np.float32(2.675) * 10) / 10)
    assert verigrad.sign(verigrad.tensor([3, 0, -2])).numpy().tolist() == [1, 0, -1]
    assert verigrad.tensor([float("nan")]).sign().item() == 0.0  # PyTorch's
    w = verigrad.tensor([0.3, 1.7], requires_grad=True)
    (w.floor() + w.round() * 2).sum().backward()
    assert w.grad.numpy().tolist() == [0.0, 0.0]


def test_group_norm_plateau_schedule_and_parameter_vectors() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    groups = x.reshape(2, 3, -1)
    expected = (
        (groups - groups.mean(-1, keepdims=True)) / np.sqrt(groups.var(-1, keepdims=True) + 1e-5)
    ).reshape(x.shape)
    np.testing.assert_allclose(nn.GroupNorm(3, 6)(verigrad.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="6 channels do not split into 4 groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(verigrad.ShapeError, match="do not split into 4 groups"):
        F.group_norm(verigrad.tensor(x), 4)
    n = verigrad.dims("n")
    assert verigrad.check(lambda v: F.group_norm(v, 3), verigrad.spec([n, 6, 3])) == verigrad.spec([n, 6, 3])

    opt = SGD([verigrad.zeros(1, requires_grad=True)], lr=1.0)
    plateau = lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5, min_lr=0.3)
    rates = []
    for loss in [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]:
        plateau.step(loss)
        rates.append(opt.lr)
    assert rates == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3]  # two bad epochs cut it; min_lr holds
    with pytest.raises(ValueError, match="factor must be in"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)

    layer = nn.Linear(2, 2)
    flat = nn.utils.parameters_to_vector(layer.parameters())
    assert flat.shape == (6,) and flat.numpy()[:4].tolist() == layer.weight.numpy().ravel().tolist()
    nn.utils.vector_to_parameters(verigrad.arange(6).float(), layer.parameters())
    assert layer.bias.numpy().tolist() == [4.0, 5.0]
    with pytest.raises(ValueError, match="a vector of 6 values"):
        nn.utils.vector_to_parameters(verigrad.zeros(5), layer.parameters())


def test_named_convolution_paddings_and_their_refusals() -> None:
    x, w = verigrad.randn(1, 2, 5, 6), verigrad.randn(3, 2, 2, 3)
    assert F.conv2d(x, w, padding="same").shape == (1, 3, 5, 6)
    assert F.conv2d(x, w, padding="valid").shape == (1, 3, 4, 4) == F.conv2d(x, w).shape
    assert nn.Conv2d(2, 3, 3, padding="same")(x).shape == (1, 3, 5, 6)
    with pytest.raises(ValueError, match="padding='same' needs stride 1"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding must be a size, 'valid' or 'same', got 'full'"):
        F.conv2d(x, w, padding="full")
    h = verigrad.dims("h")
    assert verigrad.check(
        lambda v: F.conv2d(v, w, padding="same"), verigrad.spec([1, 2, h, 6])
    ) == verigrad.spec([1, 3, h, 6])


def test_scatter_scatter_add_and_fill_diagonal_by_hand() -> None:
    z = verigrad.zeros(2, 4)
    assert z.scatter_(1, verigrad.tensor([[1], [3]]), 1.0) is z  # one-hot rows
    assert z.numpy().tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]
    x = verigrad.ones(3)
    index = verigrad.tensor([0, 2, 0])
    assert x.scatter_add(0, index, verigrad.tensor([1.0, 2.0, 4.0])).numpy().tolist() == [6, 1, 3]
    assert x.scatter(0, index, verigrad.tensor([1.0, 2.0, 4.0])).numpy().tolist() == [4, 1, 2]  # last wins
    f = verigrad.compile(lambda t, i, s: t.scatter_add(0, i, s))
    assert f(x, index, verigrad.tensor([1.0, 2.0, 4.0])).numpy().tolist() == [6, 1, 3]
    with pytest.raises(verigrad.DTypeError, match="scatter needs an integer index tensor"):
        x.scatter(0, verigrad.tensor([0.5]), 1.0)
    with pytest.raises(verigrad.ShapeError, match=r"must have the rank of src \[2\] and be no larger"):
        x.scatter_add(0, index, verigrad.ones(2))
    with pytest.raises(verigrad.ShapeError, match=r"the input \[2, 2\] and be no larger but along dim 0"):
        verigrad.zeros(2, 2).scatter(0, verigrad.zeros(1, 3, dtype="i64"), 1.0)
    with pytest.raises(TypeError, match="one of src"):
        x.scatter(0, index)
    assert x.scatter(0, index, 2.0, reduce="add").numpy().tolist() == [5, 1, 3]  # 1 + 2 + 2, 1, 1 + 2
    assert x.scatter(0, index, verigrad.tensor([3.0, 2.0, 4.0]), reduce="multiply").numpy().tolist() == [
        12,
        1,
        2,
    ]
    with pytest.raises(ValueError, match="'add' or 'multiply'"):
        x.scatter(0, index, 1.0, reduce="max")
    m = verigrad.zeros(3, 3)
    assert m.fill_diagonal_(1.0) is m and np.array_equal(m.numpy(), np.eye(3))
    with pytest.raises(verigrad.ShapeError, match="all sides equal"):
        verigrad.zeros(2, 3, 3).fill_diagonal_(1.0)


def test_index_add_and_unique_by_hand() -> None:
    z = verigrad.zeros(5, 2)
    assert z.index_add_(0, verigrad.tensor([0, 4, 0]), verigrad.ones(3, 2), alpha=2) is z
    assert z.numpy()[:, 0].tolist() == [4.0, 0.0, 0.0, 0.0, 2.0]  # repeated positions add up
    with pytest.raises(verigrad.ShapeError, match="index_add needs a vector of integer positions"):
        z.index_add(0, verigrad.tensor([[0]]), verigrad.ones(1, 1, 2))
    x = verigrad.tensor([3, 1, 3, 2])
    values, inverse, counts = x.unique(return_inverse=True, return_counts=True)
    assert (values.numpy().tolist(), inverse.numpy().tolist(), counts.numpy().tolist()) == (
        [1, 2, 3],
        [2, 0, 2, 1],
        [1, 1, 2],
    )
    with pytest.raises(TypeError, match="runs eagerly"):
        verigrad.compile(lambda t: t.unique())(x)
    rows = verigrad.tensor([[1, 2], [0, 5], [1, 2]])
    values, inverse = rows.unique(dim=0, return_inverse=True)
    assert values.numpy().tolist() == [[0, 5], [1, 2]] and inverse.numpy().tolist() == [1, 0, 1]
    c = verigrad.tensor([[True, False], [True, True]])
    assert [i.numpy().tolist() for i in verigrad.where(c)] == [[0, 1, 1], [0, 0, 1]]  # PyTorch's one-argument
    assert verigrad.where(c, 1.0, 0.0).numpy().tolist() == [[1, 0], [1, 1]]
    with pytest.raises(TypeError, match="where takes a condition alone, or a condition and the two values"):
        verigrad.where(c, 1.0)
    with pytest.raises(TypeError, match="runs eagerly"):
        verigrad.compile(lambda t: verigrad.where(t))(c)


def test_lstm_shapes_training_compiled_and_refusals() -> None:
    verigrad.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    assert [name for name, _ in lstm.named_parameters()][:4] == [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
    ]
    assert lstm.weight_ih_l1_reverse.shape == (16, 8) and np.abs(lstm.weight_hh_l0.numpy()).max() <= 0.5
    x = verigrad.randn(2, 5, 3)
    out, (h, c) = lstm(x)
    assert out.shape == (2, 5, 8) and h.shape == c.shape == (4, 2, 4)
    np.testing.assert_allclose(out.numpy()[:, -1, :4], h.numpy()[2], rtol=1e-6)  # the last layer, forward
    np.testing.assert_allclose(out.numpy()[:, 0, 4:], h.numpy()[3], rtol=1e-6)  # and its reverse run

    def step(x):
        opt.zero_grad()
        loss = lstm(x)[0].sum()
        loss.backward()
        opt.step()
        return loss

    opt = SGD(lstm.parameters(), lr=0.1)
    before = [p.numpy().copy() for p in lstm.parameters()]
    compiled = verigrad.compile(step)
    compiled_loss = compiled(x).item()
    after_compiled = [p.numpy().copy() for p in lstm.parameters()]
    with verigrad.no_grad():
        for p, b in zip(lstm.parameters(), before):
            p.assign(verigrad.tensor(b))
    eager_loss = step(x).item()
    assert compiled_loss == pytest.approx(eager_loss, rel=1e-6)
    for p, a in zip(lstm.parameters(), after_compiled):
        np.testing.assert_allclose(p.numpy(), a, rtol=1e-5, atol=1e-6)
    with pytest.raises(verigrad.ShapeError, match="LSTM takes"):
        lstm(verigrad.randn(2, 5, 4))
    gru = nn.GRU(3, 4, num_layers=2)
    out, h = gru(verigrad.randn(5, 2, 3))
    assert out.shape == (5, 2, 4) and h.shape == (2, 2, 4)
    np.testing.assert_allclose(out.numpy()[-1], h.numpy()[1], rtol=1e-6)
    assert repr(gru) == "GRU(3, 4, num_layers=2)" and gru.weight_hh_l1.shape == (12, 4)
    with pytest.raises(ValueError, match="dropout must be a probability"):
        nn.LSTM(3, 4, num_layers=2, dropout=1.5)
    with pytest.warns(UserWarning, match="with one layer it does nothing"):
        nn.LSTM(3, 4, dropout=0.5)
    t = verigrad.dims("t")
    with pytest.raises(verigrad.ShapeError, match="must be concrete"):
        verigrad.check(lambda v: nn.LSTM(3, 4)(v)[0], verigrad.spec([t, 2, 3]))


def test_recurrent_dropout_between_layers_in_training_only() -> None:
    """PyTorch's: on every layer's outputs but the last's, in training; eval runs as without it."""
    verigrad.manual_seed(0)
    gru = nn.GRU(3, 64, num_layers=2, dropout=0.5)
    plain = nn.GRU(3, 64, num_layers=2)
    plain.load_state_dict(gru.state_dict())
    x = verigrad.randn(4, 2, 3)
    gru.eval()
    np.testing.assert_array_equal(gru(x)[0].numpy(), plain(x)[0].numpy())
    gru.train()
    first, second = gru(x)[0].numpy(), gru(x)[0].numpy()
    assert not np.array_equal(first, second) and not np.array_equal(first, plain(x)[0].numpy())
    one = nn.GRU(3, 64, num_layers=2, dropout=1.0)  # every first-layer output dropped: the second layer
    one.load_state_dict(gru.state_dict())  # sees zeros, whatever x is
    np.testing.assert_array_equal(one(x)[0].numpy(), one(verigrad.randn(4, 2, 3))[0].numpy())
    assert repr(gru) == "GRU(3, 64, num_layers=2, dropout=0.5)"


def test_mask_selection_comparison_methods_and_in_place_variants() -> None:
    x = verigrad.tensor([1.0, -2.0, 3.0, -4.0], requires_grad=True)
    picked = x[x > 0]
    assert picked.numpy().tolist() == [1.0, 3.0]
    picked.sum().backward()
    assert x.grad.numpy().tolist() == [1.0, 0.0, 1.0, 0.0]
    rows = verigrad.tensor(np.arange(6.0).reshape(3, 2))
    assert rows[verigrad.tensor([True, False, True])].numpy().tolist() == [[0.0, 1.0], [4.0, 5.0]]
    y = verigrad.tensor([1.0, -2.0, 3.0, -4.0])
    y[y < 0] = y[y < 0] * 10  # the selected values, in order
    y[y > 0] += 1
    assert y.numpy().tolist() == [2.0, -20.0, 4.0, -40.0]
    with pytest.raises(verigrad.ShapeError, match=r"values of shape \[3\] cannot be broadcast .* \[2\]"):
        y[y > 0] = verigrad.tensor([1.0, 2.0, 3.0])
    with pytest.raises(IndexError, match=r"the shape of the mask \[2\] does not match"):
        rows[verigrad.tensor([True, False])]
    with pytest.raises(TypeError, match="runs eagerly"):
        verigrad.compile(lambda t: t[t > 0].sum())(verigrad.tensor([1.0, -1.0]))
    assert y.nonzero().numpy().tolist() == [[0], [1], [2], [3]]
    assert [i.numpy().tolist() for i in rows.nonzero(as_tuple=True)] == [[0, 1, 1, 2, 2], [1, 0, 1, 0, 1]]

    a, b = verigrad.tensor([1, 2, 3]), verigrad.tensor([1, 0, 4])
    assert [a.eq(b).numpy().tolist(), a.ne(b).numpy().tolist()] == [[True, False, False], [False, True, True]]
    assert [a.lt(b).numpy().tolist(), a.ge(b).numpy().tolist()] == [[False, False, True], [True, True, False]]
    assert a.gt(b).sum().item() == 1 and a.le(b).sum().item() == 2
    z = verigrad.tensor([4.0, 9.0])
    assert z.sqrt_() is z and z.numpy().tolist() == [2.0, 3.0]
    assert z.exp_().log_().numpy().tolist() == pytest.approx([2.0, 3.0])
    assert z.lerp(verigrad.tensor([4.0, 5.0]), 0.5).numpy().tolist() == [3.0, 4.0]
    assert z.square().numpy().tolist() == pytest.approx(
        [4.0, 9.0]
    ) and z.neg_().numpy().tolist() == pytest.approx([-2.0, -3.0])
    verigrad.manual_seed(1)
    u = verigrad.zeros(2000).uniform_(-1, 1)
    assert u.numpy().min() >= -1 and u.numpy().max() < 1 and abs(u.numpy().mean()) < 0.05
    n = verigrad.zeros(2000, dtype=verigrad.f64).normal_(3.0, 2.0)
    assert n.dtype is verigrad.f64 and abs(n.numpy().mean() - 3) < 0.15 and abs(n.numpy().std() - 2) < 0.1
    assert (
        verigrad.ones_like(a, dtype=verigrad.f64).dtype is verigrad.f64
        and verigrad.zeros_like(a).dtype is verigrad.i64
    )


def test_diagonals_channel_dropout_and_warm_restarts_by_hand() -> None:
    x = verigrad.tensor(np.arange(12.0).reshape(3, 4))
    assert x.diagonal().numpy().tolist() == [0.0, 5.0, 10.0] and x.diagonal(2).numpy().tolist() == [2.0, 7.0]
    assert x.diagonal(-1).numpy().tolist() == [4.0, 9.0] and x.diagonal(9).shape == (0,)
    assert verigrad.diag(verigrad.tensor([1.0, 2.0]), 1).numpy().tolist() == [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    assert x[:, :3].trace().item() == 15.0
    with pytest.raises(verigrad.ShapeError, match="trace: expected a matrix"):
        verigrad.functions.trace(verigrad.zeros(3))
    with pytest.raises(verigrad.ShapeError, match="two different axes"):
        x.diagonal(0, 1, 1)
    a, b = verigrad.meshgrid(verigrad.tensor([1, 2, 3]), verigrad.tensor([7, 8]))
    assert a.numpy().tolist() == [[1, 1], [2, 2], [3, 3]] and b.numpy().tolist() == [[7, 8]] * 3
    std, mean = verigrad.std_mean(x, dim=1)
    assert mean.numpy().tolist() == [1.5, 5.5, 9.5] and std.numpy() == pytest.approx([1.2909944] * 3)

    verigrad.manual_seed(0)
    y = nn.Dropout2d(0.5)(verigrad.ones(4, 8, 3, 3)).numpy()
    channels = y.reshape(32, 9)
    assert set(np.unique(channels)) <= {0.0, 2.0} and all(
        len(set(c)) == 1 for c in channels
    )  # whole channels
    assert 0 < (channels[:, 0] == 0).sum() < 32
    assert nn.Dropout2d(0.5).eval()(verigrad.ones(1, 2, 2, 2)).numpy().min() == 1.0
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d, which is deprecated"):
        F.dropout2d(verigrad.ones(2, 3))  # PyTorch's: a warning, and dropout over axes 0 and 1

    opt = SGD([verigrad.zeros(1, requires_grad=True)], lr=1.0)
    warm = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    rates = [opt.lr]
    for _ in range(6):
        warm.step()
        rates.append(opt.lr)
    assert rates == pytest.approx([1.0, 0.5, 1.0, 0.85355339, 0.5, 0.14644661, 1.0])  # restarts at 2 and 6


def test_device_queries_for_code_written_for_gpus() -> None:
    device = "cuda" if verigrad.cuda.is_available() else "cpu"  # PyTorch's idiom
    assert device == "cpu" and verigrad.cuda.device_count() == 0 and str(verigrad.device("cpu")) == "cpu"
    assert verigrad.zeros(2).to(device).device.type == "cpu" and nn.Linear(2, 2).to(device) is not None
    with pytest.raises(ValueError, match="verigrad runs on the CPU: there is no 'cuda:0' device"):
        verigrad.zeros(2).to("cuda:0")
    with pytest.raises(ValueError, match="no 'cuda' device"):
        verigrad.zeros(2, device=verigrad.device("cuda"))  # made as PyTorch makes it, refused when used


def test_new_helpers_by_hand_and_their_refusals() -> None:
    x = verigrad.arange(6).reshape(2, 3)
    assert (verigrad.tensor([-7, 7]) % 3).numpy().tolist() == [2, 1]  # Python's %: the divisor's sign
    assert (7.5 % verigrad.tensor([-2.0])).numpy().tolist() == [-0.5]
    assert verigrad.tensor([-7.5]).fmod(2).numpy().tolist() == [-1.5]  # C's: the dividend's sign
    y = verigrad.tensor([5.0, -5.0])
    y %= 3
    assert y.numpy().tolist() == [2.0, 1.0]
    assert x.roll(1).numpy().tolist() == [[5, 0, 1], [2, 3, 4]]  # flattened, as PyTorch
    assert x.roll(-1, 1).numpy().tolist() == [[1, 2, 0], [4, 5, 3]]
    assert [t.numpy().tolist() for t in x.unbind(1)] == [[0, 3], [1, 4], [2, 5]]
    assert x.narrow(1, 1, 2).numpy().tolist() == [[1, 2], [4, 5]]
    assert x.masked_select(x > 3).numpy().tolist() == [4, 5]
    assert verigrad.addmm(verigrad.ones(2, 2), verigrad.eye(2), verigrad.eye(2), beta=0).numpy().tolist() == [
        [1, 0],
        [0, 1],
    ]
    n = verigrad.dims("n")
    assert verigrad.check(lambda v: v.roll(1, 1), verigrad.spec([n, 3])) == verigrad.spec([n, 3])
    with pytest.raises(verigrad.ShapeError, match="roll needs a concrete size along dim 0"):
        verigrad.check(lambda v: v.roll(1, 0), verigrad.spec([n, 3]))
    with pytest.raises(TypeError, match="runs eagerly"):
        verigrad.compile(lambda t: t.masked_select(t > 0))(verigrad.ones(3))
    logits, target = verigrad.randn(3, 4), verigrad.tensor([0, 1, 2])
    with pytest.raises(verigrad.ShapeError, match=r"cross_entropy: weight must be \[4\], got \[3\]"):
        F.cross_entropy(logits, target, weight=verigrad.ones(3))
    assert F.cross_entropy(logits, target, weight=verigrad.ones(4), label_smoothing=0.1).shape == ()
    ignored = F.cross_entropy(logits, verigrad.tensor([0, -1, 2]), ignore_index=-1)
    kept = F.cross_entropy(logits[verigrad.tensor([0, 2])], verigrad.tensor([0, 2]))
    assert ignored.item() == pytest.approx(kept.item(), rel=1e-6)  # the ignored sample counts for nothing
    with pytest.raises(ValueError, match="logspace needs a whole number of steps"):
        verigrad.logspace(0, 1, -1)
    assert verigrad.as_tensor([1.0, 2.0]).dtype.name == "f32" and verigrad.topk(
        x.reshape(-1), 2
    ).values.numpy().tolist() == [5, 4]


def test_random_draws_bernoulli_and_multinomial() -> None:
    """PyTorch's distributions (not its draws): drawn frequencies within a few standard errors."""
    generator = verigrad.Generator(3)
    weights = verigrad.tensor([0.1, 0.0, 0.6, 0.3])
    draws = verigrad.multinomial(weights, 20000, replacement=True, generator=generator).numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 20000, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    firsts, pairs = [], []
    for _ in range(2000):
        pair = verigrad.multinomial(weights, 2, generator=generator).numpy()
        firsts.append(pair[0])
        pairs.append(pair)
    assert all(a != b and 1 not in (a, b) for a, b in pairs)  # without replacement; a zero weight never
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 2000, [0.1, 0.0, 0.6, 0.3], atol=0.035)
    rows = verigrad.multinomial(verigrad.tensor([[1.0, 0.0], [0.0, 2.0]]), 3, replacement=True)
    assert rows.numpy().tolist() == [[0, 0, 0], [1, 1, 1]] and rows.dtype.name == "i64"
    again = [verigrad.multinomial(weights, 3, generator=verigrad.Generator(9)).numpy() for _ in range(2)]
    assert again[0].tolist() == again[1].tolist()  # the same seed, the same draws
    coins = verigrad.bernoulli(verigrad.full((20000,), 0.3), generator=generator).numpy()
    assert set(np.unique(coins)) == {0.0, 1.0} and abs(coins.mean() - 0.3) < 0.015
    with pytest.raises(ValueError, match="5 draws without replacement from 4 categories"):
        verigrad.multinomial(weights, 5)
    with pytest.raises(verigrad.ShapeError, match="multinomial takes weights"):
        verigrad.multinomial(verigrad.ones(2, 2, 2), 1)
    with pytest.raises(ValueError, match="pad: reflect padding must be smaller than the size 3"):
        F.pad(verigrad.ones(1, 3), (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="pad: mode must be one of"):
        F.pad(verigrad.ones(1, 3), (1, 0), mode="mirror")
    with pytest.raises(verigrad.ShapeError, match="pixel_shuffle: 6 channels do not split into groups of 2"):
        F.pixel_shuffle(verigrad.ones(1, 6, 2, 2), 2)


def test_conv_transpose2d_by_hand() -> None:
    """A stride-2 transposed convolution of a single 1 places the kernel; the output size; refusals."""
    x = verigrad.zeros(1, 1, 2, 2)
    x[0, 0, 1, 0] = 1.0
    w = verigrad.arange(1, 5, dtype="f32").reshape(1, 1, 2, 2)
    out = F.conv_transpose2d(x, w, stride=2)
    assert out.shape == (1, 1, 4, 4) and out.numpy()[0, 0].tolist() == [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
        [1, 2, 0, 0],
        [3, 4, 0, 0],
    ]
    up = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)
    assert up(verigrad.randn(1, 2, 5, 5)).shape == (1, 3, 10, 10) and up.weight.shape == (2, 3, 3, 3)
    with pytest.raises(ValueError, match="output_padding must be below stride or dilation"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(verigrad.ShapeError, match="conv_transpose2d takes x"):
        F.conv_transpose2d(verigrad.ones(2, 2), w)


def test_grouped_conv2d_refusals() -> None:
    x = verigrad.ones(1, 4, 3, 3)
    with pytest.raises(verigrad.ShapeError, match="4 channels and 6 filters do not split into 4 groups"):
        F.conv2d(x, verigrad.ones(6, 1, 1, 1), groups=4)
    with pytest.raises(verigrad.ShapeError, match="needs 2 input channels a group"):
        F.conv2d(x, verigrad.ones(4, 1, 1, 1), groups=2)
    with pytest.raises(NotImplementedError, match="groups > 1 takes NCHW"):
        F.conv2d(verigrad.ones(1, 3, 3, 4), verigrad.ones(1, 1, 2, 4), layout="NHWC", groups=2)


def test_interpolation_refusals_and_layouts() -> None:
    x = verigrad.randn(1, 4, 5, 2)  # NHWC: [N, H, W, C]
    nchw = F.interpolate(x.permute(0, 3, 1, 2), size=(6, 3), mode="bilinear")
    nhwc = F.interpolate(x, size=(6, 3), mode="bilinear", layout="NHWC")
    np.testing.assert_array_equal(nhwc.permute(0, 3, 1, 2).numpy(), nchw.numpy())
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x, mode="bilinear")
    with pytest.raises(NotImplementedError, match="mode must be one of nearest, nearest-exact"):
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(NotImplementedError, match="got 4D input, but trilinear mode needs 5D input"):
        F.interpolate(x, size=(2, 2), mode="trilinear")
