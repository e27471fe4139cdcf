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

import functools
import math

import numpy as np

from flowsim.integrate.solution import Deferred
from flowsim.symbolic.flow import commutes_with_sign_flips
from flowsim.symbolic.model import DiagonalNet
from flowsim.symbolic.reachable import STARTS_KEPT, start_key, start_of


def reduction(system, theta0, data):
    """``(tied_system, speedup, tied_data, flips)`` when ``theta0`` is a balanced start of a product
    network up to signs, else None. ``flips`` (layers, d): each entry's sign relative to layer 1's.

    Layers equal up to a sign per entry (:math:`|w_{lj}|` equal over l, e.g. the anti-balanced
    :math:`w_2 = -w_1`) are the balanced start of the same network in :math:`v = \\mathrm{flips}\\,w` on data
    whose column j is multiplied by :math:`c_j = \\prod_l \\mathrm{flips}_{lj}`: the loss is the same
    function, and the built-in flows act entry by entry through odd maps and sign-blind norms, so they
    commute with the flips. (Integrated as a product, the anti-balanced start drifted off its manifold
    in BDF, Radau and LSODA and "separated" data with beta_j > 0 that the exact flow keeps <= 0.) A
    flow with parts of your own is reduced only from layers exactly equal: the flips need that
    symmetry, which flowsim cannot check in your code."""

    tied = _tied_start(system, *start_key(theta0))
    if tied is None:
        return None
    run_system, speedup, flips, c, _ = tied
    tied_data = data if (c > 0).all() else data.flipped(c)  # flips whose product is +1 leave the data as they are
    return run_system, speedup, tied_data, flips


@functools.lru_cache(maxsize=STARTS_KEPT)
def _tied_start(system, shape, raw):
    """``reduction``'s part that the data do not enter, once per (system, start): ``(tied_system, speedup,
    flips, c, balanced)`` (``flips_product``; the arrays read-only), or None."""
    model = system.model
    flips = layer_flips(model, start_of(shape, raw))
    if flips is None or (np.any(flips < 0) and not commutes_with_sign_flips(system.flow)):
        return None
    tied = system.flow.tied_equivalent(model.depth)
    if tied is None:  # a flow whose parts do not say how the tied net follows: integrate the product
        return None
    flow, speedup = tied
    c, balanced = flips_product(flips)
    flips.flags.writeable = c.flags.writeable = False  # shared by the solves from this start
    return tied_system(model.depth, system.loss, flow), speedup, flips, c, balanced


@functools.lru_cache(maxsize=64)
def tied_system(depth, loss, flow):
    """The tied network w^depth under ``loss`` and ``flow``, derived once per (depth, loss, flow): a System is
    immutable, and building its model again (DiagonalNet parses its formula) cost a tenth of a millisecond a solve."""
    from flowsim.symbolic.derive import derive

    return derive(DiagonalNet(depth, "tied"), loss, flow)


def layer_flips(model, theta0):
    """(layers, d) signs of each entry relative to layer 1's where ``theta0`` starts a product network
    (depth >= 2) with layers equal up to signs (all 1 for a balanced start), else None."""
    if not isinstance(model, DiagonalNet) or model.form != "product" or model.depth < 2:
        return None
    if not np.all(np.abs(theta0) == np.abs(theta0[:1])):
        return None
    return np.where(np.sign(theta0) == np.sign(theta0[:1]), 1.0, -1.0)


def lift(fields, system, speedup, data, flips) -> dict:
    """The product network's solution (the fields of a :class:`flowsim.Solution`) from the tied one's (``fields``):
    layer l is ``flips[l]`` times w (every layer w for a balanced start), beta and the events' beta the flips'
    product times the tied beta (the margins and the loss are the same), time ``speedup`` times longer (the tied
    flow is that much faster) and tau as much, over the tied lr's factor: a schedule-clock flow's tau is its clock
    s, which the tied net's lr x L^(-1/p) shortens by that factor."""
    tied = fields["system"]
    shift = math.log10(speedup)
    c, balanced = flips_product(flips)
    stretch = speedup / system.flow.direction.tied_lr(system.model.depth)
    events = [e.retimed(shift, stretch, c) for e in fields["events"]]
    with np.errstate(over="ignore"):  # a tau past float range (t near 1e308) is inf; log10_t holds the time
        tau = fields["tau"] * stretch
    flipped = "" if balanced else \
        f", layers flipped by {flips.astype(int).tolist()} (data columns by {c.astype(int).tolist()})"
    # layer l is flips[l] w, (saves, 1, d) x (layers, d); a balanced start's layers are w itself (a broadcast
    # product with ones cost 0.1-0.5 ms at n = d = 100). Found on first read: the tied states are this Solution's
    # alone, and many runs never read the layers (at n = d = 100 writing them out was a tenth of the host work)
    params = fields["params"]
    layers = functools.partial(np.repeat, params, len(flips), axis=1) if balanced else \
        functools.partial(np.multiply, params, flips)
    return dict(
        fields, system=system, data=data, log10_t=fields["log10_t"] + shift, tau=tau,
        beta=fields["beta"] if balanced else fields["beta"] * c, params=Deferred(layers), events=events,
        config={**fields["config"], "rho": system.flow.rho,
                "integrated_as": f"{tied} with {tied.flow}, {speedup:g}x faster{flipped}"},
    )


def flips_product(flips):
    """(c, balanced): the product of the flips over the layers (d,) and whether every flip is +1."""
    return flips.prod(axis=0), bool((flips > 0).all())
