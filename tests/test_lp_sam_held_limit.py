"""l3-SAM held near a surface g_k = 0: the exact flow's limits (a regularised smooth flow, eps -> 0, and discrete
SAM, step -> 0) against flowsim's solution, both written here independently of flowsim's engine (JAX gradients,
scipy's Radau, a plain SAM loop).

lp-SAM with 2 < p < inf carries sign(g_k)|g_k/||g||_q|^(q-1) in its ascent step (q - 1 = 1/(p-1)), continuous but not
Lipschitz where g_k = 0. Near such a surface the entry's normalised gradient x = g_k/||g||_q obeys
x' = a - c sign(x)|x|^(1/2) to leading order (c > 0 where the ascent step pulls it back): the flow is drawn to
x* = sign(a)(a/c)^2, a slow manifold near the surface but not on it, where the field is smooth and the flow is
unique. Random case 33 (test_random_slides) is held there from log10 t = 0.6 to 3.45 with |x| from 1e-6 to
6e-5; flowsim (backend auto: a stiff hand-over to BDF) follows it, and both limits converge to it.
"""

import math
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import flowsim as fs

sys.path.insert(0, str(Path(__file__).parent))
from test_random_slides import ending, random_case  # noqa: E402

jax.config.update("jax_enable_x64", True)

SEED = 33
#: a time inside the stretch held near g_2 = 0, and one 200 later (the discrete runs' span)
T_HELD, T_END = 2518.0, 2718.0
Q = 1.5  # the dual exponent of p = 3


def _problem(seed):
    model, flow, data, alpha = random_case(seed)
    assert flow.name == "SAM" and flow.point.norm == 3.0
    Z = jnp.asarray(data.X * data.y[:, None])
    depth, form = model.depth, model.form

    def beta(theta):
        if form == "tied":
            return theta[0] ** depth
        if form == "difference":
            return theta[0] ** depth - theta[1] ** depth
        return jnp.prod(theta, axis=0)

    def loss(theta):
        return jnp.mean(jnp.logaddexp(0.0, -Z @ beta(theta)))

    return model, flow, data, alpha, jax.grad(loss)


def _solve(model, flow, data, alpha, t1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        return fs.solve(fs.derive(model, "logistic", flow), data, alpha, t1=t1, backend="auto")


def _regularised(grad, rho, eps, shape):
    """The l3-SAM field with |G_k| -> sqrt(G_k^2 + eps^2) in the ascent step (G = g/||g||_q): smooth."""
    def field(y):
        theta = y.reshape(shape)
        g = grad(theta)
        G = g / jnp.sum(jnp.abs(g) ** Q) ** (1 / Q)
        return -grad(theta + rho * G * (G**2 + eps**2) ** ((Q - 2) / 2)).ravel()
    return jax.jit(field), jax.jit(jax.jacfwd(field))


def _discrete_sam(grad, rho, theta, eta, span):
    """Discrete l3-SAM, step eta, for span / eta steps from theta."""
    def step(_, th):
        g = grad(th)
        ascent = jnp.sign(g) * jnp.sqrt(jnp.abs(g) / jnp.sum(jnp.abs(g) ** Q) ** (1 / Q))
        return th - eta * grad(th + rho * ascent)
    return np.asarray(jax.jit(lambda th: jax.lax.fori_loop(0, int(round(span / eta)), step, th))(jnp.asarray(theta)))


@pytest.mark.slow
def test_l3_sam_held_near_a_surface_g_k_0_is_the_limit_of_the_regularised_flows():
    model, flow, data, alpha, grad = _problem(SEED)
    sol = _solve(model, flow, data, alpha, T_END)
    start, end = sol.params[0], sol.params[-1]
    g = np.asarray(grad(jnp.asarray(end)))
    held = abs(g[0, 1]) / np.sum(np.abs(g) ** Q) ** (1 / Q)
    assert held < 1e-3  # the case is where it is meant to be: held near g_2 = 0
    errors = []
    for eps in (1e-3, 1e-4, 1e-5):
        field, jacobian = _regularised(grad, flow.rho, eps, start.shape)
        ref = solve_ivp(lambda t, y: np.asarray(field(y)), (0.0, T_END), start.ravel(), method="Radau", rtol=1e-11,
                        atol=1e-14, jac=lambda t, y: np.asarray(jacobian(y)))
        assert ref.success, ref.message
        errors.append(float(np.abs(ref.y[:, -1] - end.ravel()).max()))
    print(f"seed {SEED}, |g_2|/||g||_q = {held:.2g} at t = {T_END}: max |theta_eps - theta_flowsim| for eps = 1e-3, "
          f"1e-4, 1e-5: {', '.join(f'{e:.2g}' for e in errors)}")
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-5


@pytest.mark.slow
def test_l3_sam_held_near_a_surface_g_k_0_is_the_limit_of_discrete_sam():
    model, flow, data, alpha, grad = _problem(SEED)
    start = _solve(model, flow, data, alpha, T_HELD).params[-1]
    end = _solve(model, flow, data, alpha, T_END).params[-1]
    errors = [float(np.abs(_discrete_sam(grad, flow.rho, start, eta, T_END - T_HELD) - end).max())
              for eta in (1e-2, 1e-3, 1e-4)]
    print(f"seed {SEED}, t = {T_HELD} -> {T_END}: max |theta_eta - theta_flowsim| for eta = 1e-2, 1e-3, 1e-4: "
          f"{', '.join(f'{e:.2g}' for e in errors)}")
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-2 * math.sqrt(np.sum(end**2))


def test_an_l3_sam_solve_that_stops_near_g_k_0_says_what_the_exact_flow_does_there():
    """LSODA spends its steps on case 33's stiff manifold near g_2 = 0 (auto and Radau follow it): the message
    names the manifold and the critical point it may be arriving at, not a motion on the surface itself."""
    status, _, message = ending(SEED, "scipy:LSODA")
    assert status == "chattering" and "entries w[layer 1, coordinate 2] are on a surface" in message, message
    assert "stiff manifold next to the surface" in message and "moves along it" not in message, message


def _fully_regularised(grad, rho, eps, shape):
    """l3-SAM's ascent sign(g_k)|g_k|^(q-1)/||g||_q^(q-1) with |g_k| -> sqrt(g_k^2 + eps^2) and ||g||_q^2 ->
    ||g||_q^2 + eps^2: smooth, also where all of g vanishes (USAM with radius rho/eps there)."""
    def field(y):
        theta = y.reshape(shape)
        g = grad(theta)
        ascent = g * (g**2 + eps**2) ** ((Q - 2) / 2) / (jnp.sum(jnp.abs(g) ** Q) ** (2 / Q) + eps**2) ** ((Q - 1) / 2)
        return -grad(theta + rho * ascent).ravel()
    return jax.jit(field), jax.jit(jax.jacfwd(field))


def _at_degenerate_point(seed):
    """flowsim's limit (converged at a degenerate critical point) and its state at a tenth of a decade before."""
    model, flow, data, alpha, grad = _problem(seed)
    sol = _solve(model, flow, data, alpha, 1e30)
    assert sol.status == "converged" and "a degenerate critical point" in sol.message, sol.message
    log10_t = float(sol.message.split("log10 t = ")[1].split(":")[0])
    start = _solve(model, flow, data, alpha, 10 ** (log10_t - 0.1)).params[-1]
    return flow, grad, start, sol.params[-1]


def _compared(seed, ends, label, steps):
    """Errors on the entries flowsim does not hold at 0, and the held entries (which must stay on their sides)."""
    _, _, start, limit = _at_degenerate_point(seed)
    held = limit.ravel() == 0.0
    errors = [float(np.abs(end.ravel() - limit.ravel())[~held].max()) for end in ends]
    left = [float(np.abs(end.ravel()[held]).max()) for end in ends]
    print(f"seed {seed}: max |theta - theta_flowsim| off the held entries for {label} = {steps}: "
          f"{', '.join(f'{e:.2g}' for e in errors)}; the held entries' largest |w| {', '.join(f'{w:.3g}' for w in left)} "
          f"(from {np.abs(start.ravel()[held]).max():.3g})")
    for end in ends:  # on the side each entry started, never across its plane
        assert np.all(end.ravel()[held] * start.ravel()[held] > 0)
    assert left[0] >= left[1] >= left[2] and left[2] < np.abs(start.ravel()[held]).max()  # decaying, faster in the limit
    assert errors[2] <= errors[0] and errors[2] < 1e-6


#: time units the limits are run from a tenth of a decade before flowsim's convergence
SPAN = 100.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [22, 75])
def test_l3_sam_at_a_degenerate_minimum_is_the_limit_of_the_regularised_flows(seed):
    """flowsim holds the decaying entries at 0 and the rest at the critical point of the loss restricted to them: the
    smoothed flows, started before that, keep the decaying entries on their sides (their planes are invariant for
    every eps: the field is Lipschitz and 0 there), decaying faster as eps falls, and the rest stays at flowsim's
    point (22: errors 7.9e-9, 1.7e-9, 8.2e-11; 75: 2.5e-7, 2.5e-7, 2.0e-7, with held entries still 1e-2)."""
    flow, grad, start, _ = _at_degenerate_point(seed)
    ends = []
    for eps in (1e-4, 1e-5, 1e-6):
        field, jacobian = _fully_regularised(grad, flow.rho, eps, start.shape)
        ref = solve_ivp(lambda t, y: np.asarray(field(y)), (0.0, SPAN), start.ravel(), method="Radau", rtol=1e-10,
                        atol=1e-13, jac=lambda t, y: np.asarray(jacobian(y)))
        assert ref.success, ref.message
        ends.append(ref.y[:, -1].reshape(start.shape))
    _compared(seed, ends, "eps", "1e-4, 1e-5, 1e-6")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [22, 75])
def test_l3_sam_at_a_degenerate_minimum_is_the_limit_of_discrete_sam(seed):
    """Discrete l3-SAM from the same state: the decaying entries stay on their sides, faster as the step falls, and
    the rest converges to flowsim's point (22: 3.4e-4, 2.9e-4, 5.6e-7; 75: 1.1e-4, 6.6e-6, 3.4e-7)."""
    flow, grad, start, _ = _at_degenerate_point(seed)
    ends = [_discrete_sam(grad, flow.rho, start, eta, SPAN) for eta in (1e-2, 1e-3, 1e-4)]
    _compared(seed, ends, "eta", "1e-2, 1e-3, 1e-4")
