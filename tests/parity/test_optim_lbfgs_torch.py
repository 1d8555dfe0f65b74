"""`verigrad.optim.LBFGS` against `torch.optim.LBFGS` in f64: 20 `step(closure)` calls on an
L2-regularized logistic regression (a Linear layer), with a fixed step and with the strong-Wolfe line
search, a history that wraps around and one that does not; the parameters must agree to 1e-12 after
every step, and the closure must have been called as often (`func_evals`, `n_iter`).

The problem is convex: L-BFGS contracts toward its minimum there, so the last-bit differences of the
two frameworks' dot products and fused multiply-adds (PyTorch's BLAS sums in its own order) stay at
that level. On a non-convex model the iterations amplify such differences (a line search branching
the other way), whichever implementation is right.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad import nn, optim

RTOL = ATOL = 1e-12
STEPS = 20

rng = np.random.default_rng(0)
X = rng.standard_normal((32, 4))
Y = ((X @ np.array([1.0, -2.0, 0.5, 0.3]) + 0.1 * rng.standard_normal(32)) > 0).astype(np.float64)[:, None]
W, B = rng.standard_normal((1, 4)) * 0.1, np.zeros(1)

CONFIGS = {
    "fixed-step": {"lr": 0.5, "max_iter": 2, "history_size": 2},
    "fixed-step-long-history": {"lr": 0.5, "max_iter": 3},
    "strong-wolfe": {"lr": 3.0, "max_iter": 2, "history_size": 2, "line_search_fn": "strong_wolfe"},
    "strong-wolfe-long-history": {"lr": 3.0, "max_iter": 4, "line_search_fn": "strong_wolfe"},
}


def _setup(lib: Any, kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
    if lib is verigrad:
        model = nn.Linear(4, 1, dtype="f64")
        model.weight.data, model.bias.data = verigrad.tensor(W.copy()), verigrad.tensor(B.copy())
        opt = optim.LBFGS(model.parameters(), **kwargs)
    else:
        model = torch.nn.Linear(4, 1).double()
        with torch.no_grad():
            model.weight.copy_(torch.from_numpy(W))
            model.bias.copy_(torch.from_numpy(B))
        opt = torch.optim.LBFGS(model.parameters(), **kwargs)
    x, y = lib.tensor(X), lib.tensor(Y)

    def closure() -> Any:
        opt.zero_grad()
        z = model(x)
        loss = ((z.exp() + 1).log() - y * z).mean() + 0.05 * (model.weight**2).sum()
        loss.backward()
        return loss

    return model, opt, closure


def _values(model: Any) -> np.ndarray:
    return np.concatenate([np.asarray(p.detach().numpy()).ravel() for p in model.parameters()])


@pytest.mark.parametrize("config", list(CONFIGS))
def test_lbfgs_steps_match_torch(config: str) -> None:
    ours, ours_opt, ours_closure = _setup(verigrad, CONFIGS[config])
    theirs, theirs_opt, theirs_closure = _setup(torch, CONFIGS[config])
    for step in range(STEPS):
        first = ours_opt.step(ours_closure)
        their_first = theirs_opt.step(theirs_closure)
        assert float(first) == pytest.approx(float(their_first.detach()), rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(
            _values(ours), _values(theirs), rtol=RTOL, atol=ATOL, err_msg=f"step {step}"
        )
    ours_state = ours_opt.state[next(iter(ours.parameters()))]
    theirs_state = theirs_opt.state[next(iter(theirs.parameters()))]
    assert list(ours_state) == list(theirs_state)
    assert (ours_state["func_evals"], ours_state["n_iter"]) == (
        theirs_state["func_evals"],
        theirs_state["n_iter"],
    )
    assert ours_state["func_evals"] > STEPS + 5, "the steps should have iterated"
    for name in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(
            ours_state[name].numpy(), theirs_state[name].numpy(), rtol=1e-10, atol=1e-12
        )
    assert np.abs(_values(ours) - np.concatenate([W.ravel(), B])).max() > 0.5


def test_lbfgs_state_dict_goes_to_torch_and_back(tmp_path: Path) -> None:
    """Ten steps in verigrad, its state dict saved with verigrad.save and loaded by PyTorch's LBFGS (and
    PyTorch's converted back into a second verigrad LBFGS): the next ten steps agree."""
    kwargs = CONFIGS["strong-wolfe-long-history"]
    ours, ours_opt, ours_closure = _setup(verigrad, kwargs)
    for _ in range(10):
        ours_opt.step(ours_closure)
    theirs, theirs_opt, theirs_closure = _setup(torch, kwargs)
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.numpy()))
    verigrad.save(ours_opt.state_dict(), tmp_path / "lbfgs.pt")
    theirs_opt.load_state_dict(torch.load(tmp_path / "lbfgs.pt", weights_only=True))
    again, again_opt, again_closure = _setup(verigrad, kwargs)
    for p, q in zip(again.parameters(), ours.parameters()):
        p.data = verigrad.tensor(q.numpy().copy())
    again_opt.load_state_dict(verigrad.load(tmp_path / "lbfgs.pt"))
    for step in range(10):
        ours_opt.step(ours_closure)
        theirs_opt.step(theirs_closure)
        again_opt.step(again_closure)
        np.testing.assert_allclose(_values(ours), _values(theirs), rtol=RTOL, atol=ATOL, err_msg=f"{step}")
        np.testing.assert_array_equal(_values(again), _values(ours))


def test_lbfgs_refusals_are_torchs() -> None:
    p, q = (verigrad.zeros(2, dtype="f64").requires_grad_() for _ in range(2))
    tp, tq = (torch.zeros(2, dtype=torch.float64, requires_grad=True) for _ in range(2))
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        torch.optim.LBFGS([{"params": [tp]}, {"params": [tq]}])
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [p]}, {"params": [q]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        torch.optim.LBFGS([tp], lr=-1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.LBFGS([p], lr=-1)
