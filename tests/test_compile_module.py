"""`verigrad.compile` with PyTorch's signature: a module becomes an OptimizedModule (`_orig_mod`), and a
program that compiles its model and trains it with backward() outside gets the eager results."""

import numpy as np
import pytest

import verigrad as vg
import verigrad.nn as nn
import verigrad.nn.functional as F


def _model():
    vg.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.25), nn.Linear(8, 2))


def _train(model, steps=6):
    opt = vg.optim.AdamW(model.parameters(), lr=0.01)
    vg.manual_seed(1)
    x, y = vg.randn(16, 3), vg.randn(16, 2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with vg.no_grad():
        evaluated = model(x).numpy().copy()
    return losses, evaluated


def test_compiled_module_trains_as_the_module():
    eager_losses, eager_eval = _train(_model())
    compiled = vg.compile(_model())
    assert type(compiled).__name__ == "OptimizedModule"
    losses, evaluated = _train(compiled)
    assert losses == eager_losses  # dropout's draws, BatchNorm's running statistics updated once a step
    assert evaluated.tobytes() == eager_eval.tobytes()
    # the forward and backward halves ran as plans (not the module eagerly)
    halves = compiled.__dict__["_compiled"]._halves
    assert len(halves) == 1 and all(h for h in halves.values())
    assert compiled.stats()["hits"] >= 10


class _TwoOutputs(nn.Module):
    """nanoGPT's shape of forward: (logits, loss), the loss when targets are given."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 5))

    def forward(self, x, targets):
        logits = self.body(x)
        return logits, F.cross_entropy(logits, targets)


def test_a_model_returning_logits_and_loss_trains_as_eager():
    def run(compiled):
        vg.manual_seed(3)
        model = _TwoOutputs()
        runner = vg.compile(model) if compiled else model
        opt = vg.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
        x, t = vg.randn(12, 4), vg.randint(0, 5, (12,))
        vg.manual_seed(9)
        losses = []
        for _ in range(8):
            _logits, loss = runner(x, t)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            vg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().tobytes() for p in model.parameters()]

    assert run(True) == run(False)


def test_double_backward_through_a_compiled_call_is_refused():
    model = nn.Linear(3, 1)
    out = vg.compile(model)(vg.randn(4, 3)).sum()
    with pytest.raises(NotImplementedError, match="create_graph"):
        vg.autograd.grad(out, model.weight, create_graph=True)


def test_optimized_module_is_the_module_under_orig_mod():
    model = _model()
    compiled = vg.compile(model, mode="max-autotune", fullgraph=True, dynamic=False)
    assert compiled._orig_mod is model
    assert list(compiled.state_dict()) == [f"_orig_mod.{k}" for k in model.state_dict()]
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    compiled.eval()
    assert not model.training
    assert compiled[0] if False else compiled._orig_mod[0] is model[0]
    assert str(compiled).startswith("OptimizedModule(\n  (_orig_mod): Sequential(")


def test_keywords_and_decorator_forms():
    x = vg.arange(3.0)

    @vg.compile
    def double(x):
        return x * 2

    @vg.compile(mode="reduce-overhead")
    def triple(x):
        return x * 3

    assert double(x).tolist() == [0.0, 2.0, 4.0] and triple(x).tolist() == [0.0, 3.0, 6.0]
    model = _model()
    assert vg.compile(model, disable=True) is model
    with pytest.raises(NotImplementedError, match="backend function"):
        vg.compile(model, backend=lambda gm, inputs: gm)
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        vg.compile(model, mode="fastest")
    with pytest.raises(TypeError, match="function or a module"):
        vg.compile(3)


def test_keyword_arguments_run_eagerly():
    class Scaled(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    compiled = vg.compile(Scaled())
    x = vg.arange(3.0)
    assert compiled(x, scale=2.0).tolist() == [0.0, 2.0, 4.0]
    assert np.array_equal(compiled(x).numpy(), x.numpy())
