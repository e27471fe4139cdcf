"""diffrax's explicit FSAL Runge-Kutta pairs with their stages unrolled at trace time.

diffrax runs the stages of a step in an inner while loop (so one code path serves explicit,
implicit and reversible-mode solvers), which on CPU costs about 4 us per step: for the
n = d = 100 flows of ``benchmarks/bench_core.py`` a tenth of the step, and a third of it at
n = 20, d = 10. Unrolled, XLA sees the stages as straight-line code. Same tableau, same error
estimate, same dense output, so the same steps and, to rounding, the same numbers as diffrax's
own solver (``tests/test_invariants.py``). Follows diffrax's ``AbstractAdaptiveSolver`` contract.
"""

from __future__ import annotations

from typing import ClassVar

import diffrax
import equinox.internal as eqxi

from flowsim._jax import jax, jnp


class _UnrolledERK(diffrax.AbstractAdaptiveSolver):
    """Subclasses set ``reference``: the diffrax solver whose tableau and interpolation they reuse
    (an explicit pair that is first-same-as-last and whose last stage is the solution)."""

    term_structure: ClassVar = diffrax.AbstractTerm
    reference: ClassVar[type]

    @property
    def interpolation_cls(self):
        return self.reference.interpolation_cls

    def order(self, terms):
        return self.reference().order(terms)

    def error_order(self, terms):
        return self.reference().error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return terms.vf(t0, y0, args)

    def step(self, terms, t0, t1, y0, args, f0, made_jump):
        tab = self.reference.tableau
        h = t1 - t0
        # first same as last, unless the field jumped at t0; under vmap (flowsim.sweep) a batched
        # predicate would turn the cond into a select that always evaluates, so ask if any member
        # jumped, as diffrax does
        f0 = jax.lax.cond(eqxi.unvmap_any(made_jump), lambda: jnp.where(made_jump, terms.vf(t0, y0, args), f0),
                          lambda: f0)
        ks = [f0 * h]
        for a, c in zip(tab.a_lower, tab.c):
            y_stage = y0 + sum(float(a_j) * k for a_j, k in zip(a, ks) if a_j != 0)
            ks.append(terms.vf(t0 + float(c) * h, y_stage, args) * h)
        y1 = y0 + sum(float(b) * k for b, k in zip(tab.b_sol, ks) if b != 0)
        y_error = sum(float(b) * k for b, k in zip(tab.b_error, ks) if b != 0)
        # a trial step into overflow is rejected and shrunk: diffrax's controller scales the error by
        # max(|y0|, |y1|), and an infinite y1 turned that into inf/inf = NaN, the next step size NaN, and
        # every later step rejected (depth-4 GD from alpha = 1)
        overflow = ~jnp.all(jnp.isfinite(y1))
        y1 = jnp.where(overflow, y0, y1)
        y_error = jnp.where(overflow, jnp.inf, y_error)
        dense_info = {"y0": y0, "y1": y1, "k": jnp.stack(ks)}
        return y1, y_error, dense_info, ks[-1] / h, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


class Tsit5(_UnrolledERK):
    """Tsitouras' 5(4) pair (``diffrax.Tsit5``), unrolled."""

    reference: ClassVar[type] = diffrax.Tsit5


class Dopri5(_UnrolledERK):
    """Dormand-Prince 5(4) (``diffrax.Dopri5``), unrolled."""

    reference: ClassVar[type] = diffrax.Dopri5

