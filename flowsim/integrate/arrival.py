r"""Entries that reach an invariant plane :math:`w_k = 0` in finite time, and stay there.

Under a gradient-following flow the plane :math:`w_k = 0` of a tied or difference network is invariant
(the entry's field carries :math:`\partial\beta/\partial w_k`, which vanishes there). Where that field is
Lipschitz (GD, USAM, l2-SAM) the plane is approached like :math:`e^{-\lambda t}` and never reached. Where it
vanishes *slower* than linearly it is reached in finite time: :math:`\ell_p`-SAM with p > 2 moves the
evaluation point by :math:`|g_k|^{q-1}` with q - 1 = 1/(p-1) < 1, so at depth 2 the entry obeys
:math:`\dot w \approx -c\,\mathrm{sign}(w)|w|^{1/(p-1)}` and arrives at 0 at a finite time. From there
the exact flow stays on the plane (its field is 0 there), but a solver cannot land on it: the field's
derivative is infinite at 0, and LSODA or Radau dither around it, spending their whole step budget
(one random case in six of l3-SAM).

:func:`arrivals` finds such entries from the field itself, so it holds for any user flow: the entry is
within the solver's resolution of the plane, the plane is invariant (the field is exactly 0 on it), the
field points into it from both sides, and it vanishes sub-linearly (its order of vanishing, measured
between two distances a factor 16 apart, is below :data:`ORDER`), so the remaining time to arrival is
below anything the solver resolves. Such entries are set to exactly 0, where the field keeps them.

The same test about an entry's current value finds a surface the flow is held at (:func:`sliding`): normalised
SAM's field :math:`-\nabla L(\theta + \rho\,\epsilon(g))` is not smooth where a component :math:`g_k` vanishes
(lp-SAM's ascent step carries :math:`|g_k|^{1/(p-1)}`, not Lipschitz there for p > 2; l2's :math:`g/|g|` jumps
where all of g vanishes). Where it points into that surface from both sides without shrinking, the exact flow
follows a stiff manifold next to the surface (lp-SAM: :math:`x = g_k/\|g\|_q` is drawn to
:math:`\mathrm{sign}(a)(a/c)^2`, a its rate on the surface and c the ascent step's pull, not
to 0) or arrives at a critical point of the loss, where the field jumps
(docs/theory.md, "Sliding modes"). A solver there dithers across the surface at steps of the
solver's resolution (Radau spent its 16,384 steps, 48 s, on 1e-4 of a decade in a random depth-3 case);
found at two chunk ends in a row with the loss standing still, it ends the solve
(``handlers._sliding``).
"""

from __future__ import annotations

import math

import numpy as np

#: an entry's field vanishing like |w|^a with a below this reaches the plane in finite time
#: (a = 1 is Lipschitz: exponential approach; l3-SAM at depth 2 has a = 1/2)
ORDER = 0.9
#: the two distances at which the order of vanishing is measured are this factor apart
RATIO = 16.0


#: states evaluated in one call of ``VectorField.fields``: its (states, n) sample weights stay near 16 MB
STATES_PER_CALL = 2**21


def _fields_at(vf, theta, Z, rho, sigma, entries, values):
    """Each entry's own field with that entry (and no other) moved to its value: ``entries`` (layers, coordinates)
    index arrays, ``values`` one per entry; all in a few calls of ``VectorField.fields``."""
    layers, coordinates = entries
    out = np.empty(len(values))
    block = max(1, STATES_PER_CALL // Z.shape[0])
    for start in range(0, len(values), block):
        at = slice(start, start + block)
        rows = np.arange(len(values[at]))
        probes = np.repeat(theta[:, None, :], len(rows), axis=1)
        probes[layers[at], rows, coordinates[at]] = values[at]
        with np.errstate(all="ignore"):
            out[at] = vf.fields(probes, Z, rho, sigma)[layers[at], rows, coordinates[at]]
    return out


def _reached(vf, theta, Z, rho, sigma, entries, centers, deltas):
    """``reached`` for many entries at once (index arrays, with a center and a delta each)."""
    m = len(centers)
    right, left, near = np.split(_fields_at(vf, theta, Z, rho, sigma, tuple(np.tile(i, 3) for i in entries),
                                            np.concatenate([centers + deltas, centers - deltas,
                                                            centers + deltas / RATIO])), [m, 2 * m])
    with np.errstate(all="ignore"):
        ratio = np.where(near != 0, right / np.where(near != 0, near, 1.0), math.inf)
    return (right < 0) & (0 < left) & (0 < ratio) & (ratio < RATIO**ORDER)


def reached(vf, theta, Z, rho, sigma, k, center, delta):
    """Whether entry ``k``'s field points into ``center`` from both sides (probed at ``delta``) while
    vanishing there sub-linearly, so that ``center`` is reached in finite time."""
    entry = (np.array([k[0]]), np.array([k[1]]))
    return bool(_reached(vf, theta, Z, rho, sigma, entry, np.array([center], float), np.array([delta], float))[0])


def arrivals(vf, theta, Z, rho, sigma, planes, tol) -> np.ndarray:
    """(K, d) bool: entries within ``tol`` (a number, or one per entry) of an invariant plane (``planes``:
    per layer) that the field reaches in finite time from both sides (see the module docstring)."""
    tol = np.broadcast_to(np.asarray(tol, float), theta.shape)
    near = (np.abs(theta) <= tol) & (theta != 0) & np.asarray(planes, bool)[:, None]
    entries = np.nonzero(near)
    invariant = _fields_at(vf, theta, Z, rho, sigma, entries, np.zeros(len(entries[0]))) == 0.0
    entries = tuple(i[invariant] for i in entries)
    out = np.zeros_like(near)
    out[entries] = _reached(vf, theta, Z, rho, sigma, entries, np.zeros(len(entries[0])), tol[entries])
    return out


def sliding(vf, theta, Z, rho, sigma, rtol, atol, planes=()) -> np.ndarray:
    """(K, d) bool: entries whose field points into their current value from both sides, a distance of
    the solver's resolution (atol + rtol |w|) away, and does not shrink as that distance does: a
    discontinuity surface the state sits on (see the module docstring). An entry that close to an
    invariant plane (``planes``: per layer) is probed about the plane, the field's own zero: about its
    value, a field vanishing linearly at the plane looked sub-linear (l2-SAM decaying to a critical point
    at rate 2e5: Tsit5 dithered at 1e-12..1e-8 and was called sliding)."""
    planes = np.asarray(planes, bool) if len(planes) else np.zeros(theta.shape[0], bool)
    # every entry is probed: near a critical point all of g is small, and which g_k is "near 0" is not
    # told by its size against max |g| (0.5-1% on two entries sliding together)
    entries = np.nonzero(theta != 0)
    values = theta[entries]
    deltas = atol + rtol * np.abs(values)
    centers = np.where(planes[entries[0]] & (np.abs(values) <= deltas), 0.0, values)
    out = np.zeros(theta.shape, bool)
    out[entries] = _reached(vf, theta, Z, rho, sigma, entries, centers, deltas)
    return out


#: an entry this many atol from its rest plane (``rest_planes``) is set on it: a move below what the solver resolves,
#: above the rounding of theta that steps past the plane (at 100 atol the restart there, at log10 t = 8 of random
#: case 145, failed LSODA's first step)
REST_PLANE_REACH = 0.01


def rest_planes(vf, theta, Z, rho, sigma, free, field) -> np.ndarray:
    """(K, d) bool: the ``free`` entries (neither held nor sliding) that ``field`` (the field integrated, (K, d))
    moves toward the plane where a sign perturbation's evaluation point theta + rho sigma has them at 0,
    theta_k = -rho sigma_k, on which their own field is exactly 0. There the field carries dbeta/dw at the
    evaluation point, which vanishes in a tied, difference or product net: the entry rests on that plane while its
    sign holds, approaches it like a power of 1/t without reaching it, and past it the field runs away (tied depth
    3: (w + rho)' = -3 r (w + rho)^2 for sigma = 1), so a solver that steps past it by rounding, at the large t where
    the entry comes within it, follows a trajectory the flow does not take."""
    out = np.zeros(np.shape(theta), bool)
    if not rho > 0:
        return out
    entries = np.nonzero(np.asarray(free, bool) & (np.abs(sigma) == 1))
    centers = -rho * np.asarray(sigma, float)[entries]
    invariant = _fields_at(vf, theta, Z, rho, sigma, entries, centers) == 0.0
    toward = np.asarray(field)[entries] * (centers - theta[entries]) > 0
    out[tuple(i[invariant & toward] for i in entries)] = True
    return out
