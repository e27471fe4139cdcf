r"""Margin losses l(m) from any sympy expression; flowsim derives what the solver needs.

The solver works with :math:`\log q_i`, :math:`q = -l'(m)`, and :math:`S = \log \frac1n \sum_i q_i`, so
that :math:`\nabla_\beta L = -e^{S} Z^\top \mathrm{softmax}(\log q)` with an O(1) direction
(docs/theory.md, section 4). A :class:`Loss` therefore derives q, pushes :math:`\log q` and
:math:`\log l` into a log-domain form that stays finite for margins in the millions (sums of
exponentials become a log-sum-exp, :math:`\log(1 + e^x)` a softplus), and checks what the clocks
assume: q > 0 everywhere and log q finite in float64 far out in the tail. An exponential tail,
:math:`-\log q(m)/m \to c > 0` as m -> oo, is measured (:attr:`Loss.tail_rate`), not required: the clocks
integrate heavier and lighter tails too, but the max-margin theorems assume one (docs/theory.md 4).

A regression loss (``task="regression"``) is a function of the residual m = x.beta - y instead; its solves take
the sample weights q itself (signed, O(residual)), not their logs, and need no tail (docs/theory.md 12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import sympy as sp
from sympy.functions.elementary.hyperbolic import HyperbolicFunction

from flowsim._checks import fits_float64
from flowsim.symbolic.expression import ExpressionError, parse
from flowsim.symbolic.functions import log_softplus, logsumexp, numpy_functions, softplus

#: the margin symbol every loss is rewritten in
M = sp.Symbol("m", real=True)


def _softplus_form(e):
    """log(1 + exp(x)) -> softplus(x), wherever it appears."""
    def is_softplus(a):
        return isinstance(a, sp.log) and isinstance(a.args[0], sp.Add) and len(a.args[0].args) == 2 \
            and sp.S.One in a.args[0].args and any(isinstance(t, sp.exp) for t in a.args[0].args)

    def to_softplus(a):
        (x,) = [t.args[0] for t in a.args[0].args if isinstance(t, sp.exp)]
        return softplus(x)

    return e.replace(is_softplus, to_softplus)


def _fold_softplus(e):
    """a - softplus(x) -> (a - x) - softplus(-x) where that has fewer operations (softplus(x) - x =
    softplus(-x)): the logistic loss's log q = -m - softplus(-m) becomes -softplus(m), one array
    operation instead of three in every field evaluation."""
    if not isinstance(e, sp.Add):
        return e
    for t in e.args:
        if isinstance(-t, softplus):
            x = (-t).args[0]
            folded = (e - t - x) - softplus(-x)
            if sp.count_ops(folded) < sp.count_ops(e):
                return folded
    return e


def log_domain(e):
    """log(e) written so that no intermediate over- or underflows: products become sums, exponentials
    their exponents, sums of positive terms a log-sum-exp, log(softplus) the log-softplus."""
    e = sp.powsimp(sp.factor_terms(sp.piecewise_fold(e)), combine="exp")  # -Piecewise: the sign goes inside
    if isinstance(e, sp.Piecewise):
        return sp.Piecewise(*[(log_domain(value), where) for value, where in e.args])
    if isinstance(e, sp.exp):
        return e.args[0]
    if isinstance(e, softplus):
        return log_softplus(e.args[0])
    if isinstance(e, sp.Mul) and not e.could_extract_minus_sign():  # log(-a b) is not log(-a) + log(b)
        return sp.Add(*[log_domain(f) for f in e.args])
    if isinstance(e, sp.Pow) and e.exp.is_real:
        return e.exp * log_domain(e.base)
    if isinstance(e, sp.Add) and all(_positive(t) for t in e.args):
        return logsumexp(*[log_domain(t) for t in e.args])
    return sp.log(e)


def _positive(t):
    """True when every factor of the term is positive for every real m (a term a log-sum-exp may take)."""
    factors = t.args if isinstance(t, sp.Mul) else (t,)
    return all(f.is_positive or isinstance(f, (sp.exp, softplus)) for f in factors)


#: margins where q > 0 and the log-domain form are checked against mpmath, and where the tail is read
_CHECK_AT = np.linspace(-30.0, 30.0, 61)
_TAIL_AT = (1e4, 1e6, 1e8)


@dataclass(frozen=True)
class Loss:
    r"""A margin loss l(m): ``Loss(name, expr, margin=None, log_expr=None)``.

    ``expr`` is any sympy expression in one symbol, the margin (found by itself, or named by ``margin``;
    assumptions do not matter). flowsim derives q = -l'(m) and the log-domain forms of log q and log l.
    ``log_expr`` (log l), when given, is checked against the derived one. A loss with hyperbolic
    functions that fails these checks as written is tried in exponentials (``1 - tanh(m)`` as
    ``2/(exp(2m) + 1)``: in float64 the first cancels to 0). Raises ``ValueError`` when q or l is not
    positive on [-30, 30], or when log q is not finite in float64 at margins 1e4 to 1e8. ``tail_rate`` is c
    in -log q(m) ~ c m, nan for a tail that is not exponential (q ~ m^-k): such a loss integrates in every
    clock, but the max-margin theorems need an exponential tail (docs/theory.md 4). A solve from a start
    with a margin where q <= 0 (beyond [-30, 30]) is refused.

    >>> m = sympy.Symbol("m")
    >>> fs.Loss("squared exponential", sympy.exp(-m) ** 2)     # tail rate 2
    >>> fs.Loss("polynomial", (sympy.sqrt(1 + m**2) + m) ** -2)  # q ~ m^-3: tail rate nan
    """

    name: str = field(compare=False)  # a label: losses with one formula are one loss
    expr: sp.Expr
    margin: sp.Symbol | None = None
    log_expr: sp.Expr | None = None
    task: str = "classification"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string; got {self.name!r}.")
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' (a margin loss) or 'regression' (a loss of the residual); "
                             f"got {self.task!r}.")
        expr = _sympified(self.expr, "expr")
        margin = _margin_symbol(expr, self.margin)
        expr = _softplus_form(expr.xreplace({margin: M}) if margin is not None else expr)
        given = None if self.log_expr is None else _softplus_form(
            _sympified(self.log_expr, "log_expr").xreplace({margin: M} if margin is not None else {}))
        try:
            self._take(expr, given)
        except ValueError as as_given:
            # 1 - tanh(m): its float64 log q is -inf in the tail, where 2/(exp(2m) + 1) is fine; the form in
            # exponentials is taken only where the form given fails (exp(-m) (2 - tanh m) was fine as given)
            in_exponentials = _softplus_form(sp.simplify(expr.rewrite(sp.exp)))
            if not expr.has(HyperbolicFunction) or in_exponentials.has(HyperbolicFunction):
                raise
            try:
                self._take(in_exponentials, given)
            except ValueError:
                raise as_given from None  # the given form's error names what the user wrote

    def _take(self, expr, given_log_expr):
        """Use ``expr`` as the loss: its log-domain forms, checked (positivity, the tail) as the clocks need."""
        for cached in ("q", "log_q"):
            self.__dict__.pop(cached, None)
        object.__setattr__(self, "expr", expr)
        object.__setattr__(self, "margin", M)
        if self.task == "regression":
            if given_log_expr is not None:
                raise ValueError(f"loss {self.name!r}: log_expr is for margin losses; a regression loss is used as "
                                 "written (leave log_expr out).")
            object.__setattr__(self, "log_expr", sp.log(expr))
            _check_residual_loss(self)
            object.__setattr__(self, "_tail", math.nan)
            return
        derived = log_domain(expr)
        if given_log_expr is not None:
            _check_same(given_log_expr, derived, "log_expr", "log l(m)")
            derived = given_log_expr
        object.__setattr__(self, "log_expr", derived)
        _check_constants(self)
        _check_positive(self)
        object.__setattr__(self, "_tail", _tail_rate(self))

    @cached_property
    def q(self) -> sp.Expr:
        """q(m) = -l'(m), the weight of a sample with margin m."""
        return -sp.diff(self.expr, M)

    @cached_property
    def log_q(self) -> sp.Expr:
        """log q(m) in log-domain form."""
        return _fold_softplus(sp.expand(log_domain(self.q)))

    @cached_property
    def dq(self) -> sp.Expr:
        """dq/dm = -l''(m): how a sample's weight moves with its margin (a regression loss's solves use it)."""
        return sp.diff(self.q, M)

    @property
    def tail_rate(self) -> float:
        """c with -log q(m) / m -> c as m -> oo (1 for the exponential and logistic losses); nan for a margin loss
        whose tail is not exponential, and for a regression loss, which has no tail to ask of."""
        return self._tail

    @cached_property
    def tail_power(self) -> float:
        """k with l(m) ~ c m^-k as m -> oo (q ~ m^-(k+1)), read off the slopes of log q against log m at the margins
        where ``tail_rate`` is read; nan for an exponential tail, one lighter or heavier than every power, and a
        regression loss. A run on such a tail tends in direction to the minimiser of sum_i (z_i.w)^-k on the sphere
        (:func:`flowsim.polynomial_tail_limit`), not to a max-margin (docs/theory.md 4)."""
        if self.is_regression or self.exponential_tail:
            return math.nan
        logs = _log_q_in_tail(self)
        powers = [-(b - a) / math.log(mb / ma) for a, b, ma, mb in zip(logs, logs[1:], _TAIL_AT, _TAIL_AT[1:])]
        if powers[-1] > 1 and abs(powers[-1] - powers[-2]) <= 1e-3 * powers[-1]:
            return powers[-1] - 1.0
        return math.nan

    @property
    def exponential_tail(self) -> bool:
        """A margin loss with -log q(m)/m -> c > 0: the setting of the l2 max-margin theorems (docs/theory.md 4)."""
        return not self.is_regression and math.isfinite(self._tail)

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"

    def __str__(self) -> str:
        return self.name


def _sympified(e, what):
    try:
        e = parse(e) if isinstance(e, str) else sp.sympify(e, strict=True)
    except ExpressionError as err:
        raise ValueError(f"{what}: {err}") from None
    except (sp.SympifyError, TypeError):
        raise ValueError(f"{what} must be a sympy expression in the margin; got {e!r}.") from None
    if not isinstance(e, sp.Expr) or getattr(e, "is_Matrix", False) or e.has(sp.I):  # (an Eq or a Matrix: a traceback)
        raise ValueError(f"{what} must be a real sympy expression in the margin; got {e!r}.")
    return e


def _margin_symbol(expr, margin):
    free = expr.free_symbols
    if margin is not None:
        if not isinstance(margin, sp.Symbol):
            raise ValueError(f"margin must be the sympy Symbol the loss is written in (log l goes in log_expr=); "
                             f"got {margin!r}.")
        if free - {margin}:
            raise ValueError(f"the loss may depend on the margin {margin} only; it also has {sorted(map(str, free - {margin}))}.")
        return margin
    if len(free) > 1:
        raise ValueError(f"the loss has several symbols {sorted(map(str, free))}; name the margin with margin=.")
    return next(iter(free), None)


def _mp_values(e, at):
    import mpmath

    f = sp.lambdify(M, e, modules=[{"softplus": lambda x: mpmath.log1p(mpmath.exp(x)),
                                     "log_softplus": lambda x: mpmath.log(mpmath.log1p(mpmath.exp(x))),
                                     "logsumexp": lambda *a: mpmath.log(mpmath.fsum(mpmath.exp(v) for v in a))}, "mpmath"])
    def at_point(m):
        try:
            return f(mpmath.mpf(float(m)))
        except ZeroDivisionError:  # 1/m at m = 0: undefined there, reported by the caller as nan
            return mpmath.mpf("nan")

    with mpmath.workdps(40):
        return [at_point(m) for m in at]


def _check_same(a, b, what, of, fix=None):
    va, vb = _mp_values(a, _CHECK_AT), _mp_values(b, _CHECK_AT)
    for m, x, y in zip(_CHECK_AT, va, vb):
        if not abs(complex(x) - complex(y)) <= 1e-9 * (1 + abs(complex(y))):
            raise ValueError(f"{what} is not {of}: at m = {m:g} it is {complex(x).real:.6g}, the derived form "
                             f"gives {complex(y).real:.6g}. " + (fix or f"Leave {what} out to have it derived."))


def _check_constants(loss):
    """Every constant of l, log l and log q is one float64 holds (a literal 10**400 reaches the generated code as
    an integer numpy takes no log of)."""
    _check_constants_of(loss, (loss.expr, loss.log_expr, loss.log_q))


def _check_constants_of(loss, forms):
    for form in forms:
        bad = [a for a in form.atoms(sp.Number) if not fits_float64(a)]
        if bad:
            raise ValueError(f"loss {loss.name!r}: the constant {sp.N(bad[0], 4)} is beyond float64's range; a "
                             "constant factor of a loss only rescales time, so drop it (or fold it into t1).")


def _check_positive(loss):
    """l > 0 and q > 0 on [-30, 30] (mpmath), and the log-domain forms equal to log l and log q there."""
    import mpmath

    # (not further out: at 40 digits 4 e^(-2m)/(1 + e^(-2m)) - 4 e^(-4m)/(1 + e^(-2m))^2 cancels to 0 at m = -1e4;
    # a solve that starts where q <= 0 is refused, solve._check_defined_at)
    checks = (("q(m) = -l'(m)", loss.q, "a loss that decreases everywhere"),
              ("l(m)", loss.expr, "a loss that decreases to 0; one that tends to a constant instead: subtract it, a "
               "constant changes no dynamics"))
    for what, e, why in checks:
        for m, raw in zip(_CHECK_AT, _mp_values(e, _CHECK_AT)):
            v = complex(raw)
            if v != v:
                raise ValueError(f"loss {loss.name!r}: {what} is undefined at m = {m:g} (nan); a loss must be "
                                 "defined at every margin.")
            if not (abs(v.imag) <= 1e-30 and raw.real > 0):
                raise ValueError(f"loss {loss.name!r}: {what} must be > 0 for every margin ({why}); at m = {m:g} it "
                                 f"is {mpmath.nstr(raw.real, 4)}.")
    fix = "This is a bug in flowsim's log-domain rewriting; please report it with the loss."
    _check_same(loss.log_expr, sp.log(loss.expr), "the log-domain log l", "log l(m)", fix)
    _check_same(loss.log_q, sp.log(loss.q), "the log-domain log q", "log q(m)", fix)


def _check_residual_loss(loss):
    """A regression loss l(m) of the residual m: l(0) = 0 = l'(0), l > 0 and m l'(m) > 0 elsewhere on [-30, 30]
    (mpmath), so that a zero residual is its only minimum and an interpolator is a global minimum of L."""
    at = [m for m in _CHECK_AT if m != 0.0]
    for what, e, want in (("l(m)", loss.expr, lambda m, v: v > 0), ("-m l'(m)", M * loss.q, lambda m, v: v < 0)):
        for m, raw in zip(at, _mp_values(e, at)):
            v = complex(raw)
            if v != v or abs(v.imag) > 1e-30 or not want(m, v.real):
                raise ValueError(f"loss {loss.name!r}: a regression loss of the residual m must be defined, > 0 and "
                                 f"increasing in |m| away from m = 0 (its only minimum); at m = {m:g}, {what} is "
                                 f"{complex(raw).real:.6g}. Write it as l(m) with l(0) = 0, e.g. m**2/2.")
    for what, e in (("l(0)", loss.expr), ("l'(0)", loss.q)):
        value = complex(_mp_values(e, [0.0])[0])
        if not abs(value) <= 1e-12:
            raise ValueError(f"loss {loss.name!r}: {what} = {value.real:.6g}; a regression loss must have its minimum "
                             "l(0) = 0 at a zero residual (subtract the constant: it changes no dynamics).")
    _check_constants_of(loss, (loss.expr, loss.q, loss.dq))


def _log_q_in_tail(loss) -> list:
    """log q at the margins _TAIL_AT, where the tail's rate and power are read (non-finite where float64 fails)."""
    f = sp.lambdify(M, loss.log_q, modules=[numpy_functions(), "numpy"])
    with np.errstate(all="ignore"):
        return [float(f(np.float64(m))) for m in _TAIL_AT]


def _tail_rate(loss) -> float:
    """c in -log q(m) ~ c m as m -> oo, read off the slopes between _TAIL_AT; nan for a tail that is not exponential
    (q ~ m^-k, e^(-m^2)), which integrates as any other (docs/theory.md 4). Raises where log q is not finite in
    float64 there: the solver could not evaluate the field at such margins."""
    logs = _log_q_in_tail(loss)
    if not all(np.isfinite(logs)):
        raise ValueError(
            f"loss {loss.name!r}: log q(m) = {loss.log_q} is not finite in float64 at m = "
            f"{', '.join(f'{m:g}' for m in _TAIL_AT)} (it gives {', '.join(f'{v:.4g}' for v in logs)}): margins grow "
            "without bound on separable data, and the field is evaluated through log q there. Write the loss without "
            "a cancellation there: 1/(sqrt(1 + m^2) + m) for sqrt(1 + m^2) - m, 2/(exp(2m) + 1) for 1 - tanh(m).")
    # slopes between the points: a constant in log q (a factor in q) drops out
    rates = [-(b - a) / (mb - ma) for a, b, ma, mb in zip(logs, logs[1:], _TAIL_AT, _TAIL_AT[1:])]
    if rates[-1] > 0 and abs(rates[-1] - rates[-2]) <= 1e-3 * rates[-1]:
        return rates[-1]
    return math.nan


exponential_loss = Loss("exponential", sp.exp(-M))
logistic_loss = Loss("logistic", sp.log(1 + sp.exp(-M)))
#: the square loss of regression, l(m) = m^2 / 2 of the residual m = x.beta - y: L = (1/2n) ||X beta - y||^2
square_loss = Loss("square", M**2 / 2, task="regression")

LOSSES = {"exponential": exponential_loss, "logistic": logistic_loss, "square": square_loss}


def get_loss(loss) -> Loss:
    if isinstance(loss, Loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(LOSSES)} or pass a flowsim.Loss.")
    return LOSSES[loss]
