"""`nn.LSTM`, as PyTorch's: its parameter names (so its state dicts load), gate order (input, forget,
cell, output), layers, bidirectional runs, batch_first and unbatched inputs.

Each step is written with ops, so it differentiates and traces as they do; the input's part of every
gate is one product over all time steps (per layer and direction), the recurrent part one product a
step. The number of steps must be a concrete size: the loop over them is Python's.
"""

from __future__ import annotations

from typing import Any

from ..dtypes import f32
from ..errors import ShapeError
from ..ops import concat, sigmoid, stack, tanh, zeros
from ..tensor import Tensor, describe
from .init import fan_in_bound, uniform
from .module import Module


class LSTM(Module):
    """Long short-term memory over [T, N, input_size] ([N, T, ...] with batch_first, or [T, input_size]
    unbatched); returns (output [T, N, D * hidden_size], (h_n, c_n) [D * num_layers, N, hidden_size]),
    D = 2 if bidirectional else 1. Parameters are U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

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
        if dropout:
            raise ValueError("LSTM: dropout between layers is not supported (dropout must be 0)")
        if num_layers < 1 or hidden_size < 1:
            raise ValueError(
                f"LSTM needs num_layers >= 1 and hidden_size >= 1, got {num_layers}, {hidden_size}"
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        bound = fan_in_bound(hidden_size)
        for layer in range(num_layers):
            width = input_size if layer == 0 else hidden_size * self.directions
            for suffix in self._suffixes(layer):
                setattr(self, f"weight_ih{suffix}", uniform((4 * hidden_size, width), bound, dtype))
                setattr(self, f"weight_hh{suffix}", uniform((4 * hidden_size, hidden_size), bound, dtype))
                if bias:
                    setattr(self, f"bias_ih{suffix}", uniform((4 * hidden_size,), bound, dtype))
                    setattr(self, f"bias_hh{suffix}", uniform((4 * hidden_size,), bound, dtype))

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _suffixes(self, layer: int) -> list[str]:
        return [f"_l{layer}", f"_l{layer}_reverse"][: self.directions]

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Any]:
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"LSTM takes [T, N, {self.input_size}] or [T, {self.input_size}], got {describe(x)}"
            )
        unbatched = x.ndim == 2
        if unbatched:
            x = x.unsqueeze(1)
            state = None if state is None else (state[0].unsqueeze(1), state[1].unsqueeze(1))
        elif self.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        if not isinstance(steps, int):
            raise ShapeError(
                f"LSTM runs a Python loop over the time steps: their number must be concrete, got {steps}"
            )
        if state is None:
            h0 = c0 = zeros(self.num_layers * self.directions, batch, self.hidden_size, dtype=x.dtype)
        else:
            h0, c0 = state
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(self._suffixes(layer)):
                k = layer * self.directions + d
                out, h, c = self._run(x, h0[k], c0[k], suffix, reverse=d == 1)
                outputs.append(out)
                finals_h.append(h)
                finals_c.append(c)
            x = outputs[0] if len(outputs) == 1 else concat(outputs, axis=-1)
        h_n, c_n = stack(finals_h), stack(finals_c)
        if unbatched:
            return x.squeeze(1), (h_n.squeeze(1), c_n.squeeze(1))
        return (x.transpose(0, 1) if self.batch_first else x), (h_n, c_n)

    def _run(
        self, x: Tensor, h: Tensor, c: Tensor, suffix: str, reverse: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One direction of one layer over x [T, N, width]: its outputs [T, N, H] and last h and c."""
        inputs = x @ getattr(self, f"weight_ih{suffix}").T  # every step's input part at once
        recurrent = getattr(self, f"weight_hh{suffix}").T
        if self.bias:
            inputs = inputs + (getattr(self, f"bias_ih{suffix}") + getattr(self, f"bias_hh{suffix}"))
        size = self.hidden_size
        order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        outputs: list[Tensor] = [None] * x.shape[0]  # type: ignore[list-item]
        for t in order:
            gates = inputs[t] + h @ recurrent
            i, f = sigmoid(gates[:, :size]), sigmoid(gates[:, size : 2 * size])
            g, o = tanh(gates[:, 2 * size : 3 * size]), sigmoid(gates[:, 3 * size :])
            c = f * c + i * g
            h = o * tanh(c)
            outputs[t] = h
        return stack(outputs), h, c

    def extra_repr(self) -> str:
        extra = "".join(
            f", {name}={value}"
            for name, value, default in [
                ("num_layers", self.num_layers, 1),
                ("bias", self.bias, True),
                ("batch_first", self.batch_first, False),
                ("bidirectional", self.bidirectional, False),
            ]
            if value != default
        )
        return f"{self.input_size}, {self.hidden_size}{extra}"
