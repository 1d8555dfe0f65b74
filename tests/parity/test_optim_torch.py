"""`verigrad.optim` against `torch.optim`, in f64, on random parameters and gradients.

Each optimizer configuration takes 10 steps on the same parameters with the same gradients in both
frameworks; the parameters must agree to 1e-12 after every step, and the optimizer state (momentum
buffers, Adam's moments) at the end. PyTorch runs its single-tensor implementation (foreach=False, its
CPU default). Its kernels fuse multiply-adds, so the two differ by an ulp here and there: a tolerance
of 1e-12 leaves room for that and nothing else (a wrong formula is off by far more).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad.optim import ASGD, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, RAdam, RMSprop, Rprop

RTOL = ATOL = 1e-12
STEPS = 10
SHAPES = [(7, 5), (13,), (), (3, 4, 2)]

# id -> (verigrad class, torch class, keyword arguments both accept)
CONFIGS: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "sgd": (SGD, torch.optim.SGD, {"lr": 0.1}),
    "sgd-momentum": (SGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd-dampening": (SGD, torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
    "sgd-nesterov": (SGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    "sgd-weight-decay": (SGD, torch.optim.SGD, {"lr": 0.1, "weight_decay": 0.05}),
    "sgd-momentum-dampening-weight-decay": (
        SGD,
        torch.optim.SGD,
        {"lr": 0.05, "momentum": 0.8, "dampening": 0.1, "weight_decay": 0.01},
    ),
    "sgd-nesterov-weight-decay": (
        SGD,
        torch.optim.SGD,
        {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
    ),
    "adam": (Adam, torch.optim.Adam, {"lr": 1e-2}),
    "adam-weight-decay": (Adam, torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.1}),
    # beta1 < 0.5: PyTorch's lerp takes its other branch (end - (end - start) * (1 - weight))
    "adam-betas-eps": (Adam, torch.optim.Adam, {"lr": 3e-2, "betas": (0.3, 0.99), "eps": 1e-3}),
    "adamw": (AdamW, torch.optim.AdamW, {"lr": 1e-2}),
    "adamw-weight-decay": (AdamW, torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1, "betas": (0.8, 0.9)}),
    "adamax": (Adamax, torch.optim.Adamax, {"lr": 1e-2}),
    "adamax-weight-decay": (
        Adamax,
        torch.optim.Adamax,
        {"lr": 2e-2, "betas": (0.8, 0.99), "weight_decay": 0.1},
    ),
    "nadam": (NAdam, torch.optim.NAdam, {"lr": 1e-2}),
    "nadam-weight-decay": (
        NAdam,
        torch.optim.NAdam,
        {"lr": 1e-2, "weight_decay": 0.1, "momentum_decay": 0.01},
    ),
    "nadam-decoupled": (
        NAdam,
        torch.optim.NAdam,
        {"lr": 1e-2, "weight_decay": 0.1, "decoupled_weight_decay": True},
    ),
    # 10 steps: the momentum-only steps (rho_t <= 5) and then the rectified ones
    "radam": (RAdam, torch.optim.RAdam, {"lr": 1e-2}),
    "radam-weight-decay": (RAdam, torch.optim.RAdam, {"lr": 1e-2, "weight_decay": 0.1, "betas": (0.8, 0.99)}),
    "radam-decoupled": (
        RAdam,
        torch.optim.RAdam,
        {"lr": 1e-2, "weight_decay": 0.1, "decoupled_weight_decay": True},
    ),
    "rmsprop": (RMSprop, torch.optim.RMSprop, {"lr": 1e-2}),
    "rmsprop-centered-momentum-weight-decay": (
        RMSprop,
        torch.optim.RMSprop,
        {"lr": 5e-3, "alpha": 0.9, "eps": 1e-6, "centered": True, "momentum": 0.8, "weight_decay": 0.01},
    ),
    "adagrad": (Adagrad, torch.optim.Adagrad, {"lr": 0.1}),
    "adagrad-decay-initial-weight-decay": (
        Adagrad,
        torch.optim.Adagrad,
        {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.3, "weight_decay": 0.02, "eps": 1e-6},
    ),
    "adam-amsgrad-maximize": (Adam, torch.optim.Adam, {"lr": 1e-2, "amsgrad": True, "maximize": True}),
    "adadelta": (Adadelta, torch.optim.Adadelta, {}),
    "adadelta-weight-decay": (Adadelta, torch.optim.Adadelta, {"lr": 0.5, "rho": 0.7, "weight_decay": 0.1}),
    "rprop": (Rprop, torch.optim.Rprop, {}),
    "rprop-etas-sizes": (
        Rprop,
        torch.optim.Rprop,
        {"lr": 0.1, "etas": (0.4, 1.1), "step_sizes": (0.01, 0.3)},
    ),
    "asgd": (ASGD, torch.optim.ASGD, {}),
    # t0 within the steps: the average starts following the parameters
    "asgd-averaging": (ASGD, torch.optim.ASGD, {"lr": 0.05, "lambd": 0.01, "t0": 4, "weight_decay": 0.1}),
}


def _torch_optimizer(cls: Any, params: list[torch.Tensor], kwargs: dict[str, Any]) -> Any:
    return cls(params, **kwargs, foreach=False)


def _problem(seed: int) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Initial parameters, and STEPS gradients for each. Every other parameter's gradients are small,
    so that Adam's eps matters for it."""
    rng = np.random.default_rng(seed)
    params = [np.asarray(rng.standard_normal(shape)) for shape in SHAPES]
    grads = [
        [np.asarray(rng.standard_normal(shape) * (1e-3 if i % 2 else 1.0)) for i, shape in enumerate(SHAPES)]
        for _ in range(STEPS)
    ]
    return params, grads


def _pair(arrays: list[np.ndarray]) -> tuple[list[verigrad.Tensor], list[torch.Tensor]]:
    ours = [verigrad.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    theirs = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    return ours, theirs


def _set_grads(ours, theirs, grads: list[np.ndarray | None]) -> None:
    for p, t, g in zip(ours, theirs, grads):
        p.grad = None if g is None else verigrad.from_numpy(g.copy())
        t.grad = None if g is None else torch.from_numpy(g.copy())


def _assert_params(ours, theirs, when: str) -> None:
    for i, (p, t) in enumerate(zip(ours, theirs)):
        assert p.dtype.name == "f64" and p.shape == tuple(t.shape)
        np.testing.assert_allclose(
            p.numpy(), t.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=f"parameter {i}, {when}"
        )


def _assert_state(optimizer, torch_optimizer, ours, theirs) -> None:
    """`optimizer.state[p]` has PyTorch's names, counts and values: no entry until p's first update."""
    for i, (p, t) in enumerate(zip(ours, theirs)):
        expected = torch_optimizer.state.get(t, {})
        state = optimizer.state[p]
        assert (p in optimizer.state) == (t in torch_optimizer.state), f"parameter {i}: state entry"
        assert list(state) == list(expected), f"parameter {i}: state names differ"
        for name, want in expected.items():
            if name == "step":
                assert state["step"].item() == float(want), f"parameter {i}: step count"
                continue
            assert state[name].dtype.name == str(want.dtype).removeprefix("torch.").replace("float", "f")
            np.testing.assert_allclose(
                state[name].numpy(),
                want.numpy(),
                rtol=RTOL,
                atol=ATOL,
                err_msg=f"parameter {i}, state {name}",
            )


@pytest.mark.parametrize("config", list(CONFIGS))
def test_ten_steps_match_torch(config: str) -> None:
    ours_cls, torch_cls, kwargs = CONFIGS[config]
    params, grads = _problem(seed=sorted(CONFIGS).index(config))
    ours, theirs = _pair(params)
    optimizer, torch_optimizer = ours_cls(ours, **kwargs), _torch_optimizer(torch_cls, theirs, kwargs)
    for step in range(STEPS):
        _set_grads(ours, theirs, grads[step])
        optimizer.step()
        torch_optimizer.step()
        _assert_params(ours, theirs, f"after step {step + 1}")
    _assert_state(optimizer, torch_optimizer, ours, theirs)
    moved = max(float(np.abs(p.numpy() - a).max()) for p, a in zip(ours, params))
    assert moved > 1e-3, "the parameters barely moved; the comparison would prove little"


@pytest.mark.parametrize(
    "config", ["sgd-nesterov-weight-decay", "sgd-dampening", "adam-weight-decay", "adamw"]
)
def test_parameters_without_a_gradient_are_skipped_as_torch_does(config: str) -> None:
    """A parameter whose gradient is None is left alone (no decay, no state); its momentum starts, and
    Adam's bias correction counts, from its own first step, as PyTorch's per-parameter step does."""
    ours_cls, torch_cls, kwargs = CONFIGS[config]
    params, grads = _problem(seed=99)
    ours, theirs = _pair(params)
    optimizer, torch_optimizer = ours_cls(ours, **kwargs), _torch_optimizer(torch_cls, theirs, kwargs)
    for step in range(STEPS):
        # parameter 0 from step 4 on; parameter 2 on even steps; parameter 3 never
        present = [step >= 3, True, step % 2 == 0, False]
        _set_grads(ours, theirs, [g if on else None for g, on in zip(grads[step], present)])
        optimizer.step()
        torch_optimizer.step()
        _assert_params(ours, theirs, f"after step {step + 1}")
    _assert_state(optimizer, torch_optimizer, ours, theirs)
    np.testing.assert_array_equal(ours[3].numpy(), params[3])


@pytest.mark.parametrize("config", ["sgd-momentum", "adam", "adamw-weight-decay"])
def test_learning_rate_changed_between_steps(config: str) -> None:
    """A schedule that sets the learning rate before each step (as `verigrad train` does with its
    cosine decay) gives PyTorch's result with the same schedule on `param_groups`."""
    ours_cls, torch_cls, kwargs = CONFIGS[config]
    params, grads = _problem(seed=5)
    ours, theirs = _pair(params)
    optimizer, torch_optimizer = ours_cls(ours, **kwargs), _torch_optimizer(torch_cls, theirs, kwargs)
    for step in range(STEPS):
        lr = kwargs["lr"] * 0.5 * (1 + math.cos(math.pi * step / STEPS))
        optimizer.param_groups[0]["lr"] = lr
        torch_optimizer.param_groups[0]["lr"] = lr
        _set_grads(ours, theirs, grads[step])
        optimizer.step()
        torch_optimizer.step()
        _assert_params(ours, theirs, f"after step {step + 1}")


@pytest.mark.parametrize("config", ["sgd-nesterov-weight-decay", "adam", "adamw"])
def test_resumed_from_state_dict_matches_uninterrupted_torch(config: str) -> None:
    """Half the steps, then a new optimizer (on copies of the parameters) resumed from the first's
    state_dict, which takes the rest; PyTorch runs all the steps without a break. The first optimizer
    keeps stepping on its own parameters and must not disturb the resumed one's state."""
    ours_cls, torch_cls, kwargs = CONFIGS[config]
    params, grads = _problem(seed=11)
    ours, theirs = _pair(params)
    optimizer, torch_optimizer = ours_cls(ours, **kwargs), _torch_optimizer(torch_cls, theirs, kwargs)
    half = STEPS // 2
    for step in range(half):
        _set_grads(ours, theirs, grads[step])
        optimizer.step()
        torch_optimizer.step()
    resumed_params = [verigrad.tensor(p).requires_grad_(True) for p in ours]
    resumed = ours_cls(resumed_params, **kwargs)
    resumed.load_state_dict(optimizer.state_dict())
    for step in range(half, STEPS):
        _set_grads(ours, theirs, grads[step])
        for p, g in zip(resumed_params, grads[step]):
            p.grad = verigrad.from_numpy(g.copy())
        optimizer.step()
        resumed.step()
        torch_optimizer.step()
        _assert_params(resumed_params, theirs, f"after step {step + 1}, resumed")
        _assert_params(ours, theirs, f"after step {step + 1}, uninterrupted")
    _assert_state(resumed, torch_optimizer, resumed_params, theirs)


@pytest.mark.parametrize(
    "config", ["sgd-momentum", "adam", "adamw-weight-decay", "adadelta", "rprop", "asgd"]
)
def test_f32_parameters_stay_f32_and_track_torch(config: str) -> None:
    """In f32 the update is computed in f32 (no promotion to f64) and follows PyTorch's to f32
    rounding: 10 steps agree to a few ulps of the parameters' size."""
    ours_cls, torch_cls, kwargs = CONFIGS[config]
    params, grads = _problem(seed=3)
    ours, theirs = _pair([p.astype(np.float32) for p in params])
    optimizer, torch_optimizer = ours_cls(ours, **kwargs), _torch_optimizer(torch_cls, theirs, kwargs)
    for step in range(STEPS):
        _set_grads(ours, theirs, [g.astype(np.float32) for g in grads[step]])
        optimizer.step()
        torch_optimizer.step()
    for i, (p, t) in enumerate(zip(ours, theirs)):
        assert p.dtype.name == "f32", f"parameter {i} became {p.dtype.name}"
        for name, buffer in optimizer.state[p].items():
            want = "f32"  # the step count too: an f32 scalar, PyTorch's default dtype
            assert buffer.dtype.name == want, f"parameter {i}: state {name} is {buffer.dtype.name}"
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{i}")
