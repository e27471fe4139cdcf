"""The criteria the reproduction judges claims by: pure functions of measured numbers -> Outcome.

Each one is run on a claim's setting and, unchanged, on its negative controls (``_claim.judge``),
and ``tests/test_criteria.py`` feeds each a constructed case that violates its claim: none of them
can only say "holds".
"""

from __future__ import annotations

import numpy as np

import flowsim as fs
from flowsim.theory.analysis import is_steady, rate_halves

from ._claim import Number, Outcome


def _undecided_if_not_finite(*values):
    """A criterion fed NaN (a run that failed) must not say "fails": on a control that would pass as
    evidence. None instead."""
    if not all(np.all(np.isfinite(np.asarray(v, float))) for v in values):
        return Outcome(None, "non-finite input (a run that did not finish?)")
    return None


def ran(sol, outcome: Outcome) -> Outcome:
    """``outcome`` of a run, or undecided when the run itself ended in a failure status."""
    return outcome if sol.ok else Outcome(None, f"the run ended {sol.status!r}: {sol.message}")


def converges_to(sol, refs: dict, want: str) -> Outcome:
    """beta(t) converges in direction to ``refs[want]`` by flowsim's fitted-gap verdict (its limit extrapolated
    under both decay laws of ``flowsim.theory.analysis.LAWS``: undecided where they disagree by more than the
    references are apart)."""
    v = fs.verdict(sol, refs, want)
    fit = v.fits[want]
    numbers = (Number("log10_t_end", float(sol.log10_t[-1]), "log10 t"), Number(f"gap_{want}", fit.final_gap, "1"),
               Number(f"rate_{want}", fit.rate, "1 (k in gap ~ (log t)^-k)"), Number(f"r2_{want}", fit.r2, "1"),
               Number(f"angle_{want}", fit.final_angle, "deg"),
               *(Number(f"limit_angle_{law.replace(' ', '_')}", deg, "deg (extrapolated limit from the claim)")
                 for law, deg in v.extrapolated.items()))
    return Outcome(v.holds, v.why, numbers)


def fates_match(prediction: dict, beta_end, alpha, rho: float, depth: int) -> Outcome:
    """Each coordinate's fate under l_inf-SAM (Thm 3.2) and the limit direction (Cor 3.5) against
    beta at the horizon. At L >= 3 the leader blows up at a finite tau (t -> inf), so the others stop
    there: a non-leading "grow" has only grown, an odd-L "collapse" has only risen toward rho^L."""
    if (bad := _undecided_if_not_finite(beta_end)) is not None:
        return bad
    if prediction.get("tied"):  # on a boundary: Thm 3.2 names no basis vector, so nothing here to check
        return Outcome(None, f"coordinates {[j + 1 for j in prediction['tied']]} tie: no single limit predicted")
    b, a, lead = np.asarray(beta_end, float), np.asarray(alpha, float), prediction["leader"]
    wrong = []
    for j, fate in enumerate(prediction["fate"]):
        if fate == "grow":
            ok = b[j] > 10 * max(a[j], rho) ** depth if j == lead else b[j] > a[j] ** depth
        elif fate == "stay":
            ok = abs(b[j] - rho**depth) <= 1e-9 * rho**depth
        elif depth % 2 == 0:
            ok = abs(b[j]) <= 1e-12  # slid to w_j = 0 and stayed
        else:
            ok = a[j] ** depth < b[j] <= rho**depth * (1 + 1e-9) and (lead is not None or b[j] >= 0.95 * rho**depth)
        if not ok:
            wrong.append(f"beta_{j + 1} = {b[j]:.4g} is not '{fate}'")
    leader = int(np.argmax(b)) if b.max() > 10 * rho**depth else None
    if leader != lead:
        wrong.append(f"limit {_limit_name(leader)}, predicted {_limit_name(lead)}")
    numbers = (*(Number(f"beta_{j + 1}_end", float(v), "1") for j, v in enumerate(b)),
               Number("fates_predicted", list(prediction["fate"]), "per coordinate"),
               Number("limit", _limit_name(leader), "direction"), Number("limit_predicted", _limit_name(lead), "direction"))
    return Outcome(not wrong, "; ".join(wrong) or f"fates {', '.join(prediction['fate'])} and limit {_limit_name(lead)} as predicted",
                   numbers)


def _limit_name(index) -> str:
    """A limit direction in words: e_j (j 1-based, as the papers) for a basis vector, else bounded."""
    return "bounded" if index is None else f"e_{index + 1}"


def angle_falls(log10_t, angle_deg, *, near: float = 15.0, far: float = 45.0) -> Outcome:
    """Directional convergence to a predicted direction: over the last half of the run (in log10 t) the
    angle falls at every save point, as one power of 1/log t (fitted rate k > 0 in angle ~ (log t)^-k, the
    same on both halves of the tail within 15%; at depth 2 the minor coordinates fade that slowly; an
    angle levelling off above 0 slows down), and ends below ``near`` degrees. Fails when it ends above
    ``far`` degrees or rises."""
    lt, ang = np.asarray(log10_t, float), np.asarray(angle_deg, float)
    ok = np.isfinite(lt) & (lt > 0)
    lt, ang = lt[ok], ang[ok]
    tail = lt >= lt[0] + 0.5 * (lt[-1] - lt[0]) if lt.size else lt.astype(bool)
    x, y = lt[tail], ang[tail]
    if x.size < 3:
        return Outcome(None, "fewer than 3 save points in the tail")
    numbers = (Number("angle_start", float(y[0]), "deg"), Number("angle_end", float(y[-1]), "deg"),
               Number("log10_t_start", float(x[0]), "log10 t"), Number("log10_t_end", float(x[-1]), "log10 t"))
    if y[-1] < 1e-9:
        return Outcome(True, f"angle {y[-1]:.2g} deg at log10 t = {x[-1]:.4g}", numbers)
    pos = y > 0
    rate = -np.polyfit(np.log(x[pos]), np.log(y[pos]), 1)[0] if pos.sum() >= 3 else np.nan
    text = f"angle {y[0]:.3g} -> {y[-1]:.3g} deg over log10 t {x[0]:.3g}..{x[-1]:.3g}, fitted ~ (log t)^-{rate:.3g}"
    # one power law over the tail, as fs.verdict asks of a gap: an angle levelling off at c > 0 slows down
    numbers += (Number("rate", float(rate), "1 (k in angle ~ (log t)^-k)"),)
    if pos.sum() < 6:
        return Outcome(None, text + "; too few saves in the tail to compare its halves (6 needed)", numbers)
    halves = rate_halves(np.log(x[pos]), np.log(y[pos]))
    steady = is_steady(halves)
    text += f" ({halves[0]:.3g} then {halves[1]:.3g} over the tail's halves)"
    numbers += (Number("rate_halves", list(halves), "1"),)
    if bool(np.all(np.diff(y) <= 1e-12 * y[:-1])) and rate > 0 and y[-1] < near and steady:
        return Outcome(True, text, numbers)
    if y[-1] > far or y[-1] > y[0]:
        return Outcome(False, text, numbers)
    return Outcome(None, text, numbers)


def minor_to_major(amplification: dict, status: str = "completed", finality=None) -> Outcome:
    """The leading coordinate runs from the minor features to the major one, which leads last (Thm 4.4),
    in a run that reached its horizon (a collapsed run has leaders but no limit: undecided) with an order that
    is final there (``finality``, a :class:`~flowsim.reproduce.horizons.Finality`; None: not asked). An order
    cut off by the horizon is undecided: its next switch may be the one that makes it minor to major."""
    order = [j + 1 for j in amplification["order"]]
    numbers = (Number("leaders", order, "coordinate"),)
    if status != "completed":
        return Outcome(None, f"the run ended {status!r}; leaders over time (1-based): {order}", numbers)
    if finality is not None:
        numbers += (Number("order_final", finality.final, "1"), Number("finality_slack", finality.slack, "1"))
        if not finality.final:
            return Outcome(None, f"leaders so far (1-based): {order}, not final at the horizon ({finality.why})",
                           numbers)
    return Outcome(bool(amplification["minor_to_major"]), f"leaders over time (1-based): {order}", numbers)


def no_minor_lead(amplification: dict, major: int, finality) -> Outcome:
    """No minor coordinate ever leads: the major one (``major``, 0-based) leads from the start and for ever (its
    order is final: ``finality``). Fails as soon as another coordinate leads at some time, final or not."""
    order = [j + 1 for j in amplification["order"]]
    numbers = (Number("leaders", order, "coordinate"), Number("order_final", finality.final, "1"))
    if order != [major + 1]:
        return Outcome(False, f"a minor coordinate leads at some time: leaders (1-based) {order}", numbers)
    if not finality.final:
        return Outcome(None, f"only the major coordinate led so far, not final ({finality.why})", numbers)
    return Outcome(True, f"the major coordinate leads throughout: leaders (1-based) {order}", numbers)


def crossover_law(N, mu_from: float, mu_to: float, rho: float, rtol: float = 1e-6) -> Outcome:
    """At a growth switch from j to k the gradient norm N = ||mu * w||_2 equals rho (mu_j + mu_k) / sqrt 2."""
    if (bad := _undecided_if_not_finite(N)) is not None:
        return bad
    want = rho * (mu_from + mu_to) / np.sqrt(2.0)
    err = abs(N / want - 1.0)
    return Outcome(bool(err <= rtol), f"N = {N:.10g} against rho (mu_j + mu_k)/sqrt 2 = {want:.10g}: relative error {err:.2g}",
                   (Number("N", float(N), "1"), Number("N_predicted", float(want), "1"),
                    Number("relative_error", float(err), "1")))


def error_order(etas, errors, order: float = 1.0, tol: float = 0.1) -> Outcome:
    """The error of a discretisation shrinks at ``order`` in the step (each halving, within ``tol``)."""
    etas, errors = np.asarray(etas, float), np.asarray(errors, float)
    if (bad := _undecided_if_not_finite(errors)) is not None or len(etas) < 2:
        return bad or Outcome(None, "fewer than two step sizes")
    orders = np.log(errors[:-1] / errors[1:]) / np.log(etas[:-1] / etas[1:])
    ok = bool(np.all(np.abs(orders - order) < tol))
    return Outcome(ok, f"observed orders {np.round(orders, 3).tolist()} (want {order} +- {tol})",
                   (Number("step_sizes", etas, "1"), Number("errors", errors, "1"), Number("orders", orders, "1")))


def leader_by_scale(leaders) -> Outcome:
    """Thm 4.5 at one time: along increasing alpha the leader (0-based, -1 collapsed) runs from the
    minor coordinate to the major one, never back."""
    lead = np.asarray(leaders, float)
    seen = lead[~np.isnan(lead)]  # NaN: the run ended before that time
    alive = seen[seen >= 0]
    collapse_first = not np.any(np.diff((seen >= 0).astype(int)) < 0)  # collapsed (-1) only below the survivors
    ok = (len(alive) > 1 and collapse_first and bool(np.all(np.diff(alive) >= 0)) and alive[0] == 0
          and alive[-1] == alive.max() > 0)
    shown = ["-" if np.isnan(v) else int(v) + 1 for v in lead]
    return Outcome(bool(ok), f"leader along alpha (1-based, 0 collapsed, - not reached): {' '.join(map(str, shown))}",
                   (Number("leader_along_alpha", shown, "coordinate (0 collapsed, - not reached)"),))


#: a run judged to reach a reference ends at most this fraction of its distance to the nearest other
NEAR = 0.1


def nearest_reference(distances: dict, want: str) -> Outcome:
    """``distances[k]``: the distance of the run's direction to reference k at each record (last ones
    at the horizon). Holds when ``want`` is the nearest by more than the convergence spread (how far
    its distance moved over the last quarter of the records), at most a tenth of the nearest other's
    distance (nearest alone is not near: a reference moved 0.069 off the run's limit, by a planted bug
    in the metric, was still the nearest of three), and its distance is falling or tiny; fails when
    another reference is nearer by more than the spread."""
    final = {k: float(np.asarray(v)[-1]) for k, v in distances.items()}
    d = np.asarray(distances[want], float)
    if len(d) < 2 or not all(np.isfinite(v) for v in final.values()):
        return Outcome(None, f"too few records or a non-finite distance: {final}")
    spread = float(abs(d[-1] - d[-max(2, len(d) // 4)]))
    others = {k: v for k, v in final.items() if k != want}
    rival = min(others, key=others.get)
    numbers = (*(Number(f"distance_{k}", v, "1 (between unit directions)") for k, v in final.items()),
               Number(f"spread_{want}", spread, "1"))
    text = (", ".join(f"{k} {v:.4g}" for k, v in final.items()) + f" (distance of unit directions); spread of "
            f"'{want}' over the last quarter {spread:.2g}")
    if final[want] + spread < others[rival] and (d[-1] <= d[-max(2, len(d) // 4)] or d[-1] < 1e-6):
        if final[want] <= NEAR * others[rival]:
            return Outcome(True, f"nearest is '{want}': " + text, numbers)
        return Outcome(None, f"nearest is '{want}' but not near it (over {NEAR:g} of the distance to '{rival}'): "
                       + text, numbers)
    if others[rival] + spread < final[want]:
        return Outcome(False, f"nearest is '{rival}', not '{want}': " + text, numbers)
    return Outcome(None, "undecided: " + text, numbers)


def cells_match(match, predicted, decided=None) -> Outcome:
    """A phase diagram against its prediction: holds when every cell agrees; undecided when the only
    disagreements lie next to a predicted boundary (there the limit may need a longer horizon), or some cell is
    undecided (``decided`` False there: its solve failed, or its horizon did not settle its limit); fails when a decided cell away from every boundary disagrees. (At
    ">= 99% of the grid" a threshold alpha_j > 1.05 rho in place of rho, wrong on a band of cells along the
    boundary, held at L = 3: 99.4%.)"""
    match, predicted = np.asarray(match, bool), np.asarray(predicted)
    decided = np.ones(match.shape, bool) if decided is None else np.asarray(decided, bool)
    edge = np.zeros_like(match)
    for axis in (0, 1):  # a cell whose predicted label differs from a neighbour's
        differs = np.diff(predicted, axis=axis) != 0
        lo = [slice(None)] * 2
        hi = [slice(None)] * 2
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        edge[tuple(lo)] |= differs
        edge[tuple(hi)] |= differs
    wrong, far = int((~match & decided).sum()), int((~match & decided & ~edge).sum())
    open_cells = int((~decided).sum())
    text = (f"limit = Cor 3.5's on {match.mean():.1%} of the grid; {wrong} cells disagree, {far} of them away from "
            "the predicted boundaries" + (f"; {open_cells} undecided (a failed solve, or an order the horizon did not "
                                          "settle)" if open_cells else ""))
    numbers = (Number("share_matching", float(match.mean()), "1"), Number("cells_disagreeing", wrong, "cells"),
               Number("cells_disagreeing_off_boundaries", far, "cells"), Number("cells_undecided", open_cells, "cells"))
    return Outcome(True if wrong == 0 and not open_cells else (False if far else None), text, numbers)


def at_most(value: float, bound: float, what: str) -> Outcome:
    if (bad := _undecided_if_not_finite(value)) is not None:
        return bad
    return Outcome(bool(value <= bound), f"{what} {value:.4g} ({'<=' if value <= bound else '>'} {bound:g})",
                   (Number("value", float(value), "1"), Number("bound", float(bound), "1")))


def at_least(value: float, bound: float, what: str) -> Outcome:
    if (bad := _undecided_if_not_finite(value)) is not None:
        return bad
    return Outcome(bool(value >= bound), f"{what} {value:.4g} ({'>=' if value >= bound else '<'} {bound:g})",
                   (Number("value", float(value), "1"), Number("bound", float(bound), "1")))


def share_above(share: float, baseline: float, what: str) -> Outcome:
    """A share measured on the claim's flow exceeds the same share on the baseline flow."""
    if (bad := _undecided_if_not_finite(share, baseline)) is not None:
        return bad
    return Outcome(bool(share > baseline), f"{what}: {share:.4g} against {baseline:.4g} for the baseline",
                   (Number("share", float(share), "1"), Number("baseline", float(baseline), "1")))


#: over the last half of a run in log10 t (log t doubles), a coordinate converging to a finite limit rises by at most
#: RISE (relative); one diverging rises by more than GROWS ((log t)^p does by 2^p - 1: 11% at p = 0.15)
RISE, GROWS = 0.01, 0.1


def _tail_rise(log10_t, values) -> tuple:
    """(relative rise of ``values`` over the last half of the run in log10 t, its value there, at the end)."""
    lt, v = np.asarray(log10_t, float), np.asarray(values, float)
    half = int(np.searchsorted(lt, lt[-1] / 2))
    return float(v[-1] / v[half] - 1.0), float(v[half]), float(v[-1])


def settles_at(log10_t, values, limit: float, now: float | None, what: str, rtol: float = 1e-6) -> Outcome:
    """A coordinate converges to the finite ``limit`` as t -> infinity along a known path: over the last half of the
    run (in log10 t) it rises by at most ``RISE`` (relative), ends within ``rtol`` (relative) of ``now`` (the
    path's value at the run's end, from a closed form) and not above ``limit``. Fails when it rises by more than
    ``GROWS`` (as a diverging coordinate does), ends more than 1e3 ``rtol`` off ``now`` or above ``limit``;
    undecided in between, and when no path is predicted (``now`` None) and it does not grow."""
    if (bad := _undecided_if_not_finite(values)) is not None:
        return bad
    rise, mid, end = _tail_rise(log10_t, values)
    off = abs(end / now - 1.0) if now else np.inf
    numbers = (Number("value_half_way", mid, "1"), Number("value_end", end, "1"), Number("rise", rise, "1"),
               Number("closed_form_end", float("nan") if now is None else float(now), "1"),
               Number("relative_error", off, "1"), Number("limit_predicted", float(limit), "1"))
    text = (f"{what}: {mid:.6g} -> {end:.6g} over the last half of log10 t (rise {rise:.2g}), "
            + (f"closed form there {now:.6g} (relative error {off:.2g}), " if now else "no closed form, ")
            + f"limit {limit:.6g}")
    if rise > GROWS or (now and off > 1e3 * rtol) or end > limit * (1 + rtol):
        return Outcome(False, text, numbers)
    return Outcome(True if abs(rise) <= RISE and off <= rtol else None, text, numbers)


def diverges(log10_t, values, bound: float, what: str) -> Outcome:
    """A coordinate grows without bound: over the last half of the run (in log10 t) it rises by more than ``GROWS``
    (relative) or passes ``bound``. Fails when it rises by at most ``RISE`` and stays below ``bound`` (a bound
    the flow's equations give it for all t); undecided in between."""
    if (bad := _undecided_if_not_finite(values)) is not None:
        return bad
    rise, mid, end = _tail_rise(log10_t, values)
    numbers = (Number("value_half_way", mid, "1"), Number("value_end", end, "1"), Number("rise", rise, "1"),
               Number("bound", float(bound), "1"))
    text = f"{what}: {mid:.6g} -> {end:.6g} over the last half of log10 t (rise {rise:.2g}), bound {bound:.6g}"
    if rise > GROWS or end > bound:
        return Outcome(True, text, numbers)
    return Outcome(False if rise <= RISE else None, text, numbers)
