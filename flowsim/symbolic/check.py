r"""``System.check()``: the compiled field and Jacobian against autodiff of an independently built loss.

The reference shares nothing with the derivation but the user's own rules (the formula for beta, the
loss expression, the point's and the direction's rules): the loss :math:`\frac1n\sum_i l(z_i\cdot\beta)`
is evaluated directly from ``loss.expr`` (no log domain, no couplings), beta from ``model.beta`` entry
by entry, and every derivative is ``jax.grad``; the evaluation point and the field are then assembled
from the rules with those gradients. So a wrong chain rule, log-domain rewrite, coupling or Jacobian
assembly shows up as a disagreement, named by its component.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from flowsim.errors import DerivationError
from flowsim.symbolic.functions import jax_functions
from flowsim.symbolic.loss import M


def _jax(args, e):
    return sp.lambdify(args, e, modules=[jax_functions(), "jax"])


def reference(system, Z, rho, sigma):
    """theta -> (real-time field at theta, g at theta), from autodiff of the direct loss."""
    from flowsim._jax import jax, jnp

    model, loss, flow = system.model, system.loss, system.flow
    w = model.symbols
    beta_fn, loss_fn, q_fn = _jax(w, model.beta), _jax([M], loss.expr), _jax([M], loss.q)
    dbeta_fn = [_jax(w, sp.diff(model.beta, x)) for x in w]
    x = sp.symbols("w G N S rho sigma", real=True)
    point_fn, normed_fn = (_jax(x, e(*x)) for e in (flow.perturbation, flow.normed))
    y = sp.symbols("w dbeta r N P n sigma", real=True)
    field_fn = _jax(y, flow.field(y[0], y[1], y[2], y[4], y[5], y[3], y[6]))
    n, q = Z.shape[0], flow.dual_exponent

    def L(th):
        return jnp.mean(loss_fn(Z @ beta_fn(*th)))

    def parts(th):
        g = jax.grad(L)(th)
        m = Z @ beta_fn(*th)
        S = jnp.log(jnp.mean(q_fn(m)))
        return g, S, m

    def field(th):
        g, S, _ = parts(th)
        G = g / jnp.exp(S)
        N = 1.0 if q is None else jnp.sum(jnp.abs(normed_fn(th, G, 1.0, S, rho, sigma)) ** q) ** (1 / q)
        th_t = th + rho * point_fn(th, G, N, S, rho, sigma)
        _, S_t, m_t = parts(th_t)
        p = q_fn(m_t) / jnp.sum(q_fn(m_t))
        r_t, P_t = p @ Z, (p**2) @ Z**2
        dbeta = jnp.stack([f(*th_t) * jnp.ones_like(th_t[0]) for f in dbeta_fn])
        F = field_fn(th_t, dbeta, r_t, N, P_t, float(n), sigma)
        return jnp.exp(S_t) * F, S_t

    return field, parts


def check(system, data=None, *, points: int = 3, seed: int = 0, rho=None, rtol: float = 1e-8):
    """Compare the compiled gradient direction, field and Jacobian (NumPy and JAX) with the autodiff
    reference at ``points`` random states (on ``data``, or a random 4 x 3 data set). Raises
    :class:`flowsim.DerivationError` naming the component that disagrees; returns the largest relative
    error seen."""
    from flowsim._jax import jax, jnp
    from flowsim.field.jacobian import FieldJacobian
    from flowsim.field.vector_field import jax_field, numpy_field

    if system.loss.is_regression:
        raise ValueError(f"System.check compares margin losses' fields with autodiff; {system.loss.name!r} is a "
                         "regression loss, whose field tests/test_regression_solves.py checks (against the closed-form "
                         "limits and autodiff of the Jacobian).")
    rng = np.random.default_rng(seed)
    Z = data.z if data is not None else rng.normal(size=(4, 3))
    rho = float(system.flow.rho if rho is None else rho)
    K, d = system.model.n_layers, Z.shape[1]
    worst = 0.0
    for _ in range(points):
        theta = rng.uniform(0.3, 1.0, size=(K, d)) * rng.choice([-1.0, 1.0], size=(K, d))
        G, _ = numpy_field(system, K, d).direction(theta, Z)
        sigma = np.sign(G)
        field, parts = reference(system, jnp.asarray(Z), rho, jnp.asarray(sigma))
        g, S, _ = parts(jnp.asarray(theta))
        worst = max(worst, _agree("gradient direction G = grad L / e^S", np.exp(S) * G, g, rtol))
        F_ref, S_ref = field(jnp.asarray(theta))
        for name, vf in (("numpy", numpy_field(system, K, d)), ("jax", jax_field(system, K, d))):
            F, S_t = vf.field_and_scale(theta, Z, rho, sigma)
            worst = max(worst, _agree(f"field ({name})", np.exp(S_t) * np.asarray(F), F_ref, rtol))
        _, S_t, dF, _ = FieldJacobian(numpy_field(system, K, d)).field_and_scale(theta, Z, rho, sigma)
        # d(e^S~ F)/dtheta = e^S~ (dF + F dS~); compare the compiled dF against the reference's
        J_ref = jax.jacfwd(lambda th: field(th)[0] / jnp.exp(field(th)[1]))(jnp.asarray(theta))
        # a field that does not move with theta (sign flows) has a Jacobian of rounding errors: F/|theta| sets its scale
        floor = float(np.max(np.abs(F_ref))) / np.exp(float(S_ref)) / float(np.max(np.abs(theta)))
        worst = max(worst, _agree("Jacobian dF/dtheta", dF, np.reshape(J_ref, (K * d, K * d)), rtol, floor))
    return worst


def _agree(component, got, ref, rtol, floor=1e-300):
    got, ref = np.asarray(got, float), np.asarray(ref, float)
    scale = max(float(np.max(np.abs(ref))), floor)
    err = float(np.max(np.abs(got - ref))) / scale if got.shape == ref.shape else np.inf
    if not err <= rtol:
        raise DerivationError(f"{component} disagrees with autodiff of the loss built independently: largest "
                              f"error {err:.3g} of its scale (tolerance {rtol:g}).", component)
    return err
