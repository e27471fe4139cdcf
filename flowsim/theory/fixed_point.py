r"""The data-adaptive Mahalanobis max-margin of per-sample Adam (seed 002, Thm 4.8; docs/theory.md 6).

For c on the simplex, :math:`M(c) = \mathrm{diag}(\sqrt{\sum_i c_i^2 x_i[k]^2})`; :math:`T(c)` is the
normalised vector of dual multipliers of :math:`\min w^\top M(c) w` s.t. :math:`Zw \ge 1`. The limit
direction of the beta_2 -> 1 proxy solves the Mahalanobis problem at a fixed point c* = T(c*),
found here by damped fixed-point iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    """Solve c* = T(c*) by damped iteration c <- (1 - damping) c + damping T(c). Raises
    ``RuntimeError`` with the last residual if it does not converge."""
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1]; got {damping!r}.")
    c = np.full(data.n, 1.0 / data.n) if c0 is None else np.asarray(c0, float) / np.sum(c0)
    res = np.inf
    for it in range(1, max_iter + 1):
        M = adam_metric(data, c)
        if np.any(np.diag(M) <= 0):
            raise RuntimeError("M(c) is singular: some coordinate is zero on every sample with c_i > 0.")
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
    M = adam_metric(data, c)
    sol = max_margin(data, "mahalanobis", metric=M)
    d = sol.direction / np.linalg.norm(sol.direction)
    return AdamFixedPoint(direction=d, c=c, metric=M, residual=res, iterations=it, solution=sol)
