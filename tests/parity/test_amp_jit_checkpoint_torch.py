"""torch.amp (autocast, GradScaler), torch.jit's decorators and torch.utils.checkpoint as PyTorch's on
a machine without a GPU: the same losses, gradients, scales and skipped steps, or a clear refusal."""

import warnings

import numpy as np
import pytest
import torch

import verigrad as vg


def _pair(seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal((8, 4)).astype(np.float32)
    models = []
    for lib in (torch, vg):
        m = lib.nn.Linear(3, 4)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
        models.append(m)
    return models, x, y


@pytest.mark.parametrize("blow_up", [None, 2, 5])
def test_grad_scaler_on_the_cpu_matches_torch(blow_up):
    (tm, vm), x, y = _pair()
    runs = []
    for lib, m in ((torch, tm), (vg, vm)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scaler = lib.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
        scales, losses = [], []
        for step in range(9):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(m(lib.tensor(x)), lib.tensor(y))
            if step == blow_up:
                loss = loss * float("inf")  # an overflowing step: skipped, the scale backs off
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            grads = [p.grad.detach().numpy().copy() for p in m.parameters()]
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            losses.append(loss.item())
        runs.append(
            (scales, losses, grads, [p.detach().numpy().copy() for p in m.parameters()], scaler.state_dict())
        )
    (ts, tl, tg, tp, tsd), (vs, vl, vgr, vp, vsd) = runs
    assert vs == ts  # the same scales, the same steps skipped
    np.testing.assert_allclose(vl, tl, rtol=1e-6)  # f32 sums in another order: 1e-6 relative
    for a, b in zip(tg + tp, vgr + vp):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    assert vsd == {k: (v.item() if hasattr(v, "item") else v) for k, v in tsd.items()}


def test_autocast_and_scaler_for_a_missing_device_are_disabled_with_a_warning():
    for lib in (torch, vg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.autocast("cuda"):
                pass
            scaler = lib.amp.GradScaler("cuda")
            with lib.cuda.amp.autocast():
                pass
        assert not scaler.is_enabled() and scaler.get_scale() == 1.0
        assert any("not available" in str(w.message) for w in caught)
        x = lib.ones(2, requires_grad=True)
        assert scaler.scale(x) is x
    with vg.autocast("cpu", enabled=False):
        assert vg.nn.Linear(2, 2)(vg.ones(1, 2)).dtype == vg.float32
    assert vg.is_autocast_enabled() is False and vg.get_autocast_dtype("cpu") == vg.bfloat16


def test_enabled_cpu_autocast_is_refused():
    with pytest.raises(NotImplementedError, match="enabled=False"), vg.autocast("cpu", dtype=vg.bfloat16):
        pass
    with pytest.raises(RuntimeError, match="unknown device_type"):
        vg.autocast("gpu")


def test_jit_decorators_run_the_python_code():
    for lib in (torch, vg):

        @lib.jit.script
        def gelu_tanh(x):
            return 0.5 * x * (1.0 + lib.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

        traced = lib.jit.trace(lib.nn.Linear(2, 2), lib.ones(1, 2))
        assert isinstance(traced(lib.ones(1, 2)), lib.Tensor)
        assert not lib.jit.is_scripting()
    x = np.linspace(-3, 3, 7).astype(np.float32)
    ref = (
        0.5
        * torch.tensor(x)
        * (1.0 + torch.tanh(0.7978845608 * (torch.tensor(x) + 0.044715 * torch.tensor(x) ** 3)))
    )
    got = gelu_tanh(vg.tensor(x))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="TorchScript"):
        vg.jit.save(traced, "m.pt")


def test_checkpoint_gives_the_plain_call_s_values_and_gradients():
    grads = []
    for lib in (torch, vg):
        import importlib

        cp = importlib.import_module(f"{lib.__name__}.utils.checkpoint")
        x = lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
        seq = lib.nn.Sequential(lib.nn.Tanh(), lib.nn.Sigmoid())
        y = cp.checkpoint(lambda a: (a * a).sin(), x, use_reentrant=False)
        z = cp.checkpoint_sequential(seq, 2, y, use_reentrant=False)
        z.sum().backward()
        grads.append(x.grad.detach().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-7)
