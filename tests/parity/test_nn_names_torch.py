"""nn names public programs use that verigrad lacked, against torch 2.13: nn.Buffer (assigned to a module it
is a buffer, persistent or not), nn.FractionalMaxPool2d/3d (the same windows given the same samples),
nn.SyncBatchNorm in one process and SyncBatchNorm.convert_sync_batchnorm."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def test_buffer_assigned_to_a_module_is_a_buffer():
    for t in (torch, verigrad):
        nn = t.nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.kept = nn.Buffer(t.ones(2))
                self.transient = nn.Buffer(t.zeros(3), persistent=False)
                self.plain = t.ones(1)

        m = M()
        assert sorted(m.state_dict()) == ["kept"]
        assert [n for n, _ in m.named_buffers()] == ["kept", "transient"]
        assert isinstance(m.kept, nn.Buffer) and not isinstance(m.plain, nn.Buffer)
        assert not isinstance(t.ones(1), nn.Buffer) and list(m.parameters()) == []
        m.kept = t.full((2,), 3.0)  # a tensor given to a buffer's name stays a buffer
        assert m.state_dict()["kept"].tolist() == [3.0, 3.0]


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("sizing", [{"output_size": 3}, {"output_ratio": 0.5}])
def test_fractional_max_pool_modules_against_torch(dims, sizing):
    rng = np.random.default_rng(dims)
    x = rng.standard_normal((2, 3) + (8,) * dims)
    samples = rng.random((2, 3, dims))
    ours_x, theirs_x = (f.from_numpy(x.copy()).requires_grad_() for f in (verigrad, torch))
    name = f"FractionalMaxPool{dims}d"
    ours = getattr(verigrad.nn, name)(
        2, **sizing, return_indices=True, _random_samples=verigrad.from_numpy(samples)
    )
    theirs = getattr(torch.nn, name)(
        2, **sizing, return_indices=True, _random_samples=torch.from_numpy(samples)
    )
    (o, oi), (t, ti) = ours(ours_x), theirs(theirs_x)
    np.testing.assert_array_equal(o.numpy(), t.detach().numpy())
    np.testing.assert_array_equal(oi.numpy(), ti.numpy())
    o.sum().backward()
    t.sum().backward()
    np.testing.assert_array_equal(ours_x.grad.numpy(), theirs_x.grad.numpy())
    for f in (torch, verigrad):
        with pytest.raises(ValueError, match="requires specifying"):
            getattr(f.nn, name)(2)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4), (2, 3, 2, 3, 3)])
def test_sync_batch_norm_in_one_process_against_torch(shape):
    rng = np.random.default_rng(len(shape))
    ours, theirs = verigrad.nn.SyncBatchNorm(3, momentum=0.2), torch.nn.SyncBatchNorm(3, momentum=0.2)
    for step in range(3):
        x = rng.standard_normal(shape)
        o = ours(verigrad.from_numpy(x.astype(np.float32)))
        t = theirs(torch.from_numpy(x.astype(np.float32)))
        np.testing.assert_allclose(
            o.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {step}"
        )
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), rtol=1e-6)
    ours.eval()
    theirs.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(
        ours(verigrad.from_numpy(x)).numpy(),
        theirs(torch.from_numpy(x)).detach().numpy(),
        rtol=1e-6,
        atol=1e-6,
    )


def test_convert_sync_batchnorm_keeps_the_layers_state():
    outputs = []
    for t in (torch, verigrad):
        t.manual_seed(0)
        nn = t.nn
        model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.Sequential(nn.BatchNorm1d(5)))
        model[1].weight.data.fill_(2.0)
        model[1].running_mean.fill_(0.5)
        model.eval()
        converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        assert [type(m).__name__ for m in converted.modules()] == [
            "Sequential", "Conv2d", "SyncBatchNorm", "Sequential", "SyncBatchNorm",
        ]  # fmt: skip
        layer = converted[1]
        assert layer.weight is model[1].weight if t is verigrad else True
        assert (
            not layer.training
            and layer.weight.tolist() == [2.0] * 4
            and layer.running_mean.tolist() == [0.5] * 4
        )
        x = np.linspace(-1, 1, 2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
        outputs.append(converted[1](t.from_numpy(x[:, :1].repeat(4, 1))).detach().numpy())
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-6)


def test_torch_module_paths_and_user_losses_as_torch():
    import importlib

    for t in (torch, verigrad):
        name = t.__name__
        parameter = importlib.import_module(f"{name}.nn.parameter")
        loss = importlib.import_module(f"{name}.nn.modules.loss")
        utils = importlib.import_module(f"{name}.nn.modules.utils")
        assert isinstance(parameter.Parameter(t.ones(2)), t.nn.Parameter)
        assert utils._pair(3) == (3, 3) and utils._triple((1, 2, 3)) == (1, 2, 3) and utils._single(4) == (4,)
        places = [("conv", "Conv2d"), ("batchnorm", "BatchNorm2d"), ("linear", "Linear"), ("rnn", "LSTM")]
        places += [("activation", "ReLU"), ("container", "Sequential"), ("module", "Module")]
        for sub, cls in places:
            assert getattr(importlib.import_module(f"{name}.nn.modules.{sub}"), cls) is getattr(t.nn, cls)
        assert t.nn.modules.Linear is t.nn.Linear

        class Squared(loss._Loss):
            def forward(self, a, b):
                d = (a - b) ** 2
                return d.mean() if self.reduction == "mean" else d.sum()

        class Focal(loss._Loss):
            def __init__(self, gamma=2.0, reduction="mean"):
                super().__init__(reduction=reduction)
                self.gamma = gamma

            def forward(self, p):
                return (-((1 - p) ** self.gamma) * p.log()).sum()

        class Weighted(loss._WeightedLoss):
            def forward(self, a):
                return (a * self.weight).sum()

        ones, zeros = t.ones(3), t.zeros(3)
        assert Squared(reduction="sum")(ones, zeros).item() == 3.0 and Squared()(ones, zeros).item() == 1.0
        assert Squared(None, None, "sum").reduction == "sum"
        assert abs(Focal(3.0)(t.full((2,), 0.5)).item() - 2 * 0.125 * np.log(2)) < 1e-6
        weighted = Weighted(weight=t.tensor([1.0, 2.0, 3.0]))
        assert weighted(ones).item() == 6.0 and list(weighted.state_dict()) == ["weight"]
