"""torch.nn.utils.prune against torch 2.13: l1_unstructured (a fraction, then a count among the entries
left), ln_structured, custom_from_mask, global_unstructured over two layers, identity, remove and
is_pruned: the same masks, parameter and buffer names, outputs and gradients of weight_orig."""

from __future__ import annotations

import importlib

import numpy as np
import torch

import verigrad

RNG = np.random.default_rng(0)
W1, W2 = RNG.standard_normal((4, 6)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
X = RNG.standard_normal((2, 6)).astype(np.float32)


def _run(t):
    prune = importlib.import_module(f"{t.__name__}.nn.utils.prune")
    nn = t.nn
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    model.load_state_dict({"0.weight": t.from_numpy(W1.copy()), "0.bias": t.zeros(4),
                           "2.weight": t.from_numpy(W2.copy()), "2.bias": t.zeros(3)})  # fmt: skip
    first, last = model[0], model[2]
    prune.l1_unstructured(first, "weight", amount=0.3)
    names = ([n for n, _ in first.named_parameters()], [n for n, _ in first.named_buffers()])
    prune.l1_unstructured(first, "weight", amount=3)  # among the entries still there
    prune.ln_structured(first, "weight", amount=1, n=2, dim=0)
    prune.identity(last, "bias")
    prune.custom_from_mask(last, "bias", t.tensor([1.0, 0.0, 1.0]))
    prune.global_unstructured(
        [(first, "weight"), (last, "weight")], pruning_method=prune.L1Unstructured, amount=0.4
    )
    out = model(t.from_numpy(X.copy()))
    out.sum().backward()
    masks = [first.weight_mask.numpy().copy(), last.weight_mask.numpy().copy(), last.bias_mask.numpy().copy()]
    grads = [first.weight_orig.grad.numpy().copy(), last.weight_orig.grad.numpy().copy()]
    pruned = prune.is_pruned(model)
    prune.remove(first, "weight")
    after = (
        [n for n, _ in first.named_parameters()],
        first.weight.detach().numpy().copy(),
        first.weight.requires_grad,
    )
    return names, masks, out.detach().numpy(), grads, pruned, after, prune.is_pruned(first)


def test_pruning_against_torch():
    ours, theirs = _run(verigrad), _run(torch)
    assert ours[0] == theirs[0] == (["bias", "weight_orig"], ["weight_mask"])
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-6)
    for a, b in zip(ours[3], theirs[3]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert ours[4] is theirs[4] is True
    assert ours[5][0] == theirs[5][0] and ours[5][2] == theirs[5][2]
    np.testing.assert_array_equal(ours[5][1], theirs[5][1])
    assert ours[6] is theirs[6] is False
