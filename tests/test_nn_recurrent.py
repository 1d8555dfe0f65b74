"""nn.RNN and the recurrent cells against NumPy computations written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import nn

TIGHT = {"rtol": 1e-12, "atol": 1e-12}


def _set(module: nn.Module, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    module.load_state_dict({k: np.asarray(v, np.float64) for k, v in arrays.items()})
    return arrays


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_runs_the_elman_recurrence_both_ways(nonlinearity) -> None:
    rng = np.random.default_rng(0)
    rnn = nn.RNN(2, 3, nonlinearity=nonlinearity, bidirectional=True, dtype="f64")
    w = _set(rnn, **{k: rng.standard_normal(tuple(v.shape)) for k, v in rnn.state_dict().items()})
    act = np.tanh if nonlinearity == "tanh" else (lambda v: np.maximum(v, 0))
    x = rng.standard_normal((4, 1, 2))
    out, h_n = rnn(verigrad.tensor(x))
    for suffix, steps, half in [
        ("_l0", range(4), slice(0, 3)),
        ("_l0_reverse", range(3, -1, -1), slice(3, 6)),
    ]:
        h = np.zeros((1, 3))
        for t in steps:
            h = act(
                x[t] @ w[f"weight_ih{suffix}"].T
                + w[f"bias_ih{suffix}"]
                + h @ w[f"weight_hh{suffix}"].T
                + w[f"bias_hh{suffix}"]
            )
            np.testing.assert_allclose(out.numpy()[t, :, half], h, **TIGHT)
        np.testing.assert_allclose(h_n.numpy()[0 if suffix == "_l0" else 1], h, **TIGHT)


def test_lstm_projection_feeds_the_projected_h_back() -> None:
    rng = np.random.default_rng(1)
    lstm = nn.LSTM(2, 3, proj_size=1, dtype="f64")
    assert [k for k in lstm.state_dict()][-1] == "weight_hr_l0" and lstm.weight_hh_l0.shape == (12, 1)
    w = _set(lstm, **{k: rng.standard_normal(tuple(v.shape)) for k, v in lstm.state_dict().items()})
    x = rng.standard_normal((3, 2))  # unbatched
    out, (h_n, c_n) = lstm(verigrad.tensor(x))
    assert out.shape == (3, 1) and h_n.shape == (1, 1) and c_n.shape == (1, 3)

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    h, c = np.zeros(1), np.zeros(3)
    for t in range(3):
        g = x[t] @ w["weight_ih_l0"].T + w["bias_ih_l0"] + h @ w["weight_hh_l0"].T + w["bias_hh_l0"]
        c = sigmoid(g[3:6]) * c + sigmoid(g[0:3]) * np.tanh(g[6:9])
        h = (sigmoid(g[9:12]) * np.tanh(c)) @ w["weight_hr_l0"].T
        np.testing.assert_allclose(out.numpy()[t], h, **TIGHT)
    np.testing.assert_allclose(c_n.numpy()[0], c, **TIGHT)


def test_cells_are_one_step_of_their_networks() -> None:
    rng = np.random.default_rng(2)
    for cell_type, net_type in [(nn.RNNCell, nn.RNN), (nn.GRUCell, nn.GRU), (nn.LSTMCell, nn.LSTM)]:
        cell, net = cell_type(2, 3, dtype="f64"), net_type(2, 3, dtype="f64")
        net.load_state_dict({f"{k}_l0": v for k, v in cell.state_dict().items()})
        x = verigrad.tensor(rng.standard_normal((1, 4, 2)))
        out = cell(x[0])
        h = out[0] if isinstance(out, tuple) else out
        np.testing.assert_allclose(h.numpy(), net(x)[0].numpy()[0], **TIGHT)
    bare = nn.GRUCell(2, 3, bias=False)
    assert bare.bias_ih is None and list(bare.state_dict()) == ["weight_ih", "weight_hh"]
    assert nn.LSTMCell(2, 3)(verigrad.randn(2))[1].shape == (3,)
