r"""A flow is an evaluation point and a direction applied there (docs/theory.md 3):
:math:`\dot\theta = \Phi(\nabla L(\tilde\theta))`, :math:`\tilde\theta = \theta + \rho P(\nabla L(\theta))`.

``Flow(point, direction, rho=..., lr=..., decay=...)`` composes the parts of :mod:`flowsim.symbolic.points`
and :mod:`flowsim.symbolic.directions`; the built-ins (:mod:`flowsim.symbolic.flows`) are made with the
same constructor. l2-SAM from its parts::

    fs.Flow(fs.points.Ascent(norm=2), fs.directions.Gradient(), rho=0.1)   # == fs.SAM(0.1, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import sympy as sp

from flowsim.symbolic.directions import Direction, DirectionSymbols, Preconditioned
from flowsim.symbolic.points import EvaluationPoint, PointSymbols, dual_exponent


def check_rho(rho) -> float:
    if isinstance(rho, (bool, str, bytes)):  # float("0.1") and float(True) read them as numbers
        raise ValueError(f"rho must be a real number >= 0 (not {type(rho).__name__}); got {rho!r}.")
    try:
        rho = float(rho)
    except (TypeError, ValueError):
        raise ValueError(f"rho must be a real number >= 0; got {rho!r}.") from None
    if not math.isfinite(rho) or rho < 0:
        raise ValueError(f"rho must be finite and >= 0 (the perturbation radius); got {rho!r}.")
    return rho


def check_schedule(lr, decay):
    lr, decay = float(lr), float(decay)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number (eta_t = lr (t+1)^-decay); got {lr!r}.")
    if not 0 <= decay <= 1:
        raise ValueError(f"decay must be in [0, 1]; got {decay!r}.")
    return lr, decay


@dataclass(frozen=True)
class Flow:
    """An evaluation point and a direction (see the module docstring). ``rho``: the point's radius;
    ``lr``, ``decay``: the schedule eta(t) = lr (t+1)^-decay of schedule-clock directions. ``name``
    labels it in output (not part of its identity)."""

    point: EvaluationPoint
    direction: Direction
    rho: float = 0.0
    lr: float = 1.0
    decay: float = 1.0
    name: str | None = field(default=None, compare=False)
    #: the hyper-parameters a named flow shows in its label (its constructor's arguments)
    shows: tuple = field(default=(), compare=False)

    def __post_init__(self):
        if not isinstance(self.point, EvaluationPoint):
            raise ValueError(f"point must be a flowsim.points.EvaluationPoint (Here(), Ascent(norm), ...); got {self.point!r}.")
        if not isinstance(self.direction, Direction):
            raise ValueError(f"direction must be a flowsim.directions.Direction (Gradient(), ...); got {self.direction!r}.")
        rho = check_rho(self.rho)
        if rho and not self.point.uses_rho:
            raise ValueError(f"rho={rho:g} has no effect at the point {self.point}; use a perturbed point "
                             "(e.g. fs.SAM(rho=...) or fs.USAM(rho=...)) or leave rho out.")
        object.__setattr__(self, "rho", rho)
        lr, decay = check_schedule(self.lr, self.decay)
        if self.direction.clock is None and (lr, decay) != (1.0, 1.0):
            raise ValueError(f"lr and decay set the schedule clock; {self.direction} runs in the gradient clock "
                             "(its speed is the loss's own), so leave them out.")
        object.__setattr__(self, "lr", lr)
        object.__setattr__(self, "decay", decay)
        if len({p for p in (self.point.norm, self.direction.norm) if p is not None}) > 1:
            raise ValueError(f"the point's norm ({self.point.norm:g}) and the direction's ({self.direction.norm:g}) "
                             "differ; a flow has one dual norm N.")

    @property
    def norm(self):
        return self.point.norm if self.point.norm is not None else self.direction.norm

    @property
    def dual_exponent(self):
        """q of the norm N the flow uses (None: N is not used)."""
        return None if self.norm is None else dual_exponent(self.norm)

    @property
    def uses_sign(self) -> bool:
        """The field has a sign in it (held piecewise constant, Filippov). A point's sign(g) scaled by
        rho = 0 is not one: l_inf-SAM at rho = 0 is gradient flow, and watching sign(g_k) of an entry
        decaying to 0 there would only count rounding flips (Zeno "switching")."""
        return (self.point.uses_sign and self.rho > 0) or self.direction.uses_sign

    @property
    def affine_in_sign(self) -> bool:
        """A sign flow whose field is affine in the signs: no sign in its evaluation point (or rho = 0) and a
        direction linear in sigma. Filippov's average over the sign corners of several switching surfaces is then
        the field at the averaged signs (``flowsim.field.surfaces``)."""
        if not self.uses_sign or (self.point.uses_sign and self.rho > 0):
            return False
        w, dbeta, r, P, n, N, sigma = sp.symbols("w dbeta r P n N sigma")
        return sp.simplify(sp.diff(self.field(w, dbeta, r, P, n, N, sigma), sigma, 2)) == 0

    @property
    def clock(self):
        return self.direction.clock

    @property
    def needs_P(self) -> bool:
        return self.direction.needs_P

    @property
    def follows_gradient(self) -> bool:
        return self.point.follows_gradient and self.direction.follows_gradient and not self.uses_sign

    def perturbation(self, w, G, N, S, rho, sigma):
        return self.point.perturbation(PointSymbols(w, G, N, S, rho, sigma))

    def normed(self, w, G, N, S, rho, sigma):
        return self.point.normed(PointSymbols(w, G, N, S, rho, sigma))

    def field(self, w, dbeta, r, P, n, N, sigma):
        return self.direction.field(DirectionSymbols(w, dbeta, r, -dbeta * r, N, P, n, sigma))

    def tied_equivalent(self, depth):
        """``(flow, speedup)`` that the tied network w^L follows when a depth-L product starts
        balanced (docs/theory.md 9), or None when the parts do not say."""
        if not (_tied_form_is_own(self.point, "tied_rho", ("perturbation", "normed"))
                and _tied_form_is_own(self.direction, "tied_speedup", ("field",))):
            return None
        rho, speedup = self.point.tied_rho(self.rho, depth), self.direction.tied_speedup(depth)
        if rho is None or speedup is None:
            return None
        return replace(self, rho=rho, lr=self.lr * self.direction.tied_lr(depth)), speedup

    @property
    def key(self):
        return (self.point.key, self.direction.key)

    def __str__(self):
        if self.name is None:
            rho = f", rho={self.rho:g}" if self.point.uses_rho else ""
            return f"Flow({type(self.point).__name__}({', '.join(self.point.describe())}), " \
                   f"{type(self.direction).__name__}({', '.join(self.direction.describe())}){rho})"
        args = [f"{a}={self._value(a):g}" for a in self.shows]
        return f"{self.name}({', '.join(args)})"

    def _value(self, name):
        for holder in (self, self.point, self.direction):
            if name in getattr(holder, "__dataclass_fields__", {}):
                return getattr(holder, name)
        raise AttributeError(name)


def _tied_form_is_own(part, form, rules) -> bool:
    """The part's tied form describes its own rule: declared by the class that writes the rule, or by a subclass
    of it (a subclass of Gradient with a field of its own, -G^3, inherited tied_speedup = L: its balanced starts
    were reduced at Gradient's speed, beta_2 7.70 where the full product reaches 6.89)."""
    def owner(name):
        return next(c for c in type(part).__mro__ if name in vars(c))

    return all(issubclass(owner(form), owner(rule)) for rule in rules)


def rest_points_are_critical(flow) -> bool:
    """The flow's rest points are the loss's critical points, held as such: it follows the gradient
    (``Flow.follows_gradient``: an entry's field carries dbeta/dw, which :mod:`flowsim.symbolic.reachable`
    uses) in the solver's own clock, not a schedule's; used by :mod:`flowsim.integrate.critical`."""
    return flow.follows_gradient and flow.clock is None


def commutes_with_sign_flips(flow) -> bool:
    """Flipping the sign of some entries (and the data columns where their product changes sign) maps
    the flow's trajectories to trajectories: true of flowsim's own parts, which act entry by entry
    through odd maps with sign-blind norms and weights; not assumed of parts of your own. Used by the
    balanced-start reduction and :func:`flowsim.reachable_signs`."""
    own = ("flowsim.symbolic.points", "flowsim.symbolic.directions")
    parts = (flow.point, flow.direction)  # (a preconditioner's weight is a user's function of w: not assumed even)
    return all(type(part).__module__ in own for part in parts) and not isinstance(flow.direction, Preconditioned)
