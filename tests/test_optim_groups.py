"""verigrad.optim's PyTorch interface: parameter groups, `state` keyed by parameter, PyTorch-shaped state
dicts, the keywords PyTorch code passes, zero_grad; and the first steps of Adadelta, Rprop, ASGD and
LBFGS computed by hand. (Step-by-step parity with PyTorch is in tests/parity/test_optim_*_torch.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import nn, optim
from verigrad.optim import SGD, Adam

TIGHT = {"rtol": 1e-12, "atol": 1e-15}
P0 = np.array([0.5, -1.5, 2.0, 0.25])
G1 = np.array([0.3, -0.2, 1.5, -4.0])
G2 = np.array([-1.0, 0.25, 0.5, 2.0])


def param(values) -> verigrad.Tensor:
    return verigrad.tensor(np.array(values, dtype=np.float64)).requires_grad_()


def give_grad(p: verigrad.Tensor, g) -> None:
    p.grad = verigrad.tensor(np.array(g, dtype=np.float64))


# parameter groups -----------------------------------------------------------------------------------
def test_groups_fill_in_the_defaults_and_their_settings_are_read_at_each_step() -> None:
    a, b = param(P0), param(P0)
    opt = SGD([{"params": [a], "weight_decay": 0.1}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0)
    assert opt.defaults == {"lr": 0.1, "momentum": 0, "dampening": 0, "weight_decay": 0,
                            "nesterov": False, "maximize": False, "foreach": None, "differentiable": False,
                            "fused": None}  # fmt: skip
    first, second = opt.param_groups
    assert first["params"][0] is a and second["params"][0] is b  # one tensor alone is a list of one
    assert (first["lr"], first["weight_decay"], second["lr"], second["weight_decay"]) == (0.1, 0.1, 0.5, 0)
    assert list(first) == ["params", "weight_decay", *[k for k in opt.defaults if k != "weight_decay"]]
    give_grad(a, G1)
    give_grad(b, G1)
    opt.step()
    np.testing.assert_allclose(a.numpy(), P0 - 0.1 * (G1 + 0.1 * P0), **TIGHT)
    np.testing.assert_allclose(b.numpy(), P0 - 0.5 * G1, **TIGHT)
    for group in opt.param_groups:  # PyTorch's way of setting a rate: the next step uses it
        group["lr"] = 0.01
    before = b.numpy().copy()
    opt.step()
    np.testing.assert_allclose(b.numpy(), before - 0.01 * G1, **TIGHT)


def test_add_param_group_and_the_errors_pytorch_raises() -> None:
    a, b, c = param(P0), param(P0), param(P0)
    opt = Adam([a], lr=0.1)
    opt.add_param_group({"params": [b], "betas": (0.5, 0.9)})
    assert opt.param_groups[1]["betas"] == (0.5, 0.9) and opt.param_groups[1]["lr"] == 0.1
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [c, a]})
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        SGD([{"params": [a]}, {"params": [a]}], lr=0.1)
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([c])
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        SGD([a * 2], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        SGD([a, a], lr=0.1)


def test_named_parameters_give_param_names() -> None:
    model = nn.Linear(3, 2)
    opt = SGD(model.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    with pytest.raises(ValueError, match="all optimizer param groups should be with/without names"):
        opt.add_param_group({"params": [param(P0)]})


# state ----------------------------------------------------------------------------------------------
def test_state_is_keyed_by_parameter_from_its_first_update_with_pytorchs_names() -> None:
    a, b = param(P0), param(P0)
    opt = Adam([a, b], lr=0.1, amsgrad=True)
    assert len(opt.state) == 0 and opt.state[a] == {}
    give_grad(a, G1)
    opt.step()
    assert list(opt.state) == [a] and b not in opt.state
    assert list(opt.state[a]) == ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
    assert opt.state[a]["step"].item() == 1 and opt.state[a]["step"].dtype.name == "f32"
    np.testing.assert_allclose(opt.state[a]["exp_avg"].numpy(), 0.1 * G1, **TIGHT)
    opt.state[a]["exp_avg"] = verigrad.tensor(np.zeros(4))  # written into the optimizer's own
    assert not opt.state_dict()["state"][0]["exp_avg"].numpy().any()
    sgd = SGD([a], lr=0.1, momentum=0.9)
    sgd.step()
    assert list(sgd.state[a]) == ["momentum_buffer"]  # PyTorch's SGD keeps no step count
    assert len(SGD([a], lr=0.1).state) == 0  # nor, without momentum, any state


def test_state_dict_is_pytorchs_and_loads_back() -> None:
    a, b = param(P0), param(P0[:2])
    opt = Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    give_grad(a, G1)
    opt.step()
    state = opt.state_dict()
    assert set(state) == {"state", "param_groups"}
    assert list(state["state"]) == [0] and list(state["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    assert state["state"][0]["exp_avg"] is opt.state[a]["exp_avg"]  # the optimizer's own, as PyTorch's
    assert [g["params"] for g in state["param_groups"]] == [[0], [1]]
    assert state["param_groups"][1]["lr"] == 0.5 and "params" not in opt.defaults

    c, d = param(a.numpy()), param(b.numpy())
    other = Adam([{"params": [c]}, {"params": [d]}], lr=0.2)
    other.load_state_dict(state)
    assert other.param_groups[1]["lr"] == 0.5 and other.param_groups[1]["params"][0] is d
    assert other.state[c]["exp_avg"] is not opt.state[a]["exp_avg"]  # copied in
    for p, q in ((a, c), (b, d)):
        give_grad(p, G2[: p.shape[0]])
        give_grad(q, G2[: q.shape[0]])
    opt.step()
    other.step()
    np.testing.assert_array_equal(c.numpy(), a.numpy())
    np.testing.assert_array_equal(d.numpy(), b.numpy())
    with pytest.raises(ValueError, match="different number of parameter groups"):
        Adam([c]).load_state_dict(state)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        Adam([{"params": [c, d]}, {"params": []}]).load_state_dict(state)


# keywords -------------------------------------------------------------------------------------------
def test_momentum_turned_on_while_training_starts_from_that_gradient() -> None:
    p = param(P0)
    opt = SGD([p], lr=0.1)
    give_grad(p, G1)
    opt.step()
    opt.param_groups[0].update(momentum=0.9, dampening=0.5)
    for g in (G2, G1):
        give_grad(p, g)
        opt.step()
    buf = 0.9 * G2 + 0.5 * G1  # the buffer starts as G2, undampened
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * G1 - 0.1 * G2 - 0.1 * buf, **TIGHT)


def test_maximize_ascends() -> None:
    p = param(P0)
    opt = SGD([p], lr=0.1, maximize=True, weight_decay=0.5)
    give_grad(p, G1)
    opt.step()
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * (-G1 + 0.5 * P0), **TIGHT)


def test_keywords_that_change_nothing_on_the_cpu_are_accepted_and_the_others_refused() -> None:
    p = param(P0)
    for opt in (SGD([p], foreach=True), Adam([p], fused=True), optim.Adagrad([p], foreach=False)):
        give_grad(p, G1)
        opt.step()
    with pytest.raises(
        ValueError, match=r"Adam: differentiable=True \(autograd through the optimizer step\)"
    ):
        Adam([p], differentiable=True)
    with pytest.raises(ValueError, match="RMSprop: capturable=True is for CUDA graphs"):
        optim.RMSprop([p], capturable=True)
    with pytest.raises(ValueError, match="differentiable=True"):
        SGD([{"params": [p], "differentiable": True}])
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        SGD([p], fused=True, foreach=True)
    with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
        Adam([p], fused=True, differentiable=True)
    with pytest.raises(TypeError, match="a Tensor lr is not supported"):
        SGD([p], lr=verigrad.tensor(0.1))
    with pytest.raises(TypeError, match="Tensor betas are not supported"):
        Adam([p], betas=(verigrad.tensor(0.9), 0.999))
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        SGD([p], nesterov=True)
    with pytest.raises(ValueError, match=r"Invalid beta parameter at index 1: 1\.0"):
        Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match=r"Invalid rho value: 1\.5"):
        optim.Adadelta([p], rho=1.5)
    with pytest.raises(ValueError, match=r"Invalid eta values: 0\.5, 0\.9"):
        optim.Rprop([p], etas=(0.5, 0.9))
    with pytest.raises(ValueError, match=r"Invalid weight_decay value: -1"):
        optim.ASGD([p], weight_decay=-1)


def test_zero_grad_sets_to_none_by_default_or_zeros_in_place() -> None:
    model = nn.Linear(3, 2)
    opt = SGD(model.parameters(), lr=0.1)
    model(verigrad.ones(4, 3)).sum().backward()
    grad = model.weight.grad
    opt.zero_grad(set_to_none=False)
    assert model.weight.grad is grad and not grad.numpy().any()
    opt.zero_grad()
    assert model.weight.grad is None
    model(verigrad.ones(4, 3)).sum().backward()
    grad = model.bias.grad
    model.zero_grad(set_to_none=False)
    assert model.bias.grad is grad and not grad.numpy().any()
    model.zero_grad()
    assert model.bias.grad is None and model.weight.grad is None


def test_a_compiled_step_with_two_groups_is_the_eager_step_and_follows_their_rates() -> None:
    weights = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4, dtype="f64"), nn.Tanh(), nn.Linear(4, 1, dtype="f64"))
        params = list(model.parameters())
        opt = Adam([{"params": params[:2], "weight_decay": 0.1}, {"params": params[2:], "lr": 0.05}], lr=0.01)
        x = verigrad.tensor(np.random.default_rng(2).standard_normal((5, 3)))

        def step(x, model=model, opt=opt):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = verigrad.compile(step) if compiled else step
        for i in range(6):
            if i == 3:
                opt.param_groups[1]["lr"] = 0.2
            run(x)
        if compiled:
            assert run.stats()["traces"] == 1
        weights.append([p.numpy().copy() for p in params])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


# new optimizers, first steps by hand ----------------------------------------------------------------
def test_adadelta_first_step() -> None:
    p = param(P0)
    opt = optim.Adadelta([p], lr=0.5, rho=0.8, eps=1e-6)
    give_grad(p, G1)
    opt.step()
    v = 0.2 * G1 * G1
    delta = np.sqrt(1e-6) / np.sqrt(v + 1e-6) * G1
    np.testing.assert_allclose(p.numpy(), P0 - 0.5 * delta, **TIGHT)
    np.testing.assert_allclose(opt.state[p]["square_avg"].numpy(), v, **TIGHT)
    np.testing.assert_allclose(opt.state[p]["acc_delta"].numpy(), 0.2 * delta * delta, **TIGHT)


def test_rprop_grows_keeps_and_cuts_the_step_sizes() -> None:
    p = param(P0)
    opt = optim.Rprop([p], lr=0.1, etas=(0.5, 1.2), step_sizes=(0.06, 0.11))
    give_grad(p, G1)
    opt.step()  # no previous gradient: each step size is lr, each weight moves by it against its sign
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * np.sign(G1), **TIGHT)
    g2 = np.array([0.1, -0.5, -1.0, 0.0])  # same sign, same, flipped, zero
    give_grad(p, g2)
    opt.step()
    sizes = np.array([0.11, 0.11, 0.06, 0.1])  # 0.12 and 0.05 clamped to step_sizes; 0.1 kept
    np.testing.assert_allclose(opt.state[p]["step_size"].numpy(), sizes, **TIGHT)
    expected = P0 - 0.1 * np.sign(G1) - np.sign([0.1, -0.5, 0.0, 0.0]) * sizes  # no step after a flip
    np.testing.assert_allclose(p.numpy(), expected, **TIGHT)
    np.testing.assert_array_equal(opt.state[p]["prev"].numpy(), [0.1, -0.5, 0.0, 0.0])


def test_asgd_first_steps() -> None:
    p = param(P0)
    opt = optim.ASGD([p], lr=0.1, lambd=0.01, alpha=0.5, t0=1.0, weight_decay=0.2)
    give_grad(p, G1)
    opt.step()
    eta = np.float64(np.float32(0.1))  # kept in f32, as PyTorch keeps it
    p1 = P0 * (1 - 0.01 * eta) - eta * (G1 + 0.2 * P0)
    np.testing.assert_allclose(p.numpy(), p1, **TIGHT)
    np.testing.assert_array_equal(opt.state[p]["ax"].numpy(), p1)  # mu = 1: the average is p
    eta2 = np.float64(np.float32(0.1 / (1 + 0.1 * 0.01 * 1) ** 0.5))
    assert opt.state[p]["eta"].item() == eta2 and opt.state[p]["mu"].item() == 1.0
    give_grad(p, G2)
    opt.step()
    p2 = p1 * (1 - 0.01 * eta2) - eta2 * (G2 + 0.2 * p1)
    np.testing.assert_allclose(p.numpy(), p2, **TIGHT)
    assert opt.state[p]["mu"].item() == 1.0  # 1 / max(1, t - t0) at t = 2
    give_grad(p, G1)
    opt.step()
    assert opt.state[p]["mu"].item() == 0.5


def test_lbfgs_first_iteration_and_its_closure() -> None:
    """On f(x) = |x - c|^2 / 2 (gradient x - c), one iteration steps along -g by min(1, 1/|g|_1) lr; a
    second sees the exact curvature (y = s), so H_diag is 1 and the step lands on c."""
    c = np.array([1.0, -2.0, 0.5])
    x = param(np.zeros(3))
    opt = optim.LBFGS([x], lr=1.0, max_iter=1)
    calls = []

    def closure():
        opt.zero_grad()
        loss = ((x - verigrad.tensor(c)) ** 2).sum() / 2
        loss.backward()
        calls.append(float(loss))
        return loss

    first = opt.step(closure)
    g = -c
    np.testing.assert_allclose(x.numpy(), -min(1.0, 1 / np.abs(g).sum()) * g, **TIGHT)
    assert float(first) == pytest.approx(np.sum(c**2) / 2) and len(calls) == 1
    opt.step(closure)
    np.testing.assert_allclose(x.numpy(), c, **TIGHT)
    state = opt.state[x]
    assert state["func_evals"] == 2 and state["n_iter"] == 2 and state["H_diag"].item() == pytest.approx(1.0)
    with pytest.raises(TypeError, match=r"LBFGS\.step needs a closure"):
        opt.step()
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe'"):
        optim.LBFGS([x], line_search_fn="armijo")


def test_an_optimizer_written_as_pytorchs_are_keeps_its_state_in_pytorchs_way() -> None:
    """A subclass with its own step() filling `self.state[p]` (a defaultdict, as PyTorch's), and its
    state dict going out and back in."""

    class SignSGD(optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, {"lr": lr})

        @verigrad.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if len(state) == 0:
                        state["count"] = 0
                        state["last"] = verigrad.zeros_like(p)
                    state["count"] += 1
                    state["last"].copy_(p.grad.sign())
                    p.add_(state["last"], alpha=-group["lr"])

    p = param(P0)
    opt = SignSGD([p])
    for g in (G1, G2):
        give_grad(p, g)
        opt.step()
    np.testing.assert_allclose(p.numpy(), P0 - 0.1 * np.sign(G1) - 0.1 * np.sign(G2), **TIGHT)
    saved = opt.state_dict()
    assert saved["state"][0]["count"] == 2 and saved["param_groups"][0]["params"] == [0]
    other = SignSGD([param(P0)])
    other.load_state_dict(saved)
    assert other.state[other.param_groups[0]["params"][0]]["count"] == 2


def test_a_state_dict_without_a_newer_setting_takes_its_default() -> None:
    """A state dict from an older PyTorch (no decoupled_weight_decay in its groups) loads and steps."""
    p = param(P0)
    opt = Adam([p], lr=0.1)
    saved = opt.state_dict()
    del saved["param_groups"][0]["decoupled_weight_decay"]
    other = Adam([param(P0)], lr=0.1)
    other.load_state_dict(saved)
    assert other.param_groups[0]["decoupled_weight_decay"] is False
    give_grad(other.param_groups[0]["params"][0], G1)
    other.step()


def test_a_parameter_appended_to_a_groups_params_is_trained() -> None:
    a, b = param(P0), param(P0)
    opt = Adam([a], lr=0.1)
    opt.param_groups[0]["params"].append(b)  # as PyTorch code may do instead of add_param_group
    give_grad(b, G1)
    opt.step()
    np.testing.assert_allclose(b.numpy(), P0 - 0.1 * G1 / (np.abs(G1) + 1e-8), **TIGHT)
    assert list(opt.state) == [b] and opt.state_dict()["param_groups"][0]["params"] == [0, 1]


def test_step_and_state_dict_hooks_run_as_pytorchs() -> None:
    p = param(P0)
    opt = SGD([p], lr=0.1, momentum=0.9)
    seen = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: seen.append(("pre", o is opt, args, kwargs)))
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append(("post", o is opt)))
    opt.register_state_dict_post_hook(lambda o, state: {**state, "extra": 1})
    opt.register_load_state_dict_pre_hook(lambda o, state: {k: v for k, v in state.items() if k != "extra"})
    give_grad(p, G1)
    opt.step()
    assert seen == [("pre", True, (), {}), ("post", True)]
    pre.remove()
    opt.step()
    assert seen[-1] == ("post", True) and len(seen) == 3
    saved = opt.state_dict()
    assert saved["extra"] == 1
    opt.load_state_dict(saved)
    lbfgs = optim.LBFGS([p])  # a subclass's own step runs the hooks once
    calls = []
    lbfgs.register_step_post_hook(lambda o, args, kwargs: calls.append(len(args)))
    lbfgs.step(lambda: (p**2).sum())
    assert calls == [1]


def test_adagrad_has_state_at_once_for_its_first_parameters_only() -> None:
    a, b = param(P0), param(P0)
    opt = optim.Adagrad([a], initial_accumulator_value=0.5)
    opt.add_param_group({"params": [b]})
    assert list(opt.state) == [a] and opt.state[a]["sum"].numpy().tolist() == [0.5] * 4
    give_grad(b, G1)
    opt.step()
    assert list(opt.state) == [a, b] and list(opt.state_dict()["state"]) == [0, 1]
