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
Jacobian :math:`A = \partial F/\partial\theta` (``FieldJacobian.gradient``), whatever the flow's own field: the
critical points of the loss are its zeros. The flow's field at rho = 0 is that map only where its direction is the
gradient; steepest descent for p = inf, :math:`-\|g\|_1\,\mathrm{sign}(g)`, vanishes with G too, but its
Jacobian there, :math:`-\sigma\,(\partial\|g\|_1/\partial\theta)^\top`, has rank one, so neither Newton's
method nor the spectrum below can be taken from it:

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

**Degenerate critical points.** On a tied or product net an entry can decay to 0 on its invariant plane
with a gradient of higher order in it (:math:`g_k = L w_k^{L-1} r_k` on a tied net of depth L): the
Jacobian is singular there and Newton's method shrinks the entry only by the constant factor
:math:`1 - 1/(L-1)` a step. Such entries (shrunk by one constant factor in (0.3, 0.95) on consecutive
steps, their field exactly 0 on the plane and pointing to it from the side the entry is on) are set to 0
and held there, and Newton's method goes on in the other entries: the limit is a critical point of the
loss restricted to them (:attr:`CriticalPoint.vanishing` names the held entries). A normalised SAM flow is
accepted within its arrival radius of such a point where its field traps it (``_traps``).
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
#: an entry that Newton's steps shrink by one constant factor in this range (to VANISHING_SPREAD, on two steps in a
#: row) is driven to 0 geometrically: its gradient is of order 1/(1 - factor) >= 1.4 in it (1/2: quadratic, 2/3: cubic)
VANISHING_FACTORS = (0.3, 0.95)
VANISHING_SPREAD = 1e-3


@dataclass(frozen=True)
class CriticalPoint:
    """What :func:`find` established at a state: the limit theta* = theta + delta, the remaining
    displacement (error norm of delta, <= 1) and the slowest decay rate (per unit tau)."""

    limit: np.ndarray
    displacement: float  # error norm of limit - state (units of the tolerance)
    decay_rate: float
    of_loss: bool = True  # a critical point of the loss; False: a rest point of the perturbed flow only
    growth_rate: float = 0.0  # > 0: a saddle, left along its unstable directions at this rate per unit tau
    vanishing: np.ndarray | None = None  # (K, d) bool: entries driven to 0 geometrically (a degenerate point)

    @property
    def degenerate(self) -> bool:
        return self.vanishing is not None and bool(self.vanishing.any())


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


def find(vf, theta, Z, rtol, atol, radius=0.0, rho=0.0, sigma=None, flow_rho=0.0):
    """A :class:`CriticalPoint` that ``theta`` has converged to (see the module docstring), or None.

    With ``rho > 0`` a rest point of the perturbed flow itself is looked for first: where the
    evaluation point lands on a critical point (for SAM on a tied net at odd depth, w~_k = 0), the field
    vanishes with theta away from the loss's critical points. Such a rest point can attract from one
    side only (the field vanishes like (w~_k)^(L-1)), so a solver step across it leads to a trajectory
    the exact flow does not take; it is recognised here, before that can happen.

    ``radius`` (:func:`arrival_radius`): a normalised SAM flow is accepted within that distance of a
    minimum, where its field -grad L(theta + rho g/|g|) points into the minimum, provided the
    gradient is linear in theta across that radius (to 10%), the regime where the argument holds, or, with the
    flow's radius ``flow_rho`` > 0, where the rays of its field lead into the minimum (``_traps``).

    ``sigma``: a sign flow's held signs (l_inf-SAM's point theta + rho sigma), for its own rest points."""
    own = rest_point(vf, theta, Z, rtol, atol, rho, sigma) if rho > 0 else None
    cp = own or _newton(vf, theta, Z, _scale(theta, rtol, atol), atol, 0.0, radius, flow_rho=flow_rho)
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


def _newton(vf, theta, Z, scale, atol, rho, radius=0.0, sigma=None, flow_rho=0.0):
    """Newton's method on ``_newton_map`` (rho = 0: the gradient field) from ``theta`` (``_limit``), and
    what its limit is: a :class:`CriticalPoint`, or None where there is none or it is not reached (``radius``,
    ``flow_rho``: see :func:`find`)."""
    field = _newton_map(vf, Z, rho, sigma)
    x, vanishing = _limit(field, theta, scale)
    if x is None:
        return None
    F, A = field(x)
    eig = np.linalg.eigvals(A) if F is not None else np.array([np.inf])
    size = float(np.abs(eig).max(initial=0.0))
    if not np.isfinite(size) or size == 0.0:
        return None
    growth = float(eig.real.max()) if eig.real.max() > 1e-9 * size else 0.0
    offset = np.ravel(x - theta)
    displacement = error_norm(offset, scale)
    if displacement > 1.0 and not (np.linalg.norm(offset) <= radius
                                   and _traps(vf, x, Z, A, radius, flow_rho, ~np.ravel(vanishing))):
        return None
    stable = eig.real[eig.real < -1e-9 * size]
    if not growth:  # below what the solver resolves: entries decaying to 0 are 0 (at a saddle, some grow back)
        x = np.where(np.abs(x) <= atol, 0.0, x)
    return CriticalPoint(limit=x, displacement=displacement, decay_rate=float(-stable.max()) if stable.size else 0.0,
                         of_loss=rho == 0.0, growth_rate=growth, vanishing=vanishing if vanishing.any() else None)


def _newton_map(vf, Z, rho, sigma):
    """theta -> (F, dF/dtheta), the map whose zero Newton's method looks for: at rho = 0 the gradient field -G, whose
    zeros are the loss's critical points for every flow; at rho > 0 the flow's own field there (``sigma``: a sign
    flow's held signs), whose zeros are its own rest points."""
    if rho == 0.0:
        return lambda x: _gradient_field(vf, x, Z)
    return lambda x: _flow_field(vf, x, Z, rho, sigma)


def _limit(field, theta, scale):
    """The limit of Newton's method on ``field`` from ``theta`` (None where it is not reached to the solver's
    tolerance within ``NEWTON_STEPS`` steps, twice that where entries vanish), and the (K, d) bool entries it drives
    to 0 geometrically (``_vanishing``), held at 0 from when they are found while the others go on."""
    x, free, before = theta, np.ones(theta.size, bool), []
    for _ in range(2 * NEWTON_STEPS):
        F, A = field(x)
        if F is None:
            return None, None
        delta = np.zeros(theta.size)
        delta[free] = np.linalg.lstsq(A[np.ix_(free, free)], -F[free], rcond=None)[0]
        if np.linalg.norm(A[free] @ delta + F[free]) > 1e-6 * np.linalg.norm(F[free]) + 1e-300:
            return None, None
        before, x = before + [np.ravel(x)], x + delta.reshape(theta.shape)
        if error_norm(delta, scale) <= 1.0:
            return x, ~free.reshape(theta.shape)
        new = _vanishing(field, theta, before + [np.ravel(x)]) & free
        if new.any():
            free &= ~new
            x = np.where(new.reshape(theta.shape), 0.0, x)
        elif free.all() and len(before) >= NEWTON_STEPS:
            return None, None
    return None, None


def _vanishing(field, theta, iterates):
    """(K d,) bool: entries that the last three Newton ``iterates`` shrank by one constant factor in
    ``VANISHING_FACTORS`` (to 0 geometrically), whose field is exactly 0 with them at 0 (an invariant set: on a
    product net every layer of a coordinate goes to 0 together) and points to 0 with them at their values in
    ``theta``, the others at the last iterate (the loss rises off the plane on the side each entry is on)."""
    if len(iterates) < 3:
        return np.zeros(theta.size, bool)
    a, b, c = iterates[-3:]
    with np.errstate(all="ignore"):
        first, second = b / a, c / b
    low, high = VANISHING_FACTORS
    out = (a != 0) & (b != 0) & (low <= first) & (first <= high) & (np.abs(second - first) <= VANISHING_SPREAD)
    if not out.any():
        return out
    F_on, _ = field(np.where(out, 0.0, c).reshape(theta.shape))
    F_off, _ = field(np.where(out, np.ravel(theta), c).reshape(theta.shape))
    if F_on is None or F_off is None or np.any(F_on[out] != 0.0) or np.any(F_off[out] * np.ravel(theta)[out] >= 0.0):
        return np.zeros(theta.size, bool)
    return out


def _scale(theta, rtol, atol):
    """The solver's error scale at theta, per entry (what a displacement is measured in)."""
    return atol + rtol * np.abs(np.ravel(theta))


def error_norm(v, scale):
    """The RMS of a displacement v in units of the solver's error scale (<= 1: within its tolerance)."""
    return math.sqrt(float(np.mean((v / scale) ** 2)))


def _gradient_field(vf, theta, Z):
    """The gradient field -G = -grad L / e^S at theta (flat) and its exact Jacobian, whatever the flow's field."""
    with np.errstate(all="ignore"):
        G, dG = FieldJacobian(vf).gradient(theta, Z)
    return _finite(-np.ravel(G), -dG)


def _flow_field(vf, theta, Z, rho, sigma=None):
    """The flow's derived field at radius ``rho`` at theta (flat) and its exact Jacobian (``sigma``: a sign flow's
    held signs)."""
    sigma = np.ones_like(theta) if sigma is None else sigma
    with np.errstate(all="ignore"):
        F, _, A, _ = FieldJacobian(vf).field_and_scale(theta, Z, rho, sigma)
    return _finite(np.ravel(F), A)


def _finite(F, A):
    return (F, A) if np.all(np.isfinite(F)) and np.all(np.isfinite(A)) else (None, None)


def _traps(vf, x, Z, A, radius, flow_rho, free):
    """Whether a normalised SAM flow (radius ``flow_rho``) arriving at the minimum x of the loss stays there: where
    the gradient is linear across ``radius`` (``_linear_over``), since its field -rho H eps(u) then points into it;
    otherwise where the rays of its field continued from every stable direction lead into it
    (``rest_points.normalised_minimum_traps``, no linearity assumed). ``free``: the entries not held at 0."""
    from flowsim.integrate import rest_points

    if _linear_over(vf, x, Z, A, radius, free):
        return True
    if flow_rho <= 0.0 or vf.signed:
        return False
    try:
        return rest_points.normalised_minimum_traps(vf, x, Z, flow_rho).is_rest_point
    except ValueError:  # not resolved well enough to tell
        return False


def _linear_over(vf, x, Z, A, radius, free=None):
    """The gradient field at distance ``radius`` from x, along each of a few directions in the ``free`` entries
    (default all), within 10% of its linearisation A v."""
    F0, _ = _gradient_field(vf, x, Z)
    free = np.ones(x.size, bool) if free is None else free
    rng = np.random.default_rng(0)
    for _ in range(4):
        v = np.zeros(x.size)
        v[free] = rng.normal(size=int(free.sum()))
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
    if cp.degenerate:
        from flowsim.integrate.filippov import entry_name

        entries = ", ".join(entry_name(i, j) for i, j in zip(*np.nonzero(cp.vanishing)))
        decaying += (f"; a degenerate critical point: entries {entries} go to 0 on their planes with a gradient of "
                     "higher order in them (held at 0; the rest is a critical point of the loss restricted to them)")
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
    with np.errstate(divide="ignore"):  # log l(0) = -inf: a zero residual adds nothing
        ll = np.asarray(system.numpy.log_l(residuals)).reshape(-1)
    loss = math.exp(float(np.logaddexp.reduce(ll)) - math.log(data.n)) if np.any(np.isfinite(ll)) else 0.0
    worst = f"largest |residual| {np.abs(residuals).max():.3g}"
    held = f"distance to it {cp.displacement:.2g} of the tolerance; the state is held to t1"
    if interpolates(system, data, cp.limit, atol):
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


def interpolates(system, data, theta, atol=0.0) -> bool:
    """Every residual of the regression ``data`` at ``theta`` is 0 to ``INTERPOLATES`` of its terms
    |x_i||beta| + |y_i|, or below what the solver resolves (``atol`` in beta)."""
    beta = np.asarray(system.numpy.beta(theta)).reshape(-1)
    terms = np.abs(data.X) @ (np.abs(beta) + atol / INTERPOLATES) + np.abs(data.y)
    return bool(np.all(np.abs(data.X @ beta - data.y) <= INTERPOLATES * np.maximum(terms, 1e-300)))


@dataclass(frozen=True)
class MinimaAround:
    """The loss around a critical point of a regression, for a normalised perturbation that jumps there."""

    #: the dimension of the normal space: the directions in which the loss curves up (its Hessian's range)
    normal_rank: int
    #: the loss curves down in some direction: a saddle
    saddle: bool
    #: some field of Filippov's set there, -grad L at a perturbed point, has a part along the minima (their
    #: tangent space, the Hessian's null space): the exact flow may move along them; False where the minimum is
    #: isolated, or the fields are all normal (a loss quadratic in theta: the linear model)
    drifts: bool


#: Hessian eigenvalues within this fraction of the largest count as 0 (the tangent space of a set of minima)
FLAT = 1e-8
#: a field's part along the minima above this fraction of it is a drift (O(rho) against the normal part; rounding
#: alone leaves 1e-16)
DRIFT = 1e-6


def minima_around(vf, theta, Z, rho, sigma) -> MinimaAround:
    """What a normalised perturbation meets at the critical point ``theta`` of a regression: the loss Hessian's
    rank and sign, and whether the one-sided fields -grad L(theta~) there, theta~ the perturbed point of a coupling
    X^T w (every sample's +-x_i and 16 random w: the couplings a neighbourhood of the minima gives), all point
    across the minima or some move along them."""
    F, A = _gradient_field(vf, theta, Z)
    eig, vectors = np.linalg.eigh(-(A + A.T) / 2)  # the Hessian (the gradient field's Jacobian is -H)
    scale = max(float(np.abs(eig).max(initial=0.0)), 1e-300)
    saddle, normal = bool(eig.min() < -FLAT * scale), eig > FLAT * scale
    tangent = vectors[:, np.abs(eig) <= FLAT * scale]
    X = vf.features(Z)
    rng = np.random.default_rng(0)
    couplings = [c * x for x in X for c in (1.0, -1.0)] + list(rng.normal(size=(16, X.shape[0])) @ X)
    drifts = False
    for c in couplings if tangent.size else ():
        theta_t, _ = vf.perturbed(theta, c, 0.0, rho, sigma)
        F_t, _ = _gradient_field(vf, np.asarray(theta_t), Z)
        if F_t is None or np.linalg.norm(tangent.T @ F_t) > DRIFT * np.linalg.norm(F_t):
            drifts = True
            break
    return MinimaAround(int(normal.sum()), saddle, drifts)
