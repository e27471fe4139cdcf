r"""The l1 max-margin's dual slack: the rate at which depth-2 diagonal networks reach their limit (docs/theory.md 6b).

The l1 max-margin problem :math:`\min \|w\|_1` s.t. :math:`Zw \ge 1` has the dual

.. math:: \max_{\lambda \ge 0} \mathbf 1^\top\lambda \quad\text{s.t.}\quad \|Z^\top\lambda\|_\infty \le 1,

solved here on the interior-point conic solver (Clarabel), independently of the primal LP (HiGHS) that
:func:`flowsim.max_margin` solves. Complementary slackness puts :math:`|Z^\top\lambda^\star|_j = 1` on every
coordinate of the primal's support; the *slack* of a coordinate is :math:`1 - |Z^\top\lambda^\star|_j`, and
``delta``, the smallest slack over the coordinates off the support, is the conjectured exponent of the
normalised-margin gap of depth-2 GD, :math:`\gamma^\star - \gamma(t) \sim (\log t)^{-\delta}`.
"""

from __future__ import annotations

from dataclasses import dataclass

import clarabel
import numpy as np
import scipy.sparse as sps

from flowsim.data import Dataset
from flowsim.errors import UncertifiedError
from flowsim.theory.references import MaxMargin, check_separable, max_margin

#: a coordinate whose slack is below this is tight (on the dual's face); the interior point meets 1e-12
TIGHT = 1e-7


@dataclass(frozen=True)
class L1Slack:
    """The l1 max-margin's dual slack: ``slacks`` (one per coordinate, 1 - |Z^T lam|_j with lam the dual
    optimum scaled to ||Z^T lam||_inf = 1), ``off_support`` (the coordinates where the primal optimum is 0),
    ``delta`` (the smallest slack off the support; inf where every coordinate is on it), ``duals`` (lam, on the
    simplex), ``primal`` (:func:`flowsim.max_margin`'s l1 answer, whose zeros are ``off_support``) and ``strict``:
    whether the optimum is nondegenerate, so that ``delta`` is one number: the primal optimum unique, every support
    coordinate tight and every other slack (strict complementarity), and as many support samples (lam_i > 0) as
    support coordinates (the dual optimum unique)."""

    slacks: np.ndarray
    off_support: np.ndarray
    delta: float
    duals: np.ndarray
    primal: MaxMargin
    strict: bool


def l1_dual_slack(data: Dataset) -> L1Slack:
    """The dual slack of the l1 max-margin of ``data`` (the module's text); ``NonSeparableError`` for data no
    direction separates, :class:`flowsim.errors.UncertifiedError` where the conic solver does not solve the dual."""
    check_separable(data)
    Z = data.z / np.abs(data.z).max()  # the same slacks; the solver's tolerances meet entries <= 1
    lam = _dual(Z)
    along = Z.T @ lam
    slacks = 1.0 - np.abs(along) / np.abs(along).max()
    primal = max_margin(data, 1)
    w = primal.direction
    off = np.abs(w) <= 1e-9 * np.abs(w).max()
    tight = slacks <= TIGHT
    support_samples = int((lam > TIGHT * lam.max()).sum())
    strict = bool(primal.unique and np.array_equal(tight, ~off) and support_samples == int((~off).sum()))
    delta = float(slacks[off].min()) if off.any() else np.inf
    return L1Slack(slacks=slacks, off_support=off, delta=delta, duals=lam / lam.sum(), primal=primal,
                  strict=strict)


def _dual(Z) -> np.ndarray:
    """lam maximising 1.lam s.t. -1 <= Z^T lam <= 1, lam >= 0 (Clarabel: min c.x s.t. A x + s = b, s >= 0)."""
    n, d = Z.shape
    A = sps.csc_matrix(np.vstack([Z.T, -Z.T, -np.eye(n)]))
    b = np.concatenate([np.ones(2 * d), np.zeros(n)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
    out = clarabel.DefaultSolver(sps.csc_matrix((n, n)), -np.ones(n), A, b, [clarabel.NonnegativeConeT(2 * d + n)],
                                 settings).solve()
    if str(out.status) not in ("Solved", "AlmostSolved"):
        raise UncertifiedError(f"the conic solver ended {out.status} on the l1 max-margin's dual.")
    return np.clip(np.asarray(out.x), 0.0, None)
