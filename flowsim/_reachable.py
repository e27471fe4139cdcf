r"""Which sign patterns of beta a model can reach from its initialisation (MATH.md 9 in the team's
notes; README "What a model can reach").

- ``Linear()`` and the difference network :math:`u^L - v^L`: any sign.
- Tied :math:`w^L`, even L: :math:`\beta = w^L \ge 0` always.
- Tied, odd L >= 3, under GD, USAM and lp-SAM with p finite: :math:`w_j = 0` is invariant (the
  gradient and the perturbation vanish there), so :math:`\beta_j` keeps the sign of :math:`w_j(0)`.
- Product :math:`w_1 \cdots w_L`, coordinate j whose layers start equal (:math:`w_{lj} = w_j` for all
  l): the layers stay equal under every flow here (layer symmetry), so at even L :math:`\beta_j \ge 0`.
  Under GD, USAM and lp-SAM (p finite), layers of equal magnitude keep equal magnitudes (flip the sign
  of a layer and of :math:`z_{:j}` together: a symmetry of these flows), so :math:`\beta_j` keeps its
  initial sign, and stays 0 if it starts there.

Where none applies the coordinate is free. Sign and Adam-proxy flows can leave :math:`w_j = 0` through
a sliding mode, so only the layer-symmetry rules are used for them.
"""

from __future__ import annotations

import numpy as np

from ._flows import follows_gradient


def reachable_signs(model, theta0, flow) -> np.ndarray:
    """Per coordinate: +1 (beta_j >= 0 for ever), -1 (<= 0), 0 (= 0) or nan (either sign)."""
    theta0 = np.asarray(theta0, float)
    d = theta0.shape[1]
    free = np.full(d, np.nan)
    L = model.depth
    if L == 1 or model.form == "difference":
        return free
    keeps_zero = follows_gradient(flow)
    if model.form == "tied":
        if L % 2 == 0:
            return np.ones(d)
        return np.sign(theta0[0]) if keeps_zero else free
    equal = np.all(theta0 == theta0[:1], axis=0)
    same_size = np.all(np.abs(theta0) == np.abs(theta0[:1]), axis=0)
    signs = free.copy()
    if keeps_zero:
        signs[same_size] = np.sign(np.prod(theta0, axis=0))[same_size]
    if L % 2 == 0:
        signs[equal & np.isnan(signs)] = 1.0
    return signs


def kept_entry_signs(model, theta0, flow) -> np.ndarray:
    """(layers, d): the sign each parameter entry keeps for ever, 0 where it may change.

    Under GD, USAM and lp-SAM (p finite) the plane w_lj = 0 is invariant for the tied and difference
    networks of depth >= 2 (the field of an entry carries the factor w_lj^(L-1)): an entry that starts
    non-zero never reaches 0 in finite time, let alone crosses it. At odd L the sign of the entry is
    the sign of its term of beta, and a step across the plane (an implicit method's overshoot) leads
    to a trajectory the exact flow cannot produce; flowsim stops there (``crossing`` event). At even L
    the field is odd in each entry, so an overshoot lands on the mirror trajectory with the same beta,
    and is not flagged."""
    theta0 = np.asarray(theta0, float)
    if follows_gradient(flow) and model.depth % 2 == 1 and model.depth >= 3 and model.form in ("tied", "difference"):
        return np.sign(theta0)
    return np.zeros_like(theta0)
