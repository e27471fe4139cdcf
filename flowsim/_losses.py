r"""Margin losses l(m), written so that sympy derives q(m) = -l'(m) and every quantity the solver
needs has a log-domain form (no overflow or underflow for margins in the millions).

The solver works with :math:`\log q_i` and :math:`S = \log \frac1n \sum_i q_i`, so that
:math:`\nabla_\beta L = -e^{S} Z^\top \mathrm{softmax}(\log q)` with an O(1) direction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp


class softplus(sp.Function):
    r""":math:`\log(1 + e^x)`, printed as ``logaddexp(0, x)`` (stable for any x)."""

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sp.exp(x - softplus(x))


class log_softplus(sp.Function):
    r""":math:`\log\log(1 + e^x)`, stable for x -> -inf (where softplus underflows)."""


def _np_log_softplus(x):
    x = np.asarray(x, dtype=np.float64)
    small = x < -30.0
    xs = np.where(small, x, 0.0)
    return np.where(small, xs + np.log1p(-0.5 * np.exp(xs)), np.log(np.logaddexp(0.0, np.where(small, 0.0, x))))


def _jax_log_softplus(x):
    import jax.numpy as jnp

    small = x < -30.0
    xs = jnp.where(small, x, 0.0)
    return jnp.where(small, xs + jnp.log1p(-0.5 * jnp.exp(xs)), jnp.log(jnp.logaddexp(0.0, jnp.where(small, 0.0, x))))


def numpy_functions():
    return {"softplus": lambda x: np.logaddexp(0.0, x), "log_softplus": _np_log_softplus}


def jax_functions():
    import jax.numpy as jnp

    return {"softplus": lambda x: jnp.logaddexp(0.0, x), "log_softplus": _jax_log_softplus}


M = sp.Symbol("m", real=True)


@dataclass(frozen=True)
class Loss:
    """A margin loss: ``name``, the sympy expression l(m), and its log-domain logarithm."""

    name: str
    expr: sp.Expr
    log_expr: sp.Expr

    @property
    def log_q(self) -> sp.Expr:
        """log q(m), q = -l'(m), derived by sympy and pushed into the log domain."""
        q = -sp.diff(self.expr, M)
        return sp.expand_log(sp.log(q), force=True)

    def __str__(self) -> str:
        return self.name


exponential_loss = Loss("exponential", sp.exp(-M), -M)
logistic_loss = Loss("logistic", softplus(-M), log_softplus(-M))

LOSSES = {"exponential": exponential_loss, "logistic": logistic_loss}


def get_loss(loss) -> Loss:
    if isinstance(loss, Loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(LOSSES)} or pass a flowsim.Loss.")
    return LOSSES[loss]
