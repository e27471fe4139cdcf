"""Entries of a sliding coordinate that reach their planes w = 0: held there, or sent on to one side.

In a diagonal network every entry's gradient factor is G_lj = (dbeta_j/dw_lj) r_j. While coordinate j slides on its
surface r_j = 0 its entries move with the shared control s_j, each with the sign sign(dbeta_j/dw_lj) s_j. Where that
factor vanishes with the entry itself (a difference or tied net: dbeta_j/du_j = L u_j^(L-1)), the plane w_lj = 0 is a
second switching surface of the entry: its sign flips there, and the sliding field on the two sides of the plane
differs. Where both sides point into the plane (for the sign flow, |u_j|' = -s_j on both sides) the exact flow
reaches it in finite time and slides on the intersection of the plane and r_j = 0: the entry is held at 0 and the
coordinate's other entries keep it on r_j = 0. Stepped across the plane with the sign of the side it came from, the
entry moves away with |u|' = +s_j, and two such entries bounce across their planes in turn, ever faster (Zeno
switching).

This module decides, at a switch, which entries of the coordinates sliding on surfaces sit on such a plane and how
the sliding field meets it there, from the sliding field itself on its two sides (no property of a flow assumed):
both sides in (and mirror images, the rule held entries follow): held; both the same way: the entry goes on to that
side; both away: to the side it is on (the two are mirror images with the same beta). A held entry is examined again
at the next switch; no event of its own watches its plane stop holding it (s_j changing sign).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from flowsim.field import surfaces

#: an entry within this fraction of 1 + max |theta| of its plane is on it (``filippov.classify``'s rule)
ON_PLANE = 1e-8
#: the one-sided sliding fields are probed this fraction of 1 + max |theta| off the plane
PROBE = 1e-8
#: one-sided fields whose sum is within this fraction of their sizes are mirror images (``filippov._mirror_on_plane``)
MIRROR = 1e-6


class Planes(NamedTuple):
    """The state after the entries on their planes were settled: ``theta``, ``sigma``, ``pinned``, ``sliding`` (the
    entries sliding on surfaces, without those now held) and ``changed`` (whether any entry was held or let go)."""

    theta: np.ndarray
    sigma: np.ndarray
    pinned: np.ndarray
    sliding: np.ndarray
    changed: bool


def settle(vf, theta, Z, rho, sigma, pinned, sliding) -> Planes:
    """Entries of the coordinates sliding on their surfaces (``sliding``) that sit on their own switching planes,
    held there or not: held where the sliding field points into the plane from both sides (and its two sides are
    mirror images, the rule held entries follow); otherwise set just off the plane, sliding with their coordinate,
    on the side the field carries them to, or, where it points away on both sides, on the side they are on (+ at 0):
    two mirror-image continuations with the same beta (beta_j is even in the entry), the ones discrete sign descent
    takes as its step goes to 0 (tests/test_slide_planes.py)."""
    theta, sigma, pinned, sliding = (np.array(a) for a in (theta, sigma, pinned, sliding))
    slides = np.broadcast_to(sliding.any(axis=0), theta.shape)
    size = 1.0 + float(np.abs(theta).max())
    changed = False
    for k in zip(*np.nonzero(slides & (np.abs(theta) <= ON_PLANE * size))):
        if not _own_plane(vf, theta, k):
            continue
        plus, minus = (_velocity(vf, theta, Z, rho, sigma, pinned, sliding, k, side * PROBE * size) for side in (1, -1))
        if plus < 0 < minus:
            if abs(plus + minus) <= MIRROR * (abs(plus) + abs(minus)) and not pinned[k]:
                theta[k], sigma[k], pinned[k], sliding[k], changed = 0.0, 0.0, True, False, True
            continue
        side = np.sign(plus) if plus * minus > 0 else (-1.0 if theta[k] < 0 else 1.0)
        if pinned[k] or not sliding[k] or np.sign(theta[k]) != side:
            theta[k], pinned[k], sliding[k], changed = side * PROBE * size, False, True, True
    return Planes(theta, sigma, pinned, sliding, changed)


def _own_plane(vf, theta, k) -> bool:
    """The entry's gradient factor dbeta/dw vanishes on its own plane w = 0 (a difference or tied net; in a product
    net it vanishes with the other layers' entries): a switching surface of the entry."""
    on = theta.copy()
    on[k] = 0.0
    return surfaces.layer_signs(vf, on)[k] == 0


def _velocity(vf, theta, Z, rho, sigma, pinned, sliding, k, offset) -> float:
    """The sliding field's component of entry ``k`` with the entry at ``offset`` from its plane, free and sliding
    with its coordinate (its sign there is its side's)."""
    at = theta.copy()
    at[k] = offset
    free, held = sliding.copy(), pinned.copy()
    free[k], held[k] = True, False
    spread = surfaces.spread_of(vf, at, free)
    twin = surfaces.jax_of(vf)
    F, _ = surfaces.evaluate(twin, "field_and_scale", at, Z, rho, sigma, held, spread)
    return float(np.asarray(F)[k])


