r"""The Jacobian of the derived field, assembled by the chain rule from the per-coordinate partial
derivatives that sympy derives (``System.numpy.partials``) and the data couplings, for the implicit
scipy methods (Radau, BDF, LSODA). Written against an array namespace like :mod:`flowsim.field.vector_field`.

With :math:`c_{lj} = \partial\beta_j/\partial w_{lj}`, margins :math:`m = Z\beta`, weights
:math:`p = \mathrm{softmax}(a)`, :math:`a = \log q(m)` and :math:`a' = d\log q/dm`:

.. math::  \frac{\partial r}{\partial w_{li}} = Z^\top H Z_{:i}\, c_{li},\quad
           H = \mathrm{diag}(p\odot a') - p\,(p\odot a')^\top,\qquad
           \frac{\partial S}{\partial w_{li}} = (Z^\top (p\odot a'))_i\, c_{li},

the same at the evaluation point, and :math:`N = \|H\|_q` through :math:`H(w, r)` (G = -c r unless the
point scales it). Then

.. math::  \frac{d\tilde w}{d\theta} = P_w + P_r \frac{dr}{d\theta} + P_N \frac{dN}{d\theta} + P_S \frac{dS}{d\theta},\qquad
           \frac{dF}{d\theta} = \Big(F_{\tilde w} + F_{\tilde r}\frac{\partial\tilde r}{\partial\tilde w}
           + F_{\tilde P}\frac{\partial\tilde P}{\partial\tilde w}\Big)\frac{d\tilde w}{d\theta}

and the clocks multiply by their rates (``rhs_jacobian``). Entries are ordered like the flat state,
layer-major: index ``l * d + j``.

Accuracy is eps relative to the terms of :math:`H`: where one sample carries nearly all the weight the
covariance cancels below that (autodiff of the field does no better), which a Newton iteration does
not notice.
"""

from __future__ import annotations

import math

import numpy as np

from flowsim.field.vector_field import at_theta, flushed

#: entries of a Jacobian below this fraction of its largest are set to 0: a Newton matrix I - h J perturbed by
#: them moves by less than d eps^2 of its norm, far below the LU's own rounding, while products of the tiny
#: couplings between decaying coordinates (w_i w_j ~ 1e-320) made each LU of it up to 30x slower (subnormals)
NEGLIGIBLE = float(np.finfo(np.float64).eps) ** 2


def significant(xp, M):
    """``M`` with its entries below NEGLIGIBLE of its largest set to 0 (see there)."""
    return xp.where(xp.abs(M) < NEGLIGIBLE * xp.max(xp.abs(M)), 0.0, M)


def _local(xp, block):
    """(K*K, d) per-coordinate partials d a_k / d b_l -> the (Kd, Kd) matrix, block-diagonal in j."""
    K2, d = block.shape
    K = math.isqrt(K2)
    eye = xp.eye(d)
    # [k, j, l, i] = block[k, l, j] delta_ij
    full = xp.reshape(block, (K, K, d))[:, :, :, None] * eye[None, None, :, :]
    return xp.reshape(xp.transpose(full, (0, 2, 1, 3)), (K * d, K * d))


def _through(xp, a, dx, K):
    """Chain rule through a per-coordinate coupling x_j (dx: (d, Kd)) or a scalar (dx: (Kd,)):
    rows (k, j) of (d y_kj / d x_j) (d x_j / d theta), with ``a`` = d y / d x of shape (K, d)."""
    a = xp.reshape(a, (-1, 1))
    return a * (xp.tile(dx, (K, 1)) if dx.ndim == 2 else dx[None, :])


def _couplings(vf, W, Z):
    """At W: r, S, the weights p, p * a', c = dbeta/dw (K, d), dr/dW (d, Kd) and dS/dW (Kd,)."""
    xp, K, d = vf.xp, vf.K, vf.d
    c = -vf.compiled.direction(W, xp.ones(d))
    _, m, S, p = vf.weights(W, Z)
    p = flushed(xp, p)
    if vf.residual:  # p = q / n and S = 0 (``VectorField._residual_weights``): dr/dbeta = X^T diag(q'/n) X, dS = 0
        X = vf.features(Z)
        pa = vf.compiled.partials["q_m"](m) / Z.shape[0]
        r, v = X.T @ p, xp.zeros(d)
        M1 = X.T @ (pa[:, None] * X)
        dr = xp.reshape(M1[:, None, :] * c[None, :, :], (d, K * d))
        return r, S, p, pa, c, dr, xp.zeros(K * d)
    pa = flushed(xp, p * vf.compiled.partials["log_q_m"](m))
    v = Z.T @ pa  # dS/dbeta
    r = Z.T @ p
    M1 = Z.T @ (pa[:, None] * Z) - xp.outer(r, v)  # dr/dbeta = Z^T H Z
    dr = xp.reshape(M1[:, None, :] * c[None, :, :], (d, K * d))
    return r, S, p, pa, c, dr, xp.reshape(v[None, :] * c, (K * d,))


class FieldJacobian:
    """``field_and_scale`` of a :class:`flowsim.field.vector_field.VectorField` together with its derivatives."""

    def __init__(self, vf):
        self.vf = vf

    def field_and_scale(self, theta, Z, rho, sigma, held=None):
        """F, S~ and their Jacobians dF/dtheta (Kd, Kd), dS~/dtheta (Kd,). ``held``: entries held on the
        plane w = 0, whose evaluation point does not move while they are (0 under a gradient-following
        point, where P vanishes with G; +-rho under sign(G)), whatever its derivative off the plane."""
        vf = self.vf
        xp, K, d, P = vf.xp, vf.K, vf.d, vf.compiled.partials
        here = _couplings(vf, theta, Z)
        r, S, _, _, _, dr, dS = here
        q = vf.dual_exponent
        if q is None:
            N, dN = 1.0, xp.zeros(K * d)
        else:
            H = vf.compiled.normed(theta, r)  # N = |H|_q
            N = xp.sum(xp.abs(H) ** q) ** (1.0 / q)
            dH = _local(xp, P["H_w"](theta, r)) + _through(xp, P["H_r"](theta, r), dr, K)
            nu = xp.reshape(xp.sign(H) * (xp.abs(H) / xp.where(N > 0, N, 1.0)) ** (q - 1), (K * d,))
            dN = xp.where(N > 0, nu @ dH, 0.0)
            N = xp.where(N > 0, N, 1.0)
        args = (theta, r, N, S, rho, sigma)
        if at_theta(rho):
            theta_t, dwt = theta, xp.eye(K * d)
        else:
            dwt = _local(xp, P["P_w"](*args)) + _through(xp, P["P_r"](*args), dr, K) \
                + _through(xp, P["P_N"](*args), dN, K) + _through(xp, P["P_S"](*args), dS, K)
            theta_t = vf.compiled.perturbed(*args)
        if held is not None:
            dwt = xp.where(xp.reshape(held, (-1, 1)), 0.0, dwt)

        # (n d^2 each: at theta itself, once)
        rt, St, pt, pat, ct, drt, dSt = here if at_theta(rho) else _couplings(vf, theta_t, Z)
        n = float(Z.shape[0])
        if vf.needs_P:
            # the field takes r~ and P~ scaled per coordinate by c (VectorField.scaled_moments), and is unchanged by
            # that scaling: its partials in the unscaled ones are F_r / c and F_P / c^2 (0 on a column of zeros)
            with np.errstate(divide="ignore"):  # p~ = 0 (underflowed) is log -inf: weight 0, as in the field
                log_pt = xp.log(pt)
            rt, Pt, log_c = vf.scaled_moments(log_pt, Z)
            # (below e^-700 the unscaled partials have underflowed with p~: those terms are left out)
            inv = xp.where(log_c > -700.0, xp.exp(-xp.where(log_c > -700.0, log_c, 0.0)), 0.0)
            # dP~/dw~ = 2 (Z^2)^T diag(p~) dp~/dw~, dp~/dw~ = H~ Z c~
            Hz = pat[:, None] * Z - xp.outer(pt, pat @ Z)
            M2 = 2.0 * (Z**2).T @ (pt[:, None] * Hz)
            dPt = xp.reshape(M2[:, None, :] * ct[None, :, :], (d, K * d))
        else:
            Pt, dPt, inv = rt, drt, 1.0
        fargs = (theta_t, rt, Pt, n, N, sigma)
        F = vf.compiled.field(*fargs)
        dF_dwt = _local(xp, P["F_w"](*fargs)) + _through(xp, P["F_r"](*fargs) * inv, drt, K) \
            + _through(xp, P["F_P"](*fargs) * inv**2, dPt, K)
        # the direction may use N at theta (steepest descent): that term goes straight to theta
        dF = dF_dwt @ dwt + _through(xp, P["F_N"](*fargs), dN, K)
        return F, St, significant(xp, dF), dSt @ dwt

    def gradient(self, theta, Z):
        """G (K, d) with grad L = e^S G, whatever the flow, and its Jacobian dG/dtheta (Kd, Kd): the map whose
        zeros are the loss's critical points (``flowsim.integrate.critical``). G = -c r is linear in r."""
        xp, K = self.vf.xp, self.vf.K
        r, _, _, _, c, dr, _ = _couplings(self.vf, theta, Z)
        G = self.vf.compiled.direction(theta, r)
        dG = _local(xp, self.vf.compiled.partials["G_w"](theta, r)) + _through(xp, -c, dr, K)
        return G, significant(xp, dG)

    def sliding_field_and_scale(self, theta, Z, rho, sigma, pinned):
        """The Filippov average of :meth:`flowsim.field.vector_field.VectorField.sliding_field_and_scale` and its Jacobians."""
        xp = self.vf.xp
        # held entries neither move nor move the others: rows and columns out (a field that vanishes
        # sub-linearly on the plane has an infinite derivative there)
        free = xp.reshape(~pinned, (-1,))
        keep = free[:, None] & free[None, :]
        if not self.vf.signed:
            F, S, dF, dS = self.field_and_scale(theta, Z, rho, sigma, pinned)
            return xp.where(pinned, 0.0, F), S, xp.where(keep, dF, 0.0), xp.where(free, dS, 0.0)
        Fp, Sp, dFp, dSp = self.field_and_scale(theta, Z, rho, xp.where(pinned, 1.0, sigma), pinned)
        Fm, Sm, dFm, dSm = self.field_and_scale(theta, Z, rho, xp.where(pinned, -1.0, sigma), pinned)
        lam = 1.0 / (1.0 + xp.exp(Sm - Sp))  # the weight of the +1 side
        F = lam * Fp + (1 - lam) * Fm
        mx = xp.maximum(Sp, Sm)
        S = mx + xp.log(0.5 * (xp.exp(Sp - mx) + xp.exp(Sm - mx)))
        dF = lam * dFp + (1 - lam) * dFm + lam * (1 - lam) * xp.reshape(Fp - Fm, (-1, 1)) * (dSp - dSm)[None, :]
        return xp.where(pinned, 0.0, F), S, xp.where(keep, dF, 0.0), xp.where(free, lam * dSp + (1 - lam) * dSm, 0.0)

    def rhs_jacobian(self, clock, sliding: bool):
        """d(rhs)/dy for :meth:`flowsim.field.vector_field.VectorField.rhs` under ``clock``; same arguments ``(s, y, args)``."""
        vf = self.vf
        xp, K, d = vf.xp, vf.K, vf.d
        fs = self.sliding_field_and_scale if sliding else (lambda th, Z, rho, sg, pn: self.field_and_scale(th, Z, rho, sg))

        def jac(s, y, args):
            Z, rho, sigma, pinned = args.Z, args.rho, args.sigma, args.pinned
            theta = xp.reshape(y[:-1], (K, d))
            F, S_t, dF, dS = fs(theta, Z, rho, sigma, pinned)
            top, bottom = clock.jacobian(xp, xp.reshape(F, (-1, 1)), S_t, dF, dS, s, y[-1])
            return significant(xp, xp.concatenate([top, bottom], axis=0))

        return jac
