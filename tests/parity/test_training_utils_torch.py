"""Losses, gradient clipping, learning-rate schedules and the small modules, against PyTorch's."""

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
from verigrad.optim import lr_scheduler

RNG = np.random.default_rng(11)
PRED, TARGET = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (F.mse_loss, TF.mse_loss),
        (F.l1_loss, TF.l1_loss),
        (
            lambda x, t, **kw: F.smooth_l1_loss(x, t, beta=0.7, **kw),
            lambda x, t, **kw: TF.smooth_l1_loss(x, t, beta=0.7, **kw),
        ),
        (
            lambda x, t, **kw: F.smooth_l1_loss(x, t, beta=0.0, **kw),
            lambda x, t, **kw: TF.smooth_l1_loss(x, t, beta=0.0, **kw),
        ),
        (
            lambda x, t, **kw: F.huber_loss(x, t, delta=0.8, **kw),
            lambda x, t, **kw: TF.huber_loss(x, t, delta=0.8, **kw),
        ),
    ],
)
def test_regression_losses(ours, theirs, reduction) -> None:
    _check(
        {"x": PRED, "t": TARGET},
        lambda x, t: ours(x, t, reduction=reduction),
        lambda x, t: theirs(x, t, reduction=reduction),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_with_an_ignored_class(reduction) -> None:
    target = np.array([1, -100, 4, 0])
    _check(
        {"x": PRED},
        lambda x: F.nll_loss(x.log_softmax(-1), verigrad.tensor(target), reduction=reduction),
        lambda x: TF.nll_loss(x.log_softmax(-1), torch.from_numpy(target), reduction=reduction),
    )
    _check(
        {"x": PRED},
        lambda x: nn.NLLLoss(ignore_index=4)(x, verigrad.tensor(target[[0, 2, 2, 3]])),
        lambda x: torch.nn.NLLLoss(ignore_index=4)(x, torch.from_numpy(target[[0, 2, 2, 3]])),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction) -> None:
    probs, labels = 1 / (1 + np.exp(-PRED)), (TARGET > 0).astype(np.float64)
    _check(
        {"p": probs},
        lambda p: F.binary_cross_entropy(p, verigrad.tensor(labels), reduction=reduction),
        lambda p: TF.binary_cross_entropy(p, torch.from_numpy(labels), reduction=reduction),
    )
    logits = PRED * 30  # large magnitudes: the logits form must not overflow
    _check(
        {"x": logits, "t": 1 / (1 + np.exp(-TARGET))},
        lambda x, t: nn.BCEWithLogitsLoss(reduction)(x, t),
        lambda x, t: torch.nn.BCEWithLogitsLoss(reduction=reduction)(x, t),
    )
    edges = np.array([0.0, 1.0, 1.0, 0.0])  # log(0): PyTorch bounds each log below by -100
    ours = F.binary_cross_entropy(
        verigrad.tensor(edges), verigrad.tensor([0.0, 0.0, 1.0, 1.0]), reduction="none"
    )
    theirs = TF.binary_cross_entropy(
        torch.from_numpy(edges), torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64), reduction="none"
    )
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_identity_softmax_and_log_softmax_modules() -> None:
    _check({"x": PRED}, lambda x: nn.Softmax(0)(nn.Identity()(x)), lambda x: torch.nn.Softmax(0)(x))
    _check({"x": PRED}, lambda x: nn.LogSoftmax(dim=1)(x), lambda x: torch.nn.LogSoftmax(dim=1)(x))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm(norm_type, max_norm) -> None:
    grads = [RNG.standard_normal((3, 4)), RNG.standard_normal(7), RNG.standard_normal(())]
    ours = [verigrad.zeros(*g.shape, dtype="f64", requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for o, t, g in zip(ours, theirs, grads):
        o.grad, t.grad = verigrad.tensor(g), torch.from_numpy(g.copy())
    norm = nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    np.testing.assert_allclose(norm.numpy(), expected.numpy(), rtol=1e-14)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-14, atol=1e-300)
    for o, t, g in zip(ours, theirs, grads):
        o.grad, t.grad = verigrad.tensor(g), torch.from_numpy(g.copy())
    nn.utils.clip_grad_value_(ours, 0.1)
    torch.nn.utils.clip_grad_value_(theirs, 0.1)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.grad.numpy(), t.grad.numpy())


SCHEDULES = [
    ("StepLR", {"step_size": 7, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [3, 10, 10, 20], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.93}),
    ("CosineAnnealingLR", {"T_max": 9, "eta_min": 0.001}),
    ("CosineAnnealingLR", {"T_max": 1}),
    ("LinearLR", {"start_factor": 0.2, "end_factor": 1.0, "total_iters": 6}),
    ("LinearLR", {}),
    ("LambdaLR", {"lr_lambda": lambda epoch: 0.95**epoch / (1 + epoch % 3)}),
]


@pytest.mark.parametrize(
    ("name", "settings"), SCHEDULES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULES)]
)
def test_learning_rate_schedules_give_pytorchs_floats(name, settings) -> None:
    ours_opt = verigrad.optim.SGD([verigrad.zeros(2, requires_grad=True)], lr=0.1)
    theirs_opt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    ours = getattr(lr_scheduler, name)(ours_opt, **settings)
    theirs = getattr(torch.optim.lr_scheduler, name)(theirs_opt, **settings)
    for _ in range(45):
        assert ours.get_last_lr() == theirs.get_last_lr()  # the same floats, not just close ones
        assert ours_opt.param_groups[0]["lr"] == theirs_opt.param_groups[0]["lr"]
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()


SEQUENCES = [
    ([("LinearLR", {"start_factor": 0.1, "total_iters": 4}), ("ExponentialLR", {"gamma": 0.9})], [5]),
    (
        [
            ("ExponentialLR", {"gamma": 0.8}),
            ("StepLR", {"step_size": 3}),
            ("CosineAnnealingLR", {"T_max": 7}),
        ],
        [4, 11],
    ),
    (
        [
            ("LambdaLR", {"lr_lambda": lambda epoch: 0.5 if epoch < 5 else 1.0}),
            ("LambdaLR", {"lr_lambda": lambda e: 1 / (e + 1)}),
        ],
        [2],
    ),
]


@pytest.mark.parametrize(("parts", "milestones"), SEQUENCES, ids=["warmup", "three", "lambda"])
def test_sequential_schedules_give_pytorchs_floats(parts, milestones) -> None:
    ours_opt = verigrad.optim.SGD([verigrad.zeros(2, requires_grad=True)], lr=0.1)
    theirs_opt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    ours = lr_scheduler.SequentialLR(
        ours_opt, [getattr(lr_scheduler, n)(ours_opt, **s) for n, s in parts], milestones
    )
    theirs = torch.optim.lr_scheduler.SequentialLR(
        theirs_opt, [getattr(torch.optim.lr_scheduler, n)(theirs_opt, **s) for n, s in parts], milestones
    )
    for _ in range(25):
        assert ours.get_last_lr() == theirs.get_last_lr()
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()
    with pytest.raises(ValueError, match="one milestone fewer"):
        lr_scheduler.SequentialLR(ours_opt, [lr_scheduler.ExponentialLR(ours_opt, 0.9)], [3])


ONE_CYCLE = [
    ("SGD", {"lr": 0.1, "momentum": 0.9}, {"max_lr": 1.0, "total_steps": 20}),
    ("Adam", {}, {"max_lr": 0.01, "epochs": 3, "steps_per_epoch": 7, "three_phase": True}),
    (
        "RMSprop",
        {"momentum": 0.5},
        {"max_lr": 0.1, "total_steps": 9, "anneal_strategy": "linear", "pct_start": 0.5},
    ),
    ("AdamW", {}, {"max_lr": 0.1, "total_steps": 11, "cycle_momentum": False, "div_factor": 5.0}),
]


@pytest.mark.parametrize(("name", "settings", "schedule"), ONE_CYCLE, ids=[o for o, _, _ in ONE_CYCLE])
def test_one_cycle_gives_pytorchs_rates_and_momenta(name, settings, schedule) -> None:
    """The same floats for the rate and the momentum (SGD's and RMSprop's, or Adam's beta1) every step."""
    ours_opt = getattr(verigrad.optim, name)([verigrad.zeros(2, requires_grad=True)], **settings)
    theirs_opt = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **settings)
    ours = lr_scheduler.OneCycleLR(ours_opt, **schedule)
    theirs = torch.optim.lr_scheduler.OneCycleLR(theirs_opt, **schedule)
    key = "betas" if "betas" in theirs_opt.defaults else "momentum"
    for _ in range(theirs.total_steps):
        assert ours.get_last_lr() == theirs.get_last_lr()
        assert ours_opt.param_groups[0][key] == theirs_opt.param_groups[0][key]
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()


def test_one_cycle_training_follows_pytorch_compiled() -> None:
    """SGD with Nesterov momentum under 1cycle, compiled (traced once) against PyTorch eager."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((16, 5)).astype(np.float32), rng.integers(0, 3, 16)
    verigrad.manual_seed(0)
    ours_model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    theirs_model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for o, t in zip(ours_model.parameters(), theirs_model.parameters()):
            t.copy_(torch.from_numpy(o.numpy().copy()))
    ours_opt = verigrad.optim.SGD(ours_model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    theirs_opt = torch.optim.SGD(theirs_model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    ours_schedule = lr_scheduler.OneCycleLR(ours_opt, max_lr=0.5, total_steps=12)
    theirs_schedule = torch.optim.lr_scheduler.OneCycleLR(theirs_opt, max_lr=0.5, total_steps=12)

    def step(x, y):
        loss = nn.CrossEntropyLoss()(ours_model(x), y)
        ours_opt.zero_grad()
        loss.backward()
        ours_opt.step()
        return loss

    compiled = verigrad.compile(step)
    for _ in range(12):
        ours_loss = compiled(verigrad.tensor(x), verigrad.tensor(y))
        theirs_loss = torch.nn.functional.cross_entropy(
            theirs_model(torch.from_numpy(x)), torch.from_numpy(y)
        )
        theirs_opt.zero_grad()
        theirs_loss.backward()
        theirs_opt.step()
        np.testing.assert_allclose(ours_loss.item(), theirs_loss.item(), rtol=1e-5)
        ours_schedule.step()
        theirs_schedule.step()
    assert compiled.stats()["traces"] == 1
    for o, t in zip(ours_model.parameters(), theirs_model.parameters()):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize(
    "how", ["plain", "bool mask", "float mask", "padding", "batch_first", "unbatched", "causal", "per head"]
)
def test_multihead_attention(how) -> None:
    """PyTorch's parameters loaded by name; outputs, attention weights and every gradient compared."""
    embed, heads = 8, 2
    theirs = torch.nn.MultiheadAttention(embed, heads, batch_first=how == "batch_first", dtype=torch.float64)
    ours = nn.MultiheadAttention(embed, heads, batch_first=how == "batch_first", dtype="f64")
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    q_shape, kv_shape = {
        "batch_first": ((3, 4, embed), (3, 5, embed)),
        "unbatched": ((4, embed), (5, embed)),
    }.get(how, ((4, 3, embed), (5, 3, embed)))
    if how == "causal":
        kv_shape = q_shape
    mask = RNG.random((4, 5)) > 0.6
    mask[:, 0] = False  # every query keeps a key
    padding = np.array([[False] * 4 + [True]] * 3)

    def extra(convert):
        return {
            "bool mask": {"attn_mask": convert(mask)},
            "float mask": {"attn_mask": convert(np.where(mask, -1.5, 0.25))},
            "padding": {"key_padding_mask": convert(padding)},
            "causal": {"attn_mask": convert(np.triu(np.ones((4, 4), bool), 1)), "is_causal": True},
            "per head": {"average_attn_weights": False},
        }.get(how, {})

    def run(module, convert, q, k, v):
        out, weights = module(q, k, v, **extra(convert))
        return out * 2 + weights.sum() if how != "per head" else out.sum() + weights * 3

    arrays = {
        "q": RNG.standard_normal(q_shape),
        "k": RNG.standard_normal(kv_shape),
        "v": RNG.standard_normal(kv_shape),
    }
    _check(
        arrays, lambda **a: run(ours, verigrad.tensor, **a), lambda **a: run(theirs, torch.from_numpy, **a)
    )
    _, weights = ours(*(verigrad.tensor(arrays[n]) for n in "qkv"), need_weights=False)
    assert weights is None


ROWS = np.concatenate([RNG.standard_normal((3, 5)), np.zeros((1, 5))])  # a zero row: norm's gradient


@pytest.mark.parametrize(
    ("p", "dim", "keepdim"), [(2, 1, False), (2, None, False), (1, 0, True), (3, 1, False)]
)
def test_norms(p, dim, keepdim) -> None:
    """Values and gradients, the zero row's too (0 for p=2 with PyTorch; p=1's sign is 0 at 0)."""
    rows = ROWS if p == 2 else RNG.standard_normal((4, 5))  # |x|^p of 0 has no defined gradient for p<1
    _check(
        {"x": rows},
        lambda x: x.norm(p, dim=dim, keepdim=keepdim),
        lambda x: x.norm(p, dim=dim, keepdim=keepdim),
    )
    _check(
        {"x": RNG.standard_normal((4, 5))},
        lambda x: verigrad.norm(x, math.inf, 1),
        lambda x: x.norm(math.inf, 1),
    )


def test_normalize_and_cosine_similarity() -> None:
    _check({"x": ROWS}, lambda x: F.normalize(x, dim=1), lambda x: TF.normalize(x, dim=1))
    other = RNG.standard_normal((4, 5))
    _check(
        {"a": ROWS[:3], "b": other[:3]},
        lambda a, b: F.cosine_similarity(a, b),
        lambda a, b: TF.cosine_similarity(a, b),
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_with_label_smoothing(reduction) -> None:
    classes = np.array([0, 4, 2, 1])
    _check(
        {"x": PRED},
        lambda x: F.cross_entropy(x, verigrad.tensor(classes), reduction=reduction, label_smoothing=0.2),
        lambda x: TF.cross_entropy(x, torch.tensor(classes), reduction=reduction, label_smoothing=0.2),
    )
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(verigrad.tensor(PRED), verigrad.tensor(classes))
    expected = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(torch.tensor(PRED), torch.tensor(classes))
    np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-12)


def test_products_outer_bmm_mm() -> None:
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    _check({"a": a, "b": b}, lambda a, b: verigrad.bmm(a, b), lambda a, b: torch.bmm(a, b))
    _check({"a": a[0], "b": b[0]}, lambda a, b: a.mm(b), lambda a, b: a.mm(b))
    _check({"u": a[0, 0], "v": b[0, 0]}, lambda u, v: verigrad.outer(u, v), lambda u, v: torch.outer(u, v))


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


@pytest.mark.parametrize(
    "args", [(0, 1, 0.1), (-1.5, 2.3, 0.37), (5, 0, -0.5), (0.0, 3), (2.5,), (1, 2.0001, 0.25)]
)
def test_arange_with_float_bounds_gives_pytorchs_floats(args) -> None:
    """f32: PyTorch's bits (start + i * step in f64, rounded once). In f64 PyTorch's vectorized kernel
    forms some values another way (an ulp from start + i * step, which verigrad gives exactly)."""
    assert verigrad.arange(*args).numpy().tobytes() == torch.arange(*args).numpy().tobytes()
    ours, theirs = (
        verigrad.arange(*args, dtype=verigrad.f64).numpy(),
        torch.arange(*args, dtype=torch.float64),
    )
    theirs = theirs.numpy()
    assert ours.shape == theirs.shape
    if theirs.size:
        assert np.abs(ours - theirs).max() <= np.spacing(np.abs(theirs).max())  # one ulp of the largest


@pytest.mark.parametrize(("groups", "shape"), [(2, (3, 4, 5)), (3, (2, 6, 2, 3)), (1, (2, 3))])
def test_group_norm(groups, shape) -> None:
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal(shape[1]), RNG.standard_normal(shape[1])
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.group_norm(x, groups, w, b),
        lambda x, w, b: TF.group_norm(x, groups, w, b),
    )
    assert repr(nn.GroupNorm(groups, shape[1])) == f"GroupNorm({groups}, {shape[1]}, eps=1e-05)"


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"mode": "max", "factor": 0.5, "patience": 1},
        {"threshold_mode": "abs", "threshold": 0.05, "cooldown": 2},
    ],
)
def test_reduce_lr_on_plateau_gives_pytorchs_rates(settings) -> None:
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.89, 0.9, 0.91, 0.92, 0.93] * 3
    settings = {"patience": 2, **settings}
    ours = lr_scheduler.ReduceLROnPlateau(
        verigrad.optim.SGD([verigrad.zeros(1, requires_grad=True)], lr=0.1), **settings
    )
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **settings)
    for m in metrics:
        ours.step(verigrad.tensor(m))
        theirs.step(m)
        assert ours.get_last_lr() == theirs.get_last_lr()
    assert ours.get_last_lr()[0] < 0.1  # it did cut


def test_parameters_to_vector_and_back() -> None:
    ours, theirs = nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        for a, b in zip(ours.parameters(), theirs.parameters()):
            b.copy_(torch.from_numpy(a.numpy()))
    flat = nn.utils.parameters_to_vector(ours.parameters())
    expected = torch.nn.utils.parameters_to_vector(theirs.parameters())
    np.testing.assert_array_equal(flat.numpy(), expected.detach().numpy())
    nn.utils.vector_to_parameters(flat * 2, ours.parameters())
    torch.nn.utils.vector_to_parameters(expected * 2, theirs.parameters())
    for a, b in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())


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


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_and_scatter_add(dim: int) -> None:
    """Values and gradients of both inputs, with an index smaller than x off the axis; scatter's positions
    written once (PyTorch leaves repeated ones unspecified), scatter_add's repeated, and a src larger than
    the index."""
    rng = np.random.default_rng(dim)
    shape, index_shape = (4, 5), (3, 4)
    rows = [rng.permutation(shape[dim])[: index_shape[dim]] for _ in range(index_shape[1 - dim])]
    unique, repeated = np.stack(rows, 1 - dim), rng.integers(0, shape[dim], index_shape)
    x = rng.standard_normal(shape)
    _check(
        {"x": x, "s": rng.standard_normal(index_shape)},
        lambda x, s: x.scatter(dim, verigrad.tensor(unique), s),
        lambda x, s: x.scatter(dim, torch.tensor(unique), s),
    )
    _check(
        {"x": x, "s": rng.standard_normal(index_shape)},
        lambda x, s: x.scatter_add(dim, verigrad.tensor(repeated), s),
        lambda x, s: x.scatter_add(dim, torch.tensor(repeated), s),
    )
    larger = rng.standard_normal((4, 4))  # values only: PyTorch cannot differentiate such a src
    np.testing.assert_allclose(
        verigrad.tensor(x).scatter_add(dim, verigrad.tensor(repeated), verigrad.tensor(larger)).numpy(),
        torch.tensor(x).scatter_add(dim, torch.tensor(repeated), torch.tensor(larger)).numpy(),
        rtol=1e-15,
        atol=1e-15,
    )
    _check(
        {"x": x},
        lambda x: x.scatter(dim, verigrad.tensor(unique), -2.5),
        lambda x: x.scatter(dim, torch.tensor(unique), -2.5),
    )


def test_fill_diagonal() -> None:
    for shape, wrap in [((4, 4), False), ((7, 3), True), ((7, 3), False), ((3, 6), True), ((3, 3, 3), False)]:
        ours, theirs = verigrad.zeros(*shape), torch.zeros(*shape)
        assert ours.fill_diagonal_(2.5, wrap=wrap) is ours
        theirs.fill_diagonal_(2.5, wrap=wrap)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_index_add_and_unique() -> None:
    index = np.array([0, 4, 0, 2])
    _check(
        {"x": RNG.standard_normal((5, 3)), "s": RNG.standard_normal((4, 3))},
        lambda x, s: x.index_add(0, verigrad.tensor(index), s, alpha=0.5),
        lambda x, s: x.index_add(0, torch.tensor(index), s, alpha=0.5),
    )
    _check(
        {"x": RNG.standard_normal((3, 5)), "s": RNG.standard_normal((3, 4))},
        lambda x, s: x.index_add(1, verigrad.tensor(index), s),
        lambda x, s: x.index_add(1, torch.tensor(index), s),
    )
    values = np.array([[3.0, 1.0, np.inf], [1.0, -0.5, 3.0], [3.0, 1.0, np.inf]])
    for dim in (None, 0, 1):
        ours = verigrad.tensor(values).unique(return_inverse=True, return_counts=True, dim=dim)
        theirs = torch.tensor(values).unique(return_inverse=True, return_counts=True, dim=dim)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    condition = values > 1
    for a, b in zip(verigrad.where(verigrad.tensor(condition)), torch.where(torch.tensor(condition))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize(
    "settings",
    [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}, {"bias": False, "num_layers": 2}],
)
def test_lstm(settings) -> None:
    """Outputs, final states and every gradient of a PyTorch LSTM given the same state dict (its
    parameter names), from zero and from given states, batched and unbatched."""
    ours = nn.LSTM(3, 4, **settings).double()
    theirs = torch.nn.LSTM(3, 4, **settings).double()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    layers = settings.get("num_layers", 1) * (2 if settings.get("bidirectional") else 1)
    x = RNG.standard_normal((2, 5, 3) if settings.get("batch_first") else (5, 2, 3))
    h0, c0 = RNG.standard_normal((layers, 2, 4)), RNG.standard_normal((layers, 2, 4))
    xs, hs, cs = (verigrad.tensor(a).requires_grad_() for a in (x, h0, c0))
    xt, ht, ct = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    out, (h, c) = ours(xs, (hs, cs))
    out_t, (h_t, c_t) = theirs(xt, (ht, ct))
    for a, b in [(out, out_t), (h, h_t), (c, c_t)]:
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
    ((out * out).sum() + h.sum() + (c * c).sum()).backward()
    ((out_t * out_t).sum() + h_t.sum() + (c_t * c_t).sum()).backward()
    for a, b in [(xs, xt), (hs, ht), (cs, ct)]:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
        )
    single, (h1, _) = ours(verigrad.tensor(x[0] if settings.get("batch_first") else x[:, 0]))
    single_t, (h1_t, _) = theirs(torch.tensor(x[0] if settings.get("batch_first") else x[:, 0]))
    np.testing.assert_allclose(single.numpy(), single_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h1.numpy(), h1_t.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_prod_gradient_with_zeros() -> None:
    """No zero, one zero and two zeros in a row: the gradient is PyTorch's in each."""
    x = RNG.standard_normal((3, 4))
    x[1, 2] = x[2, 0] = x[2, 3] = 0.0
    _check({"x": x}, lambda x: x.prod(1), lambda x: x.prod(1))
    _check({"x": x}, lambda x: verigrad.prod(x), lambda x: torch.prod(x))


@pytest.mark.parametrize("settings", [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}])
def test_gru(settings) -> None:
    """As test_lstm: outputs, final state and every gradient, from a given state, batched and not."""
    ours = nn.GRU(3, 4, **settings).double()
    theirs = torch.nn.GRU(3, 4, **settings).double()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    layers = settings.get("num_layers", 1) * (2 if settings.get("bidirectional") else 1)
    x = RNG.standard_normal((2, 5, 3) if settings.get("batch_first") else (5, 2, 3))
    h0 = RNG.standard_normal((layers, 2, 4))
    xs, hs = verigrad.tensor(x).requires_grad_(), verigrad.tensor(h0).requires_grad_()
    xt, ht = torch.tensor(x, requires_grad=True), torch.tensor(h0, requires_grad=True)
    (out, h), (out_t, h_t) = ours(xs, hs), theirs(xt, ht)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), h_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    ((out * out).sum() + h.sum()).backward()
    ((out_t * out_t).sum() + h_t.sum()).backward()
    for a, b in [(xs, xt), (hs, ht)]:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
        )
    single = x[0] if settings.get("batch_first") else x[:, 0]
    np.testing.assert_allclose(
        ours(verigrad.tensor(single))[0].numpy(), theirs(torch.tensor(single))[0].detach().numpy(), rtol=1e-12
    )


def test_mask_selection_and_lerp() -> None:
    x = RNG.standard_normal((4, 3))
    mask = x[:, 0] > 0
    _check({"x": x}, lambda x: x[verigrad.tensor(mask)] * 2, lambda x: x[torch.tensor(mask)] * 2)
    _check({"x": x}, lambda x: x[x > 0], lambda x: x[x > 0])
    end = RNG.standard_normal((4, 3))
    _check({"a": x, "b": end}, lambda a, b: a.lerp(b, 0.3), lambda a, b: a.lerp(b, 0.3))
    ours, theirs = verigrad.tensor(x.copy()), torch.tensor(x.copy())
    ours[ours < 0] = ours[ours < 0] * 3
    theirs[theirs < 0] = theirs[theirs < 0] * 3
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(ours.nonzero().numpy(), theirs.nonzero().numpy())


@pytest.mark.parametrize("offset", [0, 1, -2, 5])
def test_diagonals_trace_and_meshgrid(offset) -> None:
    x = RNG.standard_normal((3, 4))
    _check({"x": x}, lambda x: x.diagonal(offset), lambda x: x.diagonal(offset))
    _check(
        {"x": RNG.standard_normal((2, 3, 4))},
        lambda x: x.diagonal(offset, 2, 1),
        lambda x: x.diagonal(offset, 2, 1),
    )
    _check({"v": x[0]}, lambda v: verigrad.diag(v, offset), lambda v: torch.diag(v, offset))
    _check({"x": x[:, :3]}, lambda x: x.trace(), lambda x: x.trace())
    for indexing in ("ij", "xy"):
        ours = verigrad.meshgrid(
            verigrad.arange(3), verigrad.arange(2), verigrad.arange(4), indexing=indexing
        )
        theirs = torch.meshgrid(torch.arange(3), torch.arange(2), torch.arange(4), indexing=indexing)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for ours, theirs in zip(
        verigrad.std_mean(verigrad.tensor(x), dim=1), torch.std_mean(torch.tensor(x), dim=1)
    ):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_cosine_annealing_with_warm_restarts_gives_pytorchs_rates() -> None:
    ours = lr_scheduler.CosineAnnealingWarmRestarts(
        verigrad.optim.SGD([verigrad.zeros(1, requires_grad=True)], lr=0.1), T_0=3, T_mult=2, eta_min=0.01
    )
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    theirs = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01)
    for _ in range(25):
        assert ours.get_last_lr() == theirs.get_last_lr()
        ours.step()
        opt.step()
        theirs.step()


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


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
def test_amsgrad(kind, compiled) -> None:
    """Ten steps with gradients that jump (the largest second moment matters), eagerly and compiled."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(5)
    p, tp = verigrad.tensor(w0.copy()).requires_grad_(), torch.tensor(w0.copy(), requires_grad=True)
    ours = getattr(verigrad.optim, kind)([p], lr=0.1, amsgrad=True)
    theirs = getattr(torch.optim, kind)([tp], lr=0.1, amsgrad=True)

    def step(g):
        ours.zero_grad()
        (p * g).sum().backward()
        ours.step()
        return p.sum()

    run = verigrad.compile(step) if compiled else step
    for i in range(10):
        g = rng.standard_normal(5) * (10.0 if i % 3 == 0 else 0.1)
        run(verigrad.tensor(g))
        tp.grad = torch.tensor(g)
        theirs.step()
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_shifts_slices_products_and_distances() -> None:
    x, m1, m2 = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5)), RNG.standard_normal((5, 4))
    for ours, theirs in [
        (lambda x: x.roll(1, 1), lambda x: x.roll(1, 1)),
        (lambda x: x.roll((1, -2), (0, 1)), lambda x: x.roll((1, -2), (0, 1))),
        (lambda x: x.roll(5), lambda x: x.roll(5)),
        (lambda x: x.narrow(1, 1, 2), lambda x: x.narrow(1, 1, 2)),
        (lambda x: x.unbind(1)[2], lambda x: x.unbind(1)[2]),
        (lambda x: verigrad.square(x) + verigrad.log2(x.abs()) - x.abs().log10(),
         lambda x: torch.square(x) + torch.log2(x.abs()) - x.abs().log10()),
        (lambda x: x.masked_select(x > 0), lambda x: x.masked_select(x > 0)),
        (lambda x: verigrad.cdist(x, x[:2] * 2), lambda x: torch.cdist(x, x[:2] * 2)),
        (lambda x: verigrad.cdist(x, x[:2] * 2, p=1.0), lambda x: torch.cdist(x, x[:2] * 2, p=1.0)),
    ]:  # fmt: skip
        _check({"x": x}, ours, theirs)
    _check(
        {"x": x, "a": m1, "b": m2},
        lambda x, a, b: verigrad.addmm(x, a, b, beta=0.5, alpha=2.0),
        lambda x, a, b: torch.addmm(x, a, b, beta=0.5, alpha=2.0),
    )
    _check(
        {"x": x[None], "a": m1[None], "b": m2[None]},
        lambda x, a, b: verigrad.baddbmm(x, a, b),
        lambda x, a, b: torch.baddbmm(x, a, b),
    )
    _check(
        {"x": m1, "w": m2.T, "b": RNG.standard_normal(4)},
        lambda x, w, b: F.linear(x, w, b),
        lambda x, w, b: TF.linear(x, w, b),
    )


def test_values_only_helpers() -> None:
    special = np.array([np.nan, np.inf, -np.inf, 1.5, 0.0, -0.0], np.float32)
    np.testing.assert_array_equal(
        verigrad.tensor(special).nan_to_num().numpy(), torch.tensor(special).nan_to_num().numpy()
    )
    np.testing.assert_array_equal(
        verigrad.tensor(special).nan_to_num(1.0, 2.0, -2.0).numpy(),
        torch.tensor(special).nan_to_num(1.0, 2.0, -2.0).numpy(),
    )
    a, b = special, np.array([np.nan, np.inf, np.inf, 1.5 + 1e-6, 1e-9, 0.0], np.float32)
    for equal_nan in (False, True):
        np.testing.assert_array_equal(
            verigrad.isclose(verigrad.tensor(a), verigrad.tensor(b), equal_nan=equal_nan).numpy(),
            torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan).numpy(),
        )
    counts = np.array([[0, 1, 2], [0, 0, 3]])
    assert verigrad.count_nonzero(verigrad.tensor(counts)).item() == 3
    np.testing.assert_array_equal(
        verigrad.tensor(counts).count_nonzero(dim=1).numpy(),
        torch.tensor(counts).count_nonzero(dim=1).numpy(),
    )
    for offset in (-1, 0, 2):
        np.testing.assert_array_equal(
            verigrad.tril_indices(4, 3, offset).numpy(), torch.tril_indices(4, 3, offset).numpy()
        )
        np.testing.assert_array_equal(
            verigrad.triu_indices(3, 5, offset).numpy(), torch.triu_indices(3, 5, offset).numpy()
        )
    np.testing.assert_allclose(
        verigrad.logspace(-1, 2, 7).numpy(), torch.logspace(-1, 2, 7).numpy(), rtol=2e-7
    )
    assert verigrad.logspace(0, 1, 3, base=2.0).dtype.name == "f32"
    boundaries, values = np.array([1.0, 2.0, 2.0, 5.0]), np.array([[0.5, 2.0], [2.5, 9.0]])
    for right in (False, True):
        np.testing.assert_array_equal(
            verigrad.bucketize(verigrad.tensor(values), verigrad.tensor(boundaries), right=right).numpy(),
            torch.bucketize(torch.tensor(values), torch.tensor(boundaries), right=right).numpy(),
        )


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning")  # PyTorch's kl_div
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_losses(reduction: str) -> None:
    logits, target = RNG.standard_normal((6, 4)), np.array([0, 3, -100, 1, 3, 2])
    weight = np.array([0.5, 2.0, 1.0, 3.0])
    _check(
        {"x": logits},
        lambda x: F.cross_entropy(
            x, verigrad.tensor(target), reduction, weight=verigrad.tensor(weight), ignore_index=-100
        ),
        lambda x: TF.cross_entropy(x, torch.tensor(target), torch.tensor(weight), reduction=reduction),
    )
    _check(
        {"x": logits},
        lambda x: nn.CrossEntropyLoss(reduction, ignore_index=-100)(x, verigrad.tensor(target)),
        lambda x: torch.nn.CrossEntropyLoss(reduction=reduction)(x, torch.tensor(target)),
    )
    labels = (RNG.random((6, 4)) > 0.5).astype(np.float64)
    _check(
        {"x": logits},
        lambda x: F.binary_cross_entropy_with_logits(
            x, verigrad.tensor(labels), reduction, pos_weight=verigrad.tensor(weight)
        ),
        lambda x: TF.binary_cross_entropy_with_logits(
            x, torch.tensor(labels), reduction=reduction, pos_weight=torch.tensor(weight)
        ),
    )
    target_p = np.exp(RNG.standard_normal((6, 4)))
    target_p[0, 0] = 0.0  # a zero target adds nothing
    target_p /= target_p.sum(1, keepdims=True)
    for mode, log_target, given in [
        (reduction, False, target_p),
        ("batchmean", False, target_p),
        (reduction, True, np.log(target_p + 1e-3)),
    ]:
        _check(
            {"x": logits},
            lambda x, m=mode, lt=log_target, g=given: F.kl_div(
                F.log_softmax(x, 1), verigrad.tensor(g), m, log_target=lt
            ),
            lambda x, m=mode, lt=log_target, g=given: TF.kl_div(
                TF.log_softmax(x, 1), torch.tensor(g), reduction=m, log_target=lt
            ),
        )


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


ENCODER_CASES = ["post-norm", "norm_first", "gelu", "batch_first", "no bias", "masks", "stack"]
ENCODER_CASES.append("eval dropout")


@pytest.mark.parametrize("how", ENCODER_CASES)
def test_transformer_encoder(how) -> None:
    """nn.TransformerEncoderLayer and nn.TransformerEncoder with PyTorch's parameters loaded by name: the
    output and the gradients of the input and of every parameter, in f64."""
    d, heads, ff = 8, 2, 16
    settings = {
        "norm_first": {"norm_first": True},
        "gelu": {"activation": "gelu"},
        "batch_first": {"batch_first": True},
        "no bias": {"bias": False},
    }.get(how, {})
    dropout = 0.3 if how == "eval dropout" else 0.0
    torch_layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout, dtype=torch.float64, **settings)
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, dtype="f64", **settings)
    theirs, ours = torch_layer, layer
    if how == "stack":
        theirs = torch.nn.TransformerEncoder(
            torch_layer, 2, norm=torch.nn.LayerNorm(d, dtype=torch.float64), enable_nested_tensor=False
        )
        ours = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(d, dtype="f64"))
        with torch.no_grad():  # the copies differ, so that a mix-up of layers shows
            theirs.layers[1].linear1.weight.mul_(0.5)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    assert sorted(state) == sorted(dict(ours.named_parameters()))
    ours.load_state_dict(state)
    if how == "eval dropout":
        ours.eval(), theirs.eval()
    x = RNG.standard_normal((3, 5, d))
    masks = {}
    if how in ("masks", "stack"):
        attn = RNG.random((5, 5)) > 0.7
        attn[:, 0] = False
        padding = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])  # [N, S]: batch 5
        x = RNG.standard_normal((5, 3, d))  # [S, N, E]
        masks = {"mask": attn, "src_key_padding_mask": padding}

    def call(module, convert, x):
        kwargs = {k: convert(v) for k, v in masks.items()}
        if how == "masks":
            kwargs["src_mask"] = kwargs.pop("mask")
        return module(x, **kwargs)

    _check({"x": x}, lambda x: call(ours, verigrad.tensor, x), lambda x: call(theirs, torch.from_numpy, x))
    for name, p in theirs.named_parameters():
        mine = dict(ours.named_parameters())[name]
        np.testing.assert_allclose(mine.grad.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


def test_attention_dropout_in_training() -> None:
    """MultiheadAttention's dropout zeroes attention weights in training, the kept ones scaled by
    1 / (1 - p), and the weights it returns are those; in eval it is off."""
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, dtype="f64")
    x = verigrad.tensor(RNG.standard_normal((6, 1, 8)))
    verigrad.manual_seed(3)
    _, weights = mha(x, x, x, average_attn_weights=False)
    w = weights.numpy()
    assert 0.3 < (w == 0).mean() < 0.7
    mha.eval()
    _, plain = mha(x, x, x, average_attn_weights=False)
    p = plain.numpy()
    np.testing.assert_allclose(w[w != 0], 2 * p[w != 0], rtol=1e-12)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="dropout"):
        nn.MultiheadAttention(8, 2, dropout=1.5)


def _signs(n: int) -> np.ndarray:
    return np.where(np.arange(n) % 3 == 0, -1.0, 1.0)


LOSSES = {
    "margin_ranking_loss": (lambda r: {"a": r((6,)), "b": r((6,)), "y": _signs(6)}, {"margin": 0.3}),
    "hinge_embedding_loss": (lambda r: {"a": r((4, 3)), "y": np.tile(_signs(3), (4, 1))}, {"margin": 0.8}),
    "soft_margin_loss": (lambda r: {"a": r((4, 3)), "y": np.tile(_signs(3), (4, 1))}, {}),
    "cosine_embedding_loss": (lambda r: {"a": r((5, 4)), "b": r((5, 4)), "y": _signs(5)}, {"margin": 0.1}),
    "triplet_margin_loss": (lambda r: {"a": r((5, 4)), "b": r((5, 4)), "c": r((5, 4))}, {"margin": 0.5}),
    "poisson_nll_loss": (lambda r: {"a": r((4, 3)), "t": np.abs(r((4, 3))) * 3}, {"full": True}),
    "gaussian_nll_loss": (
        lambda r: {"a": r((4, 3)), "t": r((4, 3)), "v": np.abs(r((4,))) + 0.1},
        {"full": True, "eps": 0.2},
    ),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_margin_and_likelihood_losses(name, reduction) -> None:
    """Values and gradients of every float input, as PyTorch's; the target is a constant where it is one."""
    make, settings = LOSSES[name]
    arrays = make(lambda shape: RNG.standard_normal(shape))
    constants = {k: arrays.pop(k) for k in ("y",) if k in arrays}
    if name == "poisson_nll_loss":
        constants["t"] = arrays.pop("t")
    ours_fn, theirs_fn = getattr(F, name), getattr(TF, name)
    _check(
        arrays,
        lambda **a: ours_fn(
            *a.values(), *map(verigrad.tensor, constants.values()), **settings, reduction=reduction
        ),
        lambda **a: theirs_fn(
            *a.values(), *map(torch.from_numpy, constants.values()), **settings, reduction=reduction
        ),
    )


def test_multi_margin_loss_and_pairwise_distance() -> None:
    x, y, w = RNG.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2]), np.array([0.5, 1.0, 2.0, 1.5])
    for p in (1, 2):
        _check(
            {"x": x},
            lambda x: F.multi_margin_loss(x, verigrad.tensor(y), p=p, margin=0.7, weight=verigrad.tensor(w)),
            lambda x: TF.multi_margin_loss(
                x, torch.from_numpy(y), p=p, margin=0.7, weight=torch.from_numpy(w)
            ),
        )
    _check(
        {"x": x[0]},
        lambda x: F.multi_margin_loss(x, verigrad.tensor(2)),
        lambda x: TF.multi_margin_loss(x, torch.tensor(2)),
    )
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    _check(
        {"a": a, "b": b},
        lambda a, b: F.pairwise_distance(a, b, 3.0),
        lambda a, b: TF.pairwise_distance(a, b, 3.0),
    )
    ours = nn.TripletMarginLoss(margin=0.5, swap=True)
    theirs = torch.nn.TripletMarginLoss(margin=0.5, swap=True)
    c = RNG.standard_normal((3, 4))
    _check({"a": a, "b": b, "c": c}, lambda a, b, c: ours(a, b, c), lambda a, b, c: theirs(a, b, c))


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


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's own fast-path notice
@pytest.mark.parametrize("how", ["post-norm", "norm_first", "gelu", "batch_first", "masks"])
def test_transformer_decoder_and_the_whole_model(how) -> None:
    """nn.TransformerDecoderLayer and nn.Transformer with PyTorch's parameters: output and the gradients
    of source, target and every parameter, in f64."""
    d, heads, ff = 8, 2, 16
    settings = {"norm_first": {"norm_first": True}, "gelu": {"activation": "gelu"}}.get(how, {})
    settings |= {"batch_first": True} if how == "batch_first" else {}
    theirs = torch.nn.Transformer(d, heads, 2, 2, ff, 0.0, dtype=torch.float64, **settings)
    ours = nn.Transformer(d, heads, 2, 2, ff, 0.0, dtype="f64", **settings)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    assert sorted(state) == sorted(dict(ours.named_parameters()))
    ours.load_state_dict(state)
    src_shape, tgt_shape = ((3, 6, d), (3, 4, d)) if how == "batch_first" else ((6, 3, d), (4, 3, d))
    masks = {}
    if how == "masks":
        masks = {
            "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4, dtype="f64").numpy(),
            "src_key_padding_mask": np.array([[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]]),
            "memory_key_padding_mask": np.array(
                [[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]]
            ),
        }

    def run(module, convert, src, tgt):
        return module(src, tgt, **{k: convert(v) for k, v in masks.items()})

    arrays = {"src": RNG.standard_normal(src_shape), "tgt": RNG.standard_normal(tgt_shape)}
    _check(
        arrays, lambda **a: run(ours, verigrad.tensor, **a), lambda **a: run(theirs, torch.from_numpy, **a)
    )
    for name, p in theirs.named_parameters():
        mine = dict(ours.named_parameters())[name]
        np.testing.assert_allclose(mine.grad.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    layer = nn.TransformerDecoderLayer(d, heads, ff, 0.0, dtype="f64", **settings)
    torch_layer = torch.nn.TransformerDecoderLayer(d, heads, ff, 0.0, dtype=torch.float64, **settings)
    layer.load_state_dict({k: v.detach().numpy() for k, v in torch_layer.state_dict().items()})
    _check(arrays, lambda src, tgt: layer(tgt, src), lambda src, tgt: torch_layer(tgt, src))


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


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_loss(reduction, layout) -> None:
    """F.ctc_loss and nn.CTCLoss: the loss and the gradient of the logits (through log_softmax) as
    PyTorch's, for targets padded or concatenated, repeated labels, shorter inputs and another blank;
    an input too short for its target: an infinite loss, or 0 with zero_infinity."""
    steps, classes = 12, 5
    logits = RNG.standard_normal((steps, 3, classes))
    padded = np.array([[1, 2, 2, 3], [3, 1, 3, 3], [4, 4, 4, 4]])
    lengths, inputs = np.array([3, 2, 4]), np.array([12, 9, 10])
    targets = padded if layout == "padded" else np.concatenate([r[:n] for r, n in zip(padded, lengths)])
    for blank in (0, classes - 1) if layout == "padded" else (0,):
        tg = np.where(padded == blank, 1, padded) if blank else targets

        def ours(x, tg=tg, blank=blank):
            return nn.CTCLoss(blank, reduction)(F.log_softmax(x, 2), tg, inputs, lengths)

        def theirs(x, tg=tg, blank=blank):
            args = (torch.from_numpy(tg), torch.from_numpy(inputs), torch.from_numpy(lengths))
            return torch.nn.CTCLoss(blank, reduction)(torch.log_softmax(x, 2), *args)

        _check({"x": logits}, ours, theirs)
    short = (np.array([1, 1, 2, 1, 2]), np.array([2, 4]), np.array([2, 3]))  # target 0 needs 3 steps
    for zero_infinity, expected in ((False, np.inf), (True, 0.0)):
        loss = F.ctc_loss(
            F.log_softmax(verigrad.tensor(logits[:4, :2]), 2),
            *short,
            reduction="none",
            zero_infinity=zero_infinity,
        )
        assert loss.numpy()[0] == expected and np.isfinite(loss.numpy()[1])
