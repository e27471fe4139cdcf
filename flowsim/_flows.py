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

    def tied_equivalent(self, depth):
        """The flow on the tied net w^L that a balanced depth-L product follows, and its speed-up
        (see :mod:`flowsim._balanced`): the tied gradient is L times each layer's."""
        return self, float(depth)

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

    def tied_equivalent(self, depth):
        # the dual norm over L equal layers is L^(1/q) that of one, so each layer moves rho L^(-1/p)
        return SAM(self.rho / depth ** (1.0 / self.norm), self.norm), float(depth)

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

    def tied_equivalent(self, depth):
        return USAM(self.rho / depth), float(depth)  # rho g: the tied g is L times each layer's

    @property
    def key(self):
        return ("USAM",)

    def __str__(self):
        return f"USAM(rho={self.rho:g})"


def follows_gradient(flow) -> bool:
    """GD, USAM and lp-SAM with p finite: no sign, no schedule clock. Their rest points are the loss's
    critical points, and an entry's field carries the gradient's factor dbeta/dw (so w = 0 planes of
    tied and difference nets are invariant); used by ``_critical`` and ``_reachable``."""
    return not flow.uses_sign and flow.clock is None


def _field_at(dbeta_t, r_t, P_t, n, sigma):
    """The gradient flows' field at the evaluation point: -grad L(theta~) / e^{S~} = dbeta/dw(w~) r~."""
    return dbeta_t * r_t


for _cls in (GD, SAM, USAM):
    _cls.field = staticmethod(_field_at)
    _cls.clock = None
    _cls.needs_P = False


def _check_schedule(lr, decay):
    lr, decay = float(lr), float(decay)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number (eta_t = lr (t+1)^-decay); got {lr!r}.")
    if not 0 <= decay <= 1:
        raise ValueError(f"decay must be in [0, 1]; got {decay!r}.")
    return lr, decay


class _Scheduled:
    """Shared by flows with a learning-rate schedule: validation, and theta~ = theta."""

    rho = 0.0
    dual_exponent = None
    clock = "schedule"

    def __post_init__(self):
        lr, decay = _check_schedule(self.lr, self.decay)
        object.__setattr__(self, "lr", lr)
        object.__setattr__(self, "decay", decay)

    def perturbation(self, w, G, N, S, rho, sigma):
        return sp.Integer(0)

    def tied_equivalent(self, depth):
        return self, 1.0  # sign(g) and the Adam proxy are invariant to scaling g


@dataclass(frozen=True)
class SignFlow(_Scheduled):
    r"""Sign flow :math:`\dot\theta = -\eta(t)\,\mathrm{sign}(g)`, :math:`\eta = lr\,(t+1)^{-a}`: the
    small-step limit of Signum and full-batch Adam (MATH.md 3). Integrated in the schedule clock
    :math:`ds = \eta(t)\,dt` as a Filippov system (sign switches by events). The default decay = 1
    makes s = lr log(1+t), so every horizon is a short integration."""

    lr: float = 1.0
    decay: float = 1.0
    uses_sign = True
    needs_P = False

    @staticmethod
    def field(dbeta_t, r_t, P_t, n, sigma):
        return -sigma

    @property
    def key(self):
        return ("SignFlow",)

    def __str__(self):
        return f"SignFlow(lr={self.lr:g}, decay={self.decay:g})"


@dataclass(frozen=True)
class AdamProxy(_Scheduled):
    r"""The beta_2 -> 1 proxy of (mini-batch) Adam (seed 002, Prop. 4.1 and its mini-batch form):
    :math:`\dot\theta = -\eta(t)\,\Phi`, :math:`\Phi = \sqrt{b(N-1)/N}\,S \oslash ((b-1)S^2 + (N-b)Q)^{1/2}`,
    S = sum_n g_n, Q = sum_n g_n^2 (elementwise); b = 1 gives S / sqrt(N Q) (per-sample Adam),
    b = N gives sign(S) (the sign flow). Integrated in the schedule clock ds = eta(t) dt."""

    lr: float = 1.0
    decay: float = 1.0
    batch: int = 1
    uses_sign = False
    needs_P = True

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise ValueError(f"batch must be a positive int (1: per-sample Adam); got {self.batch!r}.")

    def field(self, dbeta_t, r_t, P_t, n, sigma):
        # -Phi with S = -dbeta r, Q = dbeta^2 P: dbeta cancels up to its sign (scale-free in q)
        b = self.batch
        if b == 1:
            return sp.sign(dbeta_t) * r_t / sp.sqrt(n * P_t)
        return sp.sign(dbeta_t) * sp.sqrt(b * (n - 1) / n) * r_t / sp.sqrt((b - 1) * r_t**2 + (n - b) * P_t)

    @property
    def key(self):
        return ("AdamProxy", self.batch)

    def __str__(self):
        return f"AdamProxy(lr={self.lr:g}, decay={self.decay:g}, batch={self.batch})"
