r"""Critical points with a positive loss: a flow that stops, recognised from its linearisation.

Where the model cannot separate the data (a balanced product network from a positive init keeps
:math:`\beta = w^L \ge 0` at even L, docs/theory.md 9), the loss stays bounded away from 0 and the flow
converges to a critical point :math:`\theta^*`. In real time the remaining motion decays like
:math:`e^{-\lambda t}`, so an explicit method in the log-time clock takes steps that shrink like 1/t
and runs into any step budget, while the flow itself has nothing left to do.

It applies to the flows whose rest points are the critical points of the loss
(``flowsim.symbolic.flow.rest_points_are_critical``): GD, USAM and :math:`\ell_p`-SAM with p finite, and to
:math:`\ell_\infty`-SAM, which stops at a minimum where it is a Filippov rest point (:func:`stops_at_minima`;
sign and Adam-proxy directions stop at exact equilibria instead, ``stalled``). The test uses the gradient field :math:`F = -G = -\nabla L/e^S` (O(1)) and its exact
Jacobian :math:`A = \partial F/\partial\theta` (:mod:`flowsim.field.jacobian`), i.e. the derived field at
rho = 0:

1. the Newton step :math:`\delta = -A^{+}F` solves :math:`A\delta = -F` (F lies in the range of A),
2. no eigenvalue of A has a positive real part (beyond rounding): :math:`\theta^* = \theta + \delta`
   is a minimum of the loss on what the model reaches, where GD's linearised motion
   :math:`\theta^* - e^{A\tau}\delta` decays, USAM's too, and l2-SAM, whose field
   :math:`-\nabla L(\theta + \rho\hat g)` does not vanish near it, arrives in finite time and stays
   (a Filippov rest point, like the collapse to 0);
3. the remaining displacement :math:`|\delta|` is below the solver's own tolerance,
   :math:`\| \delta / (atol + rtol|\theta|)\|_{rms} \le 1`: nothing left to resolve.

A flow that only slows down (depth-2 GD on separable data, whose direction moves like a power of
1/log t) fails (3) by orders of magnitude: there F is O(|theta|) in the tau clock and the Newton
step is as large as theta itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from flowsim.field.jacobian import FieldJacobian

#: the loss must have stopped decreasing (|change of log L| over the last stretch) before the
#: Jacobian and its spectrum, O((Kd)^3), are computed
LOSS_STILL = 1e-6
#: Newton steps from the state within which the search must reach its limit (to the solver's tolerance)
NEWTON_STEPS = 8


@dataclass(frozen=True)
class CriticalPoint:
    """What :func:`find` established at a state: the limit theta* = theta + delta, the remaining
    displacement (error norm of delta, <= 1) and the slowest decay rate (per unit tau)."""

    limit: np.ndarray
    displacement: float  # error norm of limit - state (units of the tolerance)
    decay_rate: float
    of_loss: bool = True  # a critical point of the loss; False: a rest point of the perturbed flow only
    growth_rate: float = 0.0  # > 0: a saddle, left along its unstable directions at this rate per unit tau


@functools.lru_cache(maxsize=64)
def stops_at_minima(flow) -> bool:
    """Whether a critical point that is a minimum of the loss may stop the flow: the gradient-following
    flows (``rest_points_are_critical``), and SAM with any norm, whose field -grad L(theta + rho P) points into
    a minimum from within rho of it. For l_inf-SAM (P = sign(g)) a minimum is a Filippov rest point only where
    0 is in the convex hull of its one-sided fields, which depends on rho: the solve checks that at the point
    (``rest_points.linf_sam_minimum_is_rest_point``). Steepest descent for p = inf too: its field -||g||_1 sign(g)
    vanishes with g, as every p's does."""
    from flowsim.symbolic.directions import Gradient, Steepest
    from flowsim.symbolic.flow import rest_points_are_critical
    from flowsim.symbolic.points import Ascent, Here

    if flow.clock is not None:
        return False
    return (rest_points_are_critical(flow) or (isinstance(flow.point, Ascent) and type(flow.direction) is Gradient)
            or (isinstance(flow.point, Here) and type(flow.direction) is Steepest))


def arrival_radius(flow, size) -> float:
    """How far from a minimum the flow's field stays non-zero: 0 for GD, USAM and SAM with eps > 0 (their
    perturbation vanishes there), the l2 radius of the perturbation ball for normalised SAM (``size`` parameter
    entries); 0 for other points too (ASAM's ball moves with theta): such a flow is never accepted early."""
    from flowsim.symbolic.points import Ascent

    if not isinstance(flow.point, Ascent) or flow.point.vanishes_with_gradient:
        return 0.0
    q = flow.dual_exponent
    return flow.rho * max(1.0, size ** (0.5 - (1.0 - 1.0 / q)))


def find(vf, theta, Z, rtol, atol, radius=0.0, rho=0.0, sigma=None):
    """A :class:`CriticalPoint` that ``theta`` has converged to (see the module docstring), or None.

    With ``rho > 0`` a rest point of the perturbed flow itself is looked for first: where the
    evaluation point lands on a critical point (for SAM on a tied net at odd depth, w~_k = 0), the field
    vanishes with theta away from the loss's critical points. Such a rest point can attract from one
    side only (the field vanishes like (w~_k)^(L-1)), so a solver step across it leads to a trajectory
    the exact flow does not take; it is recognised here, before that can happen.

    ``radius`` (:func:`arrival_radius`): a normalised SAM flow is accepted within that distance of a
    minimum, where its field -grad L(theta + rho g/|g|) points into the minimum, provided the
    gradient is linear in theta across that radius (to 10%), the regime where the argument holds.

    ``sigma``: a sign flow's held signs (l_inf-SAM's point theta + rho sigma), for its own rest points."""
    own = rest_point(vf, theta, Z, rtol, atol, rho, sigma) if rho > 0 else None
    cp = own or _newton(vf, theta, Z, _scale(theta, rtol, atol), atol, 0.0, radius)
    return cp if cp is not None and cp.growth_rate <= 0 else None


def saddle(vf, theta, Z, rtol, atol, radius=0.0):
    """A saddle of the loss that ``theta`` has reached (as :func:`find`, but with unstable directions:
    the exact flow leaves it, along coordinates that are tiny but not 0), or None."""
    cp = _newton(vf, theta, Z, _scale(theta, rtol, atol), atol, 0.0, radius)
    return cp if cp is not None and cp.growth_rate > 0 else None


def rest_point(vf, theta, Z, rtol, atol, rho, sigma=None):
    """A rest point of the flow at radius ``rho`` itself that ``theta`` has converged to, or None.
    With a sign flow's held signs ``sigma`` the field is smooth while they hold, so the rest point
    counts only where sign(G) is still ``sigma`` (it is then a rest point of the Filippov flow too)."""
    cp = _newton(vf, theta, Z, _scale(theta, rtol, atol), atol, rho, sigma=sigma)
    if cp is None or cp.displacement > 1.0 or cp.growth_rate > 0:  # an unstable one is left, not held
        return None
    if sigma is not None and np.any(np.sign(vf.direction(cp.limit, Z)[0]) != sigma):
        return None
    return cp


def _newton(vf, theta, Z, scale, atol, rho, radius=0.0, sigma=None):
    """Newton's method on the field at radius ``rho`` (0: the gradient field) from ``theta``, at most
    ``NEWTON_STEPS`` steps."""
    x = theta
    for _ in range(NEWTON_STEPS):
        F, A = _gradient_field(vf, x, Z, rho, sigma)
        if F is None:
            return None
        delta = np.linalg.lstsq(A, -F, rcond=None)[0]
        if np.linalg.norm(A @ delta + F) > 1e-6 * np.linalg.norm(F) + 1e-300:
            return None
        x = x + delta.reshape(theta.shape)
        if error_norm(delta, scale) <= 1.0:
            break
    else:
        return None
    F, A = _gradient_field(vf, x, Z, rho, sigma)
    eig = np.linalg.eigvals(A) if F is not None else np.array([np.inf])
    size = float(np.abs(eig).max(initial=0.0))
    if not np.isfinite(size) or size == 0.0:
        return None
    growth = float(eig.real.max()) if eig.real.max() > 1e-9 * size else 0.0
    offset = np.ravel(x - theta)
    displacement = error_norm(offset, scale)
    if displacement > 1.0 and not (np.linalg.norm(offset) <= radius and _linear_over(vf, x, Z, A, radius)):
        return None
    stable = eig.real[eig.real < -1e-9 * size]
    if not growth:  # below what the solver resolves: entries decaying to 0 are 0 (at a saddle, some grow back)
        x = np.where(np.abs(x) <= atol, 0.0, x)
    return CriticalPoint(limit=x, displacement=displacement, decay_rate=float(-stable.max()) if stable.size else 0.0,
                         of_loss=rho == 0.0, growth_rate=growth)


def _scale(theta, rtol, atol):
    """The solver's error scale at theta, per entry (what a displacement is measured in)."""
    return atol + rtol * np.abs(np.ravel(theta))


def error_norm(v, scale):
    """The RMS of a displacement v in units of the solver's error scale (<= 1: within its tolerance)."""
    return math.sqrt(float(np.mean((v / scale) ** 2)))


def _gradient_field(vf, theta, Z, rho=0.0, sigma=None):
    """The derived field at radius ``rho`` (0: -G = -grad L / e^S) at theta and its exact Jacobian
    (``sigma``: a sign flow's held signs)."""
    sigma = np.ones_like(theta) if sigma is None else sigma
    with np.errstate(all="ignore"):
        F, _, A, _ = FieldJacobian(vf).field_and_scale(theta, Z, rho, sigma)
    F = np.ravel(F)
    return (F, A) if np.all(np.isfinite(F)) and np.all(np.isfinite(A)) else (None, None)


def _linear_over(vf, x, Z, A, radius):
    """The gradient field at distance ``radius`` from x, along each of a few directions, within 10% of
    its linearisation A v."""
    F0, _ = _gradient_field(vf, x, Z)
    rng = np.random.default_rng(0)
    for _ in range(4):
        v = rng.normal(size=x.size)
        v *= radius / np.linalg.norm(v)
        F, _ = _gradient_field(vf, x + v.reshape(x.shape), Z)
        if F is None or np.linalg.norm(F - F0 - A @ v) > 0.1 * np.linalg.norm(A @ v):
            return False
    return True


#: a regression limit interpolates where every residual is below this fraction of its terms |x_i||beta| + |y_i|
INTERPOLATES = 1e-6


def describe(system, data, cp, log10_t, atol=0.0):
    """The message of a solve that converged to ``cp``: limit loss, minimum margin, the coordinates of
    beta that decay to 0 (a regression: whether the limit interpolates, ``describe_regression``, to the
    solver's resolution ``atol``)."""
    if data.is_regression:
        return describe_regression(system, data, cp, log10_t, atol)
    beta = np.asarray(system.numpy.beta(cp.limit)).reshape(-1)
    margins = data.z @ beta
    ll = np.asarray(system.numpy.log_l(margins)).reshape(-1)
    log_loss = float(np.logaddexp.reduce(ll) - math.log(data.n))
    zero = np.nonzero(np.abs(beta) <= 1e-6 * max(float(np.abs(beta).max()), 1e-300))[0] + 1
    decaying = f"coordinates decaying to 0 (1-based): {zero.tolist()}" if zero.size else "no coordinate decays to 0"
    what = "a critical point" if cp.of_loss else \
        "a rest point of the perturbed flow (its evaluation point is a critical point; theta is not)"
    motion = f"the gradient flow's motion there decays at rate >= {cp.decay_rate:.3g} per unit tau" if cp.of_loss \
        else "approached like a power of 1/tau where the rate is 0"
    separation = "the flow does not separate the data from this init" if margins.min() <= 0 else \
        "the data are separated, but the flow stops short of a vanishing loss"
    return (f"converged to {what} at log10 t = {log10_t:.6g}: limit loss {math.exp(log_loss):.6g} > 0, "
            f"minimum margin {margins.min():.6g} ({separation}); "
            f"{decaying}; {motion}; distance to it {cp.displacement:.2g} of the tolerance; the state is held to t1")


def at_zero(vf, theta, Z, atol) -> CriticalPoint | None:
    """A regression run whose parameters fell below the collapse floor has converged to theta = 0 where 0 is a
    critical point no direction leaves (the gradient field vanishes there, as for every model of two or more
    layers and for the linear model where X^T q(-y) = 0, and no eigenvalue of its Jacobian is positive): a limit
    like any other of a regression, its global minimum where y = 0 (describe it with :func:`describe`). None
    otherwise: the run was passing 0, or 0 is a saddle."""
    zero = np.zeros_like(theta)
    F, A = _gradient_field(vf, zero, Z)
    if F is None or np.abs(F).max() > atol:
        return None
    eig = np.linalg.eigvals(A)
    if eig.real.max() > 1e-9 * float(np.abs(eig).max(initial=0.0)):
        return None
    stable = eig.real[eig.real < 0]
    return CriticalPoint(zero, float(np.abs(theta).max() / atol), float(-stable.max()) if stable.size else 0.0)


def describe_regression(system, data, cp, log10_t, atol=0.0):
    """The message of a regression solve that converged to ``cp``: an interpolating global minimum (every residual
    0 to ``INTERPOLATES`` of its terms, or below what the solver resolves, ``atol`` in beta times ||x_i||_1: the
    loss, whose only minimum is a zero residual, is 0 there; targets y = 0 have a limit beta ~ atol), or another
    critical point, with its loss and largest residual, and whether any beta interpolates the data at all (the
    least-squares distance from y to the range of X)."""
    beta = np.asarray(system.numpy.beta(cp.limit)).reshape(-1)
    residuals = data.X @ beta - data.y
    terms = np.abs(data.X) @ (np.abs(beta) + atol / INTERPOLATES) + np.abs(data.y)
    with np.errstate(divide="ignore"):  # log l(0) = -inf: a zero residual adds nothing
        ll = np.asarray(system.numpy.log_l(residuals)).reshape(-1)
    loss = math.exp(float(np.logaddexp.reduce(ll)) - math.log(data.n)) if np.any(np.isfinite(ll)) else 0.0
    worst = f"largest |residual| {np.abs(residuals).max():.3g}"
    held = f"distance to it {cp.displacement:.2g} of the tolerance; the state is held to t1"
    if np.all(np.abs(residuals) <= INTERPOLATES * np.maximum(terms, 1e-300)):
        return (f"converged to an interpolating global minimum at log10 t = {log10_t:.6g}: X beta = y ({worst}, loss "
                f"{loss:.3g}); {held}")
    gap = np.linalg.norm(data.X @ np.linalg.lstsq(data.X, data.y, rcond=None)[0] - data.y)
    why = (f"no beta interpolates these data (y is {gap:.3g} from the range of X: the best fit is a least-squares one)"
           if gap > INTERPOLATES * np.linalg.norm(data.y) else
           "an interpolator exists, but the flow from this init stops short of it (a minimum on what the model "
           "reaches from it)")
    what = "a critical point" if cp.of_loss else "a rest point of the perturbed flow"
    return (f"converged to {what} that does not interpolate at log10 t = {log10_t:.6g}: limit loss {loss:.6g} > 0, "
            f"{worst}; {why}; {held}")
