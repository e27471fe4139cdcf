"""flowsim's own sympy functions, stable where their textbook forms over- or underflow, with the NumPy and
JAX code ``lambdify`` prints them as."""

from __future__ import annotations

import numpy as np
import sympy as sp


class softplus(sp.Function):
    r""":math:`\log(1 + e^x)`, printed as ``logaddexp(0, x)`` (stable for any x)."""

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sp.exp(x - softplus(x))


class log_softplus(sp.Function):
    r""":math:`\log\log(1 + e^x)`, stable for x -> -inf (where softplus underflows)."""

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sp.exp(x - softplus(x) - log_softplus(x))


class logsumexp(sp.Function):
    r""":math:`\log\sum_k e^{a_k}`: the log of a sum of positive terms, finite where each underflows."""

    def fdiff(self, argindex=1):
        return sp.exp(self.args[argindex - 1] - self)


def _np_log_softplus(x):
    x = np.asarray(x, dtype=np.float64)
    small = x < -30.0
    if not small.any():  # (the usual case: a solve's margins)
        return _np_log_of_softplus(x)
    # the small entries mended in place: the two branches over every entry (np.where) cost half as much again
    with np.errstate(divide="ignore", under="ignore"):  # (softplus of the smallest underflows to 0 there)
        out = np.asarray(_np_log_of_softplus(x))
    xs = x[small]
    out[small] = xs + np.log1p(-0.5 * np.exp(xs))
    return out


def _np_log_of_softplus(x):
    """log softplus(x), softplus as np.logaddexp(0, x) computes it, max(x, 0) + log1p(e^-|x|), in vectorised
    ufuncs: logaddexp's loop is not, and was two thirds of the losses of a solve's 400 saves."""
    return np.log(np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))))


def _jax_log_softplus(x):
    from flowsim._jax import jnp

    small = x < -30.0
    xs = jnp.where(small, x, 0.0)
    return jnp.where(small, xs + jnp.log1p(-0.5 * jnp.exp(xs)), jnp.log(jnp.logaddexp(0.0, jnp.where(small, 0.0, x))))


def numpy_functions():
    from scipy.special import logsumexp as lse

    return {"softplus": lambda x: np.logaddexp(0.0, x), "log_softplus": _np_log_softplus,
            "logsumexp": lambda *a: lse(np.stack(np.broadcast_arrays(*a)), axis=0)}


def jax_functions():
    from flowsim._jax import jax, jnp

    return {"softplus": lambda x: jnp.logaddexp(0.0, x), "log_softplus": _jax_log_softplus,
            "logsumexp": lambda *a: jax.nn.logsumexp(jnp.stack(jnp.broadcast_arrays(*a)), axis=0)}
