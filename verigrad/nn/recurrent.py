"""`nn.RNN`, `nn.LSTM` and `nn.GRU`, and their one-step cells `RNNCell`, `LSTMCell`, `GRUCell`, as
PyTorch's: their parameter names (so their state dicts load), gate orders (LSTM: input, forget, cell,
output; GRU: reset, update, new), layers, dropout between them in training, bidirectional runs,
batch_first, unbatched inputs, and LSTM's projection of h (`proj_size`).

Each step is written with ops, so it differentiates and traces as they do; the input's part of every
gate is one product over all time steps (per layer and direction), the recurrent part one product a
step. The number of steps must be a concrete size: the loop over them is Python's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..errors import ShapeError
from ..ops import concat, relu, sigmoid, stack, tanh, where, zeros
from ..shapes import shape_text
from ..tensor import Tensor, describe
from . import functional as F
from .init import _uniform_param, fan_in_bound
from .module import Module, check_dtypes, factory_dtype
from .utils import rnn as rnn_utils

State = tuple[Tensor, ...]  # h, or h and c


_NONLINEARITIES: dict[str, Callable[[Tensor], Tensor]] = {"tanh": tanh, "relu": relu}


def _gate(parts: Tensor, k: int, size: int) -> Tensor:
    return parts[..., k * size : (k + 1) * size]


def _rnn_step(activation: Callable[[Tensor], Tensor]) -> Callable[..., tuple[Tensor, ...]]:
    def step(inputs: Tensor, hidden: Tensor, state: tuple[Tensor, ...], size: int) -> tuple[Tensor, ...]:
        return (activation(inputs + hidden),)

    return step


def _lstm_step(inputs: Tensor, hidden: Tensor, state: tuple[Tensor, ...], size: int) -> tuple[Tensor, ...]:
    """One LSTM step from the gates' input and recurrent parts (biases added) and (h, c): (h, c)."""
    gates = inputs + hidden
    i, f = sigmoid(_gate(gates, 0, size)), sigmoid(_gate(gates, 1, size))
    g, o = tanh(_gate(gates, 2, size)), sigmoid(_gate(gates, 3, size))
    c = f * state[1] + i * g
    return o * tanh(c), c


def _gru_step(inputs: Tensor, hidden: Tensor, state: tuple[Tensor, ...], size: int) -> tuple[Tensor, ...]:
    """PyTorch's GRU step, the recurrent bias of the new gate inside the reset:
    n = tanh(x W_in + b_in + r * (h W_hn + b_hn))."""
    r = sigmoid(_gate(inputs, 0, size) + _gate(hidden, 0, size))
    z = sigmoid(_gate(inputs, 1, size) + _gate(hidden, 1, size))
    n = tanh(_gate(inputs, 2, size) + r * _gate(hidden, 2, size))
    return ((1 - z) * n + z * state[0],)


def _nonlinearity(name: str, nonlinearity: str) -> Callable[[Tensor], Tensor]:
    if nonlinearity not in _NONLINEARITIES:
        raise ValueError(f"{name}: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or 'relu'")
    return _NONLINEARITIES[nonlinearity]


class _Recurrent(Module):
    """The layers and directions of a recurrent network whose cell has `gates` gates and keeps
    `states` tensors (h, or h and c) per sequence."""

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
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ):
        if type(self) is _Recurrent:  # PyTorch's RNNBase(mode, input_size, ...): not made directly here
            raise TypeError(
                f"RNNBase: made directly (with {input_size!r} first) it is not supported; make nn.RNN, "
                "nn.LSTM or nn.GRU (RNNBase is their base, for isinstance checks)"
            )
        super().__init__()
        name = type(self).__name__
        dtype = factory_dtype(name, device, dtype)
        if isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout must be a probability in [0, 1], got {dropout!r}")
        if dropout and num_layers == 1:
            warnings.warn(
                f"{name}: dropout acts between layers; with one layer it does nothing", stacklevel=2
            )
        if num_layers < 1 or hidden_size < 1:
            raise ValueError(
                f"{name} needs num_layers and hidden_size >= 1, got {num_layers} and {hidden_size}"
            )
        if proj_size < 0 or (proj_size and proj_size >= hidden_size):
            raise ValueError(f"{name}: proj_size must be in [0, hidden_size), got {proj_size}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.dropout, self.proj_size = float(dropout), proj_size
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        bound, rows, out = fan_in_bound(hidden_size), self.gates * hidden_size, proj_size or hidden_size
        for layer in range(num_layers):
            width = input_size if layer == 0 else out * self.directions
            for suffix in self._suffixes(layer):
                setattr(self, f"weight_ih{suffix}", _uniform_param((rows, width), bound, dtype))
                setattr(self, f"weight_hh{suffix}", _uniform_param((rows, out), bound, dtype))
                if bias:
                    setattr(self, f"bias_ih{suffix}", _uniform_param((rows,), bound, dtype))
                    setattr(self, f"bias_hh{suffix}", _uniform_param((rows,), bound, dtype))
                if proj_size:
                    setattr(
                        self, f"weight_hr{suffix}", _uniform_param((proj_size, hidden_size), bound, dtype)
                    )

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def flatten_parameters(self) -> None:
        """PyTorch's compaction of the weights into one cuDNN buffer: nothing to do on the CPU."""

    def _suffixes(self, layer: int) -> list[str]:
        return [f"_l{layer}", f"_l{layer}_reverse"][: self.directions]

    def _state_sizes(self) -> tuple[int, ...]:
        """The last size of each state tensor: h's (the projection's, if any), then c's."""
        return (self.proj_size or self.hidden_size, self.hidden_size)[: self.states]

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """RNN's and GRU's: (output, h_n); LSTM's keeps (h, c)."""
        out, (h_n,) = self._forward(input, None if hx is None else (hx,))
        return out, h_n

    def _forward(self, x: Any, state: tuple[Tensor, ...] | None) -> tuple[Any, tuple[Tensor, ...]]:
        """The outputs and the final states, each [D * num_layers, N, size]. A PackedSequence runs padded,
        each sequence's state held after its last step, and its outputs are packed as it is."""
        name = type(self).__name__
        packed, masks = None, None
        if isinstance(x, rnn_utils.PackedSequence):
            packed = x
            x, lengths = rnn_utils.pad_packed_sequence(packed)
            masks = [(lengths > t).unsqueeze(-1) for t in range(x.shape[0])]
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            size = self.input_size
            raise ShapeError(f"{name} takes [T, N, {size}] or [T, {size}], got {describe(x)}")
        check_dtypes(name, self.weight_ih_l0, ("input", x), *(("state", s) for s in state or ()))
        unbatched = x.ndim == 2
        if unbatched:
            x = x.unsqueeze(1)
        elif self.batch_first and packed is None:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        if not isinstance(steps, int):
            raise ShapeError(
                f"{name} loops over the time steps in Python: their number must be concrete, got {steps}"
            )
        layers = self.num_layers * self.directions
        if state is None:
            state = tuple(zeros(layers, batch, size, dtype=x.dtype) for size in self._state_sizes())
        else:
            for s, size, what in zip(state, self._state_sizes(), ("h0", "c0")):
                want = (layers, size) if unbatched else (layers, batch, size)
                if tuple(s.shape) != want:
                    raise ShapeError(f"{name}: {what} must be {shape_text(want)}, got {describe(s)}")
            if unbatched:
                state = tuple(s.unsqueeze(1) for s in state)
        finals: list[tuple[Tensor, ...]] = []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(self._suffixes(layer)):
                k = layer * self.directions + d
                out, last = self._run(x, tuple(s[k] for s in state), suffix, d == 1, masks)
                outputs.append(out)
                finals.append(last)
            x = outputs[0] if len(outputs) == 1 else concat(outputs, axis=-1)
            if layer < self.num_layers - 1:  # PyTorch's dropout on each layer's outputs but the last
                x = F.dropout(x, self.dropout, training=self.training)
        final = tuple(stack([f[i] for f in finals]) for i in range(self.states))
        if packed is not None:
            return rnn_utils.pack_like(x, packed), final
        if unbatched:
            return x.squeeze(1), tuple(s.squeeze(1) for s in final)
        return (x.transpose(0, 1) if self.batch_first else x), final

    def _run(
        self, x: Tensor, state: tuple[Tensor, ...], suffix: str, reverse: bool, masks: list[Tensor] | None
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        """One direction of one layer over x [T, N, width]: its outputs [T, N, H] and last state. With
        `masks` (per step, [N, 1]: the sequence still runs), a finished sequence keeps its state and
        outputs zeros."""
        inputs = x @ getattr(self, f"weight_ih{suffix}").T  # every step's input part at once
        if self.bias:
            inputs = inputs + getattr(self, f"bias_ih{suffix}")
        recurrent = getattr(self, f"weight_hh{suffix}").T
        recurrent_bias = getattr(self, f"bias_hh{suffix}") if self.bias else None
        projection = getattr(self, f"weight_hr{suffix}").T if self.proj_size else None
        outputs: list[Tensor] = [None] * x.shape[0]  # type: ignore[list-item]
        for t in range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0]):
            hidden = state[0] @ recurrent
            hidden = hidden if recurrent_bias is None else hidden + recurrent_bias
            new = self.step(inputs[t], hidden, state, self.hidden_size)
            if projection is not None:
                new = (new[0] @ projection, *new[1:])
            if masks is not None:
                new = tuple(where(masks[t], a, b) for a, b in zip(new, state))
            state = new
            outputs[t] = state[0] if masks is None else where(masks[t], state[0], 0.0)
        return stack(outputs), state

    def step(self, inputs: Tensor, hidden: Tensor, state: State, size: int) -> State:
        """One step: the gates' input part and recurrent part (biases added), the state -> new state."""
        raise NotImplementedError

    def _settings(self) -> list[tuple[str, Any, Any]]:
        """(name, value, default) of the settings a repr shows when not their default, in PyTorch's order."""
        return [
            ("proj_size", self.proj_size, 0),
            ("num_layers", self.num_layers, 1),
            ("bias", self.bias, True),
            ("batch_first", self.batch_first, False),
            ("dropout", self.dropout, 0.0),
            ("bidirectional", self.bidirectional, False),
        ]

    def extra_repr(self) -> str:
        extra = "".join(f", {name}={value}" for name, value, default in self._settings() if value != default)
        return f"{self.input_size}, {self.hidden_size}{extra}"


class RNN(_Recurrent):
    """Elman network over [T, N, input_size] ([N, T, ...] with batch_first, or [T, input_size]
    unbatched): h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), nonlinearity "tanh" or
    "relu"; `rnn(x, h0)` returns (output [T, N, D * hidden_size], h_n [D * num_layers, N, hidden_size])."""

    gates, states = 1, 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ):
        activation = _nonlinearity("RNN", nonlinearity)
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype
        )
        self.nonlinearity = nonlinearity
        object.__setattr__(self, "step", _rnn_step(activation))


class LSTM(_Recurrent):
    """Long short-term memory over [T, N, input_size] ([N, T, ...] with batch_first, or [T, input_size]
    unbatched): `lstm(x, (h0, c0))` returns (output [T, N, D * H_out], (h_n [D * num_layers, N, H_out],
    c_n [D * num_layers, N, hidden_size])), D = 2 if bidirectional else 1, H_out = proj_size or
    hidden_size (with proj_size, h is projected by weight_hr after each step). Parameters are
    U(-1/sqrt(hidden_size), same)."""

    gates, states = 4, 2
    step = staticmethod(_lstm_step)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Any]:
        return self._forward(input, hx)


class GRU(_Recurrent):
    """Gated recurrent unit over [T, N, input_size] (as LSTM's layout): `gru(x, h0)` returns (output
    [T, N, D * hidden_size], h_n [D * num_layers, N, hidden_size]); see `_gru_step` for the formula."""

    gates, states = 3, 1
    step = staticmethod(_gru_step)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype
        )


class _Cell(Module):
    """One step of a recurrent network, with PyTorch's cell parameters weight_ih [gates * H, input_size],
    weight_hh [gates * H, H] and biases bias_ih, bias_hh [gates * H]."""

    gates = 1
    states = 1

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None, dtype: Any = None
    ):
        super().__init__()
        dtype = factory_dtype(type(self).__name__, device, dtype)
        if input_size < 1 or hidden_size < 1:
            name = type(self).__name__
            raise ValueError(f"{name} needs input_size and hidden_size >= 1, got {input_size}, {hidden_size}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        bound, rows = fan_in_bound(hidden_size), self.gates * hidden_size
        self.weight_ih = _uniform_param((rows, input_size), bound, dtype)
        self.weight_hh = _uniform_param((rows, hidden_size), bound, dtype)
        if bias:
            self.bias_ih = _uniform_param((rows,), bound, dtype)
            self.bias_hh = _uniform_param((rows,), bound, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """RNNCell's and GRUCell's: h'; LSTMCell's keeps (h', c')."""
        return self._step(input, None if hx is None else (hx,))[0]

    def _step(self, x: Tensor, state: tuple[Tensor, ...] | None) -> tuple[Tensor, ...]:
        name = type(self).__name__
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            size = self.input_size
            raise ShapeError(f"{name} takes [N, {size}] or [{size}], got {describe(x)}")
        weight_ih = self.weight_ih  # read once, as PyTorch's: a parametrized weight is computed at each read
        check_dtypes(name, weight_ih, ("input", x), *(("state", s) for s in state or ()))
        unbatched = x.ndim == 1
        if unbatched:
            x = x.unsqueeze(0)
        want = (x.shape[0], self.hidden_size)
        if state is None:
            state = tuple(zeros(*want, dtype=x.dtype) for _ in range(self.states))
        else:
            for s, what in zip(state, ("h", "c")):
                if tuple(s.shape) != want[unbatched:]:
                    expected = shape_text(want[unbatched:])
                    raise ShapeError(f"{name}: {what} must be {expected}, got {describe(s)}")
            if unbatched:
                state = tuple(s.unsqueeze(0) for s in state)
        inputs, hidden = x @ weight_ih.T, state[0] @ self.weight_hh.T
        if self.bias:
            inputs, hidden = inputs + self.bias_ih, hidden + self.bias_hh
        new = self.step(inputs, hidden, state, self.hidden_size)
        return tuple(s.squeeze(0) for s in new) if unbatched else new

    def step(self, inputs: Tensor, hidden: Tensor, state: State, size: int) -> State:
        raise NotImplementedError

    def extra_repr(self) -> str:
        extra = "" if self.bias else ", bias=False"
        return f"{self.input_size}, {self.hidden_size}{extra}"


class RNNCell(_Cell):
    """One Elman step: `cell(x, h)` (x [N, input_size] or [input_size], h zeros if not given) returns
    h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ):
        activation = _nonlinearity("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity
        object.__setattr__(self, "step", _rnn_step(activation))

    def extra_repr(self) -> str:
        extra = "" if self.nonlinearity == "tanh" else f", nonlinearity={self.nonlinearity}"
        return super().extra_repr() + extra


class LSTMCell(_Cell):
    """One LSTM step: `cell(x, (h, c))` returns (h', c') (zeros for a state not given)."""

    gates, states = 4, 2
    step = staticmethod(_lstm_step)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = self._step(input, hx)
        return h, c


class GRUCell(_Cell):
    """One GRU step: `cell(x, h)` returns h' (see `_gru_step` for the formula)."""

    gates = 3
    step = staticmethod(_gru_step)


RNNBase, RNNCellBase = _Recurrent, _Cell  # PyTorch's names of the bases (for isinstance checks)
