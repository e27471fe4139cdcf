r"""Max-margin references (no bias term), docs/theory.md 6.

- l2 and any l_p, 1 < p < inf: an interior-point conic solver (:mod:`flowsim.theory.conic`: a
  second-order cone, power cones), the l2 answer polished on its active set; the l_p optimum is unique;
- Mahalanobis: the l2 problem after :math:`v = M^{1/2} w`;
- l1, l_inf: linear programs (scipy HiGHS, bounds passed explicitly), whose simplex answers are vertices
  of the optimal face. Their optima are often not unique: ``unique`` is decided by optimising two random
  objectives over the optimal face;
- depth-L diagonal networks: KKT points of :math:`\min \|\beta\|_{2/L}` s.t. :math:`Z\beta \ge 1`.

Every max-margin answer carries a :class:`~flowsim.theory.conic.Certificate` (a primal and a dual bound on
the margin) and raises :class:`flowsim.errors.UncertifiedError` when the two are apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize

from flowsim._checks import is_whole
from flowsim.data import Dataset
from flowsim.errors import NonSeparableError, UncertifiedError
from flowsim.theory import conic


@dataclass(frozen=True)
class MaxMargin:
    """A max-margin solution: ``direction`` (unit ``norm``), its normalised margin
    min_i z_i.w / ||w||, the dual multipliers ``duals`` (one per sample), the ``support`` samples,
    and whether the optimal direction is ``unique``. ``kkt_residual`` is set for KKT points;
    ``certificate`` bounds the margin from both sides (None for KKT points of depth >= 3)."""

    norm: object
    direction: np.ndarray
    margin: float
    duals: np.ndarray
    support: np.ndarray
    unique: bool
    kkt_residual: float = 0.0
    metric: np.ndarray | None = None
    certificate: conic.Certificate | None = None


def norm_of(w, norm, metric=None):
    w = np.asarray(w, float)
    if norm == "mahalanobis":
        return float(np.sqrt(w @ metric @ w))
    return float(np.linalg.norm(w, ord=np.inf if norm == np.inf else norm))


def normalised_margin(data: Dataset, w, norm, metric=None):
    """min_i z_i . w / ||w||_norm (for an array of w's along the first axis too); ``norm`` any p > 0 (the
    2/L quasi-norms of KKT points among them), inf or "mahalanobis" with ``metric``. -inf for w = 0, NaN for
    a w with a non-finite entry."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset; got {type(data).__name__}.")
    try:
        w = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"w must be real numbers, shape (d,) or (k, d) with d = {data.d}; got {w!r}.") from None
    if w.ndim not in (1, 2) or w.shape[-1] != data.d:
        raise ValueError(f"w must have shape (d,) or (k, d) with d = {data.d}; got shape {w.shape}.")
    norm = _margin_norm(norm, metric, data.d)
    out = np.array([_margin(data.z, v, norm, metric) for v in np.atleast_2d(w)])
    return out if w.ndim == 2 else float(out[0])


def _margin(Z, w, norm, metric):
    if not np.all(np.isfinite(w)):
        return np.nan
    n = norm_of(w, norm, metric)
    return float(np.min(Z @ w) / n) if n > 0 else -np.inf


def _margin_norm(norm, metric, d):
    """``norm`` checked: a p > 0, inf (or "inf"), or "mahalanobis" with a positive-definite (d, d) metric."""
    if norm == "mahalanobis":
        _metric(metric, d)
        return norm
    if norm == "inf":
        return np.inf
    if isinstance(norm, bool) or not isinstance(norm, (int, float, np.integer, np.floating)) or not norm > 0:
        raise ValueError(f"norm must be a number p > 0, float('inf') or 'mahalanobis' (with metric); got {norm!r}.")
    return norm


def _metric(metric, d) -> tuple:
    """``metric`` as a finite, symmetric positive-definite (d, d) array M, with its eigenvalues and vectors, or a
    ValueError (eigh reads one triangle: [[1, 10], [0, 1]] passed as positive definite and gave a NaN norm)."""
    try:
        M = np.asarray(metric, dtype=np.float64) if metric is not None else None
    except (TypeError, ValueError):
        M = None
    if M is None or M.shape != (d, d) or not np.all(np.isfinite(M)) or not np.allclose(M, M.T, rtol=1e-10, atol=0):
        raise ValueError(f"metric must be a finite, symmetric positive-definite ({d}, {d}) array for "
                         "norm='mahalanobis'.")
    evals, evecs = np.linalg.eigh(M)
    if not evals.min() > 0:
        raise ValueError("metric must be positive definite (its smallest eigenvalue is <= 0).")
    return M, evals, evecs


def check_separable(data):
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset; got {type(data).__name__}.")
    if not data.is_separable:
        raise NonSeparableError("data are not linearly separable: no max-margin solution exists.")


def _lp(c, A_ub, b_ub, bounds):
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:  # (separability was decided before: a margin within HiGHS's feasibility tolerance)
        raise UncertifiedError(f"LP failed: {res.message} If the data are separable, it is by a margin near the LP's "
                               "feasibility tolerance (~1e-9 of their scale): no max-margin at double precision.")
    return res


def _face_is_point(c, A_ub, b_ub, bounds, x_opt, pick, seed=0):
    """Whether the optimum is unique: random objectives optimised over the feasible points within a slack
    of the optimal value. A unique optimum's spread shrinks with the slack (in proportion), an optimal
    face's does not; one slack with an absolute spread test called a thin near-optimal band a face and a
    face of small entries (data of scale 1e7) a point."""
    opt = c @ x_opt
    A = np.vstack([A_ub, c])
    rng = np.random.default_rng(seed)
    objectives = [sgn * r for r in rng.normal(size=(2, pick(x_opt).size)) for sgn in (1, -1)]
    size = np.abs(pick(x_opt)).max()

    def spread(slack):
        b = np.concatenate([b_ub, [opt + slack * abs(opt)]])
        ws = [pick(_lp(_lift(r, pick, c.size), A, b, bounds).x) for r in objectives]
        return max(np.abs(w - ws[0]).max() for w in ws) / size

    wide, narrow = spread(1e-6), spread(1e-8)
    return narrow <= 1e-7 or narrow <= 0.1 * wide


def _lift(r, pick, size):
    """An objective on the full LP variable whose value is r . pick(x)."""
    eye = np.eye(size)
    return np.array([r @ pick(e) for e in eye])


def max_margin(data: Dataset, norm=2, *, metric=None) -> MaxMargin:
    """The max-margin direction for ``norm``: any p >= 1 (2, 1 and inf among them) or "mahalanobis" (with
    ``metric``: M, positive definite). Returns a :class:`MaxMargin` whose ``certificate`` bounds its margin;
    raises :class:`flowsim.errors.UncertifiedError` with the bounds when they are apart by more than 1e-8."""
    check_separable(data)
    Z = data.z / np.abs(data.z).max()  # the same directions; the solvers' tolerances meet entries <= 1
    n, d = Z.shape
    if norm == "mahalanobis":
        M, evals, evecs = _metric(metric, d)
        root_inv = evecs @ np.diag(evals**-0.5) @ evecs.T
        v, a, cert = conic.solve(Z @ root_inv, 2)
        return _result(data, root_inv @ v, a, norm, True, metric=M, certificate=cert)
    if metric is not None:
        raise ValueError(f"metric is for norm='mahalanobis' only; got it with norm={norm!r} (leave it out, or use "
                         "norm='mahalanobis').")
    norm = _reference_norm(norm)
    if norm not in (1, np.inf):
        w, a, cert = conic.solve(Z, norm)
        return _result(data, w, a, norm, True, certificate=cert)
    if norm == 1:
        # w = u - v, u, v >= 0: min 1.(u + v) s.t. Z(u - v) >= 1
        c = np.ones(2 * d)
        A = -np.hstack([Z, -Z])
        b = -np.ones(n)
        bounds = [(0, None)] * (2 * d)

        def pick(x):
            return x[:d] - x[d:]
    else:
        # variables (w, s): min s s.t. Z w >= 1, -s <= w_j <= s
        c = np.concatenate([np.zeros(d), [1.0]])
        A = np.vstack([np.hstack([-Z, np.zeros((n, 1))]),
                       np.hstack([np.eye(d), -np.ones((d, 1))]),
                       np.hstack([-np.eye(d), -np.ones((d, 1))])])
        b = np.concatenate([-np.ones(n), np.zeros(2 * d)])
        bounds = [(None, None)] * d + [(0, None)]

        def pick(x):
            return x[:d]
    res = _lp(c, A, b, bounds)
    w = pick(res.x)
    duals = -np.asarray(res.ineqlin.marginals)[:n]
    cert = conic.certified(Z, w, duals, norm, "HiGHS LP")
    unique = _face_is_point(c, A, b, bounds, res.x, pick)
    return _result(data, w, duals, norm, unique, certificate=cert)


def _reference_norm(norm):
    """``norm`` as a float p >= 1 (inf included), or a ValueError naming what it takes."""
    if isinstance(norm, str) and norm == "inf":
        return np.inf
    if isinstance(norm, (bool, complex, np.complexfloating)) or not isinstance(norm, (int, float, np.integer, np.floating)) \
            or not norm >= 1:
        raise ValueError(f"norm must be 2, 1, float('inf'), any p >= 1 or 'mahalanobis'; got {norm!r}.")
    return float(norm)


def _result(data, w, duals, norm, unique, metric=None, kkt_residual=0.0, certificate=None):
    nrm = norm_of(w, norm, metric)
    direction = w / nrm
    duals = np.asarray(duals, float)
    s = duals.sum()
    return MaxMargin(norm=norm, direction=direction, margin=normalised_margin(data, direction, norm, metric),
                     duals=duals / s if s > 0 else duals, support=np.nonzero(duals > 1e-8 * max(s, 1e-300))[0],
                     unique=bool(unique), kkt_residual=float(kkt_residual), metric=metric, certificate=certificate)


def kkt_max_margin(data: Dataset, depth: int, *, start=None) -> MaxMargin:
    r"""A first-order KKT point of :math:`\min \|\beta\|_{2/L}` s.t. :math:`Z\beta \ge 1`: the limit
    directions gradient flow on depth-L diagonal networks can reach. L = 1: the l2 problem; L = 2:
    the (convex) l1 problem; L >= 3: a local method (SLSQP on beta = s * |w|^L with the sign pattern
    s of ``start``, e.g. the flow's own direction) with the KKT residual reported. The direction is
    normalised in the 2/L quasi-norm, which is also ``norm``."""
    if not is_whole(depth):
        raise ValueError(f"depth must be an integer >= 1; got {depth!r}.")
    if depth == 1:
        return max_margin(data, 2)
    if depth == 2:
        return max_margin(data, 1)
    check_separable(data)
    Z = data.z
    L = int(depth)
    if start is None:
        start = max_margin(data, 1).direction
    try:
        start = np.asarray(start, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"start must be {data.d} numbers (a direction, e.g. a flow's end); got {start!r}.") from None
    if start.shape != (data.d,) or not np.all(np.isfinite(start)):
        raise ValueError(f"start must be finite, shape (d,) = ({data.d},); got {start.tolist()}.")
    s = np.where(start >= 0, 1.0, -1.0)
    if not np.min(Z @ start) > 0:  # SLSQP from a point that does not separate failed and was returned as the optimum
        start = _separating_with_signs(Z, s)
    scale = 1.0 / np.min(Z @ start)
    w0 = (np.abs(start) * scale + 1e-6) ** (1.0 / L)
    cons = {"type": "ineq", "fun": lambda w: Z @ (s * w**L) - 1.0, "jac": lambda w: Z * (s * L * w ** (L - 1))}
    res = minimize(lambda w: (w @ w, 2 * w), w0, jac=True, constraints=[cons], method="SLSQP",
                   bounds=[(0, None)] * data.d, options=dict(ftol=1e-15, maxiter=2000))
    beta = s * res.x**L
    if not np.min(Z @ beta) >= 1.0 - 1e-7:
        raise RuntimeError(f"kkt_max_margin: SLSQP ended at a point that does not meet the margin constraints "
                           f"(min z.beta = {np.min(Z @ beta):.3g} < 1; {res.message}); try another start.")
    # KKT of min sum |beta_j|^{2/L} s.t. Z beta >= 1 on the support of beta: (2/L)|b|^{2/L-1} sign(b) = Z^T lam
    on = np.abs(beta) > 1e-8 * np.abs(beta).max()
    act = np.abs(Z @ beta - 1.0) < 1e-7
    grad = (2.0 / L) * np.abs(beta[on]) ** (2.0 / L - 1) * np.sign(beta[on])
    lam = np.zeros(data.n)
    if act.any():
        lam_act, *_ = np.linalg.lstsq(Z[act][:, on].T, grad, rcond=None)
        lam[act] = np.maximum(lam_act, 0.0)
    resid = np.linalg.norm(Z[:, on].T @ lam - grad) / max(np.linalg.norm(grad), 1e-300)
    return _result(data, beta, lam, 2.0 / L, False, kkt_residual=resid)


def _separating_with_signs(Z, s):
    """A beta with the sign pattern ``s`` (beta_j s_j >= 0) and Z beta >= 1, by LP; a ValueError if none."""
    res = linprog(np.ones(Z.shape[1]), A_ub=-(Z * s), b_ub=-np.ones(Z.shape[0]), bounds=[(0, None)] * Z.shape[1],
                  method="highs")
    if res.status != 0:
        raise ValueError(f"start: no beta with its signs {s.astype(int).tolist()} separates the data; give a start "
                         "with other signs (e.g. a flow's end direction).")
    return s * res.x
