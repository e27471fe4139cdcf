r"""Evaluation points: where a flow takes its gradient, :math:`\tilde\theta = \theta + \rho P`.

A point is a small immutable object with a ``perturbation(s)`` rule returning :math:`P` for one
parameter entry from the symbols in ``s`` (:class:`PointSymbols`):

- ``w``: the entry, ``G``: its O(1) gradient direction (:math:`\nabla L = e^S G`),
- ``N``: the dual norm :math:`\|H\|_q` over all entries of ``normed(s)`` (G unless the point says
  otherwise; q = p/(p-1) for ``norm = p``), ``S``: the log gradient scale,
- ``rho``: the radius, ``sigma``: sign(G), held piecewise constant by the solver (Filippov).

``follows_gradient = True`` promises that P vanishes where G does (so the loss's critical points are
rest points and invariant planes stay invariant, docs/theory.md 9); ``vanishes_with_gradient = True`` that P tends
to 0 with the whole gradient (a normalised g / ||g|| does not), so a regression's minima are rest points. ``tied_rho(rho, depth)`` is the
radius of the tied network a balanced product follows (None: not known, integrate the product).
To add a point, subclass :class:`EvaluationPoint` as a frozen dataclass and write ``perturbation``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import sympy as sp

from flowsim._checks import is_real_number
from flowsim.symbolic.part import Part


class PointSymbols(NamedTuple):
    w: sp.Symbol
    G: sp.Expr
    N: sp.Symbol
    S: sp.Symbol
    rho: sp.Symbol
    sigma: sp.Symbol


#: the least finite p taken: its dual exponent q = p/(p-1) is at most 51, and |g|^(q-1) stays within what the
#: compiled field holds (p = 1.01, q = 101, overflows it; nearer 1 a solve does not finish)
NORM_MIN = 1.02


def check_norm(norm, what="norm") -> float:
    """p >= NORM_MIN or inf: the l_p ball, with a finite dual exponent q = p/(p-1) >= 1."""
    try:
        p = float(norm)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number > 1 or float('inf'); got {norm!r}.") from None
    if not p > 1:
        raise ValueError(f"{what} must be > 1 (its dual exponent q = p/(p-1) must be finite) or float('inf'); "
                         f"got {norm!r}.")
    if p < NORM_MIN:
        raise ValueError(f"{what} must be at least {NORM_MIN} (or float('inf')): its dual exponent q = p/(p-1) = "
                         f"{p / (p - 1):.4g} raises |g| to the power q - 1, beyond what float64 holds above q = 51; "
                         f"got {norm!r}.")
    return p


def dual_exponent(p):
    """q with 1/p + 1/q = 1 (q = 1 for p = inf)."""
    return 1.0 if math.isinf(p) else (2.0 if p == 2 else p / (p - 1.0))


def dual_power(G, N, p, sigma):
    r""":math:`\mathrm{sign}(G)|G|^{q-1}/N^{q-1}`: the unit-l_p vector maximising <G, v> (sigma for p = inf)."""
    if math.isinf(p):
        return sigma
    if p == 2:
        return G / N
    q = sp.nsimplify(dual_exponent(p))
    return sp.sign(G) * sp.Abs(G) ** (q - 1) / N ** (q - 1)


@dataclass(frozen=True)
class EvaluationPoint(Part):
    """Base of evaluation points (see the module docstring)."""

    norm = None  # p of the norm N, None when N is not used
    uses_rho = True
    follows_gradient = True
    #: P -> 0 as the whole gradient does (not only entry by entry): the minima of a regression are rest points
    vanishes_with_gradient = True

    @property
    def uses_sign(self) -> bool:
        return self.norm is not None and math.isinf(self.norm)

    def perturbation(self, s: PointSymbols) -> sp.Expr:
        raise NotImplementedError

    def normed(self, s: PointSymbols) -> sp.Expr:
        return s.G

    def tied_rho(self, rho, depth):
        return None


@dataclass(frozen=True)
class Here(EvaluationPoint):
    """No perturbation: the gradient at theta itself."""

    uses_rho = False

    def perturbation(self, s):
        return sp.Integer(0)

    def tied_rho(self, rho, depth):
        return rho


@dataclass(frozen=True)
class Ascent(EvaluationPoint):
    r"""Normalised ascent in the l_p ball (SAM): :math:`P = \mathrm{sign}(G)|G|^{q-1}/\|G\|_q^{q-1}`;
    ``norm=inf`` gives sign(G) (a Filippov system).

    ``eps > 0`` (finite p) smooths the normalisation, :math:`\rho\,\mathrm{sign}(g)|g|^{q-1}/\|(g, \epsilon)\|_q^{q-1}`
    (at p = 2, :math:`\rho g/\sqrt{\|g\|^2 + \epsilon^2}`): the perturbation then vanishes with the gradient, so
    the loss's minima are rest points. Up to the first minimum the flow reached, the exact flow (eps = 0) is its
    eps -> 0 limit; after it, not: the exact flow slides along the minima (docs/theory.md 12). Written with
    :math:`g = e^S G` as :math:`e^{(q-1)S}\mathrm{sign}(G)|G|^{q-1}/(e^{qS}N^q + \epsilon^q)^{(q-1)/q}`, which
    neither overflows nor divides by 0 as the loss (e^S) falls."""

    norm: float = 2
    eps: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "norm", check_norm(self.norm))
        eps = self.eps
        if not is_real_number(eps) or not math.isfinite(eps) or eps < 0:
            raise ValueError(f"eps must be a finite number >= 0 (the smoothing of ||g|| in rho g / sqrt(||g||^2 + "
                             f"eps^2)); got {eps!r}.")
        if eps and math.isinf(self.norm):
            raise ValueError(f"eps = {eps:g} smooths a finite p's normalisation; at norm = inf the perturbation is "
                             "rho sign(g), which has none: use a finite norm or eps = 0.")
        object.__setattr__(self, "eps", float(eps))

    @property
    def vanishes_with_gradient(self) -> bool:
        return self.eps > 0

    def perturbation(self, s):
        if not self.eps:
            return dual_power(s.G, s.N, self.norm, s.sigma)
        q = sp.nsimplify(dual_exponent(self.norm))
        smoothed = (sp.exp(q * s.S) * s.N**q + sp.Float(self.eps) ** q) ** (1 / q)
        return sp.exp(s.S) ** (q - 1) * dual_power(s.G, smoothed, self.norm, s.sigma)

    def tied_rho(self, rho, depth):
        if self.eps:
            return None  # the tied net's own eps would be eps / L^(1/q): not a radius alone
        # the dual norm over L equal layers is L^(1/q) that of one, so each layer moves rho L^(-1/p)
        return rho / depth ** (1.0 / self.norm)


@dataclass(frozen=True)
class UnnormalizedAscent(EvaluationPoint):
    r"""Unnormalised ascent (USAM): :math:`\rho P = \rho\nabla L = \rho e^S G`."""

    def perturbation(self, s):
        return sp.exp(s.S) * s.G

    def tied_rho(self, rho, depth):
        return rho / depth  # rho g: the tied g is L times each layer's


@dataclass(frozen=True)
class AdaptiveAscent(EvaluationPoint):
    r"""Adaptive SAM's point (Kwon et al. 2021): :math:`P = T^2 G/\|T G\|_2` with
    :math:`T = |w| + \eta` elementwise (``norm=2``; other p: the l_p ball in the T-scaled metric)."""

    vanishes_with_gradient = False
    norm: float = 2
    eta: float = 0.01

    def __post_init__(self):
        object.__setattr__(self, "norm", check_norm(self.norm))
        eta = float(self.eta)
        if not (math.isfinite(eta) and eta >= 0):
            raise ValueError(f"eta must be finite and >= 0 (T = |w| + eta); got {self.eta!r}.")
        object.__setattr__(self, "eta", eta)

    def _T(self, w):
        return sp.Abs(w) + self.eta

    def perturbation(self, s):
        return self._T(s.w) * dual_power(self._T(s.w) * s.G, s.N, self.norm, s.sigma)

    def normed(self, s):
        return self._T(s.w) * s.G

    def tied_rho(self, rho, depth):
        # T = |w| + eta is the same in every equal layer: as Ascent, the ball over L layers is L^(1/q) wider
        return rho / depth ** (1.0 / self.norm)
