r"""The data-adaptive Mahalanobis max-margin of per-sample Adam (seed 002, Thm 4.8; docs/theory.md 6).

For c on the simplex, :math:`M(c) = \mathrm{diag}(\sqrt{\sum_i c_i^2 x_i[k]^2})`; :math:`T(c)` is the
normalised vector of dual multipliers of :math:`\min w^\top M(c) w` s.t. :math:`Zw \ge 1`. The limit
direction of the beta_2 -> 1 proxy solves the Mahalanobis problem at a fixed point c* = T(c*),
found here by damped fixed-point iteration: :func:`adam_fixed_point` from one start,
:func:`adam_fixed_points` from several, returning every distinct fixed point they reach (it need not be unique),
and :func:`adam_basins`, which of them the proxy flow reaches from each init scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_expit

from flowsim._checks import is_real_number, is_whole
from flowsim.data import Dataset
from flowsim.integrate.solve import solve
from flowsim.symbolic.derive import derive
from flowsim.symbolic.flows import AdamProxy
from flowsim.symbolic.model import Linear
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
    at two of them, each with residual < 1e-9, and which one the flow reaches is not decided here
    (:func:`adam_fixed_points` searches from several starts and returns them all). Samples
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


@dataclass(frozen=True)
class FixedPointSearch:
    """What :func:`adam_fixed_points` found: ``points``, the distinct fixed points (each an :class:`AdamFixedPoint`,
    the one reached from the most starts first), ``reached`` (how many starts ended at each, in the same order),
    ``starts`` (how many were tried) and ``failed`` (why each start that found none stopped: no convergence, or
    M(c) singular)."""

    points: tuple
    reached: tuple
    starts: int
    failed: tuple


#: two fixed points whose unit directions are closer than this (l2) are one (the iteration stops at ||T(c) - c||_1
#: <= 1e-9; distinct fixed points of ``shifted_diagonal(10, 5)`` are 0.01-0.1 apart)
SAME_DIRECTION = 1e-6


def adam_fixed_points(data: Dataset, *, random_starts: int = 10, seed: int = 0, damping: float = 0.5,
                      tol: float = 1e-9, max_iter: int = 2000) -> FixedPointSearch:
    """Every fixed point c* = T(c*) that damped iteration (:func:`adam_fixed_point`, with ``damping``, ``tol`` and
    ``max_iter``) reaches from: uniform weights, each sample's weight concentrated (0.9 on it, the rest shared),
    and ``random_starts`` uniform draws from the simplex (``seed``). Fixed points whose directions agree within
    ``SAME_DIRECTION`` are one. Finding one point from every start is evidence of uniqueness, not a proof: a fixed
    point no start's iteration is attracted to is not found. ``NonSeparableError`` for data no direction separates;
    a ``RuntimeError`` naming the reasons if no start converges."""
    check_separable(data)
    if not is_whole(random_starts, least=0):
        raise ValueError(f"random_starts must be an integer >= 0; got {random_starts!r}.")
    if not is_whole(seed, least=0):
        raise ValueError(f"seed must be an integer >= 0; got {seed!r}.")
    n = data.n
    starts = [np.full(n, 1.0 / n), *(0.9 * np.eye(n)[i] + 0.1 / n for i in range(n)),
              *np.random.default_rng(seed).dirichlet(np.ones(n), size=random_starts)]
    points, reached, failed = [], [], []
    for c0 in starts:
        try:
            fp = adam_fixed_point(data, damping=damping, tol=tol, max_iter=max_iter, c0=c0)
        except RuntimeError as err:
            failed.append(str(err))
            continue
        same = [i for i, p in enumerate(points) if np.linalg.norm(p.direction - fp.direction) < SAME_DIRECTION]
        if same:
            reached[same[0]] += 1
        else:
            points.append(fp)
            reached.append(1)
    if not points:
        raise RuntimeError(f"adam_fixed_points: none of {len(starts)} starts converged; first reason: {failed[0]}")
    order = np.argsort(-np.array(reached), kind="stable")
    return FixedPointSearch(points=tuple(points[i] for i in order), reached=tuple(reached[i] for i in order),
                            starts=len(starts), failed=tuple(failed))


@dataclass(frozen=True)
class Basins:
    """Which fixed point the Adam proxy flow reaches from each init scale (:func:`adam_basins`): ``search`` (the
    :class:`FixedPointSearch` whose ``points`` are named by index), ``scales``, ``direction`` (the init is
    scale * direction), ``reached`` (per scale: the index of the fixed point in ``search.points``, or None where
    the flow's end is not decided or not confirmed), ``ends`` (the flow's end direction per scale) and ``why``
    (per scale, a sentence)."""

    search: FixedPointSearch
    scales: np.ndarray
    direction: np.ndarray
    reached: tuple
    ends: np.ndarray
    why: tuple

    def scales_of(self, index: int) -> np.ndarray:
        """The init scales in the basin of ``search.points[index]``."""
        return self.scales[[r == index for r in self.reached]]


def adam_basins(data: Dataset, scales, direction, *, log10_t1: float = 1e5, search: FixedPointSearch | None = None,
                **solve_kw) -> Basins:
    """The basins of the fixed points of ``search`` (:func:`adam_fixed_points` of ``data`` by default) on the init
    scale, along the init ``direction`` (d numbers, normalised here): the init scale * direction is in the basin of
    fixed point k when the AdamProxy flow (linear model, logistic loss, to ``log10_t1``; ``solve_kw`` go to
    :func:`flowsim.solve`) from it ends nearest fixed point k, by more than its distance to k moved over the last
    quarter of the saves, and damped iteration (:func:`adam_fixed_point`) started from the flow's end loss weights
    (-l'(z_i . theta), normalised) converges to fixed point k again (within ``SAME_DIRECTION``). Otherwise the
    scale is in no basin found (None, and ``why`` says which test failed)."""
    check_separable(data)
    try:
        scales = np.asarray(scales, dtype=np.float64).ravel()
        u = np.asarray(direction, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"scales and direction must be numbers; got {scales!r}, {direction!r}.") from None
    if not (scales.size and np.all(np.isfinite(scales)) and np.all(scales > 0)):
        raise ValueError(f"scales must be finite numbers > 0; got {scales.tolist()}.")
    if u.shape != (data.d,) or not np.all(np.isfinite(u)) or not np.linalg.norm(u) > 0:
        raise ValueError(f"direction must be {data.d} finite numbers, not all 0; got {u.tolist()}.")
    u = u / np.linalg.norm(u)
    search = adam_fixed_points(data) if search is None else search
    points = np.array([p.direction for p in search.points])
    system = derive(Linear(), "logistic", AdamProxy())
    reached, ends, why = [], [], []
    for scale in scales:
        sol = solve(system, data, scale * u, log10_t1=log10_t1, throw=False, **solve_kw)
        index, text = _basin_of(data, sol, points) if sol.ok else (None, f"the flow ended {sol.status!r}")
        reached.append(index)
        ends.append(sol.direction[-1])
        why.append(f"scale {scale:g}: {text}")
    return Basins(search=search, scales=scales, direction=u, reached=tuple(reached), ends=np.array(ends),
                  why=tuple(why))


def _basin_of(data, sol, points) -> tuple:
    """(the index of the fixed point the flow ``sol`` reaches, or None; why, a sentence)."""
    dist = np.linalg.norm(sol.direction[:, None, :] - points[None], axis=2)
    end = dist[-1]
    nearest = int(np.argmin(end))
    moved = float(abs(dist[-1, nearest] - dist[-max(2, len(dist) // 4), nearest]))
    rival = np.min(np.delete(end, nearest), initial=np.inf)
    text = f"nearest search.points[{nearest}] at {end[nearest]:.3g} (moved {moved:.2g}), the next at {rival:.3g}"
    if not end[nearest] + moved < rival:
        return None, text + ": not nearest by more than it moves"
    log_weights = log_expit(-(data.z @ sol.beta[-1]))  # -l'(m) of the logistic loss, in logs (it underflows)
    weights = np.exp(log_weights - log_weights.max())
    try:
        confirmed = adam_fixed_point(data, c0=weights / weights.sum())
    except RuntimeError as err:
        return None, text + f"; the iteration from the flow's loss weights found no fixed point ({err})"
    off = float(np.linalg.norm(confirmed.direction - points[nearest]))
    if off >= SAME_DIRECTION:
        return None, text + f"; the iteration from the flow's loss weights ends {off:.2g} from it"
    return nearest, text + f"; confirmed from the flow's loss weights (residual {confirmed.residual:.2g})"
