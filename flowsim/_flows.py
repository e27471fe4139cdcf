r"""Continuous-time flows. Every flow here is :math:`\dot\theta = -\nabla L(\tilde\theta)` at an
evaluation point :math:`\tilde\theta = \theta + \rho P(g)`; a flow is the (symbolic) rule for P.

Symbols the rule may use, per parameter entry: ``w`` (the entry), ``G`` (the O(1) gradient
direction, :math:`\nabla L = e^S G`), ``N`` (the dual norm :math:`\|G\|_q` over all parameters
jointly), ``S`` (log gradient scale), ``rho`` and ``sigma`` (sign(G), held piecewise constant by the
solver between sign switches so sign flows are integrated as Filippov systems).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp


def _check_rho(rho) -> float:
    try:
        rho = float(rho)
    except (TypeError, ValueError):
        raise ValueError(f"rho must be a real number >= 0; got {rho!r}.") from None
    if not math.isfinite(rho) or rho < 0:
        raise ValueError(f"rho must be finite and >= 0 (the perturbation radius); got {rho!r}.")
    return rho


@dataclass(frozen=True)
class GD:
    r"""Gradient flow :math:`\dot\theta = -\nabla L(\theta)`."""

    rho: float = 0.0
    uses_sign = False
    dual_exponent = None

    def __post_init__(self):
        if self.rho != 0.0:
            raise ValueError("GD takes no rho; use SAM(rho=...) or USAM(rho=...) for a perturbed flow.")

    def perturbation(self, w, G, N, S, rho, sigma):
        return sp.Integer(0)

    @property
    def key(self):
        return ("GD",)

    def __str__(self):
        return "GD()"


@dataclass(frozen=True)
class SAM:
    r"""Sharpness-aware minimisation flow with an :math:`\ell_p` ball of radius rho:
    :math:`\tilde\theta = \theta + \rho\,\mathrm{sign}(g)|g|^{q-1}/\|g\|_q^{q-1}`, 1/p + 1/q = 1.

    ``norm=2``: :math:`\rho g/\|g\|_2`; ``norm=inf``: :math:`\rho\,\mathrm{sign}(g)` (a Filippov
    system: sign switches are located by events and sliding on w_j = 0 is handled). The gradient at the
    perturbed point is applied at theta; the Jacobian of the perturbation is not differentiated
    (arXiv 2603.08290).
    """

    rho: float
    norm: float = 2

    def __post_init__(self):
        object.__setattr__(self, "rho", _check_rho(self.rho))
        try:
            p = float(self.norm)
        except (TypeError, ValueError):
            raise ValueError(f"norm must be a number > 1 or float('inf'); got {self.norm!r}.") from None
        if not p > 1:
            raise ValueError(
                f"norm must be > 1 (its dual exponent q = p/(p-1) must be finite) or float('inf'); got {self.norm!r}."
            )
        object.__setattr__(self, "norm", p)

    @property
    def uses_sign(self) -> bool:
        return math.isinf(self.norm)

    @property
    def dual_exponent(self):
        if math.isinf(self.norm):
            return None
        return 2.0 if self.norm == 2 else self.norm / (self.norm - 1.0)

    def perturbation(self, w, G, N, S, rho, sigma):
        if math.isinf(self.norm):
            return rho * sigma
        if self.norm == 2:
            return rho * G / N
        q = sp.nsimplify(self.dual_exponent)
        return rho * sp.sign(G) * sp.Abs(G) ** (q - 1) / N ** (q - 1)

    @property
    def key(self):
        return ("SAM", self.norm)

    def __str__(self):
        return f"SAM(rho={self.rho:g}, norm={self.norm:g})"


@dataclass(frozen=True)
class USAM:
    r"""Unnormalised SAM flow: :math:`\tilde\theta = \theta + \rho\,\nabla L(\theta)`."""

    rho: float

    uses_sign = False
    dual_exponent = None

    def __post_init__(self):
        object.__setattr__(self, "rho", _check_rho(self.rho))

    def perturbation(self, w, G, N, S, rho, sigma):
        return rho * sp.exp(S) * G

    @property
    def key(self):
        return ("USAM",)

    def __str__(self):
        return f"USAM(rho={self.rho:g})"


FLOWS = {"gd": GD, "sam": SAM, "usam": USAM}
