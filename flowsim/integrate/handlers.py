"""What happens when a backend call ends (``HANDLERS``, one per reason): the horizon, a collapse or a
blow-up; a sign switch or a new leader; a spent chunk of steps (entries arriving on their planes, a
converged critical point, the step budget, the hand-over to an implicit method); a crossing of an
invariant plane; a failed step."""

from __future__ import annotations

import math

import numpy as np

from flowsim.field import surfaces as field_surfaces
from flowsim.integrate import critical, rest_points
from flowsim.integrate.arrival import ORDER, arrivals, reached, sliding
from flowsim.integrate.backends import ATOL_MIN_IMPLICIT, Ending, backend_for, segment_jacobian
from flowsim.integrate.backends._events import SCORES
from flowsim.integrate.critical import LOSS_STILL
from flowsim.integrate.events import Arrival, LeaderSwitch, SignSwitch, weight_entries
from flowsim.integrate.filippov import entry_name
from flowsim.integrate.segment_args import SegmentArgs
from flowsim.integrate.sliding import filippov_control, sliding_rest_point
from flowsim.integrate.status import Status
from flowsim.integrate.timeline import log10_t_from_u
from flowsim.symbolic.flow import rest_points_are_critical


def _on_end(run, seg):
    """The horizon, a collapse or a blow-up. A flow that reaches the horizon on a plateau (the loss
    unchanged between the last two saves) is reported "converged" if it has, as other backends would."""
    status, message = end_status(seg.reason, run.clock)
    short = (run.u1 - run.u_now) / (1.0 + run.u1)  # what the horizon event left of the way, relative in u
    if status is Status.COMPLETED and short > HORIZON_SLACK:  # a save or more short of t1
        status, message = Status.FAILED, SHORT_OF_HORIZON.format(log10_t=run.log10_t_asked,
                                                             log10_t1=float(log10_t_from_u(run.u1)) + run.shift)
    elif status is Status.COMPLETED and short > 1e-12:
        message = f"reached the horizon t1 to the clock's resolution there (the last row is at log10 t = " \
                  f"{run.log10_t_asked:.12g})"
    if status is Status.COMPLETED and run.on_minima:
        message = MINIMA_SLID.format(since=run.on_minima_since)
    if status is Status.COMPLETED and _has_own_rest_points(run) and _earlier_rest_point(run):
        return  # a step across a one-sided rest point went on to the horizon: the rest point is the end
    if status is Status.COLLAPSED and run.data.is_regression and _at_zero(run):
        return
    if not (status is Status.COMPLETED and _on_plateau(run, seg) and _converged(run, loss_still=True)):
        run.end(status, message)


def _on_plateau(run, seg) -> bool:
    """The loss unchanged between the last two saves, where a converged state could be held (``_converged`` holds
    none past DENSE_MAX entries, nor for a flow that does not stop at minima unless it slides on surfaces): the
    two losses are asked only where their answer counts (at 1000 x 1000 they were two 1000 x 1000 products), and
    taken from the segment where its backend found them with the solve (both saves are then its own)."""
    if len(run.records) < 2 or _too_large(run) or not (run.surfaces.any() or critical.stops_at_minima(run.system.flow)):
        return False
    ends = seg.end_log_losses
    before, after = ends if ends is not None else run.log_losses(run.records.theta_at(-2), run.theta)
    return run.loss_change(before, after) <= LOSS_STILL


def _at_zero(run) -> bool:
    """A regression collapses to no special point: theta = 0, where the field vanishes, is a limit like any other."""
    cp = critical.at_zero(run.vf, run.theta, run.Z, run.atol)
    if cp is not None:
        run.move_to(cp.limit)
        run.hold(Status.CONVERGED, critical.describe(run.system, run.data, cp, run.log10_t_asked, run.atol))
    return cp is not None


def _on_switch(run, seg):
    """A sign switch or a change of a tracked leader. Events can coincide (a coordinate sliding to 0
    ties with another at 0): the signs and every tracked leader are re-examined whatever fired."""
    tau_now, lt_now = run.tau_now, float(log10_t_from_u(run.u_now))
    if run.uses_sign:
        if _put_on_rest_planes(run) and run.status is not None:
            return  # come to rest there
        signs, was, slid = run.sigma.copy(), run.pinned.copy(), run.surfaces.copy()
        state = run.switch_signs()
        theta = state.theta
        if run.problem is not None and (_has_own_rest_points(run) and _earlier_rest_point(run)
                                        or _converged(run, loss_still=True) or _rests_on(run, state.reached)):
            # a step across a one-sided rest point led there, the switch is the rounding of G -> 0 at a
            # critical point the flow converges to (steepest descent's field vanishes with G), or the flow has come
            # to rest sliding on every surface it has reached: that is the end
            run.drop_problem()
            return
        # an entry leaving its surface whose G_k integration error left resolved on the other side takes that side
        run.resolve_signs(theta, slid & ~run.surfaces)
        changed = (np.sign(run.sigma) != np.sign(signs)) | (run.pinned != was) | (run.surfaces != slid)
        if changed.any():  # not an entry settling on its side, nor a control moving inside the box
            names = run.system.model.layer_names
            run.add_event(SignSwitch(lt_now, tau_now, pinned=weight_entries(names, run.pinned & ~was),
                                     sliding=weight_entries(names, run.surfaces & ~slid),
                                     left=weight_entries(names, slid & ~run.surfaces)), switch=True)
        run.move_to(theta)
    run.restart()
    if run.uses_sign:  # the saves from here on were made under these signs (``_earlier_rest_point``)
        run.records.signs_from_here(run.sigma, run.slides)
    theta = run.theta
    fired = seg.reason.removeprefix("lead_") if seg.reason.startswith("lead_") else None
    for kind, old, new in run.follow_leaders(theta, fired):
        run.add_event(LeaderSwitch(lt_now, tau_now, kind, old, new, run.beta(theta).tolist()))
    if run.uses_sign and run.restarts % SWITCHES_PER_REST_CHECK == 0:
        _converged(run)  # switches piling up where the loss has stopped changing: a rest point, as at a chunk's end


#: a run whose segments all end at switches never spends a chunk of steps: it is checked for a rest point this often
SWITCHES_PER_REST_CHECK = 100


def _on_chunk_end(run, seg):
    """A chunk of steps is spent: a converged critical point, the step budget, a hand-over to an implicit
    method (``backend="auto"``), or on with the next chunk."""
    if _put_on_planes(run) or _put_on_rest_planes(run) or _converged(run) or _sliding(run):
        return
    if run.adaptive:
        run.hand_over(backend_for(IMPLICIT_FALLBACK, 0.0))
    elif run.segment_steps >= run.max_steps:
        run.end(Status.MAX_STEPS, _budget_message(run))
        if run.log_loss_change <= LOSS_STILL:  # (still on the way: a budget of 4 steps "reached a saddle" 0.05 off)
            _at_saddle(run, "the step budget ran out")
        _at_a_jump(run)
        _slide_past_float64(run)


def _sliding(run) -> bool:
    """A normalised SAM flow held at a surface where its field is not smooth
    (``flowsim.integrate.arrival.sliding``) with the loss standing still and no critical point reached,
    the same entries at two chunk ends in a row: "chattering", said so (and whether it is a saddle of the
    loss), rather than a step budget spent there. (On the way to a minimum, where it slides too, the loss
    still falls or the critical point is found first.)"""
    if run.vf.signed or run.on_minima or critical.arrival_radius(run.system.flow, run.theta.size) == 0 \
            or _too_large(run):
        return False
    still = run.log_loss_change <= LOSS_STILL  # (probing costs 3 field evaluations an entry)
    on = sliding(run.vf, run.theta, run.Z, run.rho, run.sigma, run.rtol, run.atol, run.planes) if still else None
    if not run.sliding_again(on):
        return False
    run.end(Status.CHATTERING, SLIDING.format(log10_t=run.log10_t_asked, entries=", ".join(
        entry_name(i, j) for i, j in zip(*np.nonzero(on)))))
    _at_saddle(run, "it slides there")  # at a saddle of the loss, that says more
    return True


def _budget_message(run) -> str:
    """Why the step budget ran out, where that can be told: too many entries to test for convergence, or an
    explicit method's steps limited by stability (``_stability_limited``)."""
    if _too_large(run):
        return TOO_LARGE.format(size=run.K * run.d, most=DENSE_MAX, log10_t=run.log10_t_asked) \
            if critical.stops_at_minima(run.system.flow) else ""
    return _stability_limited(run)


def _stability_limited(run) -> str:
    """An explicit method whose steps sit at its stability bound (step x the rhs Jacobian's spectral
    radius >= 1, where accuracy alone would allow far longer steps): say so, and what does not pay it."""
    if run.be.implicit or _too_large(run):
        return ""
    with np.errstate(all="ignore"):
        J = segment_jacobian(run.vf, run.clock, run.sliding_shape)(run.s, run.y, run.segment_args())
        radius = float(np.abs(np.linalg.eigvals(J)).max()) if np.all(np.isfinite(J)) else math.nan
    if radius * abs(run.mean_step) >= 1.0:
        # backend="auto" hands over from a clock that can (not tau), at an atol scipy:BDF takes
        hands_over = run.clock.hands_over and run.atol >= ATOL_MIN_IMPLICIT
        auto = AUTO_HANDS_OVER if hands_over else ""
        return STIFF.format(backend=run.be.name, log10_t=run.log10_t_asked, h=abs(run.mean_step),
                            radius=radius, product=radius * abs(run.mean_step), auto=auto)
    return ""


def _put_on_planes(run) -> bool:
    """Entries that reach an invariant plane in finite time (``flowsim.integrate.arrival``), where a
    solver dithers, are set on it; the solve goes on from there."""
    if not any(run.planes):
        return False
    on = arrivals(run.vf, run.theta, run.Z, run.rho, run.sigma, run.planes, _dither(run))
    if not on.any():
        return False
    run.pin(on)
    run.add_event(Arrival(float(log10_t_from_u(run.u_now)), run.tau_now,
                          entries=weight_entries(run.system.model.layer_names, on)))
    return True


def _put_on_rest_planes(run) -> bool:
    """Entries within reach (``Run.rest_gap``) of their rest planes theta_k = -rho sigma_k and moving toward them
    (``arrival.rest_planes``) are set on them, where their field is exactly 0; the solve goes on from there."""
    if not (run.uses_sign and run.rho > 0):
        return False
    gap, reach = run.rest_gap()
    near = (np.abs(gap) <= reach * (1 + 1e-9)) & (gap != 0)
    near = near & run.resting() if near.any() else near
    if not near.any():
        return False
    run.move_to(np.where(near, -run.rho * run.sigma, run.theta))
    run.restart()
    if not np.any(run.field_and_scale()[0]):  # every entry at rest now: the rest point the flow converges to
        _converged(run, loss_still=True)
    return True


#: the most an entry is moved onto its plane, in atol: global errors are this multiple of the local tolerance
DITHER_MAX = 100


def _dither(run):
    """Per entry, how far from its plane a solver may dither: at least atol; an entry that arrives sub-linearly
    (order below ``arrival.ORDER``) within one mean step of the last call is that step's motion over
    1 - ORDER away; at most DITHER_MAX atol. An explicit method dithers at 2-30 atol where lp-SAM entries
    arrive (Tsit5 ran out of steps at a random l3-SAM case where LSODA, BDF, Radau and DOP853 collapsed)."""
    with np.errstate(all="ignore"):
        rate = run.vf.rhs(run.clock, bool(run.pinned.any()))(run.s, run.y, SegmentArgs(run.Z, run.rho, run.sigma, run.pinned))
    reach = np.abs(run.mean_step * np.asarray(rate[:-1]).reshape(run.K, run.d)) / (1.0 - ORDER)
    return np.clip(np.nan_to_num(reach, nan=run.atol), run.atol, DITHER_MAX * run.atol)


#: where ``backend="auto"`` goes when an explicit method spends a whole chunk: the steps of an explicit
#: method are stability-limited there (a step count that grows like t on a plateau, or with n on wide
#: data), an implicit one's are not (n = 2000, d = 500 l2-SAM to 1e30: Tsit5 16,384 steps and short
#: of t1 after 83 s, BDF 393 steps in 10 s)
IMPLICIT_FALLBACK = "scipy:BDF"


def _on_crossing(run, seg):
    """A solver stepped across an invariant plane w = 0 (``kept_entry_signs``): a failure, said so. Unless
    every entry is within the collapse floor there: the event fires past the floor on the other side, so
    the step went through the collapse first (a step over the whole dip finds either root). Or unless the flow was
    arriving at a (degenerate) critical point on that plane, which holds it (``_converged``, the entry put back on
    its side)."""
    if _converged_on_plane(run):
        return
    if np.abs(run.theta).max() <= math.exp(run.log_floor) * (1.0 + 1e-6):
        run.end(*end_status("collapse", run.clock))
        # the entries past their plane are at it (beta_j = +1e-21 where the flow keeps beta_j <= 0)
        run.move_to(np.where(run.sigma * run.theta < 0, 0.0, run.theta))
        return
    k = np.unravel_index(int(np.argmin(np.where(run.sigma != 0, run.sigma * run.theta, np.inf))), run.sigma.shape)
    run.end(Status.FAILED, CROSSING.format(backend=run.be.name, entry=entry_name(*k), log10_t=run.log10_t_asked))


def _converged_on_plane(run) -> bool:
    """A step across an invariant plane by an entry decaying to 0 at a degenerate critical point of the loss (its
    gradient of higher order in it): the entries past their planes are mirrored back to their sides, and the state
    is tested as a critical point the flow has converged to."""
    crossed = run.sigma * run.theta < 0
    if not crossed.any() or not critical.stops_at_minima(run.system.flow) or _too_large(run):
        return False
    kept = run.theta
    run.move_to(np.where(crossed, -run.theta, run.theta))
    if _converged(run, loss_still=True):
        return True
    run.move_to(kept)
    return False


def _on_failure(run, seg):
    """A failed step: near a minimum the l2-SAM field -grad L(theta + rho g/|g|) is discontinuous, and an
    implicit method fails there, so a converged critical point is looked for first, then a saddle (``_at_saddle``:
    a rest point of the flow where it traps it)."""
    if seg.reason == Ending.FAILED and _converged(run, loss_still=True):
        return
    run.end(Status(seg.reason), seg.message)
    if seg.reason == Ending.FAILED:
        _at_saddle(run, seg.message)
        _at_a_jump(run)
        _slide_past_float64(run)


def _at_saddle(run, why):
    """A normalised SAM flow that fails or runs out of steps at a saddle of the loss. Where the saddle traps the
    exact flow (``rest_points.normalised_rest_point``: the ascent overshoots it and the descent pulls back) it is
    a rest point of the flow, held as "converged"; where the flow passes it, or that is undecided, say so."""
    radius = critical.arrival_radius(run.system.flow, run.theta.size)
    if radius == 0 or not critical.stops_at_minima(run.system.flow) or _too_large(run) or run.log_rate() > 700:
        return  # (a rate beyond float range is the reason, said by Run.solution)
    cp = critical.saddle(run.vf, run.theta, run.Z, run.rtol, run.atol, radius)
    if cp is None:
        return
    if run.vf.signed:  # the trap test below is for a normalised g/|g|, not l_inf-SAM's sign(g)
        verdict = rest_points.SaddleRestPoint(False, SIGN_SADDLE_UNTESTED, np.empty(0), run.rho, np.nan, None)
    else:
        verdict = _normalised_saddle_verdict(run, cp)
    if verdict.is_rest_point and not np.any(cp.limit):  # beta = 0, where a run with steps enough collapses
        run.end(*end_status("collapse", run.clock))
        run.move_to(cp.limit)
        return
    if verdict.is_rest_point:
        run.move_to(cp.limit)
        run.hold(Status.CONVERGED, SADDLE_REST.format(log10_t=run.log10_t_asked, reason=verdict.reason))
        return
    run.end(Status.CHATTERING, SADDLE.format(log10_t=run.log10_t_asked, rate=cp.growth_rate, reason=why,
                                             verdict=verdict.reason))


def _normalised_saddle_verdict(run, cp):
    """Whether the saddle ``cp`` traps a normalised SAM flow (``rest_points.normalised_rest_point``)."""
    try:
        return rest_points.normalised_rest_point(run.vf, cp.limit, run.Z, run.rho)
    except ValueError as err:  # the saddle is not resolved well enough to tell
        return rest_points.SaddleRestPoint(False, f"undecided ({err})", np.empty(0), run.rho, np.nan, None)


def _at_a_jump(run):
    """A flow whose own field jumps where an entry crosses 0 (AdamProxy carries sign(dbeta/dw), which at
    even depth is sign(w)) that failed or spent its steps with entries at that plane, its field pointing
    into it from both sides without shrinking there: a sliding mode flowsim does not integrate for such a
    flow; said so, naming the entries, rather than blaming the step budget or the tolerances."""
    if run.status not in (Status.MAX_STEPS, Status.FAILED) or run.vf.signed or run.system.flow.follows_gradient \
            or _too_large(run):
        return
    theta = run.theta
    near = np.abs(theta) <= JUMP_NEAR * np.abs(theta).max()
    on = [entry_name(i, j) for i, j in zip(*np.nonzero(near)) if reached(
        run.vf, theta, run.Z, run.rho, run.sigma, (i, j), 0.0, max(2.0 * abs(theta[i, j]), run.atol))]
    if on:
        run.end(Status.CHATTERING, JUMP.format(log10_t=run.log10_t_asked, entries=", ".join(on), flow=run.system.flow))


#: entries this small against the largest are probed for a jump of the field across w = 0
JUMP_NEAR = 1e-6


def _slide_past_float64(run):
    """A sign flow that failed or spent its steps while sliding on switching surfaces whose Filippov control is
    within rounding of +-1: the weaker side's weight in the multilinear combination is below float64's resolution
    of the field (one side's loss is e^30 above the other's), so the state drifts off the surface. Said so, with
    the gap, rather than blaming the step size or budget (docs/theory.md 3b, "Large gaps")."""
    if run.status not in (Status.MAX_STEPS, Status.FAILED) or not run.surfaces.any() or run.vf.affine_in_sign:
        return
    control = filippov_control(run.vf, run.theta, run.Z, run.rho, run.sigma, run.pinned, run.surfaces)
    margin = 1.0 - np.abs(np.asarray(control.control, float))
    if not np.all(np.isfinite(margin)) or margin.min() > DIGITS_LOST:
        return
    columns = np.flatnonzero(run.surfaces.any(axis=0))
    spread = field_surfaces.spread_of(run.vf, run.theta, run.surfaces)
    _, scales, *_ = field_surfaces.evaluate(field_surfaces.jax_of(run.vf), "one_sided", run.theta, run.Z, run.rho,
                                            run.sigma, run.pinned, spread)  # the corners' log scales
    names = ("coordinate " if len(columns) == 1 else "coordinates ") + ", ".join(str(j + 1) for j in columns)
    run.end(run.status, SLIDE_PAST_FLOAT64.format(log10_t=run.log10_t_asked, coordinates=names, margin=margin.min(),
                                                  gap=float(np.ptp(scales)))
            + (f" ({run.message})" if run.message else ""))


#: a sliding control within this of +-1 has lost the weaker side's field to rounding
DIGITS_LOST = 1e-10


#: dense O((Kd)^3) linear algebra (eigenvalues, Newton steps) on cold paths only up to this many entries
DENSE_MAX = 4096


def _too_large(run) -> bool:
    return run.K * run.d > DENSE_MAX


#: at most this many saved states are tested per look back (each test is a few O((Kd)^3) Newton steps)
LOOK_BACK = 16


def _earlier_rest_point(run) -> bool:
    """A perturbed flow can come to rest where its evaluation point is a critical point, a rest point
    that may attract from one side only: a solver that steps across it goes on to a state the exact
    flow never reaches (and may report that as converged). So the saves since the last look, where the
    loss stood still, are tested for a rest point of the flow itself, and the earliest one found is
    held from that save on."""
    start = run.saves_to_look_at()
    if _too_large(run):
        return False
    first = max(start, 1)
    if len(run.records) - first < 1:  # fewer than two saves to compare
        return False
    # each save's loss once, all in one pass (one at a time these cost half an l2-SAM solve at 400 saves)
    losses = run.records.losses(first - 1)
    still = [first + k for k in range(len(losses) - 1) if abs(losses[k + 1] - losses[k]) <= LOSS_STILL]
    for i in still[::-(-len(still) // LOOK_BACK) or 1]:  # spread over the stretch: a rest lasts many saves
        theta = run.records.theta_at(i)
        sigma, sliding = run.records.signs_at(i)
        if sliding:
            continue
        cp = critical.rest_point(run.vf, theta, run.Z, run.rtol, run.atol, run.rho, sigma=sigma)
        if cp is not None:
            run.rewind_to(i, cp.limit)
            run.hold(Status.CONVERGED, critical.describe(run.system, run.data, cp, run.log10_t_asked, run.atol))
            return True
    return False


def _has_own_rest_points(run) -> bool:
    """A perturbed flow that rests where its evaluation point is a critical point: a gradient-following
    one, or a sign flow between switches (its field is then smooth; while entries slide it is not). Not a
    normalised perturbation on a regression: it jumps at the minima, where its slide decides what comes next."""
    return run.rho > 0 and (rest_points_are_critical(run.system.flow) or run.uses_sign) and not _jumps_at_minima(run)


def _jumps_at_minima(run) -> bool:
    """A normalised perturbation (SAM, ASAM with eps = 0) on a regression: its field jumps at the minima."""
    return run.data.is_regression and not run.system.flow.point.vanishes_with_gradient


def _converged(run, loss_still=False) -> bool:
    """Hold the limit as "converged" if the state has converged to a critical point (``_critical``).
    Unless ``loss_still``, only where the loss has stopped decreasing (the test costs O((Kd)^3)). Sliding on
    surfaces: a rest point of the sliding field, or a critical point of the loss that stops the flow (steepest
    descent for p = inf, whose field -||g||_1 sign(g) vanishes there on every side: its sliding field's Jacobian
    has rank one there, and Newton's method on it does not reach the point)."""
    if run.surfaces.any():
        return _at_sliding_rest(run, loss_still) or _at_critical_point(run, loss_still)
    if run.on_minima:
        return _slide_along_minima_left(run)
    return _at_critical_point(run, loss_still)


def _at_critical_point(run, loss_still) -> bool:
    """:func:`_converged` where no entry slides on a surface: a critical point of the loss (for a sign flow one
    that is a Filippov rest point), or of the perturbed flow where it has rest points of its own."""
    if not critical.stops_at_minima(run.system.flow) or _too_large(run):
        return False
    own = _has_own_rest_points(run)
    if own and _earlier_rest_point(run):
        return True
    sigma = run.sigma if run.uses_sign else None
    own = own and not (run.uses_sign and run.slides)  # a sliding sign flow's field is not smooth
    if not (loss_still or run.log_loss_change <= LOSS_STILL):
        return False
    cp = critical.find(run.vf, run.theta, run.Z, run.rtol, run.atol,
                       critical.arrival_radius(run.system.flow, run.theta.size), rho=run.rho if own else 0.0,
                       sigma=sigma, flow_rho=run.rho)
    if cp is None:
        return False
    if cp.of_loss and _jumps_at_minima(run):
        return _at_regression_critical_point(run, cp)
    message = critical.describe(run.system, run.data, cp, run.log10_t_asked, run.atol)
    if run.uses_sign and cp.of_loss:
        verdict = _sign_rest_point(run, cp)
        if not verdict.is_rest_point:
            return False  # the fields all leave the minimum: it is no end of the flow
        message += f"; {verdict.reason}"
    run.move_to(cp.limit)
    run.hold(Status.CONVERGED, message)
    return True


def _at_regression_critical_point(run, cp) -> bool:
    """A normalised perturbation (SAM, ASAM with eps = 0) at a critical point of a regression's loss, where it
    jumps (docs/theory.md 12). A saddle: the trap test decides, as in ``_at_saddle``. A minimum where every field of
    Filippov's set points across the minima (isolated, or a loss quadratic in theta): a rest point, held. Else the
    exact flow slides on along the minima: where they interpolate and their normal space is the samples' one line
    the slide is unique and the run follows it; elsewhere Filippov's inclusion has a slide for every second moment
    of the normal directions (or one flowsim does not integrate), and the run ends at the arrival saying so."""
    run.move_to(cp.limit)
    minima = critical.minima_around(run.vf, cp.limit, run.Z, run.rho, run.sigma)
    if minima.saddle:
        verdict = _normalised_saddle_verdict(run, cp)
        if verdict.is_rest_point:
            run.hold(Status.CONVERGED, SADDLE_REST.format(log10_t=run.log10_t_asked, reason=verdict.reason))
        else:
            run.end(Status.CHATTERING, REGRESSION_SADDLE.format(log10_t=run.log10_t_asked, verdict=verdict.reason))
    elif not minima.drifts:
        run.hold(Status.CONVERGED, critical.describe(run.system, run.data, cp, run.log10_t_asked, run.atol)
                 + MINIMA_NORMAL)
    elif not critical.interpolates(run.system, run.data, cp.limit, run.atol):
        run.end(Status.CHATTERING, NOT_INTERPOLATING.format(log10_t=run.log10_t_asked, rank=minima.normal_rank))
    elif minima.normal_rank == 1 and np.linalg.matrix_rank(run.vf.features(run.Z)) == 1:
        run.slide_along_minima()
    else:
        run.end(Status.CHATTERING, MINIMA_NOT_UNIQUE.format(log10_t=run.log10_t_asked, rank=minima.normal_rank))
    return True


def _slide_along_minima_left(run) -> bool:
    """The slide along the minima has stopped (its field is 0: held, as ``at_rest`` holds it before a segment), or
    meets a point where the two sides' fields no longer both point into them (an exit the sliding field does not
    follow), said so; else False: it goes on."""
    F, _ = run.field_and_scale()
    if not np.any(F):
        run.hold(Status.STALLED, MINIMA_REST.format(since=run.on_minima_since, log10_t=run.log10_t_asked))
    elif not np.all(np.isfinite(F)):
        run.end(Status.CHATTERING, MINIMA_EXIT.format(since=run.on_minima_since, log10_t=run.log10_t_asked))
    return run.status is not None


def _rests_on(run, reached) -> bool:
    """A switch with no continuation where the flow has come to rest sliding on the surfaces it has ``reached``
    (those it slid on and those it arrives at), or on those of every entry not held on its plane (arriving at
    the same rest point, whose surfaces it meets in no particular order): at a rest point no choice of sides is
    consistent, each pointing back (``_at_sliding_rest``)."""
    tried = [run.surfaces]
    for surfaces in (reached, reached | ~run.pinned):
        if surfaces.any() and not any((surfaces == t).all() for t in tried):
            if _at_sliding_rest(run, loss_still=True, surfaces=surfaces, within=REST_REACH):
                return True
            tried.append(surfaces)
    return False


#: at a switch with no continuation, an attracting rest point of the sliding field this many solver tolerances away
#: is where the flow ends (a sign flow reaches it in finite time, meeting its surfaces in an order set by rounding)
REST_REACH = 100.0


def _at_sliding_rest(run, loss_still, surfaces=None, within=1.0) -> bool:
    """Hold the state as "converged" where a flow sliding on switching surfaces (default: those it slides on) has
    come to rest: its one-sided fields balance there and every other entry is still
    (``sliding.sliding_rest_point``)."""
    if _too_large(run) or not (loss_still or run.log_loss_change <= LOSS_STILL):
        return False
    surfaces = run.surfaces if surfaces is None else surfaces
    limit = sliding_rest_point(run.vf, run.theta, SegmentArgs(run.Z, run.rho, run.sigma, run.pinned), surfaces,
                               run.atol + run.rtol * np.abs(run.theta), within)
    if limit is None:
        return False
    run.slide_on(surfaces)
    limit = np.where(np.abs(limit) <= run.atol, 0.0, limit)  # below what the solver resolves, as at a critical point
    run.move_to(limit)
    entries = ", ".join(f"coordinate {j + 1}" for j in np.flatnonzero(run.surfaces.any(axis=0)))
    run.hold(Status.CONVERGED, SLIDING_REST.format(log10_t=run.log10_t_asked, entries=entries))
    return True


def _sign_rest_point(run, cp):
    """Whether a minimum of the loss can be a Filippov rest point of a sign flow at this rho: 0 in the convex
    hull of its one-sided fields (``rest_points.linf_sam_minimum_is_rest_point``, an LP)."""
    try:
        return rest_points.linf_sam_minimum_is_rest_point(run.vf, cp.limit, run.Z, run.rho)
    except ValueError as err:  # too many entries with G = 0 to enumerate their sign patterns
        return rest_points.SignRestPoint(True, f"held without the convex-hull check ({err})", run.rho, 0, np.nan,
                                         None)


#: segment endings (backend reasons) that end a solve normally, and the status each gives
ENDINGS = {Ending.END: Status.COMPLETED, "horizon": Status.COMPLETED, "collapse": Status.COLLAPSED,
           "blowup": Status.BLEW_UP}


#: the tau clock ends at the horizon event; running out of tau means t stopped growing with it
TAU_EXHAUSTED = ("tau reached 1e300 before t1: the loss no longer decreases (an equilibrium that is not exact: exact "
                 "ones, where the field is 0, are held constant as 'stalled'), so t = tau e^{-S} cannot reach t1 in "
                 "the tau clock; the log-time clock reaches t = 1e300 on it")


#: how far short of the horizon (in u = log(1 + t), relative) a horizon event may end: its location on the dense
#: output is as fine as the clock's float resolution allows, and at tau = 6.7e7 a float step in tau moved u by 1e-3
#: (Radau, tau clock, depth-3 l_inf-SAM to log10 t = 1000: 4.4e-7 short)
HORIZON_SLACK = 1e-6
SHORT_OF_HORIZON = ("the solver's horizon event ended the run at log10 t = {log10_t:.9g}, short of log10 t1 = "
                    "{log10_t1:.9g} (its dense output did not locate it); tighten rtol or choose another backend")


def end_status(reason, clock):
    """Status and message of a segment that ended with ``reason`` (a key of ``ENDINGS``): a clock that counts u in
    its state ends at its horizon event, so running out of its integration variable is a failure."""
    if reason == Ending.END and clock.u_in_state:
        return Status.FAILED, TAU_EXHAUSTED
    return ENDINGS[reason], ""


SADDLE = ("at log10 t = {log10_t:.6g} the flow reached a saddle of the loss (growth rate {rate:.3g} per unit tau "
          "along its unstable directions) where its field -grad L(theta + rho P(g)) (P: g/|g|, its lp form or sign(g)) is "
          "discontinuous (g = 0): "
          "{verdict}. flowsim does not follow the flow through the saddle ({reason}); the trajectory up to it is kept")
#: the verdict at a saddle reached by a sign flow (l_inf-SAM), which the trap test does not cover
SIGN_SADDLE_UNTESTED = ("whether it traps the flow is not tested for l_inf-SAM (the test covers normalised "
                        "perturbations, g/|g| and its lp forms, not sign(g))")
SADDLE_REST = ("at log10 t = {log10_t:.6g} the flow came to rest, {reason}. The exact flow stays there, as its "
               "regularisation and discrete SAM do in the limits eps -> 0 and step -> 0 (docs/theory.md 9); the state "
               "is held")


MINIMA_NOT_UNIQUE = (
    "at log10 t = {log10_t:.6g} the flow reached the interpolating minima X beta = y, where its normalised "
    "perturbation is discontinuous and the exact flow slides on along them. Their normal space (the residuals' "
    "gradients) has dimension {rank}, and there Filippov's inclusion has one sliding motion for every second moment "
    "P of the normal directions (drift -(rho^2/2) times the tangential part of D^3 L[P]): the continuation is not "
    "unique, and the run ends at the arrival. Discrete SAM's oscillation picks the top Hessian eigenvector (Wen, Ma "
    "and Li, 2023); SAM(rho, eps=...) with eps > 0 rests here; on one sample the slide is unique and followed "
    "(docs/theory.md 12)")
MINIMA_EXIT = ("sliding along the interpolating minima since log10 t = {since:.6g}, at log10 t = {log10_t:.6g} the two "
               "sides' fields of the perturbation no longer both point into the minima: the flow leaves them there, a "
               "sliding exit flowsim does not follow; the slide up to it is kept")
MINIMA_REST = ("sliding along the interpolating minima since log10 t = {since:.6g}, the slide stopped at log10 t = "
               "{log10_t:.6g} (its field is 0 to the last bit: the entries it moved are on their planes w = 0 or "
               "balanced); the state is held")
MINIMA_SLID = "reached the horizon t1, sliding along the interpolating minima since log10 t = {since:.6g}"
REGRESSION_SADDLE = ("at log10 t = {log10_t:.6g} the flow reached a saddle of the loss, where its normalised "
                     "perturbation is discontinuous: {verdict}; flowsim does not follow the flow past it, and the "
                     "trajectory up to it is kept")
MINIMA_NORMAL = ("; a rest point of the exact flow too: every field of its Filippov set there (-grad L at the perturbed "
                 "points of every side) points across the minima, none along them")
NOT_INTERPOLATING = ("at log10 t = {log10_t:.6g} the flow reached a set of minima of the loss that does not "
                     "interpolate (normal space of dimension {rank}), where its normalised perturbation is "
                     "discontinuous and the fields of its Filippov set move along the set: the exact flow slides "
                     "on along it, which flowsim does not integrate off the interpolating minima; the trajectory up "
                     "to the arrival is kept (docs/theory.md 12)")


SLIDING_REST = ("at log10 t = {log10_t:.6g} the flow came to rest while sliding on the switching surfaces of "
                "{entries}: its one-sided fields balance there and every other entry is still (a rest point of the "
                "Filippov flow, docs/theory.md 3b); the state is held")


TOO_LARGE = ("the step budget max_steps ran out at log10 t = {log10_t:.6g}. With {size} parameter entries integrated "
             "(over {most}) flowsim does not test whether the flow has converged to a critical point (a dense O(n^3) "
             "test): where the loss has stopped decreasing the flow may have; plot sol.log_loss. Otherwise raise "
             "max_steps or loosen rtol/atol")


STIFF = ("{backend} ran out of its step budget at log10 t = {log10_t:.6g} with steps limited by stability, not "
         "accuracy (stiff): its mean step {h:.3g} times the spectral radius {radius:.3g} of the field's Jacobian is "
         "{product:.3g}, at an explicit method's stability bound. An implicit method is not limited so: {auto}"
         "backend='scipy:BDF', 'scipy:LSODA' or 'scipy:Radau'; a larger max_steps only goes further "
         "at the same pace (on a plateau in the log-time clock, a pace that slows like 1/t)")


#: the advice for runs that backend="auto" would hand over to an implicit method
AUTO_HANDS_OVER = "backend='auto' (hands over to scipy:BDF) or "


SLIDE_PAST_FLOAT64 = ("at log10 t = {log10_t:.6g}, sliding on the switching surface of {coordinates}, the Filippov "
                      "control is {margin:.2g} from +-1: the one-sided fields' log scales differ by {gap:.3g}, and the "
                      "weaker side's share of the field is below float64's rounding, so the state drifts off the "
                      "surface")
JUMP = ("at log10 t = {log10_t:.6g} entries {entries} are at w = 0, where the field of "
        "{flow} points into that plane from both sides without vanishing linearly (AdamProxy's carries "
        "sign(dbeta/dw) and jumps there): the exact flow reaches w = 0 and slides along it, which flowsim does not "
        "integrate for this flow; the trajectory up to it is kept")


SLIDING = ("at log10 t = {log10_t:.6g} entries {entries} are on a surface where a component of the gradient g vanishes "
           "and the field -grad L(theta + rho eps(g)) is not smooth (lp-SAM's ascent step carries |g_k|^(1/(p-1)), not "
           "Lipschitz at 0 for p > 2; l2's g/|g| jumps where g = 0): their fields point into their current values "
           "from both sides and do not shrink near them, with the loss standing still. There the exact flow either "
           "follows a stiff manifold next to the surface (lp-SAM, p > 2: an implicit method may follow it, and "
           "backend='auto' hands over to one) or arrives at a critical point of the loss, where the field jumps, "
           "that flowsim could not confirm as the flow's end (Newton's method from the state does not reach it, "
           "degenerate entries included, or its field is not shown to trap the flow there; docs/theory.md, "
           "'Sliding modes'); the trajectory up to it is kept")


CROSSING = ("{backend} stepped across {entry} = 0 at log10 t = "
            "{log10_t:.6g}. That plane is invariant: the entry's field carries the factor w^(L-1), so the exact flow "
            "does not reach it in finite time (normalised SAM and NormalizedGD only where the gradient vanishes "
            "with it, a point where its field is discontinuous and the continuation not unique). flowsim does not "
            "follow a solver across it; the trajectory up to it is kept")


HANDLERS = {**{reason: _on_end for reason in ENDINGS}, "switch": _on_switch, "slide_exit": _on_switch, Ending.MAX_STEPS: _on_chunk_end,
            "crossing": _on_crossing, Ending.FAILED: _on_failure, Ending.INTERRUPTED: _on_failure,
            **{f"lead_{kind}": _on_switch for kind in SCORES}}
