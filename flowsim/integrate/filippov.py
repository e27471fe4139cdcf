"""Sign switches of sign-dependent flows (l_inf-SAM): which side of each switching surface
G_k = 0 the trajectory takes, and when it slides.

At a switch (or at the start) every entry k with sigma_k G_k ~ 0 is a candidate. The two one-sided
fields (sigma_k = +1 and -1) are probed: a side is *consistent* if moving along its field keeps the
sign of G_k equal to that side's sigma. One consistent side: the trajectory crosses into it. Both:
a repelling surface, the trajectory leaves to the side it was not on. Neither, or both fields moving
G_k toward 0 (whatever offset the located switch left in G_k, its r_j within ``ON_SURFACE`` max |r|): a Filippov sliding mode. While other
entries slide on their surfaces the sides are probed with the sliding field there. On a coordinate plane
w_k = 0 with mirror-image one-sided fields (what diagonal networks produce) the entry is held at 0 and
the other entries see the average of the two one-sided fields. Any other sliding mode is handed on (``Signs.sliding``) to
:func:`flowsim.integrate.sliding.continuation`, which finds the Filippov continuation on the surfaces.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from flowsim.field import surfaces as field_surfaces


class Signs(NamedTuple):
    """The signs at a state and what slides: ``sigma`` (K, d), ``pinned`` (entries held on their planes w = 0),
    ``theta`` (pinned entries set to 0), ``sliding`` (entries whose one-sided fields both point into their
    surface G_k = 0 away from a plane: a sliding mode for ``continuation``)."""

    sigma: np.ndarray
    pinned: np.ndarray
    theta: np.ndarray
    sliding: np.ndarray


def entry_name(layer, coordinate) -> str:
    """A weight entry in messages, from its 0-based (layer, coordinate) place in theta: both counted from 1, as
    the papers count coordinates (``w[layer 1, coordinate 2]`` for theta[0, 1])."""
    return f"w[layer {int(layer) + 1}, coordinate {int(coordinate) + 1}]"


#: a coordinate's coupling r_j within this fraction of max |r| is on its switching surface r_j = 0: above the drift of
#: a sliding coordinate (the solver's tolerance: 2e-5 measured) and the offset a located switch leaves (LSODA: 1e-4),
#: below the r_j of a coordinate off its surface whose entries' G_lj = (dbeta_j/dw_lj) r_j are small because their
#: factor is (O(1) relative)
ON_SURFACE = 1e-3


def classify(vf, theta, Z, rho, sigma, pinned, surfaces=None, tol=1e-9, spread=None) -> Signs:
    """The side each entry near its switching surface takes, and which slide. ``surfaces``: entries sliding on
    their surfaces G_k = 0 now, left as they are (``continuation`` decides them); ``spread``: the switching
    surfaces slid on (``flowsim.field.surfaces.spread_of``), None if none. While some slide, the sides are probed
    with the field integrated there, Filippov's combination on those surfaces: the field with their controls put
    in as signs (Utkin's, not affine in them for l_inf-SAM) can point the other way across a second surface."""
    surfaces = np.zeros(np.shape(theta), bool) if surfaces is None else surfaces
    _, _, _, r = vf.couplings(theta, Z)
    G = vf.compiled.direction(theta, r)
    scale = max(float(np.abs(G).max()), 1.0)  # G can be tiny everywhere (all w -> 0): absolute floor
    sigma = np.where((sigma == 0) & ~pinned, np.sign(G), sigma).astype(float)
    # a coordinate whose data column is all 0 (a blank pixel) has G = 0 whatever theta: sign(0) = 0 holds it, as
    # sign descent by hand does; it is no sliding mode
    idle = np.broadcast_to(~np.any(Z != 0, axis=0), G.shape)
    sigma = np.where(idle, 0.0, sigma)
    cand = (pinned | (sigma * G <= tol * scale)) & ~idle & ~surfaces
    sliding = np.zeros_like(cand)
    if not cand.any():
        return Signs(sigma, pinned, theta, sliding)
    field = _probe_field(vf, theta, Z, rho, spread)
    Fp, _ = field(np.where(cand, 1.0, sigma), pinned & ~cand)
    Fm, _ = field(np.where(cand, -1.0, sigma), pinned & ~cand)
    size = 1.0 + float(np.abs(theta).max())
    speed = max(float(np.abs(Fp).max()), float(np.abs(Fm).max()), 1e-300)
    h = 1e-7 * size / speed
    G_plus, G_minus = vf.direction(theta + h * Fp, Z)[0], vf.direction(theta + h * Fm, Z)[0]
    plus_ok, minus_ok = G_plus > 0, G_minus < 0
    # both one-sided fields move G_k toward the surface: a sliding mode, wherever integration error left G_k (a
    # switch located off the surface, or a sign chosen from such an offset, would otherwise decide a crossing)
    into = (G_plus < G) & (G_minus > G) & _on_coordinate_surface(vf, theta, r)
    sigma, pinned, theta = sigma.copy(), pinned.copy(), theta.copy()
    for k in zip(*np.nonzero(cand)):
        if not into[k] and plus_ok[k] != minus_ok[k]:
            sigma[k], pinned[k] = (1.0 if plus_ok[k] else -1.0), False
        elif not into[k] and plus_ok[k]:  # both sides consistent: a repelling surface, left to the side it was not on
            sigma[k], pinned[k] = (-sigma[k] if sigma[k] != 0 else 1.0), False
        elif abs(theta[k]) <= 1e-8 * size and _mirror_on_plane(vf, theta, Z, rho, sigma, pinned, k):
            sigma[k], pinned[k], theta[k] = 0.0, True, 0.0
        else:
            sliding[k] = True
    if sliding.any():
        return Signs(sigma, pinned, theta, sliding)
    return _jointly(vf, theta, Z, rho, sigma, pinned, cand & ~pinned, h, spread)


def _on_coordinate_surface(vf, theta, r):
    """Entries whose G_lj = (dbeta_j/dw_lj) r_j is small with r_j (within ``ON_SURFACE`` of max |r|), not with their
    factor (within ``ON_SURFACE`` of the largest factor of their coordinate): on their coordinate's switching
    surface, not merely near their own plane w = 0 or on a net whose every G is tiny."""
    r = np.abs(np.asarray(r))
    factor = np.abs(np.asarray(vf.compiled.direction(theta, np.ones_like(r))))
    return (r <= ON_SURFACE * r.max()) & (factor >= ON_SURFACE * factor.max(axis=0))


def _probe_field(vf, theta, Z, rho, spread):
    """(signs, held) -> the field the sides are probed with: the plain one (the entries held on their planes are
    candidates, probed at +-1), or, with surfaces slid on (``spread``), the sliding field on them."""
    if spread is None:
        return lambda signs, held: vf.field_and_scale(theta, Z, rho, signs)
    return lambda signs, held: field_surfaces.at(vf, "field_and_scale", theta, Z, rho, signs, held, spread)


def _mirror_on_plane(vf, theta, Z, rho, sigma, pinned, k):
    """The one-sided fields of entry k are mirror images on its plane w_k = 0, where it is held: measured
    there, not at the state (a tiny rho makes a w_k of 1e-79 count: w~ = w_k +- rho), with only entry k's sign
    flipped (flipping another candidate too moves that entry's perturbation, and with it entry k's field) and the
    entries held on their planes as they are held."""
    on, held = theta.copy(), pinned.copy()
    on[k], held[k] = 0.0, False
    sides = [sigma.copy(), sigma.copy()]
    sides[0][k], sides[1][k] = 1.0, -1.0
    Fp, Fm = (vf.sliding_field_and_scale(on, Z, rho, side, held)[0][k] for side in sides)
    return abs(Fp + Fm) <= 1e-6 * (abs(Fp) + abs(Fm))


#: simultaneous switches of at most this many entries are resolved jointly (2^n probes)
JOINT = 8


def _jointly(vf, theta, Z, rho, sigma, pinned, switching, h, spread=None):
    """Entries switching together are coupled (a difference net's u_k and v_k mirror each other): the
    sides chosen one by one, each probed with the others on the same side, must also hold together.
    If they do not, every combination of sides is probed; none holding is a sliding mode on the
    intersection of their switching surfaces away from w = 0, handed on as ``sliding``."""
    idx = list(zip(*np.nonzero(switching)))
    none = np.zeros_like(switching)
    if len(idx) < 2 or _holds(vf, theta, Z, rho, sigma, pinned, switching, h, spread):
        return Signs(sigma, pinned, theta, none)
    if len(idx) <= JOINT:
        for signs in itertools.product((1.0, -1.0), repeat=len(idx)):
            trial = sigma.copy()
            for k, v in zip(idx, signs):
                trial[k] = v
            if _holds(vf, theta, Z, rho, trial, pinned, switching, h, spread):
                return Signs(trial, pinned, theta, none)
    return Signs(sigma, pinned, theta, switching)


def _holds(vf, theta, Z, rho, sigma, pinned, switching, h, spread=None):
    """Moving along the field with these signs keeps sign(G) equal to them on the switching entries."""
    if spread is None:
        F, _ = vf.sliding_field_and_scale(theta, Z, rho, sigma, pinned)
    else:
        F, _ = field_surfaces.at(vf, "field_and_scale", theta, Z, rho, sigma, pinned, spread)
    G = vf.direction(theta + h * F, Z)[0]
    return bool(np.all(np.sign(G[switching]) == sigma[switching]))
