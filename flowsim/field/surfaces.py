r"""The field of a sign flow while entries slide on their switching surfaces :math:`G_k = 0`.

A sign-dependent flow (l_inf-SAM, the sign flow, steepest descent in l_inf) has a field
:math:`F(\theta, \sigma)` with :math:`\sigma = \mathrm{sign}(G)`. Where the one-sided fields on both sides of
a surface :math:`G_k = 0` point into it, the trajectory slides on it. On the surfaces of an active set A
(m of them: at most ``MOST``, or any number for a field affine in the signs, below) its Filippov velocity is
a convex combination of the real-time one-sided fields at the :math:`2^m` sign corners :math:`c \in \{\pm 1\}^m` of A,

.. math::  \dot\theta = \frac{\sum_c w_c(s)\, e^{S_c} F_c}{\sum_c w_c(s)\, e^{S_c}},\qquad
           w_c(s) = \prod_{k \in A} \frac{1 + c_k s_k}{2},

with the control :math:`s \in [-1, 1]^m` chosen so that the state stays on every active surface:
:math:`\sum_c w_c(s)\, e^{S_c - \max S}\,\big((\partial G/\partial\theta\, F_c)_A + \gamma G_A\big) = 0`, a
multilinear system of m equations solved by Newton's method (linear for m = 1: Filippov's formula). The term
:math:`\gamma G_A` pulls the state back onto the surfaces where integration error moved it off (a rate
comparable with the flow's own: :math:`\gamma = \max_c |(\partial G/\partial\theta\, F_c)_A| / g`, with g the
largest :math:`|G|` off the active surfaces, or, where every such entry rests on its plane with G = 0, the change
of :math:`G_A` while the state moves by its own size, and g at least ``ROUNDING_FLOOR`` of that change, where
entries still decaying to their planes make it tiny; never the rounding left in :math:`G_A` itself, which would
make the pull as strong as the flow).

This is Filippov's convex combination, the limit of a discrete optimizer whose step goes to 0 (docs/theory.md,
"Sliding modes"); on one surface it is the only tangent field in Filippov's set, on several the multilinear
one. The rates :math:`\partial G/\partial\theta\, F_c` are forward-mode derivatives of the JAX field; a
NumPy field (scipy backends) evaluates this through its JAX twin, compiled once per field and m, so every
backend integrates the same sliding field.

The control leaves the box where an entry stops sliding: :math:`|s_k| \to 1` makes one side's field tangent
to the surface, and the trajectory leaves to that side (the ``slide_exit`` event). Entries held on their
planes w = 0 (``pinned``) keep their own rule (``VectorField.sliding_field_and_scale``) inside each corner.

Where the field is affine in the signs (the sign flow, steepest descent for p = inf: ``Flow.affine_in_sign``),
the multilinear average over the corners is the field at the averaged signs, :math:`F(\theta, s)`, and the
condition is linear in s: m + 1 field evaluations instead of :math:`2^m`, so any number of surfaces is followed.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from flowsim._jax import jax, jnp

#: the most entries sliding on their surfaces at once (2^m one-sided fields per evaluation)
MOST = 4
#: Newton iterations for the control (exact for m = 1; quadratic from 0 for the multilinear m > 1)
NEWTON = 8


def corners(m: int) -> np.ndarray:
    """The 2^m sign corners of m active surfaces, (2^m, m)."""
    return np.array(list(itertools.product((1.0, -1.0), repeat=m)), dtype=float).reshape(2**m, m)


def corner_weights(c, s):
    """The multilinear weights prod_k (1 + c_k s_k) / 2 of the corners ``c`` (2^m, m) at controls s (m,)."""
    return jnp.prod((1.0 + c * s) / 2.0, axis=1)


def layer_signs(vf, theta) -> np.ndarray:
    """sign(dbeta_j/dw_lj) (K, d) at theta, up to one sign for all entries (0 where the entry's factor vanishes:
    it does not switch with its coordinate)."""
    return np.sign(np.asarray(vf.compiled.direction(np.asarray(theta, float), np.ones(vf.d)))).reshape(vf.K, vf.d)


def spread_of(vf, theta, active) -> np.ndarray:
    """The switching surfaces of the entries in ``active`` (K, d), one per coordinate: (m, K d), row k the signs
    sign(dbeta_j/dw_lj) on the active entries of coordinate j, 0 elsewhere. In a diagonal model every layer's
    G_lj = (dbeta_j/dw_lj) r_j vanishes with r_j, so a coordinate's entries share one surface r_j = 0 and switch
    together, with these relative signs; h_k = row_k . G is that surface's function."""
    slope = layer_signs(vf, theta)
    columns = np.flatnonzero(np.asarray(active).any(axis=0))
    spread = np.zeros((columns.size, vf.K * vf.d))
    for k, j in enumerate(columns):
        on = np.zeros((vf.K, vf.d))
        on[:, j] = np.where(active[:, j], slope[:, j], 0.0)
        spread[k] = on.ravel()
    return spread


def one_sided(vf, theta, Z, rho, sigma, pinned, spread):
    """At the sign corners of the active surfaces (``spread``, (m, K d): :func:`spread_of`): the fields F_c
    (2^m, K, d), their log scales S_c (2^m,) and the rates dh/dtau (2^m, m) along them; h (m,) itself, and
    max |G| off the active surfaces."""
    c = jnp.asarray(corners(spread.shape[0]))
    F, S = jax.vmap(lambda corner: vf.sliding_field_and_scale(theta, Z, rho, _signs_at(corner, sigma, spread),
                                                              pinned))(c)
    h = _surface_values(vf, Z, spread)
    h_now, rates = jax.vmap(lambda f: jax.jvp(h, (theta,), (f,)))(F)
    return F, S, rates, h_now[0], _largest_off(vf, theta, Z, spread)


def _signs_at(s, sigma, spread):
    """The signs (K, d) with the entries on the active surfaces set by the per-surface values s (m,) (a corner's
    +-1, or a control), the others kept from ``sigma``."""
    on = jnp.any(spread != 0, axis=0)
    return jnp.reshape(jnp.where(on, s @ spread, jnp.reshape(sigma, (-1,))), jnp.shape(sigma))


def _surface_values(vf, Z, spread):
    """theta -> h (m,): each active surface's function spread_k . G(theta)."""
    return lambda th: spread @ jnp.reshape(vf.direction(th, Z)[0], (-1,))


def _largest_off(vf, theta, Z, spread):
    """max |G| over the entries off the active surfaces ``spread``."""
    on = jnp.any(spread != 0, axis=0)
    return jnp.max(jnp.abs(jnp.where(on, 0.0, jnp.reshape(vf.direction(theta, Z)[0], (-1,)))))


#: the pull's |G| scale is at least this fraction (sqrt of float64's epsilon) of G_A's change over the state's own
#: time: the pull then moves the control by at most ~1e-8 of its range for G_A's rounding
ROUNDING_FLOOR = 1.5e-8


def _pull(unit, F_top, theta, G_off):
    """gamma of the term gamma G_A that pulls the state back onto the surfaces (see the module docstring)."""
    own_size = jnp.max(jnp.abs(theta)) / F_top  # the time the state takes to move by its own size
    own_change = unit * jnp.where(own_size > 0, own_size, 1.0)  # G_A's change while the state moves by its size
    # G_off falls to 0 with entries decaying to their planes (G ~ w^(L-1)); below ROUNDING_FLOOR of G_A's own change
    # the pull would act on the rounding left in G_A (BDF then failed at steps below float spacing)
    G_scale = jnp.where(G_off > 0, jnp.maximum(G_off, ROUNDING_FLOOR * own_change), own_change)
    return unit / jnp.where(G_scale > 0, G_scale, 1.0)


def _newton(condition, m, iterations):
    """The root s (m,) of ``condition`` from s = 0, and the condition's Jacobian there."""
    def step(_, s):
        move = jnp.linalg.solve(jax.jacfwd(condition)(s), -condition(s))
        return jnp.where(jnp.all(jnp.isfinite(move)), s + move, s)  # singular: the verdict says why

    s = jnp.zeros(m)
    if m:  # none active: the one field there is
        s = jax.lax.fori_loop(0, iterations, step, s)
    return s, jax.jacfwd(condition)(s)


def control(vf, theta, Z, rho, sigma, pinned, spread):
    """The sliding control and what judges it (traceable, fixed shapes).

    Returns:
        dict: ``s`` (m,) the control (not clipped: beyond +-1 the sliding mode has ended), ``slope`` (m, m) the
        Jacobian of the condition in s (negative diagonal and eigenvalues with negative real parts: the surfaces
        attract), ``residual`` (m,) the condition left, relative, and ``field``, ``scale``: the Filippov field
        and its log scale at s clipped to the box (past +-1 the field is that side's, where the trajectory goes on).
    """
    if vf.affine_in_sign:
        return _affine_control(vf, theta, Z, rho, sigma, pinned, spread)
    F, S, rates, G_A, G_off = one_sided(vf, theta, Z, rho, sigma, pinned, spread)
    m = spread.shape[0]
    c = jnp.asarray(corners(m))
    unit = jnp.max(jnp.abs(rates), initial=0.0)
    gamma = _pull(unit, jnp.max(jnp.abs(F)), theta, G_off)
    a = jnp.exp(S - jnp.max(S))[:, None] * (rates + gamma * G_A[None, :])  # (2^m, m)

    def condition(s):
        return corner_weights(c, s) @ a

    s, slope = _newton(condition, m, NEWTON)
    field, scale = mixed(F, S, s)
    return {"s": s, "slope": slope, "residual": condition(s) / jnp.where(unit > 0, unit, 1.0), "field": field,
            "scale": scale}


def _affine_control(vf, theta, Z, rho, sigma, pinned, spread):
    """:func:`control` for a field affine in the signs (``VectorField.affine_in_sign``): the multilinear average
    over the corners is then the field at the averaged signs s, and the condition is linear in s. Its cost grows
    with m, not 2^m, so any number of surfaces is followed."""
    def field(s):
        return vf.sliding_field_and_scale(theta, Z, rho, _signs_at(s, sigma, spread), pinned)

    h = _surface_values(vf, Z, spread)
    m = spread.shape[0]
    G_A = h(theta)
    F0 = field(jnp.zeros(m))[0]
    dF = jnp.moveaxis(jax.jacfwd(lambda s: field(s)[0])(jnp.zeros(m)), -1, 0)  # (m, K, d): F = F0 + s . dF
    rate0 = jax.jvp(h, (theta,), (F0,))[1]
    slopes = jax.vmap(lambda f: jax.jvp(h, (theta,), (f,))[1])(dF).T  # (m, m): d rate / ds
    unit = jnp.max(jnp.abs(rate0) + jnp.sum(jnp.abs(slopes), axis=1), initial=0.0)  # the largest over the corners
    gamma = _pull(unit, jnp.max(jnp.abs(F0) + jnp.sum(jnp.abs(dF), axis=0)), theta,
                  _largest_off(vf, theta, Z, spread))

    def condition(s):
        return rate0 + slopes @ s + gamma * G_A

    s, slope = _newton(condition, m, 1)
    field_at, scale = field(jnp.clip(s, -1.0, 1.0))
    return {"s": s, "slope": slope, "residual": condition(s) / jnp.where(unit > 0, unit, 1.0), "field": field_at,
            "scale": scale}


def mixed(F, S, s):
    """The Filippov field and its log scale from the one-sided fields F_c (2^m, K, d) and their log scales S_c at
    controls s (clipped to the box)."""
    c = jnp.asarray(corners(s.shape[0]))
    top = jnp.max(S)
    mass = corner_weights(c, jnp.clip(s, -1.0, 1.0)) * jnp.exp(S - top)
    total = jnp.sum(mass)
    return jnp.tensordot(mass / total, F, axes=1), top + jnp.log(total)


def field_and_scale(vf, theta, Z, rho, sigma, pinned, spread):
    """F = dtheta/dtau and the log scale while sliding on the surfaces ``spread`` (JAX field, traceable)."""
    out = control(vf, theta, Z, rho, sigma, pinned, spread)
    return out["field"], out["scale"]


def exit_margin(vf, theta, Z, rho, sigma, pinned, spread):
    """1 - max_k |s_k|: reaches 0 where the state stops sliding on a surface (the ``slide_exit`` event)."""
    return 1.0 - jnp.max(jnp.abs(control(vf, theta, Z, rho, sigma, pinned, spread)["s"]))


def rates(vf, theta, Z, rho, sigma, pinned, spread):
    """dG/dtau (K, d) along the field while sliding on the surfaces ``spread`` (none: the plain field): where an
    entry is to leave its surface to the side c, c dG_k/dtau > 0 there."""
    F, _ = field_and_scale(vf, theta, Z, rho, sigma, pinned, spread)
    _, rate = jax.jvp(lambda th: vf.direction(th, Z)[0], (theta,), (F,))
    return rate


#: jitted functions per (compiled formulas, shape, name); each entry keeps its field alive (ids stay unique)
_JITTED: dict = {}


def compiled(vf, name, build):
    """``build()`` jitted, kept per field (its compiled formulas and shape) and ``name``."""
    key = (id(vf.compiled), vf.K, vf.d, name)
    if key not in _JITTED:
        _JITTED[key] = (vf.compiled, jax.jit(build()))
    return _JITTED[key][1]


#: the functions ``evaluate`` and ``at`` call by name
FUNCTIONS = {"control": control, "field_and_scale": field_and_scale, "exit_margin": exit_margin, "rates": rates,
             "one_sided": one_sided}


def _compiled(vf, name):
    """One of this module's functions jitted for the JAX field ``vf`` (m follows from the spread's shape)."""
    return compiled(vf, name, lambda: functools.partial(FUNCTIONS[name], vf))


def jax_of(vf):
    """The JAX field of ``vf``: itself, or a NumPy field's twin."""
    return vf if vf.twin is None else vf.twin()


def at(vf, name, theta, Z, rho, sigma, pinned, spread):
    """``name`` for the field ``vf``: traced as it is on a JAX field (inside a compiled solve), evaluated through
    the JAX twin on NumPy arrays for a NumPy field (``evaluate``)."""
    if vf.twin is None:
        return FUNCTIONS[name](vf, theta, Z, rho, sigma, pinned, spread)
    return evaluate(vf.twin(), name, theta, Z, rho, sigma, pinned, spread)


def evaluate(vf, name, theta, Z, rho, sigma, pinned, spread):
    """``name`` (one of ``FUNCTIONS``) on NumPy arrays, through the JAX field
    ``vf`` (a NumPy field's twin); NumPy results."""
    # NumPy arguments: jit moves them in its C++ dispatch (a jnp.asarray each cost more than the evaluation)
    out = _compiled(vf, name)(np.asarray(theta, np.float64), np.asarray(Z, np.float64), np.float64(rho),
                              np.asarray(sigma, np.float64), np.asarray(pinned, bool), np.asarray(spread, np.float64))
    return jax.tree_util.tree_map(np.asarray, out)
