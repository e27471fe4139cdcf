r"""The limit direction of a margin loss with a polynomial tail, docs/theory.md 4.

For :math:`\ell(m) \sim c\,m^{-k}` (:attr:`flowsim.Loss.tail_power`) linear gradient flow grows self-similarly,
:math:`\beta(t) \approx t^{1/(k+2)} w`, where w is stationary for :math:`\sum_i (z_i \cdot w)^{-k}` on the unit
sphere: the direction tends to the minimiser of that sum, which weighs every sample, not the support vectors of a
max-margin. The minimiser is found here without any flow: :math:`f(w) = \sum_i (z_i\cdot w)^{-k} + \|w\|^2/2` is
strictly convex on the cone :math:`z_i \cdot w > 0`, and its minimiser, where :math:`k \sum_i (z_i\cdot
w)^{-(k+1)} z_i = w`, points along the sphere's (a stationary point of the sum on the sphere with a positive
multiplier is a KKT point of the convex problem over the ball, so the global minimiser).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowsim.data import Dataset
from flowsim.theory.references import check_separable, max_margin
from flowsim.theory.regression import _newton

#: the minimiser's stationarity residual |k Z^T (Zw)^-(k+1) - w| relative to |w| must be below this
STATIONARY = 1e-10


@dataclass(frozen=True)
class TailLimit:
    """The limit direction of linear gradient flow on a loss l ~ m^-``power``: ``direction`` (unit l2) minimises
    sum_i (z_i.w)^-power on the sphere; ``weights`` (sum 1) are the samples' shares (z_i.w)^-(power+1) in
    w ~ sum_i weights_i z_i, every sample's positive (a max-margin's are 0 off its support); ``residual`` is the
    relative stationarity residual."""

    power: float
    direction: np.ndarray
    weights: np.ndarray
    residual: float


def polynomial_tail_limit(data: Dataset, power: float) -> TailLimit:
    """The direction linear gradient flow tends to on separable ``data`` for a margin loss l(m) ~ c m^-``power``
    (``loss.tail_power``): the minimiser of sum_i (z_i.w)^-power on the unit sphere, by Newton steps on the strictly
    convex sum_i (z_i.w)^-power + ||w||^2 / 2 from the l2 max-margin.

    Raises:
        ValueError: for a power that is not a finite number > 0, data that are not a separable classification set
            (:class:`flowsim.NonSeparableError`), or a minimiser float64 does not resolve to ``STATIONARY``.
    """
    if not isinstance(data, Dataset) or data.is_regression:
        raise ValueError("data must be a flowsim.Dataset of labels +-1 (the limit is of a margin loss).")
    if isinstance(power, bool) or not (isinstance(power, (int, float, np.number)) and math.isfinite(power)
                                       and power > 0):
        raise ValueError(f"power must be a finite number k > 0 (l(m) ~ m^-k: loss.tail_power); got {power!r}.")
    check_separable(data)
    Z, k = data.z, float(power)

    def objective(w):
        m = Z @ w
        return np.sum(m ** -k) + w @ w / 2 if np.all(m > 0) else np.inf

    def gradient(w):
        return w - k * (Z @ w) ** -(k + 1) @ Z

    def hessian(w):
        return np.eye(len(w)) + k * (k + 1) * (Z.T * (Z @ w) ** -(k + 2)) @ Z

    l2 = max_margin(data, 2)
    start = l2.direction / np.linalg.norm(l2.direction) / l2.margin  # every z_i.w >= 1
    w, message = _newton(objective, gradient, hessian, start, gtol=1e-13 * np.linalg.norm(start))
    residual = float(np.linalg.norm(gradient(w)) / np.linalg.norm(w))
    if not residual <= STATIONARY:
        raise ValueError(f"the minimiser of sum_i (z_i.w)^-{k:g} is not resolved in float64 on these data "
                         f"(stationarity residual {residual:.2g}, {message}); a power this far from 1 or samples "
                         "this unevenly scaled need rescaled data.")
    shares = (Z @ w) ** -(k + 1)
    return TailLimit(k, w / np.linalg.norm(w), shares / shares.sum(), residual)
