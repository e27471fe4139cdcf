r"""Sliding on switching surfaces of sign-dependent flows, any number at once.

A sign-dependent flow (l_inf-SAM, the sign flow) has a field :math:`F(\theta, \sigma)` with
:math:`\sigma = \mathrm{sign}(G)` held piecewise constant. Where the trajectory slides on the surfaces
:math:`G_k = 0` of an *active set* A, the signs of the active entries are replaced by unknowns
:math:`s_A \in [-1, 1]^{|A|}` chosen so that the state stays on every active surface:

.. math::  C_A(s) = \Big(\frac{\partial G}{\partial\theta}\, F_s(\theta)\Big)_A = 0,

a small nonlinear system solved by Newton's method with the Jacobian
:math:`M = (\partial G/\partial\theta)_A\, \partial F_s/\partial s_A` (both by forward-mode autodiff of the
JAX field). The rates are taken in any clock: the clocks only multiply F by a positive scalar. Two
selections of the sliding field :math:`F_s` (:func:`selected_field`):

- ``"control"``, Utkin's equivalent control: :math:`F_s = F(\theta, \sigma_A := s_A)`. The limit of the
  regularised flow :math:`\mathrm{sign}(G) \to \tanh(G/\varepsilon)`.
- ``"convex"``, Filippov's convex combination of the real-time one-sided fields at the sign corners of A,
  with multilinear weights :math:`\prod_k (1 + c_k s_k)/2`. On one surface it is the Filippov solution, the
  limit of a discrete step that chatters across the surface (discrete l_inf-SAM as its step goes to 0);
  on several, Filippov's set has more than one tangent field and this is one choice among them.

They coincide where F is affine in each sign (the sign flow, :math:`F = -s`) and differ where it is not
(l_inf-SAM, :math:`F = -G(\theta + \rho s)`: by 5e-3 in w over one slide at rho = 0.1, tests/test_sliding_control.py).

On a coordinate plane :math:`w_k = 0` of a diagonal network, :math:`G_k` vanishes with :math:`w_k`, the
row of :math:`\partial G_k/\partial\theta` is :math:`(\partial G_k/\partial w_k) e_k`, and the condition
reads :math:`F_{s,k} = 0`: the entry is held on the plane. With mirror-image one-sided fields the convex
selection gives equal weights, the field of ``VectorField.sliding_field_and_scale`` for a pinned entry; the
control selection gives :math:`s_k = 0` for l_inf-SAM (:math:`\tilde w_k = 0`, not :math:`\pm\rho`), a
different field for the other entries.

The kernel (:func:`solve_control`, :func:`sliding_field`) is traceable by JAX with a bounded number of
Newton iterations and fixed shapes (the active set is a mask; a concrete one for ``"convex"``, whose corners
are enumerated), so a jitted field can call it. :func:`equivalent_control` is its diagnostic for NumPy
callers (whether the control exists, is unique, stays in [-1, 1] and attracts, and if not, why), and
:func:`resolve` decides at a switch which entries slide and which leave to which side; both serve as the
independent check of the Utkin selection (tests/test_sliding_control.py).

``flowsim.solve`` integrates the convex selection, per coordinate surface r_j = 0 (all layers of a coordinate
share it), through :mod:`flowsim.field.surfaces`: :func:`switched` gives a sign flow's signs and sliding sets at a
switch (entries whose control reached +-1 leave, ``classify`` settles the crossings, :func:`continuation` finds the
one consistent way on), :func:`filippov_control` judges a sliding mode, and :func:`sliding_rest_point` recognises
a rest point of the sliding field.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from flowsim._jax import jax, jnp
from flowsim.field import surfaces
from flowsim.integrate import slide_planes
from flowsim.integrate.critical import error_norm
from flowsim.integrate.filippov import ON_SURFACE, classify, entry_name
from flowsim.integrate.segment_args import SegmentArgs

#: most Newton iterations of the traced kernel (quadratic convergence: 4-5 from +-1, 2-3 from the previous control)
ITERATIONS = 8
#: Newton stops once its step is below this (s is O(1))
STEP_TOL = 1e-14
#: the control solves the condition when its residual is below this fraction of |dG/dtheta| |F|
RESIDUAL_TOL = 1e-10
#: the condition determines s_A when the smallest singular value of M_AA is above this fraction of its largest
SINGULAR_TOL = 1e-10
#: an s_k this far beyond +-1 (rounding of the Newton iterate) still counts as in the box
BOX_TOL = 1e-9


def _flat_jacobian(fn, x):
    """d fn / dx for arrays of shape (K, d), as a (Kd, Kd) matrix."""
    n = x.size
    return jnp.reshape(jax.jacfwd(fn)(x), (n, n))


def gradient_jacobian(vf, theta, Z):
    """dG/dtheta (Kd, Kd) of the JAX field ``vf``: row k is the normal of the switching surface G_k = 0."""
    return _flat_jacobian(lambda th: vf.direction(th, Z)[0], theta)


def surface_rates(vf, theta, Z, rho, sigma, active=None, selection="control"):
    """dG/dtau (K, d) along the field with signs ``sigma`` (non-integer entries allowed; with ``active``, its
    entries are controls s of ``selection``, :func:`selected_field`): a field with sigma_k = +1 points into the
    surface G_k = 0 where this is negative, with -1 where it is positive."""
    active = np.zeros(np.shape(theta), bool) if active is None else active
    F, _ = selected_field(vf, theta, Z, rho, sigma, active, selection)(sigma)
    return jnp.reshape(gradient_jacobian(vf, theta, Z) @ jnp.reshape(F, (-1,)), jnp.shape(theta))


#: the two ways of sliding (module docstring): the sign replaced by s (Utkin), or the one-sided fields mixed
SELECTIONS = ("control", "convex")


def selected_field(vf, theta, Z, rho, sigma, active, selection="control"):
    """s -> (F, S~): the field with the active entries' signs set by s (K, d) in [-1, 1].

    ``"control"``: the signs are s (Utkin's equivalent control; the limit of sign -> tanh(G/eps)).
    ``"convex"``: the real-time one-sided fields at the 2^|A| sign corners of the active entries, mixed with the
    multilinear weights prod_k (1 + c_k s_k)/2 (Filippov's convex combination, unique on one surface; on several
    the multilinear one among Filippov's); ``active`` must then be concrete (a NumPy mask), the corners being
    enumerated.
    """
    if selection == "control":
        return lambda s: vf.field_and_scale(theta, Z, rho, jnp.where(active, s, sigma))
    if selection != "convex":
        raise ValueError(f"selection must be one of {SELECTIONS}; got {selection!r}.")
    try:
        index = np.flatnonzero(np.asarray(active))
    except jax.errors.TracerArrayConversionError:
        raise ValueError("active must be a concrete NumPy mask for selection='convex' (its corners are "
                         "enumerated): close the jitted field over the segment's active set.") from None
    corners = np.array(list(itertools.product((1.0, -1.0), repeat=index.size)), ndmin=2)  # (2^|A|, |A|)

    def mixed(s):
        flat_s, flat_sigma = jnp.reshape(s, (-1,))[index], jnp.reshape(sigma, (-1,))
        fields, scales, weights = [], [], []
        for corner in corners:
            F, S = vf.field_and_scale(theta, Z, rho, jnp.reshape(flat_sigma.at[index].set(corner), sigma.shape))
            fields.append(F), scales.append(S), weights.append(jnp.prod((1.0 + corner * flat_s) / 2.0))
        scales = jnp.stack(scales)
        top = jnp.max(scales)
        mass = jnp.stack(weights) * jnp.exp(scales - top)  # the real-time fields e^S~ F, weighted
        total = jnp.sum(mass)
        return jnp.tensordot(mass / total, jnp.stack(fields), axes=1), top + jnp.log(total)

    return mixed


def solve_control(vf, theta, Z, rho, sigma, active, iterations=ITERATIONS, selection="control"):
    """Newton's method for the sliding control s_A, traceable by JAX (fixed shapes, at most ``iterations`` steps;
    a ``lax.while_loop``: forward-mode differentiable, as implicit solvers' Jacobians need, not reverse-mode).

    Args:
        vf: the JAX :class:`flowsim.field.vector_field.VectorField` of a sign-dependent flow.
        theta: the state (K, d), on every active surface.
        Z: the data (n, d).
        rho: the radius of the evaluation point.
        sigma: the signs (K, d); its active entries are the Newton start (the previous control, or +-1).
        active: boolean mask (K, d) of the sliding entries.
        iterations: the most Newton iterations.
        selection: ``"control"`` or ``"convex"`` (:func:`selected_field`).

    Returns:
        dict with ``sigma`` (K, d: the signs with the control in the active entries), ``residual`` (K, d: the
        rates dG/dtau there, 0 off A), ``scale`` (|dG/dtheta| |F|, the residual's unit) and ``slope``
        (Kd, Kd: M with rows and columns outside A replaced by the identity times max |M_AA|).
    """
    dG = gradient_jacobian(vf, theta, Z)
    field = selected_field(vf, theta, Z, rho, sigma, active, selection)
    on = jnp.reshape(jnp.asarray(active), (-1,))
    both = on[:, None] & on[None, :]
    eye = jnp.eye(on.size)

    def linearised(s):
        """The rates dG/dtau (Kd,) and their Jacobian M in the signs."""
        return dG @ jnp.reshape(field(s)[0], (-1,)), dG @ _flat_jacobian(lambda x: field(x)[0], s)

    def step(state):
        count, s, _ = state
        rate, M = linearised(s)
        move = jnp.reshape(jnp.linalg.solve(jnp.where(both, M, eye), jnp.where(on, -rate, 0.0)), s.shape)
        finite = jnp.all(jnp.isfinite(move))  # a singular M: keep the iterate, the verdict says why
        return count + 1, jnp.where(finite, s + move, s), jnp.where(finite, jnp.max(jnp.abs(move)), 0.0)

    def going(state):
        count, _, size = state
        return (count < iterations) & (size > STEP_TOL)

    _, s, _ = jax.lax.while_loop(going, step, (0, jnp.asarray(sigma, dtype=float), jnp.inf))
    rate, M = linearised(s)
    top = jnp.max(jnp.where(both, jnp.abs(M), 0.0))
    return {
        "sigma": s,
        "residual": jnp.where(active, jnp.reshape(rate, s.shape), 0.0),
        "scale": jnp.max(jnp.abs(dG)) * jnp.max(jnp.abs(field(s)[0])),
        "slope": jnp.where(both, M, eye * jnp.where(top > 0, top, 1.0)),
    }


def sliding_field(vf, theta, Z, rho, sigma, active, iterations=ITERATIONS, selection="control"):
    """F = dtheta/dtau and the log scale S~ while sliding on the active surfaces (see :func:`solve_control`;
    traceable by JAX). Entries of ``sigma`` outside ``active`` are used as they are."""
    control = solve_control(vf, theta, Z, rho, sigma, active, iterations, selection)["sigma"]
    return selected_field(vf, theta, Z, rho, sigma, active, selection)(control)


@dataclass(frozen=True)
class EquivalentControl:
    """The equivalent control at one state, and whether the sliding mode it defines holds.

    ``sigma``: the signs with the control in the active entries (K, d); ``control``: the active entries'
    values in mask order; ``residual``: the largest |dG_A/dtau| left, relative to |dG/dtheta| |F|;
    ``exists``: Newton converged; ``unique``: the condition's Jacobian in s_A is nonsingular (the control is
    locally unique); ``in_box``: every |s_k| <= 1; ``attracting``: the surfaces pull the state back (M_AA has a
    negative diagonal and eigenvalues with negative real parts, so the regularised flow settles on the
    control); ``reason``: None where the sliding mode holds, else what fails, in words."""

    sigma: np.ndarray
    control: np.ndarray
    residual: float
    exists: bool
    unique: bool
    in_box: bool
    attracting: bool
    reason: str | None

    @property
    def holds(self) -> bool:
        """Whether the state slides on every active surface with this control."""
        return self.reason is None


_KERNELS: dict = {}


def _jitted(fn, vf, selection, active):
    """``fn(vf, theta, Z, rho, sigma, active, selection)`` jitted as a function of (theta, Z, rho, sigma, active):
    kept per function and field object, and per active set for ``"convex"``, whose corners are enumerated
    (that set is closed over)."""
    key = (fn, id(vf), selection, active.tobytes() if selection == "convex" else None)
    if key not in _KERNELS:
        if selection == "convex":
            fixed = active.copy()
            kernel = jax.jit(lambda th, Z, rho, sg, _: fn(vf, th, Z, rho, sg, fixed, selection))
        else:
            kernel = jax.jit(lambda th, Z, rho, sg, act: fn(vf, th, Z, rho, sg, act, selection))
        _KERNELS[key] = (vf, kernel)
    kernel = _KERNELS[key][1]
    return lambda theta, Z, rho, sigma: {k: np.asarray(v) for k, v in kernel(
        jnp.asarray(theta, dtype=float), jnp.asarray(Z, dtype=float), float(rho), jnp.asarray(sigma, dtype=float),
        jnp.asarray(active)).items()}


def _control(vf, theta, Z, rho, sigma, active, selection):
    return solve_control(vf, theta, Z, rho, sigma, active, selection=selection)


def _rates(vf, theta, Z, rho, sigma, active, selection):
    return {"rates": surface_rates(vf, theta, Z, rho, sigma, active, selection)}


def equivalent_control(vf, theta, Z, rho, sigma, active, selection="control") -> EquivalentControl:
    """Solve for the sliding control on the active surfaces and say whether the sliding mode holds.

    Args:
        vf: the JAX :class:`flowsim.field.vector_field.VectorField` of a sign-dependent flow
            (``flowsim.field.vector_field.jax_field(system, K, d)``).
        theta: the state (K, d), on every active surface G_k = 0.
        Z: the data (n, d).
        rho: the radius of the evaluation point.
        sigma: signs (K, d); the active entries start Newton's method (the previous control, or +-1).
        active: boolean mask (K, d) of the entries sliding on their surfaces.
        selection: ``"control"`` (Utkin's equivalent control, the default) or ``"convex"`` (Filippov's
            multilinear convex combination): :func:`selected_field`.

    Returns:
        An :class:`EquivalentControl`.

    Raises:
        ValueError: ``vf`` is not a JAX field, the shapes disagree, or ``selection`` is unknown.
    """
    if vf.xp is not jnp:
        raise ValueError("vf must be the JAX field of the system (flowsim.field.vector_field.jax_field(system, "
                         "K, d)): the control's Jacobians are taken by autodiff.")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}; got {selection!r}.")
    active = np.asarray(active, dtype=bool)
    if active.shape != (vf.K, vf.d) or np.shape(theta) != (vf.K, vf.d) or np.shape(sigma) != (vf.K, vf.d):
        raise ValueError(f"theta, sigma and active must have the field's shape {(vf.K, vf.d)}; got "
                         f"{np.shape(theta)}, {np.shape(sigma)} and {active.shape}.")
    out = _jitted(_control, vf, selection, active)(theta, Z, rho, sigma)
    return _classify(out, active)


def _classify(out, active) -> EquivalentControl:
    """The verdict on one Newton solve (:func:`solve_control`'s arrays)."""
    sigma = out["sigma"]
    control = sigma[active]
    where = [entry_name(*k) for k in zip(*np.nonzero(active))]
    residual = float(np.max(np.abs(out["residual"]))) / max(float(out["scale"]), 1e-300)
    on = active.reshape(-1)
    return _judged(sigma, control, residual, out["slope"][np.ix_(on, on)], where)


class _Spectrum(NamedTuple):
    """What the verdict on a sliding mode reads of the slope M of its condition: its singular values (largest
    first), its diagonal and its eigenvalues."""

    singular: np.ndarray
    diagonal: np.ndarray
    eigen: np.ndarray


def _spectrum(M) -> _Spectrum:
    """The :class:`_Spectrum` of M (one singular value 1 and no eigenvalues where M is empty)."""
    singular = np.linalg.svd(M, compute_uv=False) if M.size else np.ones(1)
    return _Spectrum(singular, np.diag(M), np.linalg.eigvals(M) if M.size else np.zeros(0))


def _reason(where, control, residual, spectrum: _Spectrum, unique, exists, in_box):
    """Why the sliding mode on ``where`` does not hold (None where it does)."""
    entries = ", ".join(where)
    singular, diagonal, eigen = spectrum.singular, spectrum.diagonal, spectrum.eigen
    if not unique:
        rank = int(np.sum(singular > SINGULAR_TOL * singular[0]))
        return (f"the sliding mode on the surfaces G = 0 of {entries} is ambiguous: the rates of their G do not "
                f"determine the signs (the Jacobian of d/dtau G_A in s_A has rank {rank} of {len(where)}, "
                f"smallest singular value {singular[-1]:.3g} of {singular[0]:.3g}), so no unique equivalent control")
    if not exists:
        return (f"no equivalent control holds the state on the surfaces G = 0 of {entries}: Newton's method left "
                f"a residual {residual:.3g} (relative) after at most {ITERATIONS} iterations")
    if not in_box:
        k = int(np.argmax(np.abs(control)))
        return (f"the control that holds the surfaces G = 0 of {entries} needs s = {control[k]:.6g} for {where[k]}, "
                f"outside [-1, 1]: the one-sided fields of that entry do not both point into its surface "
                "(it leaves the surface)")
    repelling = [w for w, m in zip(where, diagonal) if m >= 0]
    if repelling:
        return (f"the surface G = 0 of {', '.join(repelling)} repels: its rate grows with its own sign "
                "(the one-sided fields point away from it), so the sliding mode is not an attracting one")
    if np.any(eigen.real >= 0):
        worst = eigen[np.argmax(eigen.real)]
        return (f"the sliding mode on the intersection of the surfaces G = 0 of {entries} is unstable: the "
                f"Jacobian of their rates in s_A has an eigenvalue {worst:.3g} with real part >= 0")
    return None


#: at most this many surfaces reached at one instant are resolved (3^n configurations are tried, 729 at most)
JOINT = 6


@dataclass(frozen=True)
class Resolution:
    """How the trajectory continues from a state where the ``candidates`` lie on their surfaces G_k = 0.

    ``sigma``, ``active``: the signs (controls on the active entries) and the new active set, where exactly one
    configuration is consistent; ``reason``: None then, else why none or several are (the run must stop)."""

    sigma: np.ndarray
    active: np.ndarray
    reason: str | None


def resolve(vf, theta, Z, rho, sigma, active, candidates, selection="control") -> Resolution:
    """Which candidates slide and which leave to which side, at a switch (an entry reaching its surface).

    Every assignment of the candidates to "slide", "+1" or "-1" is tried: it is consistent where the control of
    the sliding ones holds (:func:`equivalent_control`) and each leaving entry's G moves to its side along the
    field so made. Exactly one consistent assignment is the continuation; none, or several (a repelling surface
    has two), end the run with the reason.

    Args:
        vf: the JAX field (:func:`equivalent_control`).
        theta: the state (K, d), on the candidates' surfaces.
        Z: the data (n, d).
        rho: the radius of the evaluation point.
        sigma: signs (K, d), controls on the active entries (the Newton start).
        active: boolean mask (K, d): the entries sliding before the switch.
        candidates: boolean mask (K, d): the entries on their surfaces now (active ones and those just reached).
        selection: ``"control"`` or ``"convex"`` (:func:`selected_field`).

    Returns:
        A :class:`Resolution`.
    """
    sigma, active, candidates = (np.asarray(a) for a in (sigma, active, candidates))
    index = list(zip(*np.nonzero(candidates)))
    names = ", ".join(entry_name(*k) for k in index)
    if len(index) > JOINT:
        return Resolution(sigma, active, f"{len(index)} entries ({names}) are on their switching surfaces at once; "
                                         f"at most {JOINT} are resolved")
    consistent = []
    for choice in itertools.product(("slide", 1.0, -1.0), repeat=len(index)):
        trial_sigma = sigma.astype(float).copy()
        for k, c in zip(index, choice):
            if c != "slide":
                trial_sigma[k] = c
        trial_active = _active_of(active, candidates, index, choice)
        leaving = [(k, c) for k, c in zip(index, choice) if c != "slide"]
        found = _consistent(vf, theta, Z, rho, trial_sigma, trial_active, leaving, selection)
        if found is not None:
            consistent.append((choice, found))
    if len(consistent) == 1:
        choice, signs = consistent[0]
        return Resolution(signs, _active_of(active, candidates, index, choice), None)
    if not consistent:
        return Resolution(sigma, active, f"no continuation at the switch of {names}: no choice of sliding and leaving "
                                         "sides is consistent (a sliding mode that leaves [-1, 1] or repels, "
                                         "with every side pointing back)")
    ways = "; ".join(", ".join(f"{entry_name(*k)} {c if c == 'slide' else f'{c:+.0f}'}" for k, c in zip(index, ch))
                     for ch, _ in consistent)
    return Resolution(sigma, active, f"the switch of {names} has {len(consistent)} consistent continuations ({ways}): "
                                     "the forward solution is not unique (a repelling surface or an ambiguous junction)")


def _active_of(active, candidates, index, choice):
    """The active set after ``choice`` (one of "slide", +1, -1 per candidate)."""
    out = active & ~candidates
    for k, c in zip(index, choice):
        out[k] = c == "slide"
    return out


def _consistent(vf, theta, Z, rho, sigma, active, leaving, selection):
    """The signs (controls on ``active``) where this choice is consistent, else None: the control on ``active``
    holds and each entry of ``leaving``, (entry, side) pairs, moves to its side."""
    if active.any():
        control = equivalent_control(vf, theta, Z, rho, sigma, active, selection)
        if not control.holds:
            return None
        sigma = control.sigma
    if leaving:
        rates = _jitted(_rates, vf, selection, np.asarray(active, dtype=bool))(theta, Z, rho, sigma)["rates"]
        if not all(c * rates[k] > 0 for k, c in leaving):
            return None
    return sigma


def filippov_control(vf, theta, Z, rho, sigma, pinned, active) -> EquivalentControl:
    """The Filippov control (:mod:`flowsim.field.surfaces`, the selection ``solve`` integrates) on the surfaces
    of the entries in ``active`` (one per coordinate) and whether the sliding mode holds, for a NumPy field
    (through its JAX twin) or a JAX one. ``control`` and the verdict are per surface; ``sigma`` has the active
    entries' signs set to their share of it (sign(dbeta/dw) s)."""
    twin = surfaces.jax_of(vf)
    spread = surfaces.spread_of(vf, theta, active)
    out = surfaces.evaluate(twin, "control", theta, Z, rho, sigma, pinned, spread)
    signs = np.where(np.any(spread != 0, axis=0), out["s"] @ spread, np.ravel(sigma)).reshape(np.shape(theta))
    where = [f"coordinate {j + 1}" for j in np.flatnonzero(np.asarray(active).any(axis=0))]
    residual = float(np.max(np.abs(out["residual"]), initial=0.0))
    return _judged(signs, out["s"], residual, out["slope"], where)


def _judged(sigma, control, residual, M, where) -> EquivalentControl:
    """The verdict on a control and the slope M of its condition."""
    spectrum = _spectrum(M)
    unique = bool(spectrum.singular[-1] > SINGULAR_TOL * spectrum.singular[0])
    exists = bool(np.all(np.isfinite(control)) and residual <= RESIDUAL_TOL)
    in_box = bool(np.all(np.abs(control) <= 1 + BOX_TOL))
    attracting = bool(np.all(spectrum.diagonal < 0) and np.all(spectrum.eigen.real < 0))
    reason = _reason(where, control, residual, spectrum, unique, exists, in_box)
    return EquivalentControl(sigma, control, residual, exists, unique, in_box, attracting, reason)


def continuation(vf, theta, Z, rho, sigma, pinned, active, candidates) -> Resolution:
    """How a sign flow continues from a state where the ``candidates`` lie on their switching surfaces, with the
    entries of ``active`` sliding on theirs: :func:`resolve`'s search over sliding and leaving sides, per surface
    (a coordinate's entries share one: ``surfaces.spread_of``), judged on Filippov's convex combination
    (:func:`filippov_control`), the field ``solve`` integrates. At most ``surfaces.MOST`` surfaces at once for a field
    not affine in the signs, and ``JOINT`` reached at one instant."""
    slope = surfaces.layer_signs(vf, theta)
    free = ~np.asarray(pinned) & (slope != 0)
    sigma, active, columns = _junction(vf, theta, Z, sigma, active, candidates, free)
    staying = np.setdiff1d(np.flatnonzero(active.any(axis=0)), columns)
    # none reached: the switch is of the surfaces slid on (their control left the box, or stopped holding)
    names = ", ".join(f"coordinate {j + 1}" for j in (columns if len(columns) else staying))
    corners = not vf.affine_in_sign  # Filippov's average over 2^m sign corners (``surfaces.control``)
    if len(columns) > JOINT or (corners and len(staying) + len(columns) > surfaces.MOST):
        most = f"at most {surfaces.MOST} at once are followed for a field not affine in the signs" if corners else \
            f"at most {JOINT} reached at the same instant are resolved"
        return Resolution(sigma, active, f"{len(staying) + len(columns)} switching surfaces (of {names}, and those "
                                         f"slid on already) at once; {most}")
    twin = surfaces.jax_of(vf)
    consistent = []
    for choice in itertools.product(("slide", 1.0, -1.0), repeat=len(columns)):
        trial_sigma, trial_active = sigma.astype(float).copy(), active.copy()
        for j, c in zip(columns, choice):
            trial_active[:, j] = free[:, j] if c == "slide" else False
            if c != "slide":
                trial_sigma[:, j] = np.where(free[:, j], c * slope[:, j], trial_sigma[:, j])
        if trial_active.any():
            verdict = filippov_control(vf, theta, Z, rho, trial_sigma, pinned, trial_active)
            if not verdict.holds:
                continue
            trial_sigma = verdict.sigma
        leaving = [(j, c) for j, c in zip(columns, choice) if c != "slide"]
        if leaving:
            spread = surfaces.spread_of(vf, theta, trial_active)
            rates = surfaces.evaluate(twin, "rates", theta, Z, rho, trial_sigma, pinned, spread)
            # the side c of coordinate j: each of its free entries' G moves to its sign c sign(dbeta/dw)
            if not all(np.all(c * slope[free[:, j], j] * rates[free[:, j], j] > 0) for j, c in leaving):
                continue
        consistent.append((choice, trial_sigma, trial_active))
    if len(consistent) == 1:
        _, signs, now = consistent[0]
        return Resolution(signs, now, None)
    if not consistent:
        return Resolution(sigma, active, f"no continuation at the switch of {names}: no choice of sliding and leaving "
                                         "sides is consistent (a sliding mode whose control leaves [-1, 1], is not "
                                         "unique or repels, with every side pointing back)")
    ways = "; ".join(", ".join(f"coordinate {j + 1} {c if c == 'slide' else f'{c:+.0f}'}" for j, c in zip(columns, ch))
                     for ch, _, _ in consistent)
    return Resolution(sigma, active, f"the switch of {names} has {len(consistent)} consistent continuations ({ways}): "
                                     "the forward solution is not unique (a repelling surface or an ambiguous junction)")


def _junction(vf, theta, Z, sigma, active, candidates, free):
    """The coordinates among the ``candidates`` on their switching surface r_j = 0, the only ones with a side to
    choose, and the signs and active set with the others settled. A coordinate is on it where one of its free
    entries (not held on its plane, with a factor dbeta_j/dw_lj != 0) is a candidate and r_j is 0 (``ON_SURFACE``).
    A candidate entry held on its plane has G = 0 with its factor, not with r_j: that is the plane's switching
    surface, not the coordinate's; and an entry whose factor is tiny has a tiny G whatever r_j. Such coordinates
    keep the side of their G, and enumerating them would add choices that differ in nothing (no free entry) or
    that the state cannot take (a side against sign(r_j))."""
    sigma, active, candidates = (np.array(a) for a in (sigma, active, candidates))
    r = np.abs(np.asarray(vf.couplings(np.asarray(theta, float), Z)[3]))
    G = np.asarray(vf.direction(np.asarray(theta, float), Z)[0])
    columns = []
    for j in np.flatnonzero(candidates.any(axis=0)):
        if (candidates[:, j] & free[:, j]).any() and r[j] <= ON_SURFACE * float(r.max()):
            columns.append(j)
            continue
        active[:, j] = False
        sigma[:, j] = np.where(free[:, j] & (G[:, j] != 0), np.sign(G[:, j]), sigma[:, j])
    return sigma, active, np.array(columns, dtype=int)


class SignState(NamedTuple):
    """A sign flow's discrete state after a switch: ``sigma`` (controls on the entries sliding on surfaces),
    ``pinned`` (held on planes), ``theta``, ``surfaces`` (sliding on G_k = 0), ``problem`` (None, or why the
    flow cannot be continued: the run ends "chattering" with it) and ``reached`` (the entries at their
    surfaces at the switch, sliding or arriving: where a flow that cannot be continued may have come to rest)."""

    sigma: np.ndarray
    pinned: np.ndarray
    theta: np.ndarray
    surfaces: np.ndarray
    problem: str | None
    reached: np.ndarray


#: an active entry whose control is this close to +-1 leaves its surface (the ``slide_exit`` event's root)
EXIT_TOL = 1e-6


def switched(vf, theta, Z, rho, sigma, pinned, sliding_now) -> SignState:
    """The signs and sliding sets from a state at a switch (or the start): entries leaving their surfaces (their
    control at +-1, whichever event fired), sides chosen for the entries reaching theirs (``classify``), and,
    where anything slides on a surface, the Filippov continuation (:func:`continuation`)."""
    sigma, sliding_now = np.array(sigma, dtype=float), np.array(sliding_now, dtype=bool)
    leaving = np.zeros_like(sliding_now)
    if sliding_now.any():
        # a leaving entry's side is its control's: its G is tangent there, so it is left alone here (its sign is
        # examined again once |G_k| has grown: the switch event's SETTLE rule)
        control = filippov_control(vf, theta, Z, rho, sigma, pinned, sliding_now)
        columns = np.flatnonzero(sliding_now.any(axis=0))
        leaving = sliding_now & np.isin(np.arange(sliding_now.shape[1]), columns[np.abs(control.control) >= 1 - EXIT_TOL])
        sigma = np.where(leaving, np.sign(control.sigma), sigma)
        sliding_now &= ~leaving
    inside = pinned & sliding_now.any(axis=0)  # held inside a slide: their G_k ~ 0 with r_j, no probe tells a side
    spread = surfaces.spread_of(vf, theta, sliding_now) if sliding_now.any() else None
    signs = classify(vf, theta, Z, rho, sigma, pinned, sliding_now | leaving | inside, spread=spread)
    if not (signs.sliding.any() or sliding_now.any()):
        return SignState(signs.sigma, signs.pinned, signs.theta, sliding_now, None, sliding_now)
    found = continuation(vf, signs.theta, Z, rho, signs.sigma, signs.pinned, sliding_now, signs.sliding)
    if found.reason is not None and sliding_now.any():  # the entries sliding already may stop here too
        found = continuation(vf, signs.theta, Z, rho, signs.sigma, signs.pinned, np.zeros_like(sliding_now),
                             signs.sliding | sliding_now)
    reached = signs.sliding | sliding_now
    if found.reason is not None:
        return SignState(found.sigma, signs.pinned, signs.theta, found.active, found.reason, reached)
    planes = slide_planes.settle(vf, signs.theta, Z, rho, found.sigma, signs.pinned, found.active)
    if planes.changed:  # entries held on their planes or let go: the control of the rest, judged again
        found = continuation(vf, planes.theta, Z, rho, planes.sigma, planes.pinned, planes.sliding,
                             np.zeros_like(reached))
    return SignState(found.sigma, planes.pinned, planes.theta, found.active, found.reason, reached)


#: Newton steps toward a rest point of the sliding field
REST_STEPS = 8


def sliding_rest_point(vf, theta, at: SegmentArgs, active, scale, within=1.0) -> np.ndarray | None:
    """The rest point of the sliding field (the one-sided fields balancing on the active surfaces with every
    other entry at rest) that ``theta`` has converged to, or None: Newton's method on F = 0 with F's exact
    Jacobian (forward-mode, through the Newton solve of the control), accepted where the step left is within
    the solver's tolerance (``scale``: atol + rtol |theta| per entry), the rest point within ``within`` times that
    tolerance of theta, no direction grows and the control stays in the box. ``at``: the data, rho, signs and
    pinned entries the field is evaluated with (the first fields of a segment's arguments)."""
    Z, rho, sigma, pinned = at.Z, at.rho, at.sigma, at.pinned
    twin = surfaces.jax_of(vf)
    spread = surfaces.spread_of(vf, theta, active)
    shape = np.shape(theta)

    def build():
        def field(th, Z, rho, sigma, pinned, spread):
            return jnp.reshape(surfaces.field_and_scale(twin, jnp.reshape(th, shape), Z, rho, sigma, pinned,
                                                         spread)[0], (-1,))
        return lambda th, *rest: (field(th, *rest), jax.jacfwd(field)(th, *rest))

    kernel = surfaces.compiled(twin, ("rest", shape), build)
    args = (np.asarray(Z, np.float64), np.float64(rho), np.asarray(sigma, np.float64), np.asarray(pinned, bool),
            spread)
    x = np.ravel(np.asarray(theta, float))
    for _ in range(REST_STEPS):
        F, J = (np.asarray(a) for a in kernel(x, *args))
        if not (np.all(np.isfinite(F)) and np.all(np.isfinite(J))):
            return None
        delta = np.linalg.lstsq(J, -F, rcond=None)[0]
        if error_norm(delta, np.ravel(scale)) <= 1.0:
            break
        x = x + delta
    else:
        return None
    # x and x + delta are the same point to the solver's resolution: either may be where the control is singular
    for limit in (x + delta, x):
        if error_norm(limit - np.ravel(theta), np.ravel(scale)) <= within and _attracting_rest(kernel, limit, args):
            control = surfaces.evaluate(twin, "control", limit.reshape(shape), Z, rho, sigma, pinned, spread)["s"]
            if np.all(np.abs(control) <= 1.0):
                return limit.reshape(shape)
    return None


def _attracting_rest(kernel, x, args) -> bool:
    """No direction of the sliding field grows at x (and its Jacobian there is not 0)."""
    eig = np.linalg.eigvals(np.asarray(kernel(x, *args)[1]))
    size = float(np.abs(eig).max(initial=0.0))
    return size > 0.0 and eig.real.max() <= 1e-9 * size
