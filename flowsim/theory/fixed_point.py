r"""The data-adaptive Mahalanobis max-margin of per-sample Adam (seed 002, Thm 4.8; docs/theory.md 6).

For c on the simplex, :math:`M(c) = \mathrm{diag}(\sqrt{\sum_i c_i^2 x_i[k]^2})`; :math:`T(c)` is the
normalised vector of dual multipliers of :math:`\min w^\top M(c) w` s.t. :math:`Zw \ge 1`. The limit
direction of the beta_2 -> 1 proxy solves the Mahalanobis problem at a fixed point c* = T(c*),
found here by damped fixed-point iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowsim._checks import is_real_number, is_whole
from flowsim.data import Dataset
from flowsim.theory.references import MaxMargin, max_margin


@dataclass(frozen=True)
class AdamFixedPoint:
    """``direction`` (unit l2) of the Mahalanobis max-margin at c*, ``c`` (= c*), ``metric`` M(c*),
    ``residual`` ||T(c*) - c*||_1, ``iterations``, and the underlying :class:`MaxMargin`."""

    direction: np.ndarray
    c: np.ndarray
    metric: np.ndarray
    residual: float
    iterations: int
    solution: MaxMargin


def adam_metric(data: Dataset, c) -> np.ndarray:
    """M(c) = diag(sqrt(sum_i c_i^2 x_i[k]^2))."""
    c = np.asarray(c, float)
    return np.diag(np.sqrt((c[:, None] ** 2 * data.X**2).sum(axis=0)))


def adam_fixed_point(data: Dataset, *, damping: float = 0.5, tol: float = 1e-9, max_iter: int = 2000,
                     c0=None) -> AdamFixedPoint:
    """Solve c* = T(c*) by damped iteration c <- (1 - damping) c + damping T(c), from ``c0`` (n weights >= 0,
    normalised here; uniform by default). The fixed point need not be unique: on some data two starts end
    at two of them, each with residual < 1e-9, and which one the flow reaches is not decided here. Raises
    ``RuntimeError`` with the last residual if it does not converge, or where c leaves a coordinate
    without weight (M(c) singular: the fixed-point theory does not apply to those data)."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset; got {type(data).__name__}.")
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1]; got {damping!r}.")
    if not (is_real_number(tol) and np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a finite number > 0; got {tol!r}.")
    if not is_whole(max_iter):
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")
    c = np.full(data.n, 1.0 / data.n) if c0 is None else _start(c0, data.n)
    res = np.inf
    for it in range(1, max_iter + 1):
        M = _regular_metric(data, c, it)
        sol = max_margin(data, "mahalanobis", metric=M)
        Tc = sol.duals / sol.duals.sum()
        res = float(np.abs(Tc - c).sum())
        if res <= tol:
            c = Tc
            break
        c = (1 - damping) * c + damping * Tc
    else:
        raise RuntimeError(f"adam_fixed_point did not converge in {max_iter} iterations (residual {res:.3g}); "
                           "try a smaller damping.")
    M = _regular_metric(data, c, it)
    sol = max_margin(data, "mahalanobis", metric=M)
    d = sol.direction / np.linalg.norm(sol.direction)
    return AdamFixedPoint(direction=d, c=c, metric=M, residual=res, iterations=it, solution=sol)


def _regular_metric(data, c, it):
    M = adam_metric(data, c)
    low = np.diag(M) <= 1e-12 * np.diag(M).max()
    if np.any(low):
        raise RuntimeError(f"M(c) is singular at iteration {it}: coordinate(s) {(np.nonzero(low)[0] + 1).tolist()} "
                           "carry no weight once c concentrates on the samples it keeps (Thm 4.8's fixed point does "
                           "not exist for these data; the AdamProxy flow shows where the direction goes).")
    return M


def _start(c0, n):
    c0 = np.asarray(c0, dtype=np.float64)
    if c0.shape != (n,) or not np.all(np.isfinite(c0)) or np.any(c0 < 0) or not c0.sum() > 0:
        raise ValueError(f"c0 must be {n} finite weights >= 0, not all 0 (one per sample); got {c0.tolist()}.")
    return c0 / c0.sum()
