"""PyTorch's time_sequence_prediction example: two stacked LSTMCells unrolled over sine waves in f64,
trained with LBFGS through a closure, then asked to continue each wave for `future` steps."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record


def build(torch: Any) -> Any:
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 12)
            self.lstm2 = nn.LSTMCell(12, 12)
            self.linear = nn.Linear(12, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)

            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for _i in range(future):  # if we should predict the future
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            outputs = torch.cat(outputs, dim=1)
            return outputs

    return Sequence()


def waves(n: int = 12, length: int = 30, period: int = 20, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.arange(length) + rng.integers(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / period * 2 * np.pi)


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, steps: int = 4) -> dict[str, Any]:
    nn = torch.nn
    torch.manual_seed(0)
    data = waves()
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = build(torch)
    seq.double()
    if saved is not None:
        record.load(torch, seq, saved)
    out: dict[str, Any] = {"state": record.state(seq), "losses": [], "closure_losses": []}
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
    for _step in range(steps):

        def closure():
            optimizer.zero_grad()
            out_ = seq(input)
            loss = criterion(out_, target)
            out["closure_losses"].append(loss.item())
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(seq)
            return loss

        out["losses"].append(float(optimizer.step(closure)))
        with torch.no_grad():  # begin to predict, no need to track gradient here
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            out["losses"].append(loss.item())
            y = pred.detach().numpy()
    out["eval"] = [y.copy()]
    return out
