r"""Max-margin problems on an interior-point conic solver (Clarabel), each answer certified.

Every norm 1 < p < inf is solved in one form, with O(1) unknowns whatever the margin:

.. math:: \max_{w,\,g}\; g \quad\text{s.t.}\quad Zw \ge g\,\mathbf 1,\; \|w\|_p \le 1,

a second-order cone for p = 2, power cones :math:`r_j \ge |w_j|^p`, :math:`\sum_j r_j \le 1` otherwise
(l1 and l_inf are LPs, solved in :mod:`flowsim.theory.references`; :func:`certified` checks them too). Its duals :math:`\lambda` on :math:`Zw \ge g` lie on
the simplex, and weak duality bounds the margin from both sides: for any feasible w and any
:math:`\lambda \ge 0` with :math:`\sum\lambda = 1`,

.. math:: \min_i z_i\cdot w / \|w\|_p \;\le\; \gamma_p \;\le\; \|Z^\top\lambda\|_q, \qquad 1/p + 1/q = 1.

:class:`Certificate` holds both bounds; an answer whose relative gap exceeds the tolerance raises
:class:`flowsim.errors.UncertifiedError` with them. For p = 2 the interior point is polished on its active set (the
minimum-norm solution of :math:`Z_S w = \mathbf 1`, duals by NNLS), which is exact where the margin is
far below the solver's own tolerance (data separable by 1e-12 of their scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import clarabel
import numpy as np
import scipy.sparse as sps
from scipy.optimize import nnls

from flowsim.errors import UncertifiedError

#: the relative gap between the two margin bounds an answer must meet
GAP_TOL = 1e-8


@dataclass(frozen=True)
class Certificate:
    """Bounds on the max margin of one norm: ``lower`` is a feasible w's margin, ``upper`` the dual bound
    ``||Z^T lam||_q``; ``gap`` is (upper - lower) / upper."""

    lower: float
    upper: float

    @property
    def gap(self) -> float:
        return (self.upper - self.lower) / self.upper if self.upper > 0 else np.inf

    def __str__(self):
        return f"margin between {self.lower:.6g} (primal) and {self.upper:.6g} (dual), relative gap {self.gap:.2g}"


def certify(Z, w, lam, p) -> Certificate:
    """The margin bounds that a direction ``w`` and simplex weights ``lam`` prove for the l_p problem."""
    q = 1.0 if p == np.inf else np.inf if p == 1 else p / (p - 1.0)
    lam = np.clip(lam, 0.0, None)
    lam = lam / lam.sum() if lam.sum() > 0 else lam
    norm = np.linalg.norm(w, ord=p)
    lower = float(np.min(Z @ w) / norm) if norm > 0 else -np.inf
    return Certificate(lower, float(np.linalg.norm(Z.T @ lam, ord=q)))


def certified(Z, w, lam, p, solver: str) -> Certificate:
    """:func:`certify`, raising :class:`flowsim.errors.UncertifiedError` with the bounds when their relative gap
    exceeds ``GAP_TOL``."""
    cert = certify(Z, w, lam, p)
    if not cert.gap <= GAP_TOL:
        raise UncertifiedError(f"the l_{p:g} max-margin ({solver}) could not be certified: {cert} > {GAP_TOL:g}. "
                               "The data's margin is near what the solver resolves at their scale.", cert)
    return cert


def solve(Z, p) -> tuple[np.ndarray, np.ndarray, Certificate]:
    """The l_p max-margin direction w (||w||_p = 1, 1 < p < inf) of the rows of Z, its simplex duals and
    certificate."""
    w, lam = _interior_point(Z, p)
    if p == 2:
        w, lam = _polish_l2(Z, w, lam)
    w = w / np.linalg.norm(w, ord=p)
    cert = certified(Z, w, lam, p, "conic")
    return w, lam / lam.sum(), cert


def _interior_point(Z, p):
    n, d = Z.shape
    extra = 0 if p == 2 else d  # unknowns (w, g, r): r_j >= |w_j|^p for the power cones
    size = d + 1 + extra
    cost = np.zeros(size)
    cost[d] = -1.0
    rows, rhs, cones = [sps.hstack([sps.csc_matrix(-Z), sps.csc_matrix(np.ones((n, 1))),
                                    sps.csc_matrix((n, extra))])], [np.zeros(n)], [clarabel.NonnegativeConeT(n)]
    if p == 2:  # (1, w) in the second-order cone
        rows.append(sps.vstack([sps.csc_matrix((1, size)), sps.hstack([-sps.identity(d), sps.csc_matrix((d, 1))])]))
        rhs.append(np.r_[1.0, np.zeros(d)])
        cones.append(clarabel.SecondOrderConeT(d + 1))
    else:  # (r_j, 1, w_j) in the power cone of exponent 1/p, sum r <= 1
        for j in range(d):
            block = sps.lil_matrix((3, size))
            block[0, d + 1 + j] = -1.0
            block[2, j] = -1.0
            rows.append(block.tocsc())
            rhs.append(np.array([0.0, 1.0, 0.0]))
            cones.append(clarabel.PowerConeT(1.0 / p))
        rows.append(sps.hstack([sps.csc_matrix((1, d + 1)), sps.csc_matrix(np.ones((1, d)))]))
        rhs.append(np.ones(1))
        cones.append(clarabel.NonnegativeConeT(1))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
    settings.max_iter = 500
    solver = clarabel.DefaultSolver(sps.csc_matrix((size, size)), cost, sps.vstack(rows).tocsc(),
                                    np.concatenate(rhs), cones, settings)
    out = solver.solve()
    if str(out.status) not in ("Solved", "AlmostSolved", "MaxIterations", "InsufficientProgress"):
        raise UncertifiedError(f"the conic solver ended {out.status} on the l_{p:g} max-margin problem.")
    x, z = np.asarray(out.x), np.asarray(out.z)
    return x[:d], z[:n]


def _polish_l2(Z, w, lam):
    """The exact l2 solution on the interior point's active set: w the minimum-norm solution of
    Z_S w = 1 (scaled to the direction), duals by NNLS on Z_S^T a = w; kept where it certifies better."""
    best = (w, lam, certify(Z, w, lam, 2).gap)
    margins = Z @ w
    margins = margins / max(margins.min(), 1e-300)
    for active in (lam > 1e-6 * lam.max(), margins < 1.0 + 1e-6):
        if not active.any():
            continue
        v, *_ = np.linalg.lstsq(Z[active], np.ones(active.sum()), rcond=None)
        a = np.zeros(len(lam))
        a[active], _ = nnls(Z[active].T, v, maxiter=50 * active.sum())
        if a.sum() > 0:
            gap = certify(Z, v, a, 2).gap
            if gap < best[2]:
                best = (v, a, gap)
    return best[0], best[1]
