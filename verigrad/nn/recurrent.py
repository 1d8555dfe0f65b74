"""`nn.LSTM` and `nn.GRU`, as PyTorch's: their parameter names (so their state dicts load), gate orders
(LSTM: input, forget, cell, output; GRU: reset, update, new), layers, dropout between them in training,
bidirectional runs, batch_first and unbatched inputs.

Each step is written with ops, so it differentiates and traces as they do; the input's part of every
gate is one product over all time steps (per layer and direction), the recurrent part one product a
step. The number of steps must be a concrete size: the loop over them is Python's.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..dtypes import f32
from ..errors import ShapeError
from ..ops import concat, sigmoid, stack, tanh, zeros
from ..tensor import Tensor, describe
from . import functional as F
from .init import fan_in_bound, uniform
from .module import Module


class _Recurrent(Module):
    """The layers and directions of a recurrent network whose cell has `gates` gates and keeps
    `states` tensors (h, or h and c) of hidden_size per sequence."""

    gates = 1
    states = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = f32,
    ):
        super().__init__()
        name = type(self).__name__
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout must be a probability in [0, 1], got {dropout!r}")
        if dropout and num_layers == 1:
            warnings.warn(
                f"{name}: dropout acts between layers; with one layer it does nothing", stacklevel=2
            )
        if num_layers < 1 or hidden_size < 1:
            raise ValueError(
                f"{name} needs num_layers and hidden_size >= 1, got {num_layers} and {hidden_size}"
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.dropout = float(dropout)
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        bound, rows = fan_in_bound(hidden_size), self.gates * hidden_size
        for layer in range(num_layers):
            width = input_size if layer == 0 else hidden_size * self.directions
            for suffix in self._suffixes(layer):
                setattr(self, f"weight_ih{suffix}", uniform((rows, width), bound, dtype))
                setattr(self, f"weight_hh{suffix}", uniform((rows, hidden_size), bound, dtype))
                if bias:
                    setattr(self, f"bias_ih{suffix}", uniform((rows,), bound, dtype))
                    setattr(self, f"bias_hh{suffix}", uniform((rows,), bound, dtype))

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _suffixes(self, layer: int) -> list[str]:
        return [f"_l{layer}", f"_l{layer}_reverse"][: self.directions]

    def _forward(self, x: Tensor, state: tuple[Tensor, ...] | None) -> tuple[Tensor, tuple[Tensor, ...]]:
        """The outputs and the final states, each [D * num_layers, N, hidden_size]."""
        name = type(self).__name__
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            size = self.input_size
            raise ShapeError(f"{name} takes [T, N, {size}] or [T, {size}], got {describe(x)}")
        unbatched = x.ndim == 2
        if unbatched:
            x = x.unsqueeze(1)
            state = None if state is None else tuple(s.unsqueeze(1) for s in state)
        elif self.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        if not isinstance(steps, int):
            raise ShapeError(
                f"{name} loops over the time steps in Python: their number must be concrete, got {steps}"
            )
        if state is None:
            state = (
                zeros(self.num_layers * self.directions, batch, self.hidden_size, dtype=x.dtype),
            ) * self.states
        finals: list[tuple[Tensor, ...]] = []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(self._suffixes(layer)):
                k = layer * self.directions + d
                out, last = self._run(x, tuple(s[k] for s in state), suffix, reverse=d == 1)
                outputs.append(out)
                finals.append(last)
            x = outputs[0] if len(outputs) == 1 else concat(outputs, axis=-1)
            if layer < self.num_layers - 1:  # PyTorch's dropout on each layer's outputs but the last
                x = F.dropout(x, self.dropout, training=self.training)
        final = tuple(stack([f[i] for f in finals]) for i in range(self.states))
        if unbatched:
            return x.squeeze(1), tuple(s.squeeze(1) for s in final)
        return (x.transpose(0, 1) if self.batch_first else x), final

    def _run(
        self, x: Tensor, state: tuple[Tensor, ...], suffix: str, reverse: bool
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        """One direction of one layer over x [T, N, width]: its outputs [T, N, H] and last state."""
        inputs = x @ getattr(self, f"weight_ih{suffix}").T  # every step's input part at once
        if self.bias:
            inputs = inputs + getattr(self, f"bias_ih{suffix}")
        recurrent = getattr(self, f"weight_hh{suffix}").T
        recurrent_bias = getattr(self, f"bias_hh{suffix}") if self.bias else None
        outputs: list[Tensor] = [None] * x.shape[0]  # type: ignore[list-item]
        for t in range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0]):
            hidden = state[0] @ recurrent
            state = self.cell(inputs[t], hidden if recurrent_bias is None else hidden + recurrent_bias, state)
            outputs[t] = state[0]
        return stack(outputs), state

    def cell(self, inputs: Tensor, hidden: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """One step: the gates' input part and recurrent part (biases added), the state -> new state."""
        raise NotImplementedError

    def gate(self, parts: Tensor, k: int) -> Tensor:
        size = self.hidden_size
        return parts[:, k * size : (k + 1) * size]

    def extra_repr(self) -> str:
        extra = "".join(
            f", {name}={value}"
            for name, value, default in [
                ("num_layers", self.num_layers, 1),
                ("bias", self.bias, True),
                ("batch_first", self.batch_first, False),
                ("dropout", self.dropout, 0.0),
                ("bidirectional", self.bidirectional, False),
            ]
            if value != default
        )
        return f"{self.input_size}, {self.hidden_size}{extra}"


class LSTM(_Recurrent):
    """Long short-term memory over [T, N, input_size] ([N, T, ...] with batch_first, or [T, input_size]
    unbatched): `lstm(x, (h0, c0))` returns (output [T, N, D * hidden_size], (h_n, c_n) [D * num_layers,
    N, hidden_size]), D = 2 if bidirectional else 1. Parameters are U(-1/sqrt(hidden_size), same)."""

    gates, states = 4, 2

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Any]:
        return self._forward(x, state)

    def cell(self, inputs: Tensor, hidden: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        gates = inputs + hidden
        i, f = sigmoid(self.gate(gates, 0)), sigmoid(self.gate(gates, 1))
        g, o = tanh(self.gate(gates, 2)), sigmoid(self.gate(gates, 3))
        c = f * state[1] + i * g
        return o * tanh(c), c


class GRU(_Recurrent):
    """Gated recurrent unit over [T, N, input_size] (as LSTM's layout): `gru(x, h0)` returns (output
    [T, N, D * hidden_size], h_n [D * num_layers, N, hidden_size]); PyTorch's formula, the recurrent
    bias of the new gate inside the reset: n = tanh(x W_in + b_in + r * (h W_hn + b_hn))."""

    gates, states = 3, 1

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h_n,) = self._forward(x, None if h0 is None else (h0,))
        return out, h_n

    def cell(self, inputs: Tensor, hidden: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        r = sigmoid(self.gate(inputs, 0) + self.gate(hidden, 0))
        z = sigmoid(self.gate(inputs, 1) + self.gate(hidden, 1))
        n = tanh(self.gate(inputs, 2) + r * self.gate(hidden, 2))
        return ((1 - z) * n + z * state[0],)
