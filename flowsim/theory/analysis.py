r"""Implicit-bias diagnostics on a solution: distance to max-margin references, fitted convergence
rates and verdicts, feature usage and its switches, and seed 000's l_inf-SAM prediction.

Convergence at depth 2 is slow (minor coordinates decay like a power of 1/log t, docs/theory.md 4), so a
verdict never reads a cosine at the last save point: it fits the normalised-margin gap
:math:`\gamma^\star - \gamma(t) \approx A (\log t)^{-k}` over the last decades and asks that the
gap to one reference decays (k > 0, a good fit, still decreasing) while the others stay away.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from flowsim._checks import is_real_number, is_whole
from flowsim.integrate.status import Status
from flowsim.symbolic.reachable import reachable_signs
from flowsim.theory.heavy_tails import polynomial_tail_limit
from flowsim.theory.references import MaxMargin, normalised_margin


def leading_coordinate(sol) -> np.ndarray:
    """argmax_j |beta_j| at each save point."""
    return np.argmax(np.abs(sol.beta), axis=1)


def shares(sol) -> np.ndarray:
    """|beta_j| / ||beta||_1 at each save point (rows sum to 1 where beta != 0)."""
    a = np.abs(sol.beta)
    s = a.sum(axis=1, keepdims=True)
    return np.divide(a, s, out=np.zeros_like(a), where=s > 0)


def switch_times(sol, by: str = "magnitude") -> list[dict]:
    """Every change of the leading coordinate, located by a solver event (root-found on the dense
    solution): dicts with ``log10_t``, ``tau``, ``from_index`` and ``to_index`` (0-based columns of ``sol.beta``,
    as NumPy counts), ``from_coordinate`` and ``to_coordinate`` (1-based, as the papers, a saved run's
    ``coordinate`` labels and a sweep's ``leader`` count: ``ds.sel(coordinate=e["to_coordinate"])``) and
    ``beta`` there. ``by="magnitude"`` (argmax |beta_j|) or ``"growth"`` (argmax of the relative growth rate); solve with ``track=`` to record
    the latter."""
    kind = f"lead_{by}"
    if by not in ("magnitude", "growth"):
        raise ValueError(f"by must be 'magnitude' or 'growth'; got {by!r}.")
    tracked = sol.config.get("track", ())
    if by not in tracked and sol.beta.shape[1] > 1:
        raise ValueError(f"this solution did not track {by!r} leaders; solve again with track=({by!r},).")
    return [e for e in sol.events if e["kind"] == kind]


def sequential_amplification(sol, by: str = "magnitude") -> dict:
    """The ordered list of coordinates that lead over time and whether the order runs from minor to
    major, minor and major meaning the size of the coordinate's data feature (sum_i |x_ij|):
    seed 000's "minor first, major last" (Thm 4.4): each leader's feature larger than the one before,
    and the last the major one (a run stopped at beta_2 of three was "minor to major")."""
    evs = switch_times(sol, by)
    # the leader before any switch, as the solver found it (a growth leader cannot be read off the saves: with
    # no switch the order was [0] whoever led)
    first = sol.config.get("first_leaders", {}).get(by)
    if first is None:  # saved by an older flowsim, or one coordinate
        first = int(leading_coordinate(sol)[1]) if by == "magnitude" or sol.beta.shape[1] == 1 else None
    if first is None and not evs:
        raise ValueError("this solution does not record which coordinate led in growth at its start; solve it again.")
    order = [evs[0]["from_index"] if evs else first] + [e["to_index"] for e in evs]
    feature = np.abs(sol.data.X).sum(axis=0)
    sizes = feature[order]
    rising = len(order) > 1 and np.all(np.diff(sizes) > 0) and sizes[-1] == feature.max()
    return {"order": order, "switches": evs, "minor_to_major": bool(rising)}


def margin_gap(sol, ref: MaxMargin) -> np.ndarray:
    """Reference normalised margin minus the current one, ``ref.norm`` (>= 0 up to round-off)."""
    return ref.margin - normalised_margin(sol.data, sol.beta, ref.norm, ref.metric)


def angle(sol, ref: MaxMargin) -> np.ndarray:
    """Angle in degrees between beta(t) and the reference direction."""
    u = sol.direction
    v = ref.direction / np.linalg.norm(ref.direction)
    return np.degrees(np.arccos(np.clip(u @ v, -1.0, 1.0)))


@dataclass(frozen=True)
class Convergence:
    """How the gap to one reference behaves over the last decades of a solution."""

    name: str
    final_gap: float
    rate: float  # k in gap ~ A (log t)^(-k); for a polynomial tail, k in angle ~ A t^(-k) (the angle is final_gap)
    r2: float
    decreasing: bool
    final_angle: float
    #: k fitted on the first and on the second half of the tail: equal for a gap that follows one power
    #: law to 0; the late k grows where the trajectory is still in a transient
    halves: tuple = (float("nan"), float("nan"))

    @property
    def steady(self) -> bool:
        """The rate is the same on both halves of the tail (within 15%)."""
        return is_steady(self.halves)


def rate_halves(log_x, log_y) -> tuple:
    """The rate k of log y = c - k log x fitted on the first and on the second half of the points."""
    h = len(log_x) // 2
    return tuple(float(-np.polyfit(log_x[part], log_y[part], 1)[0]) for part in (slice(0, h), slice(h, None)))


def is_steady(halves) -> bool:
    """One power law: a positive rate, the same on both halves within ``STEADY``."""
    early, late = halves
    return bool(early > 0 and late > 0 and abs(late / early - 1.0) <= STEADY)


def convergence(sol, ref: MaxMargin, name: str = "", tail: float = 0.5) -> Convergence:
    """Fit gap ~ A (log t)^(-k) over the last ``tail`` fraction of save points (in log10 t)."""
    gap = np.maximum(margin_gap(sol, ref), 0.0)
    return _power_law(sol.log10_t, gap, lambda log_t: np.log(log_t), name, tail, float(angle(sol, ref)[-1]))


def _power_law(lt, gap, x_of, name, tail, final_angle, floor=1e-12) -> Convergence:
    """Fit log gap = c - k x over the last ``tail`` fraction of the save points at ``lt`` (log10 t), x = x_of(log t):
    log log t for a power of 1/log t, log t for a power of 1/t. A gap at or below ``floor`` throughout is reached."""
    keep = np.isfinite(lt) & (lt >= lt[-1] - tail * (lt[-1] - max(lt[np.isfinite(lt)][0], 0.0))) & (lt > 0)
    g = gap[keep]
    x = x_of(lt[keep] * np.log(10.0))
    rate, r2, halves = 0.0, 0.0, (float("nan"), float("nan"))
    if keep.sum() >= 4 and np.all(g > 0):
        A = np.vstack([x, np.ones_like(x)]).T
        coef, res, *_ = np.linalg.lstsq(A, np.log(g), rcond=None)
        rate = -coef[0]
        pred = A @ coef
        ss = np.sum((np.log(g) - np.log(g).mean()) ** 2)
        r2 = 1.0 - np.sum((np.log(g) - pred) ** 2) / ss if ss > 0 else 1.0
        if keep.sum() >= 8:
            halves = rate_halves(x, np.log(g))
    elif keep.sum() >= 1 and np.all(g <= floor):
        rate, r2 = np.inf, 1.0
    q = max(1, keep.sum() // 3)
    decreasing = bool(keep.sum() >= 2 and g[-1] <= g[-q - 1] * (1 + 1e-9) if keep.sum() > q else False)
    return Convergence(name=name, final_gap=float(gap[-1]), rate=float(rate), r2=float(r2), decreasing=decreasing,
                       final_angle=final_angle, halves=halves)


@dataclass(frozen=True)
class Verdict:
    """``holds``: True (converges to ``reference``), False (converges elsewhere) or None
    (inconclusive); ``why``: the evidence in words; ``fits``: one :class:`Convergence` per reference;
    ``extrapolated``: the angle (degrees) from the claim of the limit extrapolated under each law of ``LAWS``
    that was fitted (empty where the verdict was reached before extrapolating)."""

    reference: str
    holds: bool | None
    why: str
    fits: dict
    extrapolated: dict = field(default_factory=dict)


def verdict(sol, refs: dict, claim: str, min_r2: float = 0.9) -> Verdict:
    """Does ``sol`` converge in direction to ``refs[claim]``? Evidence, all needed: its normalised-margin
    gap decays as one power of 1/log t (k > 0, R^2 >= min_r2, the same k on both halves of the tail
    within 15%, still decreasing at the end); beta(t) is closer in angle to it than to every other
    reference farther from it than the run is (at most ``MIN_APART_DEG`` apart they are one direction); and the limit extrapolated from the tail (:func:`limit_direction`)
    is closer to it than to those others and at most half as far from it as beta at the horizon (within
    0.05 degrees where that is less), extrapolated as a power of 1/log t; extrapolated as a power of 1/log log t
    too (``LAWS``), the two limits at most as far apart as the claim is from the nearest other reference (else
    None, "undecided by the extrapolation law": the data at this horizon do not say which it is). A run nearer
    another reference while its gap to the claim still decays is passing it (None) unless the fitted limits rule
    the claim out (False, "converges elsewhere", docs/theory.md 4). False when another reference is closer by
    more than a factor 2 in angle and the gap to the claim does not decay, when the gap to a unique optimum levels
    off above 0 without decaying (fitted |k| < 0.05, not k > 0 and decreasing: no rival needed),
    or when the run's margin is above a KKT point's (depth >= 3: a local optimum; the run is at another);
    None (inconclusive) otherwise; None ("undecided: references coincide") too for a run that would converge
    to the claim while another reference is no farther from it than the run's final angle: the run cannot tell
    the two apart (data whose l1, l2 and l_inf optima all lie along (1, 1) confirm none of the three claims over
    the others). A run of a margin loss with a polynomial tail l ~ m^-k (``loss.tail_power``) is judged by its own
    law: its limit is the minimiser of sum_i (z_i.w)^-k on the sphere, its angle to it decaying as a power of t
    (:func:`_polynomial_tail_verdict`); a loss with neither tail is refused (ValueError). A global optimum whose margin the run exceeds is not one of these data: a ValueError. (Without the last two checks of the power law, a trajectory
    still in a transient at the horizon, 37 degrees from the l_inf direction at t = 1e100 and on its way
    to l1, its gaps shrinking ever faster, was called convergent to l_inf: depth-2 GD from
    (1, 0.01, 0.01).)"""
    if claim not in refs:
        raise ValueError(f"claim {claim!r} is not among the references {sorted(refs)}.")
    if not sol.system.loss.exponential_tail:
        return _polynomial_tail_verdict(sol, refs, claim, min_r2)
    fits = {k: convergence(sol, r, k) for k, r in refs.items()}
    c = fits[claim]
    above = _above(sol, refs[claim], claim)
    at_margin = c.final_gap <= 1e-9 and not above  # (the gap is clipped at 0: a run above a KKT point's margin)
    decays = at_margin or (c.rate > 0 and c.r2 >= min_r2 and c.decreasing)
    unit = {k: r.direction / np.linalg.norm(r.direction) for k, r in refs.items()}
    apart = {k: _degrees(unit[k], unit[claim]) for k in refs if k != claim}
    rivals = [k for k, deg in apart.items() if deg > MIN_APART_DEG]
    # a reference no farther from the claim than the run is cannot be told from it by this run
    coincide = [k for k, deg in apart.items() if deg <= max(c.final_angle, MIN_APART_DEG)]
    # gaps in different norms are not comparable; angles (in l2) are
    beaten = [k for k in rivals if fits[k].final_angle <= c.final_angle]
    text = (f"gap to {claim}: {c.final_gap:.3g} at log10 t = {sol.log10_t[-1]:.4g}, fitted ~ (log t)^{-c.rate:.3g} "
            f"(R^2 = {c.r2:.3f}), angle {c.final_angle:.3g} deg"
            + "".join(f"; {k}: gap {fits[k].final_gap:.3g}, rate {fits[k].rate:.3g}" for k in rivals))
    if sol.status != Status.COMPLETED:
        return Verdict(claim, None, f"solution status {sol.status!r}: " + text, fits)
    if _is_face(refs[claim]):
        return _to_a_face(claim, c, decays, text, fits)
    if above:
        return Verdict(claim, False, f"its margin is above this KKT point's, {c.final_angle:.3g} deg from it: the run "
                                     "is at another point (a local optimum is not the only limit): " + text, fits)
    if decays and not beaten:
        settled, why, extrapolated = _settled_on(sol, unit, claim, rivals, c, at_margin)
        if settled and coincide:
            return Verdict(claim, None, "undecided: references coincide ("
                           + ", ".join(f"{k} {apart[k]:.3g} deg" for k in coincide)
                           + f" from {claim}, no farther apart than the run's {c.final_angle:.3g} deg from it: it "
                           "converges to all of them or none): " + text + why, fits, extrapolated)
        return Verdict(claim, True, "converges: " + text + why, fits, extrapolated) if settled else \
            Verdict(claim, None, "inconclusive: " + text + why, fits, extrapolated)
    if decays:  # (and a rival nearer than the claim)
        return _passing_by(sol, unit, claim, rivals, beaten, text, fits, min_r2)
    if any(fits[k].final_angle < 0.5 * c.final_angle for k in beaten):
        return Verdict(claim, False, "closer to another reference: " + text, fits)
    # a unique optimum's margin gap not decaying and levelling off above 0 (|k| < LEVEL) is a run going elsewhere,
    # with or without a rival (GD judged against l_inf alone was inconclusive at a gap of 0.077, k = -0.004)
    if refs[claim].unique and _stops_short(c) and not decays:
        return Verdict(claim, False, "its margin gap levels off above 0: " + text, fits)
    # a rival whose optimum is a face is far in angle from its one vertex: reaching its margin while this one's
    # stands still is the evidence (depth-2 GD on the l1 face, 44 deg from l2, was inconclusive for l2)
    reached = [k for k in rivals if _is_face(refs[k]) and abs(margin_gap(sol, refs[k])[-1]) <= 1e-9]
    if reached and _stops_short(c):
        return Verdict(claim, False, f"at {reached[0]}'s margin while its own stops short: " + text, fits)
    return Verdict(claim, None, "inconclusive: " + text, fits)


def _polynomial_tail_verdict(sol, refs: dict, claim: str, min_r2: float) -> Verdict:
    """:func:`verdict` for a margin loss with a polynomial tail l ~ m^-k (``loss.tail_power``; docs/theory.md 4): the
    direction tends to the minimiser of sum_i (z_i.w)^-k on the sphere (:func:`flowsim.polynomial_tail_limit`), not
    to a max-margin, and the angle to it decays as a power of t, not of 1/log t. True where ``refs[claim]`` is that
    limit (within ``MIN_APART_DEG``) and the run's angle to it decays as one power of t (k > 0, R^2 >= ``min_r2``, the
    same k on both halves of the tail within ``STEADY``, still decreasing) or is below 1e-9 degrees; False where the
    claim is not that limit and the run's angle to the limit decays so, the run nearer it than the claim; None
    otherwise. ``fits`` holds one fit of the angle (degrees, ``final_gap``) ~ t^-k per reference and one for the
    limit ("polynomial-tail limit"). A margin loss with neither tail has no decay law here: a ValueError says so."""
    loss = sol.system.loss
    power = loss.tail_power
    if not np.isfinite(power):
        tail = "a regression loss (its runs converge to a point, not in direction)" if loss.is_regression else \
            "a margin loss with neither an exponential tail (-log q ~ c m) nor a polynomial one (l ~ m^-k)"
        raise ValueError(f"verdict: the loss {loss.name!r} is {tail}: verdict has no limit direction or decay law for "
                         "its runs; compare directions with fs.angle.")
    limit = polynomial_tail_limit(sol.data, power)
    named = {**refs, LIMIT_NAME: limit}
    fits = {k: _angle_law(sol, r.direction, k) for k, r in named.items()}
    c, derived = fits[claim], fits[LIMIT_NAME]
    off = _degrees(refs[claim].direction, limit.direction)
    text = (f"a polynomial tail l ~ m^-{power:.4g}, whose limit direction minimises sum_i (z_i.w)^-{power:.4g} on the "
            f"sphere ({claim} is {off:.3g} deg from it); angle to {claim} {c.final_angle:.3g} deg at log10 t = "
            f"{sol.log10_t[-1]:.4g}, fitted ~ t^-{c.rate:.3g} (R^2 = {c.r2:.3f}, rate {c.halves[0]:.3g} then "
            f"{c.halves[1]:.3g} over the tail's halves); to that limit {derived.final_angle:.3g} deg, ~ "
            f"t^-{derived.rate:.3g}")
    if sol.status != Status.COMPLETED:
        return Verdict(claim, None, f"solution status {sol.status!r}: " + text, fits)
    if off <= MIN_APART_DEG:
        if _decays_as_one_power(c, min_r2):
            return Verdict(claim, True, "converges: " + text, fits)
        return Verdict(claim, None, "inconclusive: the angle to the limit does not yet decay as one power of t: "
                       + text, fits)
    if _decays_as_one_power(derived, min_r2) and derived.final_angle < c.final_angle:
        return Verdict(claim, False, "converges to the polynomial-tail limit, not to the claim: " + text, fits)
    return Verdict(claim, None, "inconclusive: " + text, fits)


#: the name of the polynomial-tail limit among a heavy-tailed verdict's ``fits``
LIMIT_NAME = "polynomial-tail limit"
#: an angle (degrees) below this is the direction reached (float64 resolves directions to ~1e-14 rad)
REACHED_DEG = 1e-9


def _angle_law(sol, direction, name, tail: float = 0.5) -> Convergence:
    """The run's angle (degrees) to ``direction`` fitted ~ A t^-k over the last ``tail`` of log10 t (a
    cancellation-free angle: arccos rounds angles below 1e-6 degrees)."""
    u = direction / np.linalg.norm(direction)
    degrees = np.degrees(2.0 * np.arcsin(np.clip(np.linalg.norm(sol.direction - u, axis=1) / 2.0, 0.0, 1.0)))
    return _power_law(sol.log10_t, degrees, lambda log_t: log_t, name, tail, float(degrees[-1]), floor=REACHED_DEG)


def _decays_as_one_power(fit: Convergence, min_r2: float) -> bool:
    """Reached, or decaying as one power law: k > 0, a good fit, the same k on both halves, still decreasing."""
    return fit.final_angle <= REACHED_DEG or (fit.rate > 0 and fit.r2 >= min_r2 and fit.decreasing and fit.steady)


#: a fitted decay exponent below this is a margin gap levelling off (converged runs here decay as (log t)^-1 or
#: faster; a run at another optimum's margin fits 1e-4 and less)
LEVEL = 0.05


def _stops_short(fit) -> bool:
    """The margin gap levels off above 0: its fitted power (log t)^-k has |k| < LEVEL (a gap still growing at
    the horizon, k < 0, is a transient: inconclusive)."""
    return fit.final_gap > 1e-6 and abs(fit.rate) < LEVEL


#: how far (relative) a run's normalised margin may exceed a reference's before that says something: above the
#: solvers' own slack (the l2 QP accepts min z.w >= 1 - 1e-6, the LPs meet theirs to ~1e-9)
ABOVE = 1e-5


def _above(sol, ref, name) -> bool:
    """Whether the run's margin is above ``ref``'s at the end: possible for a KKT point of depth >= 3 (a local
    optimum; the gap clipped at 0 called a run 38 degrees away convergent to it); for a global optimum it
    means the reference is not one of these data: a ValueError says so."""
    over = -margin_gap(sol, ref)[-1] > ABOVE * max(abs(ref.margin), 1e-300)
    if over and (ref.norm == "mahalanobis" or ref.norm >= 1):  # a global optimum (a KKT point's norm is 2/L < 1)
        raise ValueError(f"refs[{name!r}] is not the max-margin of these data: the run's normalised margin "
                         f"{ref.margin - margin_gap(sol, ref)[-1]:.6g} exceeds its {ref.margin:.6g} (computed on "
                         "other data, or with another metric?); pass fs.max_margin(sol.data, ...).")
    return bool(over)


def _is_face(ref) -> bool:
    """A global l1 or l_inf optimum that is not unique (an LP's optimal face). A KKT point of depth >= 3 is
    also not called unique, but it is a local optimum: a run may end above its margin, so the margin alone
    (clipped at 0) would call any such run convergent to it."""
    return not ref.unique and ref.norm in (1, np.inf)


def _to_a_face(claim, fit, decays, text, fits) -> Verdict:
    """A claim whose optimum is not unique (a face of l1 or l_inf optima) is judged by its normalised margin
    alone (docs/theory.md 6): the angle to the one vertex the LP returned says nothing (a run on the face,
    44 degrees from that vertex, was "closer to another reference")."""
    text += "; its optimum is not unique (a face): judged by the margin in its norm alone"
    if decays and (fit.final_gap <= 1e-9 or fit.steady):
        return Verdict(claim, True, "converges: " + text, fits)
    if _stops_short(fit):
        return Verdict(claim, False, "the margin in its norm stops short of the optimum: " + text, fits)
    return Verdict(claim, None, "inconclusive: " + text, fits)


#: references at most this far apart (degrees) are one direction whatever the run: the solvers' own precision
MIN_APART_DEG = 0.006


#: how far the rates fitted on the two halves of the tail may differ for one power law (converged runs in the
#: report: up to 6%; transients called convergent before: 16-72%)
STEADY = 0.15
#: the extrapolated limit must be at most this fraction of the run's final angle from the claim (or within
#: CLOSE_DEG degrees): steepest descent for l_1.8 judged against l2 ends 2.7 deg off and extrapolates to
#: 2.7 deg (it converges to its own l_p limit); runs that converge to the claim extrapolate 7-25x nearer
APPROACH = 0.5
CLOSE_DEG = 0.05


def _degrees(u, v) -> float:
    return float(np.degrees(np.arccos(np.clip(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)), -1.0, 1.0))))


def _settled_on(sol, unit, claim, rivals, fit, at_margin) -> tuple:
    """(whether the tail follows one power law and extrapolates nearest to ``claim`` under every decay law it fits,
    the evidence in words, {law: degrees of its extrapolated limit from the claim})."""
    if at_margin or fit.final_angle < 1e-6:
        return True, "", {}
    early, late = fit.halves
    if np.isnan(early):
        return False, "; too few saves in the tail to compare its halves (8 needed; solve with more saves)", {}
    text = f"; rate {early:.3g} then {late:.3g} over the tail's halves"
    if not fit.steady:
        return False, text + (" (not one power law: still in a transient, the limit not yet in sight; "
                              f"within {STEADY:.0%} needed)"), {}
    try:
        limit, slower = (limit_direction(sol, law=law) for law in LAWS)
    except ValueError as err:
        return False, text + f"; no extrapolated limit: {err}", {}
    off = {k: _degrees(limit.direction, unit[k]) for k in [claim, *rivals]}
    extrapolated = {law: _degrees(e.direction, unit[claim]) for law, e in zip(LAWS, (limit, slower))}
    nearest = min(off, key=off.get)
    text += f"; extrapolated limit {off[claim]:.3g} deg from it as a power of 1/log t"
    undecided, why = _law_decides(limit, slower, unit, claim, rivals)
    text += why
    if undecided:
        return False, text, extrapolated
    if nearest != claim:
        return False, text + f", nearer {nearest} ({off[nearest]:.3g} deg)", extrapolated
    # a run converging elsewhere extrapolates to about where it is; towards the claim, to much nearer it
    bound = max(APPROACH * fit.final_angle, CLOSE_DEG)
    if off[claim] > bound:
        return False, text + f" (must be within {bound:.3g}: the run is not heading for it)", extrapolated
    return True, text, extrapolated


def _passing_by(sol, unit, claim, rivals, beaten, text, fits, min_r2) -> Verdict:
    """A run nearer another reference at the horizon while the gap to ``claim`` still decays. A unique optimum's
    margin gap going to 0 means the direction goes to it, so nearness at a finite horizon refutes nothing (depth-1
    GD on the hunt's data seed 63 passes 0.49 deg from l1 at t = 1e100 on its way to l2, 2.05 deg from l1, its l2
    gap ~ (log t)^-1.2 with R^2 = 1): undecided, unless the fitted limits rule the claim out: the tail is out of
    its transient (the claim's gap, or the nearer rival's, decays as one power law, ``STEADY``) and the limit
    extrapolated under every decay law of ``LAWS``, one the tail fits worse included, is nearer a rival than the
    claim: False. (A refutation must not depend on the law: depth-1 GD on the hunt's data seed 573, l_inf 0.34 deg
    from l2, ends 0.32 deg from l2 and 0.18 from l_inf, and extrapolates nearer l_inf as a power of 1/log t, nearer
    l2 as a power of 1/log log t.) Depth-1 l2-SAM judged against l1 fails so: its l1 gap decays ever slower,
    (log t)^-0.08 then -0.06, to the positive gap of the l2 direction it is 0.2 deg from, its l2 gap as
    (log t)^-1.02 on both halves. A transient's extrapolation is no evidence (depth-2 GD from (1, 0.01, 0.01), 37-57 deg from every reference at t = 1e100, its
    rates growing 16-45% over the tail)."""
    fit = fits[claim]
    nearer = min(beaten, key=lambda k: fits[k].final_angle)
    rival = fits[nearer]
    text += (f"; nearer {nearer} ({rival.final_angle:.3g} deg) at this horizon while its own gap still decays, rate "
             f"{fit.halves[0]:.3g} then {fit.halves[1]:.3g} over the tail's halves ({nearer}'s {rival.halves[0]:.3g} "
             f"then {rival.halves[1]:.3g})")
    rival_settles = rival.rate > 0 and rival.r2 >= min_r2 and rival.decreasing and rival.steady
    if not (fit.steady or rival_settles):
        return Verdict(claim, None, f"undecided: {text}: not one power law for either, the limit not yet in sight", fits)
    try:
        limits = {law: limit_direction(sol, law=law) for law in LAWS}
    except ValueError as err:
        return Verdict(claim, None, f"undecided: {text}; no extrapolated limit: {err}", fits)
    extrapolated = {law: _degrees(e.direction, unit[claim]) for law, e in limits.items()}
    nearest = {law: min([claim, *rivals], key=lambda k: _degrees(e.direction, unit[k])) for law, e in limits.items()}
    text += "; extrapolated limit nearest " + ", ".join(f"{k} as a power of 1/{law}" for law, k in nearest.items())
    if claim not in nearest.values():
        return Verdict(claim, False, "converges elsewhere: " + text, fits, extrapolated)
    return Verdict(claim, None, "undecided: passing another reference on its way: " + text, fits, extrapolated)


#: a decay law whose best fit's rms residual exceeds this multiple of the other's is rejected by the data (the
#: factor by which fits count as equally good in ``LimitEstimate.spread``)
LAW_FIT = 2.0


def _law_decides(limit, slower, unit, claim, rivals) -> tuple:
    """(whether the limit depends on the decay law: the 1/log log t law fits the tail about as well as the 1/log t
    one, within ``LAW_FIT``, and their limits are farther apart than ``claim`` is from the nearest other reference;
    the evidence in words). A (log t)^-0.05 gap law puts depth-2 l2-SAM's limit on Gaussian data at l1, a
    1/log log t one 0.4 degrees off: far less than l1 is from l2, so the law does not decide there."""
    between = _degrees(limit.direction, slower.direction)
    apart = min((_degrees(unit[k], unit[claim]) for k in rivals), default=np.inf)
    text = f"; as a power of 1/log log t {_degrees(slower.direction, unit[claim]):.3g} deg"
    if slower.residual > LAW_FIT * limit.residual + 1e-14:
        return False, text + f" (a {slower.residual / limit.residual:.3g} times worse fit: rejected)"
    if between > apart:
        return True, text + (f"; undecided by the extrapolation law: the two limits are {between:.3g} deg apart, more "
                             f"than the {apart:.3g} deg between {claim} and the nearest other reference")
    return False, text


def linf_sam_prediction(mu, alpha, rho: float, depth: int) -> dict:
    """Seed 000, Thm 3.2 / Cor 3.5 for l_inf-SAM on one example mu > 0 with balanced positive init
    alpha: per coordinate "collapse" (alpha_j < rho; beta_j -> 0 for even L, rho^L for odd L),
    "stay" (alpha_j = rho; beta_j = rho^L) or "grow"; the limit direction e_{j*} with
    j* = argmax_{alpha_j > rho} mu_j (alpha_j - rho)^(L-2), or None: where beta stays bounded, and where
    growing coordinates tie in that score (``tied`` lists them; the limit is then not a basis vector: at
    L = 2 with mu_j = mu_k it is proportional to (alpha_j - rho)^2 on them). Depth 1 is Thm 3.1 (the l2
    max-margin, not a basis vector), refused here. ``limit``: beta_j as t -> infinity. At L >= 3 the leader
    blows up at tau* = 1 / ((L-2) max score), where t -> infinity: every other coordinate stops where it is then
    (dw/dtau = mu_j (w - rho)^(L-1) in closed form), a collapsing one short of rho^L (6.3e-4, not rho^3, for
    mu = (1, 2), alpha = (0.05, 0.11), rho = 0.1) and a growing one at a finite value (0.125^3, not infinity,
    for beta_2 at mu = (1, 2, 3), alpha = (0.3, 0.12, 0.11), rho = 0.1, L = 3: the stated "alpha_j > rho
    diverges" holds at L >= 3 for the leader only, docs/theory.md)."""
    mu = _finite_vector("mu", mu)
    if mu.ndim != 1 or np.any(mu <= 0):
        raise ValueError(f"mu must be a vector of positive features (Thm 3.2 is for mu > 0); got {mu.tolist()}.")
    alpha = _finite_vector("alpha", alpha)
    if alpha.shape not in ((), mu.shape) or np.any(alpha <= 0):
        raise ValueError(f"alpha must be a positive scalar or one entry per feature, shape {mu.shape}; got "
                         f"{alpha.tolist()}.")
    alpha = np.broadcast_to(alpha, mu.shape)
    if not (is_real_number(rho) and np.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho must be a finite number >= 0; got {rho!r}.")
    if not is_whole(depth) or depth < 2:
        raise ValueError(f"depth must be an integer >= 2 (Thm 3.2; at depth 1 l_inf-SAM goes to the l2 max-margin, "
                         f"Thm 3.1); got {depth!r}.")
    fate, limit = [], []
    for a in alpha:
        if a == rho:  # exact: alpha_j = rho + 5e-9 grows (w_j - rho = 5e-9 e^{mu_j tau}), so no tolerance
            fate.append("stay")
            limit.append(rho**depth)
        elif a < rho:
            fate.append("collapse")
            limit.append(0.0 if depth % 2 == 0 else rho**depth)
        else:
            fate.append("grow")
            limit.append(np.inf)
    score = {j: mu[j] * (alpha[j] - rho) ** (depth - 2) for j, f in enumerate(fate) if f == "grow"}
    best = max(score.values(), default=None)
    top = [j for j, v in score.items() if v >= best * (1 - 1e-12)] if score else []
    if depth >= 3 and score:
        blow_up = 1.0 / ((depth - 2) * best)
        limit = [limit[j] if f == "stay" or j in top else _at_tau(mu[j], alpha[j], rho, depth, blow_up)
                 for j, f in enumerate(fate)]
    return {"fate": fate, "limit": limit, "leader": top[0] if len(top) == 1 else None,
            "tied": top if len(top) > 1 else []}


def linf_sam_beta_at_tau(mu, alpha, rho: float, depth: int, tau: float) -> np.ndarray:
    """beta at the paper's clock ``tau`` under l_inf-SAM at depth >= 3 on one example (the coordinates decouple,
    dw_j/dtau = mu_j (w_j - rho)^(L-1), solved in closed form per coordinate): inf for a coordinate that has blown
    up by ``tau``. With :func:`linf_sam_leader_tau` it places a run's coordinates against the closed form."""
    mu, alpha = _finite_vector("mu", mu), np.broadcast_to(_finite_vector("alpha", alpha), np.shape(mu))
    if not is_whole(depth) or depth < 3:
        raise ValueError(f"depth must be an integer >= 3 (a finite blow-up time); got {depth!r}.")
    out = []
    for m, a in zip(mu, alpha):
        blown = a > rho and (a - rho) ** (2 - depth) <= (depth - 2) * m * tau
        out.append(np.inf if blown else (rho**depth if a == rho else _at_tau(m, a, rho, depth, tau)))
    return np.array(out)


def linf_sam_leader_tau(mu_j: float, alpha_j: float, rho: float, depth: int, beta_j: float) -> float:
    """The clock tau at which a growing coordinate (alpha_j > rho) of l_inf-SAM at depth >= 3 has reached
    ``beta_j``: the inverse of its closed form, (w - rho)^(2-L) = (alpha_j - rho)^(2-L) - (L-2) mu_j tau."""
    w = beta_j ** (1.0 / depth)
    return float(((alpha_j - rho) ** (2 - depth) - (w - rho) ** (2 - depth)) / ((depth - 2) * mu_j))


def _at_tau(mu_j, alpha_j, rho, L, tau):
    """beta_j = w^L at ``tau`` under dw/dtau = mu_j (w - rho)^(L-1) (L >= 3) from alpha_j != rho, a coordinate
    that has not blown up by ``tau``. Above rho, (w - rho)^(2-L) falls by (L-2) mu_j tau; below it |w - rho|^(2-L)
    moves by -+(L-2) mu_j tau, up to rho at odd L, down to w = 0 (where it stays) at even L."""
    if alpha_j > rho:
        return float((rho + ((alpha_j - rho) ** (2 - L) - (L - 2) * mu_j * tau) ** (1.0 / (2 - L))) ** L)
    gap = (rho - alpha_j) ** (2 - L) + (1 if L % 2 else -1) * (L - 2) * mu_j * tau
    if L % 2 == 0 and gap <= rho ** (2 - L):  # (w reached 0 before tau)
        return 0.0
    return float((rho - gap ** (1.0 / (2 - L))) ** L)


def _finite_vector(name, value):
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers; got {value!r}.") from None
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} must be finite; got {out.tolist()}.")
    return out


def leading_by_alpha(system, data, alphas, log10_t: float, **solve_kw) -> np.ndarray:
    """The leading coordinate argmax |beta_j| at time 10**log10_t as a function of the initialisation
    scale alpha (seed 000, Thm 4.5), one solve per alpha: -1 where there is none, the solve having ended
    before t (collapsed to 0, or failed: a warning names those alphas and why). A run held at an
    equilibrium or critical point ("stalled", "converged") is there at t."""
    from flowsim.integrate.solve import solve

    out, failed = [], []
    for a in alphas:
        sol = solve(system, data, a, log10_t1=log10_t, saves=2, throw=False, track=(), **solve_kw)
        out.append(int(np.argmax(np.abs(sol.beta[-1]))) if Status(sol.status).reaches_t1 else -1)
        if Status(sol.status).is_failure:
            failed.append(f"alpha = {a}: {sol.status} ({sol.message[:160]})")
    if failed:
        warnings.warn(f"leading_by_alpha: {len(failed)} solve(s) failed before log10 t = {log10_t} and read -1 "
                      f"as a collapse does: {'; '.join(failed)}", RuntimeWarning, stacklevel=2)
    return np.array(out)


def distance(sol, ref: MaxMargin) -> np.ndarray:
    """l2 distance between the unit directions of beta(t) and of the reference."""
    v = ref.direction / np.linalg.norm(ref.direction)
    return np.linalg.norm(sol.direction - v, axis=1)


@dataclass(frozen=True)
class LimitEstimate:
    """Extrapolated limit direction (unit l2) of beta(t), assuming beta/|beta| = d + c x^(-k) over the last
    decades with x = log t or log log t (``law``); ``rate`` is the k that fits best, ``residual`` the fit's rms error,
    ``moved`` how far the extrapolation is from the last saved direction (small: converged) and
    ``spread`` how far apart the extrapolations of every rate that fits within twice the best
    residual lie (large: the horizon cannot pin the limit down; slow power laws in log t are nearly
    indistinguishable from each other)."""

    direction: np.ndarray
    rate: float
    residual: float
    moved: float
    spread: float
    law: str = "log t"


#: the decay families a limit is extrapolated with: a power of 1/log t (depth-L convergence, docs/theory.md 4) and
#: the slower power of 1/log log t; where they disagree by more than the references are apart, the data at this
#: horizon do not pin the limit down
LAWS = ("log t", "log log t")


def limit_direction(sol, tail: float = 0.5, rates=np.linspace(0.05, 2.0, 40), law: str = "log t") -> LimitEstimate:
    """Estimate the limit direction by fitting the unit direction against x^(-k), x = log t (the clock in which
    depth-L convergence is a straight line, docs/theory.md 4; the default) or x = log log t (``law``, a slower
    family: :func:`verdict` asks both) and reading it at x^(-k) = 0.
    Only for a run that reached its horizon (status "completed"): one that stopped short, or came to rest,
    has no tail to extrapolate (a failed run's fit pointed 0.9 away from where it ended). Each fit is read within
    the signs beta keeps from the run's start (``reachable_signs``): a fit at t1 = 1e10 of a depth-3 net with
    beta >= 0 crossed to beta_1 = -0.034."""
    if law not in LAWS:
        raise ValueError(f"law must be one of {LAWS}; got {law!r}.")
    if sol.status != Status.COMPLETED:
        raise ValueError(f"limit_direction extrapolates a run to t -> infinity; this one ended {sol.status!r} at "
                         f"log10 t = {sol.log10_t[-1]:.6g} ({sol.message[:120]}). Use sol.direction[-1] for where it "
                         "ended.")
    lt = sol.log10_t
    ok = np.isfinite(lt) & (lt > 0)
    keep = ok & (lt >= lt[-1] - tail * (lt[-1] - lt[ok][0]))
    if law == "log log t":
        keep &= lt * np.log(10.0) > 1.0  # (log log t > 0)
    D = sol.direction[keep]
    x = lt[keep] * np.log(10.0)
    x = np.log(x) if law == "log log t" else x
    if keep.sum() < 4:
        raise ValueError(f"need at least 4 save points with {'t > e' if law == 'log log t' else 't > 1'} in the tail "
                         "to estimate a limit.")
    signs = _kept_signs(sol)
    fits = []
    for k in rates:
        A = np.vstack([np.ones_like(x), x ** (-k)]).T
        coef, *_ = np.linalg.lstsq(A, D, rcond=None)
        fits.append((float(np.sqrt(np.mean((A @ coef - D) ** 2))), k, _within(coef[0], signs)))
    res, k, d0 = min(fits, key=lambda f: f[0])
    good = [f[2] for f in fits if f[0] <= 2 * res + 1e-14]
    spread = max(float(np.linalg.norm(a - b)) for a in good for b in good)
    return LimitEstimate(direction=d0, rate=float(k), residual=res, moved=float(np.linalg.norm(d0 - sol.direction[-1])),
                         spread=spread, law=law)


def _kept_signs(sol) -> np.ndarray:
    """The sign each beta_j keeps from the run's start (nan: either), as ``reachable_signs`` says."""
    return reachable_signs(sol.system.model, sol.params[0], sol.system.flow)


def _within(direction, signs) -> np.ndarray:
    """A unit direction with the entries of a sign beta cannot take set to 0."""
    cut = np.where((signs == 0) | (signs * direction < 0), 0.0, direction)
    size = np.linalg.norm(cut)
    return cut / size if size > 0 else direction / np.linalg.norm(direction)
