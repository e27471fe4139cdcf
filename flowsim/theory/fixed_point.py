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
from flowsim.theory.references import MaxMargin, check_separable, max_margin


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
    """M(c) = diag(sqrt(sum_i c_i^2 x_i[k]^2)), for weights c >= 0, one per sample."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset; got {type(data).__name__}.")
    return _metric(data, _weights("c", c, data.n))


def _metric(data, c):
    return np.diag(np.sqrt((c[:, None] ** 2 * data.X**2).sum(axis=0)))


def adam_fixed_point(data: Dataset, *, damping: float = 0.5, tol: float = 1e-9, max_iter: int = 2000,
                     c0=None) -> AdamFixedPoint:
    """Solve c* = T(c*) by damped iteration c <- (1 - damping) c + damping T(c), from ``c0`` (n weights >= 0,
    normalised here; uniform by default). The fixed point need not be unique: on some data two starts end
    at two of them, each with residual < 1e-9, and which one the flow reaches is not decided here. Samples
    with the same z = y x keep the same margin, hence the same loss weight, under the flow: T(c) shares their
    dual weight equally (the QP's duals may split it any way; one copy took it all, a fixed point 8 degrees
    from the flow's limit). A feature no sample has (a column of zeros) carries no constraint: its entry of
    the direction is 0 and of ``metric`` 1 (M(c) is 0 there for every c). Raises ``RuntimeError`` with the
    last residual if it does not converge, or where c leaves a coordinate without weight (M(c) singular:
    the fixed-point theory does not apply to those data); ``NonSeparableError`` for data no direction
    separates."""
    check_separable(data)
    if not (is_real_number(damping) and 0 < damping <= 1):
        raise ValueError(f"damping must be a number in (0, 1]; got {damping!r}.")
    if not (is_real_number(tol) and np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a finite number > 0; got {tol!r}.")
    if not is_whole(max_iter):
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")
    c = np.full(data.n, 1.0 / data.n) if c0 is None else _weights("c0", c0, data.n)
    c = c / c.sum()
    copies = np.unique(data.z, axis=0, return_inverse=True)[1].ravel()
    res = np.inf
    for it in range(1, max_iter + 1):
        M = _regular_metric(data, c, it)
        sol = max_margin(data, "mahalanobis", metric=M)
        Tc = _shared(sol.duals / sol.duals.sum(), copies)
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


def _shared(c, copies):
    """c with the weight of each group of equal samples shared equally among them."""
    count = np.bincount(copies)
    return (np.bincount(copies, c) / count)[copies]


def _regular_metric(data, c, it):
    M = _metric(data, c)
    unused = np.all(data.X == 0, axis=0)
    M[unused, unused] = 1.0
    low = np.diag(M) <= 1e-12 * np.diag(M).max()
    if np.any(low):
        raise RuntimeError(f"M(c) is singular at iteration {it}: coordinate(s) {(np.nonzero(low)[0] + 1).tolist()} "
                           "carry no weight once c concentrates on the samples it keeps (Thm 4.8's fixed point does "
                           "not exist for these data; the AdamProxy flow shows where the direction goes).")
    return M


def _weights(name, c, n):
    try:
        c = np.asarray(c, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {n} numbers, one weight per sample; got {c!r}.") from None
    if c.shape != (n,) or not np.all(np.isfinite(c)) or np.any(c < 0) or not c.sum() > 0:
        raise ValueError(f"{name} must be {n} finite weights >= 0, not all 0 (one per sample); got {c.tolist()}.")
    return c
