"""Sign switches of sign-dependent flows (l_inf-SAM): which side of each switching surface
G_k = 0 the trajectory takes, and when it slides.

At a switch (or at the start) every entry k with sigma_k G_k ~ 0 is a candidate. The two one-sided
fields (sigma_k = +1 and -1) are probed: a side is *consistent* if moving along its field keeps the
sign of G_k equal to that side's sigma. One consistent side: the trajectory crosses into it. Both:
a repelling surface, the trajectory leaves to the side it was not on. Neither: both fields point
into the surface, a Filippov sliding mode. flowsim integrates sliding on coordinate planes w_k = 0
with mirror-image one-sided fields (what diagonal networks produce): the entry is held at 0 and the
other entries see the average of the two one-sided fields. Any other sliding mode is reported as
status "chattering" rather than integrated wrongly.
"""

from __future__ import annotations

import itertools

import numpy as np


def entry_name(layer, coordinate) -> str:
    """A weight entry in messages, from its 0-based (layer, coordinate) place in theta: both counted from 1, as
    the papers count coordinates (``w[layer 1, coordinate 2]`` for theta[0, 1])."""
    return f"w[layer {int(layer) + 1}, coordinate {int(coordinate) + 1}]"


def classify(vf, theta, Z, rho, sigma, pinned, tol=1e-9):
    """Return ``(sigma, pinned, theta, problem)``; ``problem`` is None or a message."""
    G, _ = vf.direction(theta, Z)
    scale = max(float(np.abs(G).max()), 1.0)  # G can be tiny everywhere (all w -> 0): absolute floor
    sigma = np.where((sigma == 0) & ~pinned, np.sign(G), sigma).astype(float)
    # a coordinate whose data column is all 0 (a blank pixel) has G = 0 whatever theta: sign(0) = 0 holds it, as
    # sign descent by hand does; it is no sliding mode
    idle = np.broadcast_to(~np.any(Z != 0, axis=0), G.shape)
    sigma = np.where(idle, 0.0, sigma)
    cand = (pinned | (sigma * G <= tol * scale)) & ~idle
    if not cand.any():
        return sigma, pinned, theta, None
    Fp, _ = vf.field_and_scale(theta, Z, rho, np.where(cand, 1.0, sigma))
    Fm, _ = vf.field_and_scale(theta, Z, rho, np.where(cand, -1.0, sigma))
    size = 1.0 + float(np.abs(theta).max())
    speed = max(float(np.abs(Fp).max()), float(np.abs(Fm).max()), 1e-300)
    h = 1e-7 * size / speed
    plus_ok = vf.direction(theta + h * Fp, Z)[0] > 0
    minus_ok = vf.direction(theta + h * Fm, Z)[0] < 0
    sigma, pinned, theta = sigma.copy(), pinned.copy(), theta.copy()
    for k in zip(*np.nonzero(cand)):
        if plus_ok[k] and not minus_ok[k]:
            sigma[k], pinned[k] = 1.0, False
        elif minus_ok[k] and not plus_ok[k]:
            sigma[k], pinned[k] = -1.0, False
        elif plus_ok[k] and minus_ok[k]:
            sigma[k], pinned[k] = (-sigma[k] if sigma[k] != 0 else 1.0), False
        else:
            on_plane = abs(theta[k]) <= 1e-8 * size
            mirror = on_plane and _mirror_on_plane(vf, theta, Z, rho, sigma, cand, k)
            if not (on_plane and mirror):
                return sigma, pinned, theta, (
                    f"sliding mode on G = 0 of {entry_name(*k)} away from the "
                    f"plane w = 0 (|w| = {abs(theta[k]):.3g}) or with one-sided fields that are not mirror images"
                )
            sigma[k], pinned[k], theta[k] = 0.0, True, 0.0
    return _jointly(vf, theta, Z, rho, sigma, pinned, cand & ~pinned, h)


def _mirror_on_plane(vf, theta, Z, rho, sigma, cand, k):
    """The one-sided fields of entry k are mirror images on its plane w_k = 0, where it is held: measured
    there, not at the state (a tiny rho makes a w_k of 1e-79 count: w~ = w_k +- rho)."""
    on = theta.copy()
    on[k] = 0.0
    Fp = vf.field_and_scale(on, Z, rho, np.where(cand, 1.0, sigma))[0][k]
    Fm = vf.field_and_scale(on, Z, rho, np.where(cand, -1.0, sigma))[0][k]
    return abs(Fp + Fm) <= 1e-6 * (abs(Fp) + abs(Fm))


#: simultaneous switches of at most this many entries are resolved jointly (2^n probes)
JOINT = 8


def _jointly(vf, theta, Z, rho, sigma, pinned, switching, h):
    """Entries switching together are coupled (a difference net's u_k and v_k mirror each other): the
    sides chosen one by one, each probed with the others on the same side, must also hold together.
    If they do not, every combination of sides is probed; none holding is a sliding mode on the
    intersection of their switching surfaces away from w = 0, which flowsim does not integrate."""
    idx = list(zip(*np.nonzero(switching)))
    if len(idx) < 2 or _holds(vf, theta, Z, rho, sigma, pinned, switching, h):
        return sigma, pinned, theta, None
    if len(idx) <= JOINT:
        for signs in itertools.product((1.0, -1.0), repeat=len(idx)):
            trial = sigma.copy()
            for k, v in zip(idx, signs):
                trial[k] = v
            if _holds(vf, theta, Z, rho, trial, pinned, switching, h):
                return trial, pinned, theta, None
    entries = ", ".join(entry_name(i, j) for i, j in idx)
    return sigma, pinned, theta, (
        f"entries {entries} switch sign together with no combination of sides that "
        "holds: a sliding mode on the intersection of their switching surfaces G = 0, away from the planes w = 0")


def _holds(vf, theta, Z, rho, sigma, pinned, switching, h):
    """Moving along the field with these signs keeps sign(G) equal to them on the switching entries."""
    F, _ = vf.sliding_field_and_scale(theta, Z, rho, sigma, pinned)
    G = vf.direction(theta + h * F, Z)[0]
    return bool(np.all(np.sign(G[switching]) == sigma[switching]))
