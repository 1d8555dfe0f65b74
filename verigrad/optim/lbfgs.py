"""L-BFGS, PyTorch's: up to `max_iter` quasi-Newton iterations a `step(closure)`, with the last
`history_size` curvature pairs, a fixed step `lr` or a strong-Wolfe line search.

Its loop branches on the values it computes (the tolerances, the line search), so it runs eagerly on
the flattened parameters in NumPy, in their dtype, with PyTorch's order of operations; it is not
traced into a compiled step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from .. import modes, versions
from ..autograd import enable_grad, no_grad
from ..ops import tensor
from ..tensor import Tensor
from .optimizer import Hyperparameters, Optimizer, check_lr

Scalar = Any  # a Python float, or a NumPy scalar where PyTorch has a 0-d tensor


def _cubic_interpolate(
    x1: Scalar, f1: Scalar, g1: Scalar, x2: Scalar, f2: Scalar, g2: Scalar, bounds: tuple | None = None
) -> Scalar:
    """The minimizer of the cubic through two points with their slopes, kept within bounds."""
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(
    obj_func: Callable,
    x: list[np.ndarray],
    t: Scalar,
    d: np.ndarray,
    f: float,
    g: np.ndarray,
    gtd: Scalar,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, np.ndarray, Scalar, int]:
    """PyTorch's line search (minFunc's): a bracket of the step satisfying the strong Wolfe conditions,
    then zoom into it by cubic interpolation."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = (
                    max(bracket) - eps
                    if abs(t - max(bracket)) < abs(t - min(bracket))
                    else min(bracket) + eps
                )
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's, after minFunc): `step(closure)` runs up to `max_iter` iterations (at most
    `max_eval` evaluations of the closure), each along the direction the last `history_size` curvature
    pairs give, a step of `lr` (the first min(1, 1 / |g|_1) lr) or one a strong-Wolfe line search finds
    (`line_search_fn="strong_wolfe"`); it stops early when the gradient's largest entry is at most
    `tolerance_grad` or the step or the loss changes by less than `tolerance_change`. One parameter
    group only, as PyTorch's."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        check_lr(lr)
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        settings = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval, "tolerance_grad": tolerance_grad,
                    "tolerance_change": tolerance_change, "history_size": history_size,
                    "line_search_fn": line_search_fn}  # fmt: skip
        self._lbfgs: dict[str, Any] = {}
        super().__init__(params, settings)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")

    own_state = True

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ()

    # its state: PyTorch's, on the first parameter -------------------------------------------------
    def _public_state(self, p: Tensor) -> dict[str, Any]:
        if not self._lbfgs or p is not self.param_groups[0]["params"][0]:
            return {}
        return {k: _as_tensors(v) for k, v in self._lbfgs.items()}  # PyTorch's names, in its order

    def _loaded_state(self, p: Tensor, group: Hyperparameters, values: Mapping[str, Any]) -> dict[str, Any]:
        if p is self.param_groups[0]["params"][0]:
            self._lbfgs = {k: _as_arrays(v) for k, v in values.items()}
        return self._fresh_state(p, group)

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self._lbfgs = {}
        super().load_state_dict(state_dict)

    # the algorithm -------------------------------------------------------------------------------
    def _params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    def _gather_flat_grad(self) -> np.ndarray:
        views = [
            np.zeros(p.numel(), p.dtype.np)
            if p.grad is None
            else np.asarray(p.grad.numpy(), p.dtype.np).ravel()
            for p in self._params()
        ]
        return np.concatenate(views)

    def _add_grad(self, step_size: Scalar, update: np.ndarray) -> None:
        offset = 0
        for p in self._params():
            n = p.numel()
            step = np.asarray(step_size, p.dtype.np) * update[offset : offset + n].reshape(p.shape)
            np.add(p.payload, step, out=p.payload)
            versions.note_write(p.payload)
            offset += n

    def _set_param(self, values: list[np.ndarray]) -> None:
        for p, value in zip(self._params(), values):
            np.copyto(p.payload, value)
            versions.note_write(p.payload)

    def _directional_evaluate(
        self, closure: Callable, x: list[np.ndarray], t: Scalar, d: np.ndarray
    ) -> tuple:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Up to max_iter iterations; `closure` (required) zeroes the gradients, computes the loss,
        calls backward() and returns the loss. Returns the first loss."""
        if closure is None:
            raise TypeError("LBFGS.step needs a closure that recomputes the loss and its gradients")
        if modes.current().name != "eager":
            raise RuntimeError("LBFGS runs eagerly: its iterations depend on the values; do not compile it")
        closure = enable_grad()(closure)
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self._lbfgs
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = (
            state.get("H_diag"),
            state.get("prev_flat_grad"),
            state.get("prev_loss"),
        )

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:  # a curvature pair only where the curvature is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                # the two-loop recursion: d = -H g
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = q + (-al[i]) * old_dirs[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = [p.numpy().copy() for p in self._params()]

                def obj_func(x: list[np.ndarray], t: Scalar, d: np.ndarray) -> tuple:
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:  # re-evaluate, unless this is the last iteration
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag)
        state.update(prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss


def _as_tensors(value: Any) -> Any:
    """NumPy arrays and scalars (PyTorch's tensors) as verigrad tensors, in lists too."""
    if isinstance(value, list):
        return [_as_tensors(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return tensor(np.array(value))
    return value


def _as_arrays(value: Any) -> Any:
    if isinstance(value, list):
        return [_as_arrays(v) for v in value]
    if isinstance(value, Tensor):
        array = np.array(value.numpy())
        return array[()] if array.ndim == 0 else array
    return value
