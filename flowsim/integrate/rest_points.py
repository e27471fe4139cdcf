r"""Whether a critical point of the loss stops a flow whose field is discontinuous there.

**Normalised perturbations** (l2- and lp-SAM, ASAM, normalised GD: every field that sees the gradient
only through its direction :math:`u = G/\|G\|`). Near a critical point :math:`\theta^*` with
:math:`H = \partial G/\partial\theta` there, :math:`G \approx H x` (:math:`x = \theta - \theta^*`), and
as :math:`x \to 0` the field depends on the direction u alone: :math:`F(u)`, for l2-SAM
:math:`-G(\theta^* + \rho u)`. In the coordinates :math:`y = G` the flow is :math:`\dot y = H F(\hat y)`,
homogeneous of degree 0, so :math:`\|G\|` changes at the rate :math:`\nu(u) = u^\top H F(u)` and the
direction turns along :math:`(I - u u^\top) H F(u)` (per unit :math:`\|G\|`). A *ray* is a direction
where it stops turning, :math:`H F(u) = \nu u`: on it :math:`\|G\|` falls to 0 in finite time when
:math:`\nu < 0` (the critical point traps the flow) and grows when :math:`\nu > 0` (the flow leaves).
A trajectory that reaches a saddle arrives with its unstable components tiny; as its stable part
arrives, its gradient turns towards the unstable directions, so the rays reached from the unstable
eigenvectors of H decide. Where the gradient is linear within rho, l2-SAM's
:math:`F(u) = -\rho H u` makes every eigenvector a ray with :math:`\nu = -\rho\lambda^2 < 0`: every
saddle traps (the ascent overshoots the saddle along its unstable direction, and the descent from
there pulls back); it is passed only where the loss along the unstable direction turns over within
rho: at the threshold :math:`\nu = 0`, so :math:`F(u) = 0` and :math:`\theta^* + \rho u` is a critical point
(for SAM the threshold radius is the distance to the critical point the unstable direction leads to).
Normalised GD (:math:`F = -u`, :math:`\nu = -\lambda > 0`) passes every saddle. The regularised field
:math:`G/\sqrt{\|G\|^2 + \epsilon^2}` is USAM with radius :math:`\rho/\epsilon` where :math:`\|G\| \ll \epsilon`,
stable at a saddle for :math:`\epsilon < \rho|\lambda_-|`: its limit is this decision once :math:`\epsilon` is far
below :math:`\|G\|` on arrival, not for a fixed :math:`\epsilon`.

**l_inf-SAM at a minimum** (:math:`\tilde\theta = \theta + \rho\,\mathrm{sign}(G)`): where G = 0 the
field takes one value per sign pattern :math:`s`, :math:`F_s = -G(\theta^* + \rho s)`; the point is a
Filippov rest point only when 0 lies in their convex hull, decided by a linear program. That is necessary,
not sufficient for the flow to stay: an entry on its plane w = 0 can still be pushed off it (docs/theory.md 9).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

#: a probe x is taken this far from the critical point (relative to its size): G = H x there to O(PROBE), and its
#: rounding (G is a difference of O(1) terms) moves the direction by O(1e-16 / PROBE)
PROBE = 1e-4
#: a ray's turning rate, relative to |lambda| |F| on the unstable direction it is continued from
RAY_TOL = 1e-4
#: Newton steps towards a ray, and the difference step of their Jacobian (in the tangent plane)
RAY_NEWTON = 12
RAY_STEP = 1e-4
#: the step of the central differences that give H (relative to theta's size): rounding 1e-16 / step, truncation
#: step^2
HESSIAN_STEP = 1e-5
#: l_inf-SAM's one-sided fields: at most 2^SIGN_ENTRIES_MAX sign patterns are enumerated
SIGN_ENTRIES_MAX = 16


@dataclass(frozen=True)
class Ray:
    """A direction u of the gradient (unit, flat) along which the flow near the critical point moves
    radially; ``radial_rate`` nu = d|G|/dtau there (< 0: towards the critical point); ``margin``: -nu over
    l2-SAM's linear prediction rho lambda^2 (-nu / |lambda| at rho = 0): 1 where the gradient is linear within
    rho, 0 at the threshold, negative where the flow leaves;
    ``eigenvalue``: that of the unstable direction it was reached from."""

    direction: np.ndarray
    radial_rate: float
    margin: float
    eigenvalue: float


@dataclass(frozen=True)
class SaddleRestPoint:
    """What :func:`normalised_rest_point` decided at a critical point of the loss.

    ``is_rest_point``: the exact flow (the eps -> 0 limit of its regularisation, the step -> 0 limit of the
    optimizer) stays there. ``reason``: that in words. ``eigenvalues``: of H = dG/dtheta there, ascending.
    ``margin``: the smallest ray margin (> 0: trapped). ``escape_direction``: where it is left, the theta
    direction H^+ u of the escaping ray (None when trapped or undecided). ``rays``: the rays examined."""

    is_rest_point: bool
    reason: str
    eigenvalues: np.ndarray
    rho: float
    margin: float
    escape_direction: np.ndarray | None
    rays: tuple[Ray, ...] = field(default_factory=tuple)


def normalised_rest_point(vf, theta, Z, rho) -> SaddleRestPoint:
    """Decide whether the critical point ``theta`` of the loss is a rest point of the normalised-perturbation
    flow ``vf`` (a :class:`flowsim.field.vector_field.VectorField` without signs) at radius ``rho``.

    Args:
        vf: the flow's NumPy vector field (l2/lp-SAM, ASAM, normalised GD, steepest descent for finite p).
        theta: (K, d) a critical point of the loss (G = 0 to rounding: ``critical.saddle(...).limit``).
        Z: (n, d) the signed samples y_i x_i.
        rho: the flow's radius.

    Returns:
        A :class:`SaddleRestPoint`.

    Raises:
        ValueError: ``vf`` is a sign flow (see :func:`linf_sam_minimum_is_rest_point`) or ``theta`` is not
            a critical point.
    """
    theta, H, eig, vec, size, probe = _at_critical_point(vf, theta, Z)
    unstable = [(float(lam), vec[:, i]) for i, lam in enumerate(eig) if lam < -1e-9 * size]
    if not unstable:
        return SaddleRestPoint(True, "a minimum of the loss: no unstable direction", eig, rho, 1.0, None)
    field_at = _field_of_direction(vf, theta, Z, rho, H, eig, vec, probe)
    rays = []
    for lam, v in unstable:
        for side in (1.0, -1.0):
            ray = _ray(field_at, H, side * v, lam, rho)
            if ray is None:
                return SaddleRestPoint(False, "undecided: no ray continues an unstable direction",
                                       eig, rho, float("nan"), None, tuple(rays))
            rays.append(ray)
    worst = min(rays, key=lambda r: r.margin)
    if worst.margin > 0:
        return SaddleRestPoint(True, _trapped(eig, rho, worst), eig, rho, worst.margin, None, tuple(rays))
    escape = np.linalg.pinv(H, rcond=1e-9) @ worst.direction
    return SaddleRestPoint(False, _passed(rho, worst), eig, rho, worst.margin,
                           (escape / np.linalg.norm(escape)).reshape(theta.shape), tuple(rays))


@dataclass(frozen=True)
class MinimumTrap:
    """What :func:`normalised_minimum_traps` decided. ``margin``: the slowest relative fall of ||G||_q over the
    directions tried (> 0: trapped); ``growing``: a direction of G along which it grows (None when trapped)."""

    is_rest_point: bool
    reason: str
    rho: float
    margin: float
    growing: np.ndarray | None


#: random directions of G tried by normalised_minimum_traps (besides H's eigenvectors)
MINIMUM_SAMPLES = 64


def _at_critical_point(vf, theta, Z):
    """theta (float64), the Hessian H there, its eigenvalues and vectors, their scale and the probe distance, for a
    normalised flow ``vf`` at a resolved critical point of the loss; a ValueError naming the fix otherwise."""
    if vf.signed:
        raise ValueError("vf is a sign flow (l_inf-SAM, sign descent): use linf_sam_minimum_is_rest_point.")
    theta = np.asarray(theta, dtype=np.float64)
    H, G = _hessian(vf, theta, Z)
    eig, vec = np.linalg.eigh(H)
    size = float(np.abs(eig).max(initial=0.0))
    if not np.isfinite(size) or size == 0.0:
        raise ValueError("theta: the Jacobian of G is 0 or not finite there; no critical point to classify.")
    probe = PROBE * max(1.0, float(np.abs(theta).max()))
    if np.linalg.norm(G) > 1e-3 * probe * size:
        raise ValueError(f"theta is not a critical point of the loss (|G| = {np.linalg.norm(G):.3g}); "
                         "refine it first, e.g. with flowsim.integrate.critical.saddle.")
    return theta, H, eig, vec, size, probe


def normalised_minimum_traps(vf, theta, Z, rho, samples=MINIMUM_SAMPLES) -> MinimumTrap:
    r"""Decide whether the minimum ``theta`` of the loss (a degenerate one too: H singular along entries held at 0 on
    their planes) traps the normalised-perturbation flow ``vf`` at radius ``rho``, without assuming the gradient
    linear across rho. Near it G ~ H x and the field depends on the direction u of G alone, F(u) (taken as it is,
    at the evaluation point theta + rho eps(u)); the flow's own ascent eps(u) is the gradient of the dual norm
    :math:`V = \|G\|_q` (l2: u itself), which changes at the rate :math:`\dot V = \epsilon(u)^\top H F(u)`. Where
    that is negative for every u the point traps the flow (V is a Lyapunov function; where the gradient is linear
    across rho it is :math:`-\rho\,\epsilon^\top H^2 \epsilon < 0`). It is checked on H's eigenvectors (both
    signs) and ``samples`` random directions of H's range; its null space (entries held at 0, whose G stays 0
    there) is left out.

    Raises:
        ValueError: a sign flow, or ``theta`` not a critical point (as :func:`normalised_rest_point`).
    """
    theta, H, eig, vec, size, probe = _at_critical_point(vf, theta, Z)
    if np.any(eig < -1e-9 * size):
        return MinimumTrap(False, f"not a minimum of the loss (eigenvalue {eig[0]:.4g})", rho, np.nan, None)
    span = vec[:, eig > 1e-9 * size]
    rng = np.random.default_rng(0)
    directions = np.vstack([span.T, -span.T, rng.normal(size=(samples, span.shape[1])) @ span.T])
    field_at = _field_of_direction(vf, theta, Z, rho, H, eig, vec, probe)
    keep = np.abs(eig) > 1e-9 * size
    inverse = (vec[:, keep] / eig[keep]) @ vec[:, keep].T
    rates = np.array([_dual_norm_rate(vf, theta, Z, rho, H, field_at, inverse @ u, probe, u / np.linalg.norm(u))
                      for u in directions])
    worst = int(np.argmax(rates))
    if rates[worst] < 0:
        return MinimumTrap(True, f"a minimum of the loss that traps the flow at rho = {rho:.4g}: ||G||_q falls along "
                                 f"every direction of G tried ({len(rates)}; the slowest at {-rates[worst]:.3g} of "
                                 f"|H| |F|)", rho, float(-rates[worst]), None)
    return MinimumTrap(False, f"a minimum of the loss the flow need not settle at for rho = {rho:.4g}: along a "
                              f"direction of G, ||G||_q grows ({rates[worst]:.3g} of |H| |F|)", rho,
                       float(-rates[worst]), directions[worst].reshape(theta.shape))


def _dual_norm_rate(vf, theta, Z, rho, H, field_at, x, probe, u):
    """d||G||_q/dtau over |H| |F| where G points along ``u`` (at theta + x, H x ~ u): eps(u) . H F(u), with
    ``field_at`` (``_field_of_direction``) and the flow's ascent eps(u) read at |x| = probe."""
    F = field_at(u)
    x = ((probe / np.linalg.norm(x)) * x).reshape(theta.shape)
    ascent = np.ravel(vf.evaluation_point(theta + x, Z, rho, np.ones_like(theta))[0] - (theta + x)) / rho
    return float(ascent @ H @ F) / (np.linalg.norm(H, 2) * np.linalg.norm(F) * max(np.linalg.norm(ascent), 1e-300))


def _trapped(eig, rho, ray):
    return (f"a rest point of the flow at a saddle of the loss: along every unstable direction (smallest eigenvalue "
            f"{eig[0]:.4g}) the ascent by rho = {rho:.4g} overshoots the saddle and the descent from there pulls "
            f"back, so |G| falls to 0 (radial rate {ray.radial_rate:.3g} per unit tau on the least trapping ray, "
            f"margin {ray.margin:.3g})")


def _passed(rho, ray):
    return (f"a saddle the flow passes: along the unstable direction of eigenvalue {ray.eigenvalue:.4g} the field "
            f"at radius rho = {rho:.4g} points away from it (|G| grows at {ray.radial_rate:.3g} per unit tau, "
            f"margin {ray.margin:.3g})")


def _hessian(vf, theta, Z):
    """H = dG/dtheta at theta by central differences of G (symmetrised: the Hessian of L / e^S at a critical
    point; the flow's own Jacobian is not it where its field is normalised), and G (flat)."""
    G = np.ravel(vf.direction(theta, Z)[0])
    h = HESSIAN_STEP * max(1.0, float(np.abs(theta).max()))
    columns = []
    for e in np.eye(theta.size):
        step = h * e.reshape(theta.shape)
        up, down = vf.direction(theta + step, Z)[0], vf.direction(theta - step, Z)[0]
        columns.append(np.ravel(up - down) / (2 * h))
    H = np.column_stack(columns)
    return 0.5 * (H + H.T), G


def _field_of_direction(vf, theta, Z, rho, H, eig, vec, probe):
    """u -> F(u), the flow's field at theta where the gradient points along u: at theta + x with H x
    proportional to u (x = H^+ u, scaled to |x| = probe and 2 probe, where G = H x up to O(probe^2)),
    extrapolated to x = 0 (the evaluation point theta + x + rho P(u) is off by x, which moved the threshold
    radius by the probe)."""
    keep = np.abs(eig) > 1e-9 * np.abs(eig).max()
    inverse = (vec[:, keep] / eig[keep]) @ vec[:, keep].T
    sigma = np.ones_like(theta)

    def at(x):
        return np.ravel(vf.field_and_scale(theta + x.reshape(theta.shape), Z, rho, sigma)[0])

    def field_at(u):
        x = inverse @ u
        x = (probe / np.linalg.norm(x)) * x
        return 2.0 * at(x) - at(2.0 * x)

    return field_at


def _ray(field_at, H, start, lam, rho):
    """The ray continued from the unstable direction ``start``: H F(u) = nu u, solved by Newton's method in
    the tangent plane of ``start`` (a difference Jacobian); None where it fails."""
    u0 = start / np.linalg.norm(start)
    basis = np.linalg.svd(np.eye(u0.size) - np.outer(u0, u0))[0][:, : u0.size - 1]
    scale = abs(lam) * np.linalg.norm(field_at(u0))

    def on_sphere(z):
        u = u0 + basis @ z
        return u / np.linalg.norm(u)

    def turning(z):
        u = on_sphere(z)
        V = H @ field_at(u)
        return basis.T @ (V - (u @ V) * u) / scale

    z = np.zeros(u0.size - 1)
    for _ in range(RAY_NEWTON):
        r = turning(z)
        if np.linalg.norm(r) <= RAY_TOL:
            break
        J = np.column_stack([(turning(z + RAY_STEP * e) - r) / RAY_STEP for e in np.eye(z.size)])
        z = z - np.linalg.lstsq(J, r, rcond=None)[0]
    else:
        return None
    u = on_sphere(z)
    if u @ u0 < 0.5:  # (a different ray: not the continuation of this direction)
        return None
    F = field_at(u)
    nu = float(u @ H @ F)
    return Ray(u, nu, -nu / (rho * lam**2 if rho > 0 else abs(lam)), lam)


@dataclass(frozen=True)
class SignRestPoint:
    """What :func:`linf_sam_minimum_is_rest_point` decided at a critical point of the loss.

    ``is_rest_point``: 0 lies in the convex hull of the one-sided fields. ``reason``: that in words.
    ``patterns``: how many sign patterns were compared (2^m, m entries with G = 0). ``margin``: the smallest
    cosine between ``separating_direction`` and the fields (> 0: every one-sided field moves the state along
    it, so the flow leaves; 0 where 0 is in the hull). ``separating_direction``: (K, d) unit, or None."""

    is_rest_point: bool
    reason: str
    rho: float
    patterns: int
    margin: float
    separating_direction: np.ndarray | None


def linf_sam_minimum_is_rest_point(vf, theta, Z, rho, tol=1e-9) -> SignRestPoint:
    """Decide whether the critical point ``theta`` of the loss is a Filippov rest point of l_inf-SAM (a sign
    flow ``vf``) at radius ``rho``: whether 0 lies in the convex hull of the fields F_s over the sign patterns
    s of the entries where G = 0 (the others keep sign(G)), by a linear program (HiGHS) that looks for a
    direction c with c . F_s > 0 for every s.

    Args:
        vf: the flow's NumPy vector field (signed: its field takes the signs sigma).
        theta: (K, d) a critical point of the loss, e.g. ``critical.find(...).limit``.
        Z: (n, d) the signed samples y_i x_i.
        rho: the flow's radius.
        tol: entries with |G| <= tol max(|G|, 1) count as G = 0.

    Returns:
        A :class:`SignRestPoint`.

    Raises:
        ValueError: ``vf`` has no signs, or more than ``SIGN_ENTRIES_MAX`` entries have G = 0.
    """
    if not vf.signed:
        raise ValueError("vf is not a sign flow: use normalised_rest_point for normalised perturbations.")
    theta = np.asarray(theta, dtype=np.float64)
    G = np.asarray(vf.direction(theta, Z)[0], dtype=np.float64)
    idle = np.broadcast_to(~np.any(Z != 0, axis=0), G.shape)  # a column of zeros: G = 0 whatever theta
    free = (np.abs(G) <= tol * max(float(np.abs(G).max()), 1.0)) & ~idle
    m = int(free.sum())
    if m > SIGN_ENTRIES_MAX:
        raise ValueError(f"theta: {m} entries have G = 0, over the {SIGN_ENTRIES_MAX} whose 2^m sign patterns "
                         "are enumerated.")
    sigma = np.where(idle, 0.0, np.sign(G))
    # less the field at rho = 0, -G(theta): to first order the fields at the exact critical point, where the
    # residual G(theta) of a numerical one (rounding, ~1e-16) is 0; against a tiny rho it dominated every field
    fields = _one_sided_fields(vf, theta, Z, rho, sigma, free) - np.ravel(vf.field_and_scale(theta, Z, 0.0, sigma)[0])
    lengths = np.linalg.norm(fields, axis=1)
    if np.any(lengths == 0.0):
        return SignRestPoint(True, "a one-sided field vanishes there", rho, len(fields), 0.0, None)
    unit = fields / lengths[:, None]
    c = _separating(unit)
    if c is None:
        return SignRestPoint(True, f"a Filippov rest point of the sign flow: 0 lies in the convex hull of the "
                                   f"{len(fields)} one-sided fields at rho = {rho:.4g}", rho, len(fields), 0.0, None)
    margin = float((unit @ c).min())
    return SignRestPoint(False, f"not a rest point of the sign flow at rho = {rho:.4g}: every one of the {len(fields)} "
                                f"one-sided fields has a positive component along one direction (smallest cosine "
                                f"{margin:.3g}), so the flow leaves the minimum", rho, len(fields), margin,
                         c.reshape(theta.shape))


def _one_sided_fields(vf, theta, Z, rho, sigma, free):
    """(patterns, K d): the field with the free entries' signs set to each pattern of +-1."""
    index = np.nonzero(free.ravel())[0]
    rows = []
    for signs in itertools.product((1.0, -1.0), repeat=index.size):
        s = sigma.ravel().copy()
        s[index] = signs
        rows.append(np.ravel(vf.field_and_scale(theta, Z, rho, s.reshape(theta.shape))[0]))
    return np.asarray(rows, dtype=np.float64)


def _separating(unit):
    """A unit c with c . f > 0 for every row f of ``unit``, or None where 0 is in their convex hull (the LP
    max t s.t. c . f >= t, |c_i| <= 1 has optimum t = 0 then)."""
    patterns, n = unit.shape
    objective = np.zeros(n + 1)
    objective[-1] = -1.0  # maximise t
    constraints = np.hstack([-unit, np.ones((patterns, 1))])  # t - c . f <= 0
    bounds = [(-1.0, 1.0)] * n + [(None, 1.0)]
    lp = linprog(objective, A_ub=constraints, b_ub=np.zeros(patterns), bounds=bounds, method="highs")
    if lp.status != 0:
        raise RuntimeError(f"the separation LP failed: {lp.message}")
    c = lp.x[:-1]
    if lp.x[-1] <= 1e-9 or np.linalg.norm(c) == 0.0:
        return None
    return c / np.linalg.norm(c)
