r"""Directions: the map a flow applies to the gradient at its evaluation point.

A direction is a small immutable object whose ``field(s)`` rule returns one entry's
:math:`d\theta/d\tau` (gradient clock, ``clock = None``: real time is :math:`dt = e^{-\tilde S}d\tau`,
docs/theory.md 4) or :math:`d\theta/ds` (``clock = "schedule"``: :math:`ds = \eta(t)\,dt` with
:math:`\eta = lr\,(t+1)^{-decay}`, for scale-free maps such as sign(g)), from :class:`DirectionSymbols`:

- ``w``: the entry at the evaluation point, ``dbeta``: :math:`\partial\beta/\partial w` there, ``r``:
  the data coupling there, ``G = -dbeta r``: the O(1) gradient direction there,
- ``N``: the dual norm of the gradient direction at theta (``norm = p`` selects it; a flow has one N),
- ``P``: :math:`\sum_i p_i^2 z_{ij}^2` (per-sample second moment, when ``needs_P``; then r and P come scaled
  per coordinate, r_j / c_j and P_j / c_j^2, so the rule must be unchanged by that scaling, as the Adam
  proxy's r_j / sqrt(P_j) is: unscaled, P underflows where r does not), ``n``: samples,
- ``sigma``: sign(G), held piecewise constant by the solver (Filippov; set ``uses_sign``).

``follows_gradient = True`` promises that the field carries the factor dbeta (so critical points are
rest points and invariant planes stay invariant). ``tied_speedup(depth)``: how much faster the tied
network that a balanced product follows runs (None: not known). To add a direction, subclass
:class:`Direction` as a frozen dataclass and write ``field``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import sympy as sp

from flowsim.symbolic.expression import ExpressionError, parse
from flowsim.symbolic.part import Part
from flowsim.symbolic.points import check_norm, dual_power


class DirectionSymbols(NamedTuple):
    w: sp.Symbol
    dbeta: sp.Expr
    r: sp.Symbol
    G: sp.Expr
    N: sp.Symbol
    P: sp.Symbol
    n: sp.Symbol
    sigma: sp.Symbol


@dataclass(frozen=True)
class Direction(Part):
    """Base of directions (see the module docstring)."""

    clock = None
    norm = None
    uses_sign = False
    needs_P = False
    follows_gradient = False

    def field(self, s: DirectionSymbols) -> sp.Expr:
        raise NotImplementedError

    def tied_speedup(self, depth):
        return None

    def tied_lr(self, depth):
        """The factor on the schedule's lr of the tied net a balanced product follows (schedule-clock directions)."""
        return 1.0


@dataclass(frozen=True)
class Gradient(Direction):
    r"""The gradient itself: :math:`\dot\theta = -\nabla L(\tilde\theta)`."""

    follows_gradient = True

    def field(self, s):
        return -s.G

    def tied_speedup(self, depth):
        return float(depth)  # the tied gradient is L times each layer's


@dataclass(frozen=True)
class Steepest(Direction):
    r"""Steepest descent for the l_p norm: :math:`\dot\theta = -\|g\|_q\,\mathrm{sign}(g)|g|^{q-1}/\|g\|_q^{q-1}`
    (p = 2: the gradient; p = inf: :math:`-\|g\|_1\mathrm{sign}(g)`, a Filippov system). p = 1 (greedy
    coordinate descent) switches on argmax |g_j|, a discontinuity flowsim's events do not locate."""

    norm: float = 2
    follows_gradient = True

    def __post_init__(self):
        object.__setattr__(self, "norm", check_norm(self.norm, "norm (p = 1 is coordinate descent, not integrated)"))

    @property
    def uses_sign(self):
        return math.isinf(self.norm)

    def field(self, s):
        return -s.N * dual_power(s.G, s.N, self.norm, s.sigma)

    def tied_speedup(self, depth):
        # tied gradient L g: N_tied = L ||g||_q against L^(1/q) ||g||_q over L equal layers, so the tied field
        # is L^(2 - 2/q) = L^(2/p) times each layer's (L for p = 2, 1 for p = inf)
        return float(depth) ** (2.0 / self.norm)


@dataclass(frozen=True)
class Normalized(Direction):
    r"""The unit-l_p steepest direction in the schedule clock: :math:`d\theta/ds = -\mathrm{sign}(g)|g|^{q-1}/\|g\|_q^{q-1}`
    (p = 2: normalised GD :math:`-g/\|g\|_2`; p = inf: sign descent)."""

    norm: float = 2
    clock = "schedule"
    follows_gradient = True  # sign(g)|g|^(q-1) carries the gradient's factor (p = inf: sign(g), a Filippov field)

    def __post_init__(self):
        object.__setattr__(self, "norm", check_norm(self.norm))

    @property
    def uses_sign(self):
        return math.isinf(self.norm)

    def field(self, s):
        return -dual_power(s.G, s.N, self.norm, s.sigma)

    def tied_speedup(self, depth):
        return 1.0  # a unit direction: scaling g changes nothing (tied_lr carries the layers' share)

    def tied_lr(self, depth):
        # the unit-l_p direction over L equal layers gives each L^(-(q-1)/q) = L^(-1/p) of the tied net's step
        return float(depth) ** (-1.0 / self.norm)


@dataclass(frozen=True)
class AdamProxyDirection(Direction):
    r"""The beta_2 -> 1 proxy of mini-batch Adam (seed 002, Prop. 4.1; docs/theory.md 3):
    :math:`\Phi = \sqrt{b(N-1)/N}\,S \oslash ((b-1)S^2 + (N-b)Q)^{1/2}`, S = sum_n g_n, Q = sum_n g_n^2."""

    batch: int = 1
    clock = "schedule"
    needs_P = True

    def __post_init__(self):
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise ValueError(f"batch must be a positive int (1: per-sample Adam); got {self.batch!r}.")

    def field(self, s):
        # -Phi with S = -dbeta r, Q = dbeta^2 P: dbeta cancels up to its sign (scale-free in q)
        b, n = self.batch, s.n
        if b == 1:
            return sp.sign(s.dbeta) * s.r / sp.sqrt(n * s.P)
        return sp.sign(s.dbeta) * sp.sqrt(b * (n - 1) / n) * s.r / sp.sqrt((b - 1) * s.r**2 + (n - b) * s.P)

    def tied_speedup(self, depth):
        return 1.0

    def describe(self):
        return [f"batch={self.batch}"]


@dataclass(frozen=True)
class Preconditioned(Direction):
    r"""A diagonal preconditioner: :math:`\dot\theta = -D(w)\,\nabla L`, D > 0 a function of the entry
    (a callable on a sympy symbol, or an expression in ``w``), e.g. ``lambda w: 1 + w**2``."""

    name: str = "D"
    weight: object = None
    follows_gradient = True

    def __post_init__(self):
        if self.weight is None:
            raise ValueError("weight is required: the preconditioner D(w) > 0, e.g. weight=lambda w: 1 + w**2.")
        w = sp.Symbol("w", real=True)
        try:
            if isinstance(self.weight, str):
                e = parse(self.weight, {"w": w})
            elif callable(self.weight) and not isinstance(self.weight, sp.Basic):
                e = sp.sympify(self.weight(w), strict=True)
            else:
                e = sp.sympify(self.weight, strict=True)
        except ExpressionError as err:
            raise ValueError(f"weight must be an expression in w or a callable of it: {err}") from None
        except (sp.SympifyError, TypeError, SyntaxError):
            raise ValueError(f"weight must be an expression in w or a callable of it; got {self.weight!r}.") from None
        e = e.xreplace({s: w for s in e.free_symbols if s.name == "w"})
        if e.free_symbols - {w}:
            raise ValueError(f"weight must be a function of the entry w only; got {e}.")
        if not (e.is_positive or all(_positive_real(e.subs(w, x)) for x in (-10, -1, 0, 1, 10))):
            raise ValueError(f"weight must be real and > 0 at every entry (a preconditioner); got {e}.")
        object.__setattr__(self, "weight", e)

    def field(self, s):
        return -self.weight.xreplace({sp.Symbol("w", real=True): s.w}) * s.G

    def describe(self):
        return [f"{self.name}={self.weight}"]


def _positive_real(value) -> bool:
    z = complex(value) if value.is_finite else complex("nan")
    return z.imag == 0 and z.real > 0
