"""Seed 002's "close to 1" and "in the limit" parameters scanned: Signum's momentum beta and per-sample Adam's b2.

Thm 5.1 needs Signum's momentum "close enough to 1" and Thm 4.8 describes per-sample Adam "in the b2 -> 1 limit";
a single value of either says nothing about how close is close enough. Each scan runs the discrete optimizer at
every value of its parameter for the same step budget and measures the angle between the end direction and the
reference, and how much that angle still changed over the last decade of steps (``drift``). At a tolerance a
value is

* ``within``: its end angle is at most the tolerance;
* ``outside``: at its drift's pace the end angle would need more than ``DECADES_TO_SETTLE`` further decades of
  steps to come within the tolerance (its distance has stopped falling at this budget);
* ``unsettled``: neither; the budget does not decide it (near 1 the moving averages remember ~1/(1 - p) steps
  and a run needs more steps to settle).

The threshold is the smallest scanned value from which every decided value is within, bracketed by the largest
outside value below it and refined by bisection in log(1 - p). The criterion :func:`approaches` holds when the
decided values within lie above every decided value outside (the distance has fallen to the tolerance as p -> 1)
and some value is within; it is run unchanged against another reference as the control.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from flowsim import plot

from . import adam
from ._claim import Claim, Control, Evidence, Measured, Number, Outcome, Statement, claim, every

STATES = ("within", "outside", "unsettled")
#: a value outside the tolerance whose angle, at its last decade's pace, would come within it in fewer further
#: decades of steps than this is undecided by the budget (a fall like 1/log t keeps a constant pace per decade)
DECADES_TO_SETTLE = 10
#: the end direction's tolerance around l_inf (Signum) and the fixed point (per-sample Adam), degrees
SIGNUM_TOLERANCE_DEG = 2.0
ADAM_TOLERANCE_DEG = 0.25
#: batch sizes of the Signum scan as the report names them -> the optimizer's ``batch`` (iid_gaussian(10, 20): N = 10)
SIGNUM_BATCHES = {1: "cyclic", 5: 5, 10: "full"}


@dataclass(frozen=True)
class ScanPoint:
    """One scanned value: ``value`` of the parameter, ``angle`` (deg) from the end direction to the reference,
    ``drift`` (deg) how much that angle changed (either way) over the last decade of steps."""

    value: float
    angle: float
    drift: float

    def state(self, tolerance: float) -> str:
        if self.angle <= tolerance:
            return "within"
        return "outside" if self.angle - tolerance > DECADES_TO_SETTLE * self.drift else "unsettled"


@dataclass(frozen=True)
class Threshold:
    """Where a scan enters the tolerance: every decided value from ``at`` on is within; ``below`` is the largest
    value found outside under it (None: every decided value is within, the threshold lies below the scan);
    ``bisections`` the runs spent narrowing (below, at]."""

    below: float | None
    at: float
    bisections: int = 0

    def describe(self) -> str:
        if self.below is None:
            return f"within from the scan's first decided value {self.at:g} on (threshold below the scan)"
        return f"threshold in ({self.below:.6g}, {self.at:.6g}]"


def angle_deg(u, v) -> float:
    """Angle in degrees between two directions (unit vectors), from their distance (stable near 0)."""
    return float(np.degrees(2 * np.arcsin(min(np.linalg.norm(np.asarray(u) - np.asarray(v)) / 2, 1.0))))


def _split(points, tolerance):
    states = [p.state(tolerance) for p in points]
    within = [p.value for p, s in zip(points, states) if s == "within"]
    outside = [p.value for p, s in zip(points, states) if s == "outside"]
    return within, outside


def locate_threshold(points, tolerance: float, measure: Callable[[float], ScanPoint] | None = None,
                     bisections: int = 0):
    """(:class:`Threshold` or None, the points sorted with any bisection's added). None where no value is within,
    or where a value outside lies above one within (no threshold: the criterion fails). With ``measure`` (value ->
    ScanPoint) the bracket is halved up to ``bisections`` times in log(1 - p), stopping at an unsettled midpoint."""
    points = sorted(points, key=lambda p: p.value)
    within, outside = _split(points, tolerance)
    if not within or (outside and max(outside) > min(within)):
        return None, points
    below = max((v for v in outside if v < min(within)), default=None)
    at, done = min(within), 0
    while measure is not None and below is not None and done < bisections:
        mid = 1 - np.sqrt((1 - below) * (1 - at))
        point = measure(float(mid))
        points.append(point)
        done += 1
        state = point.state(tolerance)
        if state == "unsettled":
            break
        below, at = (below, point.value) if state == "within" else (point.value, at)
    return Threshold(below, at, done), sorted(points, key=lambda p: p.value)


def approaches(points, tolerance: float, what: str) -> Outcome:
    """The end direction falls within ``tolerance`` degrees of ``what`` as the parameter -> 1: some decided value is
    within and every decided value outside lies below every one within (undecided if no value is decided)."""
    points = sorted(points, key=lambda p: p.value)
    within, outside = _split(points, tolerance)
    numbers = (Number("values", [p.value for p in points], "1"), Number("angle", [p.angle for p in points], "deg"),
               Number("drift_last_decade", [p.drift for p in points], "deg"),
               Number("state", [p.state(tolerance) for p in points], "1"), Number("tolerance", tolerance, "deg"))
    if not within and not outside:
        return Outcome(None, f"no value is decided against {what} at this budget (all unsettled)", numbers)
    if not within:
        return Outcome(False, f"no value ends within {tolerance:g} deg of {what} (nearest "
                              f"{min(p.angle for p in points):.3g} deg)", numbers)
    above = [v for v in outside if v > min(within)]
    if above:
        return Outcome(False, f"{above[0]:g} ends outside {tolerance:g} deg of {what} above {min(within):g}, which is "
                              "within: the distance does not fall toward the limit", numbers)
    threshold, _ = locate_threshold(points, tolerance)
    return Outcome(True, f"within {tolerance:g} deg of {what}: {threshold.describe()}", numbers)


def _point(run, reference, value) -> ScanPoint:
    """The ScanPoint of a discrete run: end angle to ``reference`` and its drift over the last decade of steps."""
    earlier = int(np.argmin(np.abs(np.log1p(run.steps) - np.log1p(run.steps[-1] / 10))))
    end = angle_deg(run.direction[-1], reference)
    return ScanPoint(value, end, abs(end - angle_deg(run.direction[earlier], reference)))


def _one_minus_axis(ax, values, name, ylabel, title):
    """x: 1 - p on an inverted log axis (p -> 1 to the right), ticks labelled with p (the parameter ``name``)."""
    left, right = 1.5 * max(1 - v for v in values), min(1 - v for v in values) / 1.5
    ticks = [t for t in (1.0, 0.1, 0.01, 0.001, 0.0001) if right <= t <= left]
    ax.set(xscale="log", yscale="log", xlabel=f"{name} (axis: 1 - {name}, log)", ylabel=ylabel, title=title)
    ax.set_xticks(ticks)
    ax.set_xlim(left, right)
    ax.set_xticklabels([f"{1 - t:g}" for t in ticks])
    ax.minorticks_off()
    plot.short_log_span_ticks(ax, "y")
    ax.title.set_fontsize(9)


_MARKERS = {"within": "o", "outside": "s", "unsettled": "x"}


def _draw_scan(ax, points, tolerance, color, label, threshold=None, ls="-"):
    x = np.array([1 - p.value for p in points])
    y = np.maximum([p.angle for p in points], 1e-4)
    ax.plot(x, y, ls, color=color, lw=1.2, label=label)
    for p, xi, yi in zip(points, x, y):
        s = p.state(tolerance)
        ax.plot(xi, yi, _MARKERS[s], color=color, ms=5, mfc=color if s == "within" else "none")
    if threshold is not None and threshold.below is not None:
        ax.axvspan(1 - threshold.below, 1 - threshold.at, color=color, alpha=0.15)


def _state_legend(ax, tolerance):
    ax.axhline(tolerance, color="k", lw=0.8, ls=":", label=f"tolerance {tolerance:g} deg")
    for s, m in _MARKERS.items():
        ax.plot([], [], m, color="0.3", mfc="0.3" if s == "within" else "none", label=s)
    plot.legend_beside(ax)


def _scan_row(points, threshold, tolerance) -> Measured:
    text = ", ".join(f"{p.value:g}: {p.angle:.3g} deg ({p.state(tolerance)})" for p in points)
    bracket = threshold.describe() if threshold else "no threshold"
    nums = [Number("values", [p.value for p in points], "1"), Number("angle", [p.angle for p in points], "deg"),
            Number("drift_last_decade", [p.drift for p in points], "deg")]
    if threshold is not None:
        nums += [Number("threshold_below", "none" if threshold.below is None else threshold.below, "1"),
                 Number("threshold_at", threshold.at, "1"), Number("bisections", threshold.bisections, "runs")]
    return Measured(f"{bracket}; {text}", tuple(nums))


def signum_scan_values(quick: bool):
    # 0, 0.9 and 0.99 are 002-thm5.1's runs, shared
    return (0.0, 0.9, 0.98, 0.99, 0.999) if quick else (0.0, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999)


def signum_momentum_scan(out: Path, quick: bool) -> Claim:
    steps = adam._steps(quick)
    data = adam._discriminating()
    refs = adam._references(data)
    fig = Figure(figsize=(7.8, 3.8), constrained_layout=True)
    ax = fig.subplots()
    outcomes, controls, numbers = [], [], {}
    for (b, batch), color in zip(SIGNUM_BATCHES.items(), ("C0", "C1", "C2")):
        def run(beta, batch=batch):
            return adam._run(adam.OPT.signum(0.05, beta, batch=batch), data, steps, label=adam.signum_label(beta, batch))

        def measure(beta, run=run):
            return _point(run(beta), refs["linf"], beta)

        points = [measure(beta) for beta in signum_scan_values(quick)]
        threshold, points = locate_threshold(points, SIGNUM_TOLERANCE_DEG, measure, 1 if quick else 2)
        o = approaches(points, SIGNUM_TOLERANCE_DEG, "the l_inf max-margin")
        outcomes.append(o)
        numbers[f"batch {b}: angle to l_inf"] = _scan_row(points, threshold, SIGNUM_TOLERANCE_DEG)
        to_l2 = [_point(run(p.value), refs["l2"], p.value) for p in points]
        controls.append(Control(f"the same runs at batch {b} against the l2 max-margin",
                                approaches(to_l2, SIGNUM_TOLERANCE_DEG, "the l2 max-margin")))
        _draw_scan(ax, points, SIGNUM_TOLERANCE_DEG, color, f"batch {b}: to l_inf", threshold)
        _draw_scan(ax, to_l2, SIGNUM_TOLERANCE_DEG, color, f"batch {b}: to l2 (control)", ls=":")
    _one_minus_axis(ax, signum_scan_values(quick), "beta", "angle of the end direction (deg)",
                    f"Signum (lr 0.05 (t+1)^-1/2) on iid_gaussian(10, 20), {steps:g} steps: end angle against momentum\n"
                    "shaded: each batch's threshold bracket (refined by bisection)")
    _state_legend(ax, SIGNUM_TOLERANCE_DEG)
    fig.savefig(out / "signum_scan.png", dpi=90)
    return claim(
        id="002-thm5.1-scan", seed=adam.SEED,
        statement=Statement(
            "We prove that Signum converges to the l_inf-max-margin classifier for any batch size (abstract); "
            "Thm 5.1, provided its momentum beta is close enough to 1 (notes).",
            f"At each batch size (1, 5, N = 10) Signum's end direction after the step budget falls within "
            f"{SIGNUM_TOLERANCE_DEG:g} deg of the l_inf max-margin as beta -> 1: every momentum the budget "
            "decides is within from a threshold on and outside below it; the threshold is located (bracketed "
            "and bisected in log(1 - beta)) at this budget, not as t -> infinity.", "as stated"),
        setting=f"iid_gaussian(10, 20), Signum(lr 0.05 (t+1)^-1/2), beta in {list(signum_scan_values(quick))}, "
                f"{steps} steps, tolerance {SIGNUM_TOLERANCE_DEG:g} deg",
        evidence=Evidence(
            main=every(outcomes, "batch sizes fall within the tolerance of l_inf as beta -> 1"),
            controls=controls),
        numbers=numbers, figure="signum_scan.png")


def adam_b2_values(quick: bool):
    return (0.9, 0.95, 0.99, 0.999, 0.9999) if quick else (0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)


def _bias_exponent(points, tolerance) -> float:
    """k in angle ~ (1 - b2)^k over the values the budget settled (within or outside); NaN with fewer than 3."""
    settled = [p for p in points if p.state(tolerance) != "unsettled" and p.angle > 0]
    if len(settled) < 3:
        return float("nan")
    return float(np.polyfit(np.log([1 - p.value for p in settled]), np.log([p.angle for p in settled]), 1)[0])


def adam_b2_scan(out: Path, quick: bool) -> Claim:
    steps = adam._steps(quick)
    data = adam._discriminating()
    refs = adam._references(data)

    def run(b2):  # b2 = ADAM's is 002-thm4.8's per-sample run, shared
        opt = adam.OPT.adam(**{**adam.ADAM, "b2": b2}, batch="cyclic")
        return adam._run(opt, data, steps, label="adam cyclic" if b2 == adam.ADAM["b2"] else f"adam cyclic b2 {b2}")

    def measure(b2):
        return _point(run(b2), refs["fixed point"], b2)

    points = [measure(b2) for b2 in adam_b2_values(quick)]
    threshold, points = locate_threshold(points, ADAM_TOLERANCE_DEG, measure, 1 if quick else 2)
    main = approaches(points, ADAM_TOLERANCE_DEG, "the fixed-point max-margin")
    to_linf = [_point(run(p.value), refs["linf"], p.value) for p in points]
    control = approaches(to_linf, ADAM_TOLERANCE_DEG, "the l_inf max-margin")
    k = _bias_exponent(points, ADAM_TOLERANCE_DEG)
    numbers = {"angle to the fixed point": _scan_row(points, threshold, ADAM_TOLERANCE_DEG),
               "bias law (shown, not judged)": Measured(
                   f"angle ~ (1 - b2)^k over the settled values: k = {k:.3g}", (Number("bias_exponent", k, "1"),))}
    fig = Figure(figsize=(7.8, 3.8), constrained_layout=True)
    ax = fig.subplots()
    _draw_scan(ax, points, ADAM_TOLERANCE_DEG, "C0", "to the fixed point", threshold)
    _draw_scan(ax, to_linf, ADAM_TOLERANCE_DEG, "C3", "to l_inf (control)", ls=":")
    law = f"bias law k = {k:.2f}; " if np.isfinite(k) else ""
    _one_minus_axis(ax, [p.value for p in points], "b2", "angle of the end direction (deg)",
                    f"per-sample Adam (lr 0.1 (t+1)^-0.3, b1 0.9) on iid_gaussian(10, 20), {steps:g} steps:\nend angle "
                    f"against b2 ({law}near 1 the budget no longer settles the run)")
    _state_legend(ax, ADAM_TOLERANCE_DEG)
    fig.savefig(out / "adam_b2_scan.png", dpi=90)
    return claim(
        id="002-thm4.8-b2-scan", seed=adam.SEED,
        statement=Statement(
            adam.PAPER_THM_4_8,
            f"Per-sample Adam's end direction after the step budget falls within {ADAM_TOLERANCE_DEG:g} deg of "
            "the fixed-point Mahalanobis max-margin as b2 -> 1 (every b2 the budget decides is within from a "
            "threshold on, outside below it), on one data set whose fixed point flowsim finds unique (002-metric). "
            "Left out: the b2 -> 1 limit after t -> infinity; near 1 the budget leaves b2 unsettled.",
            "weaker"),
        setting=f"iid_gaussian(10, 20), {adam.ADAM_SETTING} but b2 in {', '.join(f'{p.value:.6g}' for p in points)}, "
                f"{steps} steps, tolerance {ADAM_TOLERANCE_DEG:g} deg",
        evidence=Evidence(
            main=main,
            controls=[Control("the same runs against the l_inf max-margin (full-batch Adam's limit)", control)]),
        numbers=numbers, figure="adam_b2_scan.png")


CHECKS = [signum_momentum_scan, adam_b2_scan]
