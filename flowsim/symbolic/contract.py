"""The extension contract of points and directions, checked on the expressions a part returns.

A part's rule is a sympy expression in the symbols it is handed; what it declares (``norm``,
``uses_sign``, ``needs_P``, ``follows_gradient``) tells the solver which run-time values to supply and
which shortcuts hold. A rule that uses a symbol it did not declare would be compiled against a value
the solver never computes for it (N without a norm, sign(G) that is not held per entry, P that is not
summed), and integrate a field that is not the one written: so each is refused here, at derive time,
naming the declaration to add.
"""

from __future__ import annotations

from typing import NamedTuple

import sympy as sp

JUMP_FIX = "use s.sigma, held per entry, and declare uses_sign = True (a Filippov system)"


class CoordinateSymbols(NamedTuple):
    """The symbols of one coordinate's derived equations: its layer entries w, their values w~ at the
    evaluation point and their held signs sigma (one per layer), the couplings r, r~, N, S, the radius rho,
    the second moment P~ and the number of samples n."""

    w: tuple
    w_tilde: tuple
    sigma: tuple
    r: sp.Symbol
    r_tilde: sp.Symbol
    N: sp.Symbol
    S: sp.Symbol
    rho: sp.Symbol
    P_tilde: sp.Symbol
    n: sp.Symbol


def _refuse(part, rule, problem, fix):
    raise ValueError(f"{type(part).__name__}.{rule}: {problem}; {fix}.")


def _symbols_of(part, rule, exprs, allowed, handed):
    """The free symbols of ``exprs``, every one of them among ``allowed`` (else a ValueError listing
    ``handed``, the names a rule may use)."""
    used = set().union(*(sp.sympify(e).free_symbols for e in exprs))
    stray = sorted(str(x) for x in used - set(allowed))
    if stray:
        _refuse(part, rule, f"uses the symbol(s) {', '.join(stray)}, which the solver does not supply",
                f"write it in the symbols it is handed ({handed}) and numbers")
    return used


def check_point(point, symbols: CoordinateSymbols, perturbation, normed):
    """``perturbation`` (P per layer, without w + rho) and ``normed`` of an evaluation point."""
    w, r, N, S, rho, sig = symbols.w, symbols.r, symbols.N, symbols.S, symbols.rho, symbols.sigma
    used = _symbols_of(point, "perturbation", perturbation, {*w, r, N, S, rho, *sig},
                       "s.w, s.G, s.N, s.S, s.rho, s.sigma")
    _symbols_of(point, "normed", normed, {*w, r, S, rho, *sig}, "s.w, s.G, s.S, s.rho, s.sigma; not s.N, its own norm")
    _declared(point, "perturbation", used, N, sig, [(perturbation, r)], norm_of="the dual norm of normed(s)",
              sign_fix="use norm = float('inf'), or declare uses_sign = True (a Filippov system)")


def check_direction(direction, symbols: CoordinateSymbols, field, free_dbeta):
    """``field`` (per layer, at the evaluation point) of a direction; ``free_dbeta``: (the rule with dbeta a
    free symbol D, D), where the gradient G = -D r vanishes at D = 0 as well as at r = 0."""
    N, sig = symbols.N, symbols.sigma
    used = _symbols_of(direction, "field", field,
                       {*symbols.w_tilde, symbols.r_tilde, symbols.P_tilde, symbols.n, N, *sig},
                       "s.w, s.dbeta, s.r, s.G, s.N, s.P, s.n, s.sigma")
    if symbols.P_tilde in used and not direction.needs_P:
        _refuse(direction, "field", "uses s.P, the per-sample second moment, which the solver computes only for a "
                "direction that asks", "declare needs_P = True")
    rule, D = free_dbeta
    _declared(direction, "field", used, N, sig, [(field, symbols.r_tilde), ([rule], D)],
              norm_of="the dual norm of the gradient", sign_fix="declare uses_sign = True (a Filippov system)")


def _declared(part, rule, used, N, sig, at_zero_gradient, norm_of, sign_fix):
    """What the two kinds of part share: N needs a norm, sigma needs uses_sign, and follows_gradient
    needs the rule to tend to 0 where the gradient does (``at_zero_gradient``: (expressions, the symbol
    whose 0 makes their gradient 0) pairs)."""
    kind = "point" if rule == "perturbation" else "direction"
    if N in used and part.norm is None:
        _refuse(part, rule, f"uses s.N, {norm_of}, but the {kind} sets no norm",
                "set norm = p (e.g. norm = 2.0) as a field or class attribute")
    exprs, r = at_zero_gradient[0]
    # a rule that jumps where the gradient changes sign, however written (sign(G), G/|G|, Heaviside(G)), jumps
    # where no event looks: the backends chattered and disagreed (sign(G) |G|^a is continuous: it derives)
    kinks = (sp.sign, sp.Heaviside, sp.Abs, sp.Piecewise)
    jumps = [e for e in map(sp.sympify, exprs) if any(r in a.free_symbols for a in e.atoms(*kinks))
             and len(set(_limits_at_zero(e, r))) > 1]
    if jumps:
        _refuse(part, rule, f"jumps where the gradient changes sign ({jumps[0]}, with sympy's sign of it or the "
                "like), and no event locates those switches", JUMP_FIX)
    if set(sig) & used and not part.uses_sign:
        _refuse(part, rule, f"uses s.sigma = sign(G), which the solver holds per entry only for a {kind} that says so",
                sign_fix)
    if part.follows_gradient and not part.uses_sign:
        values = (_limits_at_zero(e, x) for exprs, x in at_zero_gradient for e in exprs)
        at_rest = [v for pair in values for v in pair if v != 0]
        if at_rest:
            _refuse(part, rule, f"tends to {at_rest[0]} where the gradient is 0, though follows_gradient = True "
                    "promises it vanishes there",
                    "set follows_gradient = False (its rest points are then not the loss's)")


def _limits_at_zero(expr, x):
    """The one-sided limits of ``expr`` as ``x`` -> 0: a rule is judged by where it tends, so sign(x) r (which
    sympy evaluates to 0 at x = 0) is refused and x/|x|^(1/2), 0/0 there, is not."""
    expr = sp.sympify(expr)
    try:
        return tuple(sp.simplify(sp.limit(expr, x, 0, side)) for side in "+-")
    except (NotImplementedError, ValueError, TypeError):  # sympy cannot take it: the value at 0, as before
        return (sp.simplify(expr.xreplace({x: 0})),)
