r"""Balanced starts of product networks, integrated on their invariant manifold.

A depth-L product network whose layers start equal (:math:`w_l = w` for every l, the setting of
arXiv 2603.08290) keeps them equal under every flow here: the field is symmetric under a
permutation of the layers. On that manifold :math:`\beta = w^L`, and the product follows the tied
network :math:`w^L` with the flow's parameters rescaled (``flow.tied_equivalent(L)``: GD as is, SAM
with radius :math:`\rho L^{-1/p}`, USAM with :math:`\rho/L`, sign and Adam-proxy flows as they are),
``speedup`` times faster (L for the gradient flows, whose tied gradient is L times each layer's).

Why not integrate the product itself: the manifold can be *unstable*. Near :math:`w_{1j} = w_{2j} = 0`
with :math:`\partial L/\partial\beta_j > 0`, :math:`w_1 + w_2` decays and :math:`w_1 - w_2` grows at
the same rate, so a rounding error that breaks the layer symmetry (an implicit method's Newton
solve and LU do) escapes exponentially and, at some huge t, separates data that the exact flow never
separates (``beta = w^2 >= 0`` for ever). The tied system has no such direction, costs 1/L of the
state, and gives every backend the same answer.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flowsim.symbolic.model import DiagonalNet


def reduction(system, theta0):
    """``(tied_system, speedup)`` when ``theta0`` is a balanced start of a product network, else None."""
    from flowsim.symbolic.derive import derive

    model = system.model
    if not isinstance(model, DiagonalNet) or model.form != "product" or model.depth < 2 or not np.all(theta0 == theta0[:1]):
        return None
    tied = system.flow.tied_equivalent(model.depth)
    if tied is None:  # a flow whose parts do not say how the tied net follows: integrate the product
        return None
    flow, speedup = tied
    return derive(DiagonalNet(model.depth, "tied"), system.loss, flow), speedup


def lift(sol, system, speedup):
    """The product network's solution from the tied one's: every layer equal to w, time and tau
    ``speedup`` times longer (the tied flow is that much faster)."""
    shift = math.log10(speedup)
    events = [dict(e, log10_t=e["log10_t"] + shift, tau=e["tau"] * speedup) for e in sol.events]
    with np.errstate(over="ignore"):  # a tau past float range (t near 1e308) is inf; log10_t holds the time
        tau = sol.tau * speedup
    return dataclasses.replace(
        sol, system=system, log10_t=sol.log10_t + shift, tau=tau,
        params=np.repeat(sol.params, system.model.n_layers, axis=1), events=events,
        config={**sol.config, "rho": system.flow.rho,
                "integrated_as": f"{sol.system} with {sol.system.flow}, {speedup:g}x faster"},
    )
