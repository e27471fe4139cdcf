"""The extension contract of points and directions, checked on the expressions a part returns.

A part's rule is a sympy expression in the symbols it is handed; what it declares (``norm``,
``uses_sign``, ``needs_P``, ``follows_gradient``) tells the solver which run-time values to supply and
which shortcuts hold. A rule that uses a symbol it did not declare would be compiled against a value
the solver never computes for it (N without a norm, sign(G) that is not held per entry, P that is not
summed), and integrate a field that is not the one written: so each is refused here, at derive time,
naming the declaration to add.
"""

from __future__ import annotations

import sympy as sp


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


def check_point(point, w, r, N, S, rho, sig, perturbation, normed):
    """``perturbation`` (P per layer, without w + rho) and ``normed`` of an evaluation point."""
    handed = "s.w, s.G, s.N, s.S, s.rho, s.sigma"
    used = _symbols_of(point, "perturbation", perturbation, {*w, r, N, S, rho, *sig}, handed)
    _symbols_of(point, "normed", normed, {*w, r, S, rho, *sig}, "s.w, s.G, s.S, s.rho, s.sigma; not s.N, its own norm")
    if N in used and point.norm is None:
        _refuse(point, "perturbation", "uses s.N, the dual norm of normed(s), but the point sets no norm",
                "set norm = p (e.g. norm = 2.0) as a field or class attribute")
    if set(sig) & used and not point.uses_sign:
        _refuse(point, "perturbation", "uses s.sigma = sign(G), which the solver holds per entry only for a point "
                "that says so", "use norm = float('inf'), or declare uses_sign = True (a Filippov system)")
    if point.follows_gradient and not point.uses_sign:
        at_rest = [sp.simplify(P.xreplace({r: 0})) for P in perturbation]
        if any(P != 0 for P in at_rest):
            _refuse(point, "perturbation", f"is {at_rest[0]} where G = 0, though follows_gradient = True promises "
                    "it vanishes there", "set follows_gradient = False (its rest points are then not the loss's)")


def check_direction(direction, wt, rt, Pt, n, N, sig, field):
    """``field`` (per layer, at the evaluation point) of a direction."""
    used = _symbols_of(direction, "field", field, {*wt, rt, Pt, n, N, *sig},
                       "s.w, s.dbeta, s.r, s.G, s.N, s.P, s.n, s.sigma")
    if N in used and direction.norm is None:
        _refuse(direction, "field", "uses s.N, the dual norm of the gradient, but the direction sets no norm",
                "set norm = p (e.g. norm = 2.0) as a field or class attribute")
    if Pt in used and not direction.needs_P:
        _refuse(direction, "field", "uses s.P, the per-sample second moment, which the solver computes only for a "
                "direction that asks", "declare needs_P = True")
    if set(sig) & used and not direction.uses_sign:
        _refuse(direction, "field", "uses s.sigma = sign(G), which the solver holds per entry only for a direction "
                "that says so", "declare uses_sign = True (a Filippov system)")
    if direction.follows_gradient and not direction.uses_sign:
        at_rest = [sp.simplify(F.xreplace({rt: 0})) for F in field]
        if any(F != 0 for F in at_rest):
            _refuse(direction, "field", f"is {at_rest[0]} where the gradient is 0, though follows_gradient = True "
                    "promises it carries the gradient's factor", "set follows_gradient = False")
