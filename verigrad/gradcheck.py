"""PyTorch's torch.autograd.gradcheck and gradgradcheck: a function's gradients (backward's, and for
gradgradcheck the gradients of those) against central differences, for every float input that requires
grad. As PyTorch's, meant for f64 inputs (an f32 one warns); a mismatch raises GradcheckError naming the
output and input, with both Jacobians."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import autograd
from .ops import from_numpy
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """The gradient backward gives is not the one central differences give (torch's GradcheckError)."""


def _tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, list | tuple) else (x,)


def _outputs(func: Callable[..., Any], inputs: tuple) -> list[Tensor]:
    """The float tensors func returns (one tensor, or a tuple or list of them), in order."""
    return [o for o in _tuple(func(*inputs)) if isinstance(o, Tensor) and o.dtype.is_float]


def _numerical(func: Callable[..., Any], inputs: tuple, i: int, eps: float) -> list[np.ndarray]:
    """d output / d inputs[i] by central differences: one [output size, input size] matrix per output."""
    base = inputs[i].detach().numpy().astype(inputs[i].dtype.np, copy=True)
    columns: list[list[np.ndarray]] = []
    for j in range(base.size):  # with grad on: func may differentiate inside (gradgradcheck's does)
        values = []
        for step in (eps, -eps):
            moved = base.copy()
            moved.flat[j] += step
            args = list(inputs)
            args[i] = from_numpy(moved).requires_grad_(inputs[i].requires_grad)
            values.append(
                [o.detach().numpy().astype(np.float64).ravel() for o in _outputs(func, tuple(args))]
            )
        columns.append([(plus - minus) / (2 * eps) for plus, minus in zip(*values)])
    sizes = [o.numel() for o in _outputs(func, inputs)]
    return [
        np.stack([c[k] for c in columns], axis=1) if columns else np.zeros((n, 0))
        for k, n in enumerate(sizes)
    ]


def _analytical(outputs: list[Tensor], inputs: tuple, i: int) -> list[np.ndarray]:
    """d output / d inputs[i] by backward: one row per output element (a one-hot cotangent each)."""
    out = []
    for o in outputs:
        rows = []
        for k in range(o.numel()):
            onehot = np.zeros(o.numel(), dtype=o.dtype.np)
            onehot[k] = 1
            cotangent = from_numpy(onehot.reshape(tuple(o.shape)))
            (g,) = autograd.grad(o, inputs[i], cotangent, retain_graph=True, allow_unused=True)
            rows.append(
                np.zeros(inputs[i].numel()) if g is None else g.detach().numpy().astype(np.float64).ravel()
            )
        out.append(np.stack(rows) if rows else np.zeros((0, inputs[i].numel())))
    return out


def gradcheck(
    func: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
    raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False, check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False, check_forward_ad: bool = False, check_backward_ad: bool = True,
    fast_mode: bool = False, masked: Any = None,
) -> bool:  # fmt: skip
    """True where backward's gradient of each float output with respect to each float input requiring grad
    matches central differences (|analytical - numerical| <= atol + rtol |numerical|); else raises
    GradcheckError (or returns False without `raise_exception`)."""
    if check_batched_grad or check_batched_forward_grad or check_forward_ad:
        raise NotImplementedError("gradcheck: batched and forward-mode checks are not supported")
    inputs = _tuple(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for i in checked:
        if inputs[i].dtype.name != "f64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point: this check "
                "will likely fail", stacklevel=2,
            )  # fmt: skip
    if not check_backward_ad:
        return True
    outputs = _outputs(func, inputs)
    for i in checked:
        for k, (numerical, analytical) in enumerate(
            zip(_numerical(func, inputs, i, eps), _analytical(outputs, inputs, i))
        ):
            if not np.allclose(analytical, numerical, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output {k} with respect to input {i},\n"
                    f"numerical:{numerical}\nanalytical:{analytical}\n"
                )
    return True


def gradgradcheck(
    func: Callable[..., Any], inputs: Any, grad_outputs: Sequence[Tensor] | Tensor | None = None, *,
    eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False, check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True, fast_mode: bool = False, masked: bool = False,
) -> bool:  # fmt: skip
    """gradcheck of the gradients themselves: of (inputs, grad_outputs) -> autograd.grad(func(inputs), inputs,
    grad_outputs, create_graph=True); grad_outputs drawn in [-1, 1) (seeded) unless given."""
    inputs = _tuple(inputs)
    wanted = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            from_numpy(rng.uniform(-1, 1, tuple(o.shape)).astype(o.dtype.np)).requires_grad_(True)
            for o in _outputs(func, inputs)
        )
    grad_outputs = _tuple(grad_outputs)
    n = len(inputs)

    def gradients(*args: Any) -> tuple:
        xs, cotangents = args[:n], args[n:]
        outs = _outputs(func, xs)
        targets = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
        found = autograd.grad(outs, targets, cotangents, create_graph=True, allow_unused=True)
        return tuple(g for g in found if g is not None)

    if not wanted:
        raise ValueError("gradgradcheck expects at least one input tensor to require gradient")
    return gradcheck(gradients, (*inputs, *grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)  # fmt: skip
