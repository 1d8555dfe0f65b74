"""verigrad.optim: single steps computed by hand, state round trips that continue identically, and
bad hyperparameters refused. (Step-by-step parity with PyTorch is in tests/parity.)"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import verigrad
from verigrad import nn, optim
from verigrad.cli.trainer import training_step
from verigrad.optim import SGD, Adam, AdamW

TIGHT = {"rtol": 1e-12, "atol": 1e-15}


def param(values) -> verigrad.Tensor:
    return verigrad.tensor(np.array(values, dtype=np.float64)).requires_grad_()


def give_grad(p: verigrad.Tensor, g) -> None:
    p.grad = verigrad.tensor(np.array(g, dtype=np.float64))


P0 = np.array([0.5, -1.5, 2.0, 0.0])
G1 = np.array([0.3, -0.2, 1.5, -4.0])
G2 = np.array([-1.0, 0.25, 0.5, 2.0])


# SGD -----------------------------------------------------------------------------------------------
def test_sgd_plain_step():
    p = param(P0)
    opt = SGD([p], lr=0.1)
    give_grad(p, G1)
    opt.step()
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * G1, **TIGHT)
    assert p.is_leaf and p.requires_grad  # the update is not recorded


def test_sgd_weight_decay_adds_to_the_gradient():
    p = param(P0)
    opt = SGD([p], lr=0.1, weight_decay=0.01)
    give_grad(p, G1)
    opt.step()
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * (G1 + 0.01 * P0), **TIGHT)


def test_sgd_momentum_and_dampening_two_steps():
    p = param(P0)
    opt = SGD([p], lr=0.1, momentum=0.9, dampening=0.2)
    give_grad(p, G1)
    opt.step()
    buf = G1  # the first buffer is the gradient itself, undampened
    p1 = P0 - 0.1 * buf
    np.testing.assert_allclose(p.numpy(), p1, **TIGHT)
    give_grad(p, G2)
    opt.step()
    buf = 0.9 * buf + 0.8 * G2
    np.testing.assert_allclose(p.numpy(), p1 - 0.1 * buf, **TIGHT)
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), buf, **TIGHT)


def test_sgd_nesterov_two_steps():
    p = param(P0)
    opt = SGD([p], lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)
    give_grad(p, G1)
    opt.step()
    g = G1 + 0.1 * P0
    buf = g
    p1 = P0 - 0.05 * (g + 0.8 * buf)
    np.testing.assert_allclose(p.numpy(), p1, **TIGHT)
    give_grad(p, G2)
    opt.step()
    g = G2 + 0.1 * p1
    buf = 0.8 * buf + g
    np.testing.assert_allclose(p.numpy(), p1 - 0.05 * (g + 0.8 * buf), **TIGHT)


# Adam, AdamW ---------------------------------------------------------------------------------------
def adam_reference(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, wd=0.0, decoupled=False):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p, m, v


def test_adam_first_step_moves_each_weight_by_about_lr():
    p = param(P0)
    opt = Adam([p], lr=0.01)
    give_grad(p, G1)
    opt.step()
    # bias-corrected m and v are g and g^2 after one step: the step is lr * g / (|g| + eps)
    np.testing.assert_allclose(p.numpy(), P0 - 0.01 * G1 / (np.abs(G1) + 1e-8), **TIGHT)


def test_adam_two_steps_with_l2_weight_decay():
    p = param(P0)
    opt = Adam([p], lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    for g in (G1, G2):
        give_grad(p, g)
        opt.step()
    expected, m, v = adam_reference(P0, [G1, G2], 0.02, (0.8, 0.99), 1e-6, wd=0.1)
    np.testing.assert_allclose(p.numpy(), expected, **TIGHT)
    np.testing.assert_allclose(opt.state[p]["exp_avg"].numpy(), m, **TIGHT)
    np.testing.assert_allclose(opt.state[p]["exp_avg_sq"].numpy(), v, **TIGHT)


def test_adamw_decays_the_weights_not_the_gradient():
    assert (
        Adam([param(P0)]).defaults["weight_decay"] == 0
        and AdamW([param(P0)]).defaults["weight_decay"] == 0.01
    )
    assert AdamW([param(P0)]).defaults["decoupled_weight_decay"] is True
    p = param(P0)
    opt = AdamW([p], lr=0.02, weight_decay=0.5)
    for g in (G1, G2):
        give_grad(p, g)
        opt.step()
    expected, _, _ = adam_reference(P0, [G1, G2], 0.02, wd=0.5, decoupled=True)
    np.testing.assert_allclose(p.numpy(), expected, **TIGHT)
    coupled, _, _ = adam_reference(P0, [G1, G2], 0.02, wd=0.5)
    assert not np.allclose(expected, coupled)  # the two kinds of decay differ here


# zero_grad and step ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), Adam, AdamW])
def test_zero_grad_and_a_parameter_without_gradient_is_left_alone(make):
    a, b = param(P0), param(P0 * 2)
    opt = make([a, b])
    give_grad(a, G1)
    give_grad(b, G2)
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    give_grad(a, G1)
    opt.step()
    assert not np.array_equal(a.numpy(), P0)
    np.testing.assert_array_equal(b.numpy(), P0 * 2)
    assert opt.param_steps == [1, 0]  # b's state was not touched: no entry, as in PyTorch
    assert a in opt.state and b not in opt.state and opt.state[b] == {}


def test_adam_bias_correction_counts_each_parameters_own_updates():
    a, b = param(P0), param(P0)
    opt = Adam([a, b], lr=0.01)
    give_grad(a, G1)
    opt.step()  # b has no gradient yet
    give_grad(a, G2)
    give_grad(b, G1)
    opt.step()  # b's first update: a first Adam step, as for a fresh optimizer
    np.testing.assert_allclose(b.numpy(), P0 - 0.01 * G1 / (np.abs(G1) + 1e-8), **TIGHT)
    np.testing.assert_allclose(a.numpy(), adam_reference(P0, [G1, G2], 0.01)[0], **TIGHT)


def test_optimizers_fit_a_small_regression(rng):
    x = rng.standard_normal((64, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.3
    for make in (lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps, lr=0.1)):
        verigrad.manual_seed(0)
        model = nn.Linear(3, 1, dtype="f64")
        opt = make(model.parameters())
        xt, yt = verigrad.tensor(x), verigrad.tensor(y[:, None])
        step = training_step(model, opt, nn.MSELoss())
        for _ in range(150):
            loss = step(xt, yt)
        assert float(loss) < 1e-4
        np.testing.assert_allclose(model.weight.numpy()[0], [1.5, -2.0, 0.5], atol=1e-2)


# state round trip -----------------------------------------------------------------------------------
MAKERS = {
    "sgd": lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: Adam(ps, lr=0.01, weight_decay=0.05),
    "adamw": lambda ps: AdamW(ps, lr=0.01),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_state_dict_round_trip_continues_identically(name, rng):
    make = MAKERS[name]
    start = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    grads = [[rng.standard_normal(s.shape) for s in start] for _ in range(6)]

    def run(params, opt, steps):
        for gs in steps:
            for p, g in zip(params, gs):
                give_grad(p, g)
            opt.step()

    params = [param(s) for s in start]
    opt = make(params)
    run(params, opt, grads[:3])
    opt.param_groups[0]["lr"] *= 0.5  # a schedule changed the rate: the state carries it
    state = copy.deepcopy(opt.state_dict())  # PyTorch's state dict holds the optimizer's own tensors
    middle = [p.numpy().copy() for p in params]
    run(params, opt, grads[3:])  # the original goes on

    resumed = [param(m) for m in middle]
    opt2 = make(resumed)
    opt2.load_state_dict(state)
    assert opt2.lr == opt.lr
    run(resumed, opt2, grads[3:])
    for p, q in zip(params, resumed):
        assert np.array_equal(p.numpy(), q.numpy())

    fresh = [param(m) for m in middle]  # without the state the continuation differs
    run(fresh, make(fresh), grads[3:])
    assert not np.array_equal(fresh[0].numpy(), params[0].numpy())


def test_loaded_state_is_not_shared_with_the_optimizer_or_the_dict_it_came_from():
    a = param(P0)
    opt_a = Adam([a], lr=0.1)
    give_grad(a, G1)
    opt_a.step()
    state = copy.deepcopy(opt_a.state_dict())
    saved = state["state"][0]["exp_avg"].numpy().copy()
    b, c = param(a.numpy()), param(a.numpy())
    opt_b, opt_c = Adam([b], lr=0.1), Adam([c], lr=0.1)
    opt_b.load_state_dict(state)
    opt_c.load_state_dict(state)  # the same dict into a second optimizer
    for opt, p in ((opt_a, a), (opt_b, b), (opt_c, c)):  # stepping one must not move another's moments
        give_grad(p, G2)
        opt.step()
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(a.numpy(), c.numpy())
    np.testing.assert_array_equal(opt_b.state[b]["exp_avg"].numpy(), opt_c.state[c]["exp_avg"].numpy())
    assert not np.array_equal(opt_b.state[b]["exp_avg"].numpy(), saved)


# bad hyperparameters --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: SGD(ps, lr=-0.1),
        lambda ps: SGD(ps, momentum=-0.5),
        lambda ps: SGD(ps, weight_decay=-1e-4),
        lambda ps: SGD(ps, nesterov=True),  # needs momentum
        lambda ps: SGD(ps, momentum=0.9, dampening=0.1, nesterov=True),
        lambda ps: Adam(ps, lr=-1e-3),
        lambda ps: Adam(ps, lr=math.nan),
        lambda ps: Adam(ps, betas=(1.0, 0.999)),
        lambda ps: Adam(ps, betas=(0.9, -0.1)),
        lambda ps: Adam(ps, eps=-1e-8),
        lambda ps: Adam(ps, weight_decay=-0.1),
        lambda ps: AdamW(ps, weight_decay=-0.01),
        lambda ps: AdamW(ps, betas=(0.9, 1.5)),
        lambda ps: SGD([], lr=0.1),
    ],
)
def test_bad_hyperparameters_raise_value_error(make):
    with pytest.raises(ValueError):
        make([param(P0)])


def test_what_is_not_a_list_of_tensors_raises_type_error_as_pytorchs():
    with pytest.raises(
        TypeError, match="optimizer can only optimize Tensors, but one of the params is ndarray"
    ):
        SGD([np.ones(3)], lr=0.1)
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        SGD(param(P0), lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        SGD([{"params": {param(P0)}}], lr=0.1)


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
        ("Adagrad", {"lr": 0.1, "lr_decay": 0.1, "initial_accumulator_value": 0.2}),
    ],
)
def test_rmsprop_and_adagrad_compiled_as_eager(cls, kwargs):
    """Their state (square_avg, grad_avg, sum) and Adagrad's per-parameter step live in tensors: a
    compiled step updates them as the eager one does."""
    weights = []
    for compiled in (False, True):
        verigrad.manual_seed(1)
        model = verigrad.nn.Sequential(verigrad.nn.Linear(3, 4), verigrad.nn.Tanh(), verigrad.nn.Linear(4, 1))
        opt = getattr(verigrad.optim, cls)(model.parameters(), **kwargs)
        x = verigrad.tensor(np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32))

        def step(x, model=model, opt=opt):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = verigrad.compile(step) if compiled else step
        losses = [run(x).item() for _ in range(4)]
        weights.append(([p.numpy().copy() for p in model.parameters()], losses))
    (eager, eager_losses), (compiled, compiled_losses) = weights
    assert eager_losses[-1] < eager_losses[0]
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-5)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)


def test_rmsprop_and_adagrad_refuse_negative_settings():
    p = [verigrad.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match=r"Invalid alpha value: -0\.5"):
        verigrad.optim.RMSprop(p, alpha=-0.5)
    with pytest.raises(ValueError, match=r"Invalid lr_decay value: -1\.0"):
        verigrad.optim.Adagrad(p, lr_decay=-1.0)
    with pytest.raises(ValueError, match="Invalid learning rate: nan"):
        verigrad.optim.Adagrad(p, lr=math.nan)


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam"])
def test_adam_variants_compiled_equal_eager(name):
    """12 steps (RAdam's first 5 are momentum only, then rectified; NAdam's f32 product of the mu_t is
    state): the compiled step gives the eager step's bits."""
    weights = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        model = nn.Linear(4, 3, dtype="f64")
        optimizer = getattr(optim, name)(model.parameters(), lr=1e-2, weight_decay=0.01)
        x = verigrad.tensor(np.random.default_rng(0).standard_normal((8, 4)))
        y = verigrad.tensor(np.arange(8) % 3)
        step = training_step(model, optimizer, nn.CrossEntropyLoss())
        run = verigrad.compile(step) if compiled else step
        for _ in range(12):
            run(x, y)
        weights.append(model.weight.numpy().copy())
    np.testing.assert_array_equal(weights[0], weights[1])
    with pytest.raises(ValueError, match=r"Invalid learning rate: -1\.0"):
        getattr(optim, name)(model.parameters(), lr=-1.0)
