r"""The numeric glue between a derived :class:`System` and a solver: the coupling scalars (margins,
softmax weights, norms) and the two clocks. Written once against an array namespace ``xp`` so the
NumPy (scipy) and JAX (diffrax) backends evaluate the same formulas.

State layout (flat): ``y = [theta.ravel(), c]`` where c is the clock that is *not* the independent
variable: the log-time ``u = log(1+t)`` under the tau clock, tau under the log-time clock.

Clocks (docs/theory.md 4, with the normalisation taken at the evaluation point, which for one
sample is exactly the clock of arXiv 2603.08290):

- ``"tau"``:      :math:`d\theta/d\tau = F`, :math:`du/d\tau = e^{-\tilde S - u}`,
- ``"log_time"``: :math:`d\theta/du = F e^{\tilde S + u}`, :math:`d\tau/du = e^{\tilde S + u}`,

where :math:`F = -G(\tilde\theta)` is O(1) and :math:`\dot\theta = e^{\tilde S} F` in real time.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from flowsim.field import surfaces as _surfaces

#: the smallest normal float64: below it NumPy computes with subnormals, at up to 30x the cost (a matrix-vector
#: product with subnormal entries; the LU of a matrix holding them), where XLA on CPU flushes them to 0
TINY = float(np.finfo(np.float64).tiny)


def flushed(xp, x):
    """``x`` with its subnormal entries set to 0, as XLA's CPU backend computes them: the NumPy and JAX fields
    agree, and NumPy's products stay fast (a decaying beta_j or a sample weight below e^-708 adds less than
    1e-300 of a unit to a margin or a coupling, far below their rounding)."""
    return xp.where(xp.abs(x) < TINY, 0.0, x)


def coordinate_weights(xp, log_e, Z):
    """(e_i z_ij / c_j, log c_j): sample weights e (``log_e`` their logs, -inf for none) on the data, each
    coordinate scaled by c_j, the largest e_i among the samples with z_ij != 0 (log c_j = -inf where none has
    feature j: a column of zeros, or a batch without it, whose entries are 0). Coordinates fed only by samples
    e^-745 below the heaviest keep their digits (the Adam proxy's moments, a discrete step's gradient)."""
    there = Z != 0
    log_c = xp.max(xp.where(there, log_e[:, None], -xp.inf), axis=0)
    w = xp.where(there, xp.exp(log_e[:, None] - xp.where(xp.isfinite(log_c), log_c, 0.0)), 0.0) * Z
    return w, log_c


@dataclass(frozen=True)
class VectorField:
    """Vector field of one system on one array namespace.

    ``K``, ``d``: parameter shape; ``dual_exponent``: q of the norm N (None: unused)."""

    compiled: object
    xp: object
    K: int
    d: int
    dual_exponent: float | None
    needs_P: bool = False
    #: the field has sigma in it (a sign flow's formulas, whatever rho): on a plane it averages two sides
    signed: bool = True
    #: the field is affine in sigma (``Flow.affine_in_sign``): sliding on any number of surfaces is one linear solve
    affine_in_sign: bool = False
    #: () -> the same field on JAX, for a NumPy field (its sliding on surfaces is evaluated there: ``surfaces``)
    twin: object = field(default=None, compare=False, repr=False)
    #: a regression loss: Z is [X, -y] and the margins are the residuals X beta - y (docs/theory.md 12)
    residual: bool = False

    def features(self, Z):
        """The samples the couplings sum over: Z itself, or X of a regression's [X, -y]."""
        return Z[:, : self.d] if self.residual else Z

    def margins(self, Z, beta):
        """The margins Z beta of beta (d,) or (m, d) (then (m, n)); a regression's residuals X beta - y."""
        if not self.residual:
            return self.xp.dot(Z, beta) if beta.ndim == 1 else beta @ Z.T
        X, offset = Z[:, : self.d], Z[:, self.d]
        return (self.xp.dot(X, beta) if beta.ndim == 1 else beta @ X.T) + offset

    def _unnormalised_weights(self, theta, Z):
        """beta, margins m, log gradient scale S, and the sample weights e = q / max q with their sum
        (a regression's: the signed q itself, its sum n and S = 0, ``_residual_weights``)."""
        if self.residual:
            return self._residual_weights(theta, Z)
        xp = self.xp
        beta = self.compiled.beta(theta)
        m = xp.dot(Z, flushed(xp, beta))  # dot, not @: NumPy's matmul dispatch costs 50% more on these small arrays
        lq = self.compiled.log_q(m)
        mx = lq.max()  # array methods: NumPy's xp.max / xp.sum dispatch costs more than these small reductions
        log_e = lq - mx
        e = flushed(xp, xp.exp(log_e))
        total = e.sum()
        return beta, m, mx + xp.log(total) - math.log(Z.shape[0]), e, total, log_e

    def _residual_weights(self, theta, Z):
        """``_unnormalised_weights`` of a regression loss: the signed q(m) = -l'(m) of the residuals m, with total n
        and S = 0, so that grad L = -(1/n) X^T q = -e^S X^T (e / total). The scale-free normalisation of a margin
        loss is not needed (q is O(residual), and O(1) at the start) and would be singular at an interpolator."""
        beta = self.compiled.beta(theta)
        m = self.margins(Z, flushed(self.xp, beta))
        q = self.compiled.q(m)
        n = float(m.shape[-1])
        return beta, m, self.xp.zeros(()), q, n, None

    def weights(self, theta, Z):
        """beta, margins m, log gradient scale S and the sample weights p = softmax(log q(m))."""
        beta, m, S, e, total, _ = self._unnormalised_weights(theta, Z)
        return beta, m, S, e / total

    def couplings(self, theta, Z):
        """Margins m, log gradient scale S, and r = Z^T softmax(log q(m)) at theta."""
        beta, m, S, e, total, _ = self._unnormalised_weights(theta, Z)
        # e Z, not Z^T e: inside a while loop XLA copies the transpose on every call; and
        # normalising after the product saves a pass over the samples. A method, not xp.dot: NumPy's
        # function dispatch costs 60% more here (e has theta's array type, so this serves JAX alike)
        return beta, m, S, e.dot(self.features(Z)) / total

    def direction(self, theta, Z):
        """G (K, d) with grad L = e^S G, and S."""
        _, _, S, r = self.couplings(theta, Z)
        return self.compiled.direction(theta, r), S

    def evaluation_point(self, theta, Z, rho, sigma):
        """theta~ and the dual norm N at theta (1 where the flow uses none)."""
        if self.dual_exponent is None and at_theta(rho):
            return theta, 1.0
        _, _, S, r = self.couplings(theta, Z)
        return self.perturbed(theta, r, S, rho, sigma)

    def perturbed(self, theta, r, S, rho, sigma):
        """theta~ and N at theta for the coupling ``r`` (the gradient's, or any other: a one-sided limit) and log
        gradient scale ``S``."""
        xp, q = self.xp, self.dual_exponent
        if q is None:
            N = 1.0
        else:
            H = self.compiled.normed(theta, r)
            N = xp.sum(xp.abs(H) ** q) ** (1.0 / q)
            N = xp.where(N > 0, N, 1.0)  # G = 0 (beta at a critical point): no perturbation
        return self.compiled.perturbed(theta, r, N, S, rho, sigma), N

    def field_and_scale(self, theta, Z, rho, sigma, pinned=None):
        """F = dtheta/dtau at theta and the log scale S~ at the evaluation point (``pinned``: unused, the
        signature of ``sliding_field_and_scale``)."""
        theta_t, N = self.evaluation_point(theta, Z, rho, sigma)
        return self._field_at(theta_t, Z, N, sigma)

    def _field_at(self, theta_t, Z, N, sigma):
        """F and S~ with the gradient taken at the evaluation point ``theta_t`` (N: the dual norm at theta)."""
        _, _, S_t, e, total, log_e = self._unnormalised_weights(theta_t, Z)
        if self.needs_P:
            r_t, P_t, _ = self.scaled_moments(log_e, Z)
        else:
            r_t = P_t = e.dot(self.features(Z)) / total
        return self.compiled.field(theta_t, r_t, P_t, float(Z.shape[0]), N, sigma), S_t

    def minima_field_and_scale(self, theta, Z, rho, sigma, pinned=None):
        r"""Filippov's field sliding along a regression's interpolating minima where their normal space is one
        line (one sample, or samples on one line; docs/theory.md 12). There the gradient is :math:`c\,\nabla r`,
        so a normalised perturbation takes one of two values, from the coupling :math:`\pm v` (v the samples'
        line); of the two sides' real-time fields the convex combination that keeps the residual constant,
        :math:`\lambda F_+ + (1-\lambda) F_-` with :math:`\nabla r \cdot F = 0`, is the sliding field. Off the
        minima by a rounding residual r the combination brings it back at the rate :math:`\kappa r`,
        :math:`\kappa = (|\dot r_+| + |\dot r_-|) / (2\rho\|\nabla r\|)` (the one-sided fields would close a gap of
        rho in that time), so the integration does not drift off them. Where the two sides do not both point into
        the minima there is no slide: NaN, and the solve fails there."""
        xp = self.xp
        X = self.features(Z)
        k = xp.argmax(xp.sum(X * X, axis=1))
        v = X[k]
        normal = self.compiled.direction(theta, v).reshape(-1)  # -grad_theta r_k (the couplings' sign)
        residual = self.margins(Z, flushed(xp, self.compiled.beta(theta)))[k]
        (theta_a, N_a), (theta_b, N_b) = (self.perturbed(theta, c * v, 0.0, rho, sigma) for c in (1.0, -1.0))
        (F_a, S_a), (F_b, S_b) = self._field_at(theta_a, Z, N_a, sigma), self._field_at(theta_b, Z, N_b, sigma)
        S = xp.maximum(S_a, S_b)
        F_a, F_b = F_a * xp.exp(S_a - S), F_b * xp.exp(S_b - S)
        rate_a, rate_b = normal @ F_a.reshape(-1), normal @ F_b.reshape(-1)  # -dr_k/dt on each side
        kappa = (xp.abs(rate_a) + xp.abs(rate_b)) / (2.0 * rho * xp.sqrt(normal @ normal))
        inward = (rate_a < 0) & (rate_b > 0)  # dr_k/dt > 0 where r_k < 0 (coupling +v), < 0 where r_k > 0
        lam = (rate_b - kappa * residual) / xp.where(inward, rate_b - rate_a, xp.nan)
        return flushed(xp, lam * F_a + (1.0 - lam) * F_b), S  # (subnormal: the slide has stopped, ``at_rest``)

    def scaled_moments(self, log_e, Z):
        """r_j = sum_i p_i z_ij and P_j = sum_i p_i^2 z_ij^2 (the per-sample second moment the Adam proxy
        needs), divided by c_j and c_j^2, and log c: c_j is the largest weight e_i (p = e / sum e, ``log_e`` its
        log) among the samples with z_ij != 0. A direction that needs P is handed these: its rule must be
        unchanged by (r_j, P_j) -> (r_j / c, P_j / c^2), as the proxy's r_j / sqrt(P_j) is. Unscaled, P_j
        underflowed where a coordinate's samples all weighed below e^-372 of the heaviest (Phi_j = 0/0 where it
        is 1/sqrt(n)), and was 0/0 on a column of zeros (a pixel of digits), where it is 0: there P_j is 1 and
        r_j 0."""
        w, log_c = coordinate_weights(self.xp, log_e, Z)
        return w.sum(axis=0), self.xp.where(~self.xp.isfinite(log_c), 1.0, (w**2).sum(axis=0)), log_c

    def sliding_field_and_scale(self, theta, Z, rho, sigma, pinned):
        """Filippov field with the entries in ``pinned`` sliding on w = 0: the real-time fields
        with their signs at +1 and at -1, averaged with equal weights (the one-sided fields of a
        diagonal network at w = 0 are mirror images, checked when an entry is pinned), pinned
        entries held. A field without sigma is one-sided: entries pinned where they reached an invariant
        plane (``flowsim.integrate.arrival``) are held, the others see the field itself."""
        xp = self.xp
        if not self.signed:
            F, S = self.field_and_scale(theta, Z, rho, sigma)
            return xp.where(pinned, 0.0, F), S
        Fp, Sp = self.field_and_scale(theta, Z, rho, xp.where(pinned, 1.0, sigma))
        Fm, Sm = self.field_and_scale(theta, Z, rho, xp.where(pinned, -1.0, sigma))
        mx = xp.maximum(Sp, Sm)
        a, b = xp.exp(Sp - mx), xp.exp(Sm - mx)
        F = (a * Fp + b * Fm) / (a + b)
        S = mx + xp.log(0.5 * (a + b))
        return xp.where(pinned, 0.0, F), S

    def surface_field_and_scale(self, theta, Z, rho, sigma, pinned, spread):
        """The Filippov field while sliding on the switching surfaces ``spread`` ((m, K d):
        :func:`flowsim.field.surfaces.spread_of`); the entries in ``pinned`` slide on their planes w = 0."""
        return _surfaces.at(self, "field_and_scale", theta, Z, rho, sigma, pinned, spread)

    def any_field_and_scale(self, theta, Z, rho, sigma, pinned, spread=None, on_minima=False):
        """The field with whatever slides: on surfaces (``spread``), along a regression's minima, on planes, or
        nothing."""
        if on_minima:
            return self.minima_field_and_scale(theta, Z, rho, sigma)
        if spread is not None and len(spread):
            return self.surface_field_and_scale(theta, Z, rho, sigma, pinned, spread)
        if pinned.any():
            return self.sliding_field_and_scale(theta, Z, rho, sigma, pinned)
        return self.field_and_scale(theta, Z, rho, sigma)

    def fields(self, thetas, Z, rho, sigma):
        """``field_and_scale``'s F at m states at once (NumPy): ``thetas`` (K, m, d) -> (K, m, d). The derived
        formulas are elementwise, so a state is one more row; the sums (margins, sample weights, moments, the dual
        norm) are each state's own, and the products are matrix products. Equal to F at each state to rounding
        (the sums are taken in another order)."""
        q, n = self.dual_exponent, Z.shape[0]
        if q is None and at_theta(rho):
            theta_t, N = thetas, 1.0
        else:
            r, S, _ = self._rows_moments(thetas, Z, moments=False)
            N = 1.0
            if q is not None:
                N = (np.abs(self.compiled.normed(thetas, r)) ** q).sum(axis=(0, 2))[:, None] ** (1.0 / q)
                N = np.where(N > 0, N, 1.0)
            theta_t = self.compiled.perturbed(thetas, r, N, S, rho, sigma)
        r_t, S_t, P_t = self._rows_moments(theta_t, Z, moments=self.needs_P)
        return self.compiled.field(theta_t, r_t, P_t, float(n), N, sigma)

    def _rows_moments(self, thetas, Z, moments):
        """Per state of ``thetas`` (K, m, d): r (m, d), the log scale S (m, 1), and P (m, d) as
        ``scaled_moments`` gives them (``moments``: one state at a time, as its (n, d) weights are large; else
        r again)."""
        beta = self.compiled.beta(thetas)
        if self.residual:  # (m, d) rows of beta: the signed weights, total n and S = 0 (``_residual_weights``)
            q = self.compiled.q(self.margins(Z, flushed(np, beta)))
            r = q @ self.features(Z) / Z.shape[0]
            return r, np.zeros((r.shape[0], 1)), r
        lq = self.compiled.log_q(flushed(np, beta) @ Z.T)
        mx = lq.max(axis=1, keepdims=True)
        log_e = lq - mx
        e = flushed(np, np.exp(log_e))
        total = e.sum(axis=1, keepdims=True)
        S = mx + np.log(total) - math.log(Z.shape[0])
        if not moments:
            r = e @ Z / total
            return r, S, r
        r, P, _ = zip(*(self.scaled_moments(row, Z) for row in log_e))
        return np.array(r), S, np.array(P)

    def observe(self, params, Z, known=()):
        """beta (m, d), margins (m, n) and the log of the mean loss (m,) at parameters (m, K, d), all at
        once (the derived formulas are elementwise). ``known``: the log-losses of the first rows, found
        before (the loss is the costly part: a solve's look-back for rest points has them)."""
        beta = self.saved_beta(params)
        return (beta, *self.margins_and_log_loss(beta, Z, known))

    def saved_beta(self, params):
        """beta (m, d) at parameters (m, K, d)."""
        xp = self.xp
        beta = self.compiled.beta(xp.swapaxes(params, 0, 1))  # (K, m, d): swapaxes, not moveaxis's Python
        return xp.reshape(xp.asarray(beta, dtype=xp.float64), (params.shape[0], self.d))

    def margins_and_log_loss(self, beta, Z, known=()):
        """The margins (m, n) and the log of the mean loss (m,) at rows of beta (m, d) (``observe``)."""
        xp = self.xp
        m, n = beta.shape[0], Z.shape[0]
        margins = self.margins(Z, beta)
        ll = xp.reshape(xp.asarray(self.compiled.log_l(margins[len(known):]), dtype=xp.float64), (m - len(known), n))
        mx = ll.max(axis=1, keepdims=True)
        mx = xp.where(mx == -xp.inf, 0.0, mx)  # every residual 0 (log l = -inf): the loss is 0, its log -inf
        log_loss = (mx[:, 0] + xp.log(xp.exp(ll - mx).sum(axis=1))) - math.log(n)
        if len(known):
            log_loss = xp.concatenate([xp.asarray(known, dtype=xp.float64), log_loss])
        return margins, log_loss

    def rhs(self, clock, sliding: bool, surfaces: int = 0, on_minima: bool = False):
        """dy/ds for the flat state under ``clock`` (a :class:`flowsim.integrate.clock.Clock`); ``args`` a
        :class:`flowsim.integrate.segment_args.SegmentArgs`. ``sliding``: some entries are held on their planes;
        ``surfaces``: the state slides on this many switching surfaces (``args.surfaces``); ``on_minima``: it slides
        along a regression's minima (``minima_field_and_scale``)."""
        xp, K, d = self.xp, self.K, self.d
        if surfaces:
            def fs(theta, args):
                return self.surface_field_and_scale(theta, args.Z, args.rho, args.sigma, args.pinned, args.surfaces)
        else:
            plain = (self.minima_field_and_scale if on_minima
                     else self.sliding_field_and_scale if sliding else self.field_and_scale)

            def fs(theta, args):
                return plain(theta, args.Z, args.rho, args.sigma, args.pinned)
        flat = _flat_numpy if xp is np else functools.partial(_flat, xp)

        def f(s, y, args):
            theta = y[:-1].reshape(K, d)
            F, S_t = fs(theta, args)
            scale, last = clock.rates(xp, S_t, s, y[-1])
            return flat(F, last) if scale is None else flat(F, last, scale)

        return f


def _flat(xp, F, last, scale=1.0):
    """The flat state derivative [scale * F.ravel(), last]."""
    return xp.concatenate([(F * scale).reshape(-1), xp.reshape(last, (1,))])


def _flat_numpy(F, last, scale=None):
    """``_flat`` in one preallocated array: np.concatenate's list and temporaries cost a third more on a
    scipy solve's small state (1.4 against 1.06 us; 1,100 calls a DOP853 solve), and a multiply by 1
    (tau clock) more than the copy (0.68 against 0.28 us)."""
    out = np.empty(F.size + 1)
    if scale is None:
        out[:-1] = F.reshape(-1)
    else:
        np.multiply(F.reshape(-1), scale, out=out[:-1])
    out[-1] = last
    return out


def at_theta(rho) -> bool:
    """Whether the evaluation point theta + rho (...) is theta itself: a concrete radius 0 (GD, a sign flow
    without ascent). Saves the couplings at theta, half a NumPy field evaluation, and the perturbation's
    derivative, which is infinite where lp-SAM's (p > 2) gradient vanishes (0 x inf is no 0). A traced
    JAX radius is never concrete: the compiled field keeps the general form."""
    return isinstance(rho, (int, float)) and rho == 0.0


#: fields kept per (system, K, d): a solve asks for its field several times, and a System is immutable
FIELDS_KEPT = 64


@functools.lru_cache(maxsize=FIELDS_KEPT)
def numpy_field(system, K, d) -> VectorField:
    """The field of a derived ``System`` on NumPy (scipy backend, events, Filippov checks)."""
    return VectorField(system.numpy, np, K, d, system.flow.dual_exponent, system.flow.needs_P, _signed(system.flow),
                       system.flow.affine_in_sign, twin=functools.cache(lambda: jax_field(system, K, d)),
                       residual=system.loss.is_regression)


@functools.lru_cache(maxsize=FIELDS_KEPT)
def jax_field(system, K, d) -> VectorField:
    """The field of a derived ``System`` on JAX (diffrax backend, sweeps)."""
    from flowsim._jax import jnp

    return VectorField(system.jax, jnp, K, d, system.flow.dual_exponent, system.flow.needs_P, _signed(system.flow),
                       system.flow.affine_in_sign, residual=system.loss.is_regression)


def _signed(flow) -> bool:
    return flow.point.uses_sign or flow.direction.uses_sign
