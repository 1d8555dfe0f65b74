"""PyTorch's regression example: fit a degree-4 polynomial with one Linear layer on features
`torch.cat([x ** i for i in range(1, 5)], 1)`, smooth_l1_loss, the update written by hand
(`param.data.add_(-0.1 * param.grad)`), and the learned and the actual function printed term by term
with `'{:+.2f} x^{} '.format(w, i + 1)` of 0-d tensors. The batches are drawn in NumPy, alike for both."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

POLY_DEGREE = 4


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None, steps: int = 40
) -> dict[str, Any]:
    F = torch.nn.functional
    torch.manual_seed(0)
    rng = np.random.default_rng(42)
    dt = dtype or torch.float32
    W_target = torch.from_numpy(rng.standard_normal((POLY_DEGREE, 1))).to(dt) * 5
    b_target = torch.from_numpy(rng.standard_normal(1)).to(dt) * 5

    def make_features(x):
        """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
        x = x.unsqueeze(1)
        return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)

    def f(x):
        """Approximated function."""
        return x.mm(W_target) + b_target.item()

    def poly_desc(W, b):
        """Creates a string description of a polynomial."""
        result = "y = "
        for i, w in enumerate(W):
            result += "{:+.2f} x^{} ".format(w, i + 1)  # noqa: UP032 (as the example)
        result += "{:+.2f}".format(b[0])  # noqa: UP032 (as the example)
        return result

    def get_batch(batch_size=32):
        """Builds a batch i.e. (x, f(x)) pair."""
        random = torch.from_numpy(rng.standard_normal(batch_size)).to(dt)
        x = make_features(random)
        y = f(x)
        return x, y

    fc = torch.nn.Linear(W_target.size(0), 1).to(dt)
    if saved is not None:
        record.load(torch, fc, saved)
    out: dict[str, Any] = {"state": record.state(fc), "losses": [], "log": []}
    for batch_idx in range(1, steps + 1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        if batch_idx == 1:
            out["loss0"], out["grads0"] = loss, record.grads(fc)
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        out["losses"].append(loss)
        if loss < 1e-3:
            break

    out["batches"] = batch_idx
    out["log"].append("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
    out["log"].append("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))
    with torch.no_grad():
        x = make_features(torch.linspace(-1, 1, 7, dtype=dt))
        out["eval"] = [fc(x).numpy().copy(), f(x).numpy().copy()]
    return out
