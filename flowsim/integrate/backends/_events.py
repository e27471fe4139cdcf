"""Event functions shared by both backends, written against an array namespace.

Each is a value of (s, y, args), positive inside a segment, and ends the segment when it
falls through zero:

- ``horizon``  (tau clock): u_end - u;
- ``collapse`` (flows without sign): log max|theta| - log floor (l2-SAM collapses to 0 in finite time);
- ``blowup``:   log ceiling - log max|theta| (depth >= 3 blows up in finite tau);
- ``switch``   (sign flows): min over unsliding entries of sigma_k G_k(theta): some sign(G_k) is
  about to change, so the piecewise-smooth field must be re-examined; and over parameter entries away
  from 0 at the segment's start (``sides``) of sign(theta_k) theta_k: an entry crossing 0 flips the
  sign of the G's its product carries, which one long step can do twice unseen.
  With a sign perturbation (l_inf-SAM), also an entry coming within reach of its rest plane theta_k =
  -rho sigma_k (``SegmentArgs.rest``), where it is set (``handlers._put_on_rest_planes``). Without one, also the
  coupling r_j of each coordinate with entries held on their planes (``SegmentArgs.held_couplings``): where it turns
  through 0 the planes stop attracting, and the held entries are probed again (a step-size limit leaves at once).
- ``crossing`` (smooth flows): min over entries with sigma_k != 0 of sigma_k theta_k, plus the collapse
  floor. For smooth flows sigma holds the sign each entry keeps for ever (``flowsim.kept_entry_signs``;
  0: free), so this event fires only when a solver steps across an invariant plane w_k = 0, by more
  than it resolves.

- ``slide_exit`` (entries sliding on their switching surfaces, ``surfaces``): 1 - max |s_k| of their
  Filippov control (:mod:`flowsim.field.surfaces`): an entry stops sliding where its control reaches +-1.

- ``lead_magnitude`` / ``lead_growth`` (tracked scores): score of the current leader (``leaders``)
  minus the best other score: another coordinate is about to lead in |beta_j| or in the relative
  growth rate d log|beta_j| / dtau (clock-free: every clock rescales all rates alike).

Each reads the segment's :class:`flowsim.integrate.segment_args.SegmentArgs`. A backend arms only
the events that are positive at the segment's start: one that is not (say two coordinates tied for ever
by symmetry) would end the segment at once, or, as part of one minimum, blind the others.
``watched`` (sign flows) does the same per entry for ``switch``: an entry that has just switched starts
its segment at sigma_k G_k = 0, and as part of one minimum it would disarm every other entry's switch
(a missed switch leaves a stale sign in the field: l_inf-SAM then follows a trajectory the exact flow
does not take). An unwatched entry is not forgotten: the segment ends once its |G_k| grows past
``SETTLE`` max|G|, or past twice its value at the start where that is more (``watch_at``), and its
sign is examined again there (the side chosen at a switch from a short probe may not hold: G_k can turn
back, and a stale sign would make a false rest point).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

from flowsim.field import surfaces

SCORES = ("magnitude", "growth")
#: an unwatched entry (sigma_k G_k ~ 0 at the segment's start) ends the segment once |G_k| exceeds this
#: fraction of max |G|: its sign is then re-examined, and it is watched from there (or re-switched)
SETTLE = 1e-6


def scores(vf, kind, theta, Z, rho, sigma):
    """Per-coordinate score whose argmax is the leading coordinate (``kind`` in SCORES)."""
    xp = vf.xp
    beta = vf.compiled.beta(theta)
    if kind == "magnitude":
        return xp.abs(beta)
    F, _ = vf.field_and_scale(theta, Z, rho, sigma)
    dbeta = -xp.sum(vf.compiled.direction(theta, xp.ones_like(beta)) * F, axis=0)
    safe = xp.where(beta == 0, 1.0, beta)
    return xp.where(beta == 0, -xp.inf, dbeta / safe)


class Events(NamedTuple):
    """The events of a segment: their ``names``, and ``at(args)``, a function ``values(s, y)`` of all of
    them at once, an (len(names),) array. One evaluation: they share max|theta|, and what depends on the
    segment's arguments alone is computed once, in ``at`` (a scipy solve checks the events every step,
    where four separate functions of (s, y, args) cost 7 us a step, 15% of an LSODA solve at 20 x 10)."""

    names: tuple
    at: Callable


def event_functions(vf, clock, uses_sign: bool, track=(), surfaces: int = 0) -> Events:
    """The events of a segment of ``vf``'s flow under ``clock`` (see the module's list), in one ``Events``;
    ``surfaces``: entries sliding on their switching surfaces in the segment."""
    xp = vf.xp
    # each maps the segment's args to a function (s, y, size) with size = log max|theta|, computed once
    fns = {"blowup": lambda args: lambda s, y, size: args.log_ceiling - size}
    if not uses_sign:  # sign flows reach 0 by sliding, which the switch event handles
        fns["collapse"] = lambda args: lambda s, y, size: size - args.log_floor
        fns["crossing"] = functools.partial(_crossing, xp)
    if clock.u_in_state:  # the horizon is a value of the state's u
        fns["horizon"] = lambda args: lambda s, y, size: args.u_end - y[-1]
    if uses_sign:
        fns["switch"] = functools.partial(_switch, vf)
    if surfaces:
        fns["slide_exit"] = functools.partial(_slide_exit, vf)
    for i, kind in enumerate(track):
        fns[f"lead_{kind}"] = functools.partial(_lead, vf, i, kind)

    def at(args):
        each = [f(args) for f in fns.values()]

        def values(s, y):
            # an array method: NumPy's function form (xp.max) adds a dispatch that costs as much as the
            # reduction on a scipy solve's small state
            size = xp.log(xp.abs(y[:-1]).max() + 1e-300)
            return xp.asarray([f(s, y, size) for f in each])

        return values

    return Events(tuple(fns), at)


def _crossing(xp, args):
    sigma = args.sigma.reshape(-1)
    free = xp.where(sigma != 0, 0.0, xp.inf)  # entries without a kept sign never cross
    # past the collapse floor on the other side: below it the solver does not resolve the state,
    # and an explicit method's entry that decays to 0 dithers around it by rounding
    floor = xp.exp(args.log_floor)
    return lambda s, y, size: (sigma * y[:-1] + free).min() + floor


def _switch(vf, args):
    xp, K, d = vf.xp, vf.K, vf.d
    Z, sigma, pinned = args.Z, args.sigma, args.pinned
    sides = args.sides.reshape(-1)
    # entries sliding on their switching surfaces leave by ``slide_exit``: their G_k stays ~0 (to the integration
    # error), which as a SETTLE term would hover at 0 in the minimum and hide the other entries' switches
    held = pinned if args.surfaces is None else pinned | xp.reshape(xp.any(args.surfaces != 0, axis=0), (K, d))

    def value(s, y, size):
        theta = xp.reshape(y[:-1], (K, d))
        _, _, _, r = vf.couplings(theta, Z)
        G = vf.compiled.direction(theta, r)
        # an entry that has just switched (unwatched) is re-examined once |G_k| has grown out of 0
        settle = xp.maximum(SETTLE * xp.max(xp.abs(G)), args.settle) - xp.abs(G)
        switched = xp.min(xp.where(held, 1.0, xp.where(args.watched, sigma * G, settle)))
        # a parameter entry crossing 0 changes the sign of G_k for the entries its product carries: two
        # such crossings in one step (a piecewise-constant field allows long steps) turned sigma_k G_k
        # back to positive by the step's end, and the switch went unseen (depth-3 SignFlow: a wrong beta)
        crossed = xp.min(xp.where(sides != 0, sides * y[:-1], xp.inf))
        if args.rest is not None:  # an entry come within reach of its rest plane is set on it
            rest, gap = args.rest.reshape(-1), y[:-1] + args.rho * sigma.reshape(-1)
            crossed = xp.minimum(crossed, xp.min(xp.where(rest != 0, rest * gap - 1.0, xp.inf)))
        if args.held_couplings is not None:  # a held plane's coordinate whose coupling turns through 0
            crossed = xp.minimum(crossed, xp.min(xp.where(args.held_couplings != 0, args.held_couplings * r, xp.inf)))
        return xp.minimum(switched, crossed)

    return value


def _slide_exit(vf, args):
    K, d = vf.K, vf.d

    def value(s, y, size):
        theta = y[:-1].reshape(K, d)
        return surfaces.at(vf, "exit_margin", theta, args.Z, args.rho, args.sigma, args.pinned, args.surfaces)

    return value


def _lead(vf, i, kind, args):
    xp, K, d = vf.xp, vf.K, vf.d
    Z, rho, sigma = args.Z, args.rho, args.sigma
    k = args.leaders[i]
    not_k = xp.arange(d) != k

    def value(s, y, size):
        sc = scores(vf, kind, xp.reshape(y[:-1], (K, d)), Z, rho, sigma)
        # a tie at the segment start (the leader was just chosen by a probe) still counts as ahead, by a
        # margin relative to the finite scores (an absolute 1e-12 reported switches among betas of 1e-13
        # late, -0.159 as 0.097 in log10 t; a growth score is -inf where beta_j = 0: it never fired)
        ahead = 1e-12 * xp.maximum(xp.max(xp.where(xp.isfinite(sc), xp.abs(sc), 0.0)), 1e-290)
        return sc[k] - xp.max(xp.where(not_k, sc, -xp.inf)) + ahead

    return value


class Watch(NamedTuple):
    """How a sign flow's switches are watched in a segment (``SegmentArgs.watched`` and ``.settle``)."""

    #: the entries whose sign switch is watched: sigma_k G_k > 0 at the segment's start
    watched: object
    #: per entry neither watched nor held, the |G_k| past which it is examined again (0 elsewhere)
    settle: object


def watch_at(vf, y, Z, sigma, held) -> Watch:
    """The switches watched in a segment starting at y (G found once). An entry not watched is examined again past
    twice its |G_k| at the start (the event takes at least SETTLE max |G|), so every term of the switch event is
    positive at the start: an entry whose G_k is already resolved off 0 there, on the side its sign does not hold,
    would otherwise start with a negative term, and as part of one minimum that disarms the switch of every entry."""
    import numpy as np

    G = np.asarray(vf.direction(np.reshape(y[:-1], (vf.K, vf.d)), Z)[0])
    watch = (sigma * G > 0) & ~held
    return Watch(watch, np.where(watch | held, 0.0, 2.0 * np.abs(G)))


def resolved_signs(vf, theta, Z, sigma, held):
    """``sigma`` with every entry not ``held`` whose G_k is resolved (|G_k| > SETTLE max |G|) on the other side of
    its sign set to sign(G_k). An entry that leaves its surface to one side while integration error has put G_k
    just past 0 on the other would start its segment with its re-examination term already negative, and that
    disarms the switch event of every entry: another entry's switch goes unseen (a depth-3 sign flow then ended
    0.58 away in direction). On the side where G_k is, its field brings it back to the surface, where it is
    examined again."""
    import numpy as np

    G = np.asarray(vf.direction(theta, Z)[0])
    stale = ~held & (sigma * G < 0) & (np.abs(G) > SETTLE * np.abs(G).max())
    return np.where(stale, np.sign(G), sigma)


def sides(y, K, d, atol):
    """The side of 0 of each parameter entry at a segment's start, watched for a crossing: 0 for entries
    within SETTLE x max |theta| or 100 atol of it (one that has just crossed, where the event left it, would
    end the next segment at once: Radau spent 10,000 segments at w = -1e-15 of a one-entry l_inf-SAM)."""
    import numpy as np

    theta = np.reshape(y[:-1], (K, d))
    size = np.abs(theta)
    return np.where(size > max(SETTLE * size.max(), 100.0 * atol), np.sign(theta), 0.0)


def first_event(values, armed, xp):
    """One continuous function of (s, y), the minimum of the ``armed`` events (a mask in the order of
    ``values``, an ``Events.at(args)``): it crosses zero when the first does."""
    return lambda s, y: xp.min(xp.where(armed, values(s, y), xp.inf))
