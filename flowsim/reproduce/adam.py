"""Seed 002 (arXiv 2510.26303): per-sample vs full-batch Adam, Signum, and the fixed-point metric.

Discrete runs of flowsim's optimizers, judged by which reference direction (l2, l_inf, the fixed-point
Mahalanobis max-margin) the run ends nearest to, by more than it still moves. Which-limit claims run on
``fs.datasets.iid_gaussian(10, 20)``, where the three references are pairwise far apart (on the paper's
toy sets each coincides with one of them, so those cannot tell per-sample from full-batch Adam).
``quick=True`` runs fewer steps and keeps every control."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import flowsim as fs
from flowsim import plot

from ._claim import Claim, Control, Evidence, Measured, Number, Outcome, Statement, claim, every, run_checks
from .criteria import at_least, at_most, converges_to, nearest_reference

INF = float("inf")
OPT = fs.optimizers
SEED = "002"
#: Thm 4.8 as the abstract and the notes give it (docs/theory.md 8)
PAPER_THM_4_8 = ("For general datasets, we characterize its bias using a proxy algorithm for the beta_2 -> 1 limit. This "
                 "proxy maximizes a data-adaptive Mahalanobis-norm margin, whose associated covariance matrix is "
                 "determined by a data-dependent dual fixed-point formulation (abstract); Thm 4.8, under Assumption 4.4 "
                 "that the proxy's direction converges (notes).")
#: eta_t = 0.1 (t+1)^-0.3: any decay in (0, 1] satisfies the theorems; a slow one reaches their asymptotic regime in
#: ~1e5-1e6 steps, where (t+1)^-1/2 needs ~1e7 (per-sample Adam on Gaussian data: 0.07 from its limit after 3e6 steps)
ADAM = {"lr": 0.1, "b1": 0.9, "b2": 0.99, "decay": 0.3}
ADAM_SETTING = "Adam(lr 0.1 (t+1)^-0.3, b1 0.9, b2 0.99, no eps, no bias correction)"
RECORDS = 24


def _steps(quick: bool) -> int:
    return 200_000 if quick else 1_000_000


def _unit(v):
    return np.asarray(v, float) / np.linalg.norm(v)


@functools.cache
def _discriminating():
    return fs.datasets.iid_gaussian(10, 20, seed=0)


def _references(data) -> dict:
    return {"l2": _unit(fs.max_margin(data, 2).direction), "linf": _unit(fs.max_margin(data, INF).direction),
            "fixed point": _unit(fs.adam_fixed_point(data).direction)}


def _cosines(refs) -> str:
    return ", ".join(f"{n.key.removeprefix('cos ')} {n.value:.3f}" for n in _cosine_numbers(refs))


def _cosine_numbers(refs) -> list:
    keys = list(refs)
    return [Number(f"cos {a}/{b}", float(refs[a] @ refs[b]), "1") for i, a in enumerate(keys) for b in keys[i + 1:]]


def _cosine_row(refs) -> Measured:
    return Measured(_cosines(refs), tuple(_cosine_numbers(refs)))


def _distances(run, refs) -> dict:
    return {k: np.linalg.norm(run.direction - v, axis=1) for k, v in refs.items()}


_RUNS: dict = {}


def _run(opt, data, steps, loss="logistic", label=None):
    """fs.iterate; with a ``label`` the run is remembered, so checks that need the same run (a control
    of one is the claim of another) share it. The label names the optimizer and its settings: "adam
    cyclic" / "adam full" are always ``ADAM``."""
    key = (label, id(data), steps, loss)
    if label is None or key not in _RUNS:
        _RUNS[key] = (data, fs.iterate(opt, fs.Linear(), loss, data, steps=steps, init=1e-3, records=RECORDS))
    return _RUNS[key][1]


def _judged(opt, data, refs, steps, want, loss="logistic", label=None):
    run = _run(opt, data, steps, loss, label)
    dist = _distances(run, refs)
    return nearest_reference(dist, want), run, dist


_NAMES = {"l2": "l2 max-margin", "linf": "l_inf max-margin", "fixed point": "fixed-point max-margin"}


def _fit_tail(ax, x, y, color, var, scale=1.0):
    """A power law y ~ A x^-k fitted over the last half of the (log-spaced) records, drawn dashed
    (shown, not judged: the claims judge which reference is nearest)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = (x > 0) & (y > 0) & np.isfinite(y)
    keep &= np.arange(len(x)) >= len(x) // 2
    if keep.sum() >= 3:
        slope, icpt = np.polyfit(np.log(scale * x[keep]), np.log(y[keep]), 1)
        plot.draw_fit(ax, x[keep], -slope, np.exp(icpt), color=color, label="fit, last half", var=var, scale=scale)


def _plot(ax, run, dist, title, want=None):
    for k, d in dist.items():
        (line,) = ax.loglog(np.maximum(run.steps, 1), np.maximum(d, 1e-6), label=_NAMES.get(k, k))
        if k == want:
            _fit_tail(ax, np.maximum(run.steps, 1), d, line.get_color(), "step")
    ax.set(title=title, xlabel="step (log axis)", ylabel="|direction - reference direction|")
    ax.title.set_fontsize(9)
    plot.short_log_span_ticks(ax)
    plot.legend_beside(ax)


def _fig(rows, cols):
    fig = Figure(figsize=(5.8 * cols, 3.3 * rows), constrained_layout=True)  # (room for the legends beside the panels)
    return fig, np.atleast_2d(fig.subplots(rows, cols))


def per_sample_vs_full(out: Path, quick: bool) -> Claim:
    steps = _steps(quick)
    data = _discriminating()
    refs = _references(data)
    runs = {"per-sample Adam (cyclic)": (OPT.adam(**ADAM, batch="cyclic"), "fixed point", "logistic"),
            "per-sample Adam, exponential loss": (OPT.adam(**ADAM, batch="cyclic"), "fixed point", "exponential"),
            "full-batch Adam": (OPT.adam(**ADAM), "linf", "logistic")}  # with the ADAM settings throughout
    labels = {"per-sample Adam (cyclic)": "adam cyclic", "per-sample Adam, exponential loss": "adam cyclic",
              "full-batch Adam": "adam full"}
    fig, axes = _fig(1, 3)
    outcomes, numbers, finals = [], {"reference cosines": _cosine_row(refs)}, {}
    for ax, (name, (opt, want, loss)) in zip(axes[0], runs.items()):
        o, run, dist = _judged(opt, data, refs, steps, want, loss, labels[name])
        outcomes.append(o)
        finals[name] = dist
        numbers[name] = o
        _plot(ax, run, dist, f"{name}: {o.word}", want)
    fig.suptitle("Thm 4.8: per-sample Adam -> the fixed-point max-margin, full-batch Adam -> l_inf "
                 "(iid_gaussian(10, 20))", fontsize=10)
    fig.savefig(out / "adam_limits.png", dpi=90)
    # an independent run whose limit is another reference (the claim's own runs judged against another
    # target would only restate the result)
    gd = _judged(OPT.gd(1.0), data, refs, steps, "fixed point", label="gd full")[0]
    controls = [Control("full-batch GD (limit l2) judged against the fixed point", gd)]
    return claim(
        id="002-thm4.8", seed=SEED,
        statement=Statement(
            PAPER_THM_4_8 + " Full-batch Adam has the l_inf max-margin bias (abstract).",
            "Per-sample Adam at b2 = 0.99 (logistic and exponential loss) ends nearest the fixed-point "
            "Mahalanobis max-margin, the fixed point found from uniform weights c, while full-batch Adam ends "
            "nearest the l_inf max-margin; one data set, one init. The fixed point is not unique on every data "
            "set (on this one 21 starts find one, 002-metric); on a set with several, which one an init "
            "reaches is judged in 002-basins.", "weaker"),
        setting=f"iid_gaussian(n=10, d=20, seed 0) (reference cosines {_cosines(refs)}), linear model, {ADAM_SETTING}, "
                f"{steps} steps",
        evidence=Evidence(main=every(outcomes, "runs end nearest their predicted reference"), controls=controls),
        numbers=numbers, figure="adam_limits.png")


def sampling_schemes(out: Path, quick: bool) -> Claim:
    steps = _steps(quick)
    data = _discriminating()
    refs = _references(data)
    outcomes, numbers, ends = [], {}, {}
    for scheme in ("cyclic", "shuffle", "replace"):
        o, run, _ = _judged(OPT.adam(**ADAM, batch=scheme), data, refs, steps, "fixed point", label=f"adam {scheme}")
        outcomes.append(o)
        ends[scheme] = run.direction[-1]
        numbers[f"batch 1, {scheme}"] = o
    spread = {f"{a}/{b}": float(np.linalg.norm(ends[a] - ends[b])) for a, b in (("cyclic", "shuffle"), ("cyclic", "replace"))}
    numbers["spread between schemes"] = Measured(", ".join(f"{k} {v:.3g}" for k, v in spread.items()),
                                                 tuple(Number(f"distance {k}", v, "1") for k, v in spread.items()))
    control = _judged(OPT.adam(**ADAM), data, refs, steps, "fixed point", label="adam full")[0]
    return claim(
        id="002-sampling", seed=SEED,
        statement=Statement(
            "The available text studies incremental Adam (one sample per step) and states nothing on the "
            "order in which samples are visited.",
            "Per-sample Adam reaches the same fixed-point limit whether samples are visited cyclically, "
            "reshuffled each epoch, or drawn with replacement.", "beyond the available text"),
        setting=f"iid_gaussian(10, 20), {ADAM_SETTING}, {steps} steps",
        evidence=Evidence(
            main=every(outcomes, "sampling schemes end nearest the fixed point"),
            controls=[Control("full-batch Adam judged against the fixed point", control)]),
        numbers=numbers)


def rademacher_pairs(out: Path, quick: bool) -> Claim:
    steps = _steps(quick)
    # seed 3: a Rademacher set whose l2 and l_inf max-margins differ
    data = fs.datasets.scaled_rademacher(10, 5, seed=3)
    refs = {k: v for k, v in _references(data).items() if k != "fixed point"}  # = l2 here (002-metric)
    outcomes, numbers = [], {"reference cosines": _cosine_row(refs)}
    for b1, b2 in ((0.9, 0.99), (0.5, 0.9), (0.9, 0.9)):
        o = _judged(OPT.adam(0.1, b1, b2, 0.3, batch="cyclic"), data, refs, steps, "l2")[0]
        outcomes.append(o)
        numbers[f"per-sample, b1 {b1}, b2 {b2}"] = o
    control = _judged(OPT.adam(**ADAM), data, refs, steps, "l2")[0]
    return claim(
        id="002-thm3.3", seed=SEED,
        statement=Statement(
            "We construct datasets on which incremental Adam provably converges to the l2-max-margin classifier, "
            "in contrast to the l_inf-max-margin bias of full-batch Adam (abstract); Thm 3.3: scaled Rademacher "
            "data, any b1 <= b2 (notes).",
            "On scaled-Rademacher data per-sample Adam ends nearest the l2 max-margin for three (b1, b2) pairs; "
            "full-batch Adam does not (it goes to l_inf).", "as stated"),
        setting=f"scaled_rademacher(10, 5, seed 3), Adam(lr 0.1 (t+1)^-0.3), {steps} steps",
        evidence=Evidence(
            main=every(outcomes, "(b1, b2) pairs end nearest l2"),
            controls=[Control("full-batch Adam judged against l2", control)]),
        numbers=numbers)


def signum_label(beta, batch) -> str:
    """The label of Signum(lr 0.05, ``beta``, ``batch``) runs, shared with the momentum scan (scans.py)."""
    return f"signum {float(beta):g} {batch}"


def signum_batches(out: Path, quick: bool) -> Claim:
    steps = _steps(quick)
    data = _discriminating()
    refs = _references(data)
    fig, axes = _fig(1, 2)
    outcomes, numbers = [], {}
    for b in (1, 5, data.n):
        batch = "cyclic" if b == 1 else (b if b < data.n else "full")
        o, run, dist = _judged(OPT.signum(0.05, 0.99, batch=batch), data, refs, steps, "linf", label=signum_label(0.99, batch))
        outcomes.append(o)
        numbers[f"beta 0.99, batch {b}"] = o
        (line,) = axes[0, 0].loglog(np.maximum(run.steps, 1), dist["linf"], label=f"beta 0.99, batch {b}")
        if b == 1:
            _fit_tail(axes[0, 0], np.maximum(run.steps, 1), dist["linf"], line.get_color(), "step")
        for beta in () if quick else (0.9, 0.0):
            if beta or b > 1:  # beta 0 at batch 1 is the control below
                shown, run, dist = _judged(OPT.signum(0.05, beta, batch=batch), data, refs, steps, "linf",
                                           label=signum_label(beta, batch))
                numbers[f"beta {beta}, batch {b} (shown, not judged)"] = shown
                axes[0, 0].loglog(np.maximum(run.steps, 1), dist["linf"], ls=(0, (4, 2)) if beta else ":",
                                  color=line.get_color(), lw=1.0, label=f"beta {beta:g}, batch {b} (shown)")
    control, run, dist = _judged(OPT.signum(0.05, 0.0, batch="cyclic"), data, refs, steps, "linf",
                                 label=signum_label(0.0, "cyclic"))
    axes[0, 0].loglog(np.maximum(run.steps, 1), dist["linf"], "k--", label="beta 0, batch 1 (control)")
    axes[0, 0].set(xlabel="step (log axis)", ylabel="|direction - l_inf max-margin direction|",
                   title="Signum on iid_gaussian(10, 20): distance to l_inf")
    axes[0, 0].title.set_fontsize(9)
    plot.short_log_span_ticks(axes[0, 0])
    plot.legend_beside(axes[0, 0])
    _plot(axes[0, 1], run, dist, "control: sign descent (beta 0, batch 1)")
    fig.suptitle("Thm 5.1: Signum with momentum 0.99 -> the l_inf max-margin at every batch size", fontsize=10)
    fig.savefig(out / "signum.png", dpi=90)
    return claim(
        id="002-thm5.1", seed=SEED,
        statement=Statement(
            "We prove that Signum converges to the l_inf-max-margin classifier for any batch size (abstract); "
            "Thm 5.1, provided its momentum beta is close enough to 1 (notes).",
            "Signum with momentum 0.99 ends nearest the l_inf max-margin at batch 1, 5 and N; without momentum "
            "(beta = 0, batch 1) it does not. How close to 1 beta must be: 002-thm5.1-scan.", "as stated"),
        setting=f"iid_gaussian(10, 20), Signum(lr 0.05 (t+1)^-1/2), beta 0.99 judged"
                f"{'' if quick else ', beta 0.9 and 0 shown'}, {steps} steps",
        evidence=Evidence(
            main=every(outcomes, "batch sizes end nearest l_inf at beta 0.99"),
            controls=[Control("sign descent without momentum (beta 0), batch 1", control)]),
        numbers=numbers, figure="signum.png")


def sign_flow_limit(out: Path, quick: bool) -> Claim:
    """The flows Signum and sign descent idealise (momentum 0, full batch: dw/dt = -sign(grad L), and steepest
    descent in l_inf, its time change) converge in direction to the l_inf max-margin on Gaussian data, where they
    slide on switching surfaces g_j = 0 on the way (followed as Filippov solutions, docs/theory.md 3b)."""
    data = fs.datasets.iid_gaussian(20, 5, seed=1)
    refs = {"l1": fs.max_margin(data, 1), "l2": fs.max_margin(data, 2), "linf": fs.max_margin(data, INF)}
    flows = {"sign flow": fs.SignFlow(), "steepest descent, l_inf": fs.SteepestDescent(INF)}
    if quick:  # the same limit by a time change: one flow shows it
        flows.pop("sign flow")
    sols = {name: fs.solve(fs.derive(fs.Linear(), "logistic", flow), data, 1e-3, t1=1e100, throw=False)
            for name, flow in flows.items()}
    outcomes = {name: converges_to(sol, refs, "linf") for name, sol in sols.items()}
    numbers = {name: Measured(f"{o.why}; slid on the surfaces of coordinates "
                              f"{sorted({x['coordinate'] for e in sols[name].events for x in e.get('sliding', [])})}",
                              o.numbers) for name, o in outcomes.items()}
    fig = Figure(figsize=(5.6 * len(sols), 3.4), constrained_layout=True)
    for ax, (name, sol) in zip(np.atleast_1d(fig.subplots(1, len(sols))), sols.items()):
        plot.margin_gaps(sol, refs, ax)
        ax.set_title(f"{name}: {outcomes[name].word}", fontsize=9)
    fig.suptitle("Sign flow and l_inf steepest descent on iid_gaussian(20, 5): the gap to the l_inf max-margin "
                 "decays", fontsize=10)
    fig.savefig(out / "sign_flow.png", dpi=90)
    controls = [Control(f"{name}: converges to the l2 max-margin (16.9 deg from l_inf here)",
                        converges_to(sol, refs, "l2")) for name, sol in sols.items()]
    return claim(
        id="002-signflow", seed=SEED,
        statement=Statement(
            "Signum converges to the l_inf-max-margin classifier (abstract, Thm 5.1); its momentum-0 full-batch "
            "limit is sign descent, steepest descent in l_inf (Gunasekar et al. 2018).",
            "The sign flow dw/dt = -sign(grad L) and l_inf steepest descent (the flows without momentum and "
            "sampling) converge in direction to the l_inf max-margin, through their sliding modes.", "weaker"),
        setting=f"iid_gaussian(20, 5, seed 1), Linear, logistic, init 1e-3, t1 1e100, flows: {', '.join(flows)}",
        evidence=Evidence(
            main=every(list(outcomes.values()), "both flows converge to l_inf by the fitted-gap verdict"),
            controls=controls),
        numbers=numbers, figure="sign_flow.png")


def batch_five(out: Path, quick: bool) -> Claim:
    steps = _steps(quick)
    data = _discriminating()
    limits = {b: fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy(batch=b)), data, 1e-3, t1=1e100).direction[-1]
              for b in (1, 5)}
    runs = {"reshuffled batch-5 Adam": (OPT.adam(**ADAM, batch=("shuffle", 5)), None),
            "cyclic blocks {1..5}, {6..10} (control)": (OPT.adam(**ADAM, batch=5), None),
            "per-sample Adam (control)": (OPT.adam(**ADAM, batch="cyclic"), "adam cyclic")}
    dist = {k: float(np.linalg.norm(_run(opt, data, steps, label=label).direction[-1] - limits[5]))
            for k, (opt, label) in runs.items()}
    outs = {k: at_most(v, 0.01, f"{k}: distance to the AdamProxy(batch=5) flow's limit") for k, v in dist.items()}
    apart = float(np.linalg.norm(limits[1] - limits[5]))
    main = every([outs["reshuffled batch-5 Adam"], at_least(apart, 0.01, "distance of the batch-1 and batch-5 limits")],
                 "checks")
    numbers = dict(outs)
    numbers["AdamProxy limits, batch 1 vs batch 5"] = Measured(f"{apart:.4g} apart", (Number("distance", apart, "1"),))
    return claim(
        id="002-batch5", seed=SEED,
        statement=Statement(
            "Experiments: batch size 5 already departs from the per-sample limit (notes); the mini-batch proxy "
            "Phi_b is from follow-up work (notes).",
            "Batch size 5 already departs from the per-sample limit: reshuffled mini-batch Adam (b = 5) goes to "
            "the limit of the mini-batch proxy flow Phi_b, which is not the per-sample one. Fixed cyclic blocks "
            "are a different algorithm with another limit.", "as stated"),
        setting=f"iid_gaussian(10, 20), {ADAM_SETTING}, {steps} steps, proxy flows to t = 1e100",
        evidence=Evidence(main=main, controls=[Control(k, o) for k, o in outs.items() if "control" in k]),
        numbers=numbers)


def epoch_map(out: Path, quick: bool) -> Claim:
    data = _discriminating()
    epochs = _steps(quick) // data.n  # the per-sample run is 002-thm4.8's
    ps = _run(OPT.adam(**ADAM, batch="cyclic"), data, epochs * data.n, label="adam cyclic")
    em = fs.iterate(OPT.adam_epoch_map(ADAM["lr"], data.n, ADAM["b1"], ADAM["b2"], ADAM["decay"]), fs.Linear(), "logistic",
                    data, steps=epochs, init=1e-3, records=RECORDS)
    full = _run(OPT.adam(**ADAM), data, epochs * data.n, label="adam full")
    d_ps = np.linalg.norm(em.direction[-1] - ps.direction[-1])
    d_full = np.linalg.norm(em.direction[-1] - full.direction[-1])
    # records are log-spaced in steps; pair each epoch-map record with the per-sample one nearest in time sum eta
    pair = [int(np.argmin(np.abs(np.log1p(ps.t) - np.log1p(t)))) for t in em.t]
    along = np.linalg.norm(em.direction - ps.direction[pair], axis=1)
    numbers = {"epoch map vs per-sample Adam along the trajectory": Measured(
                   ", ".join(f"t {t:.3g}: {x:.3g}" for t, x in zip(em.t[4::4], along[4::4])),
                   (Number("t", em.t[4::4], "sum of eta"), Number("distance", along[4::4], "1"))),
               "at the end": Measured(f"{d_ps:.4g}", (Number("distance", float(d_ps), "1"),)),
               "epoch map vs full-batch Adam at the end": Measured(f"{d_full:.4g}", (Number("distance", float(d_full), "1"),))}
    return claim(
        id="002-prop2.5", seed=SEED,
        statement=Statement(
            "Prop 2.5: over one epoch per-sample Adam moves by a closed-form steady-state map of its moving "
            "averages under cyclic sampling (notes).",
            "Iterating the epoch map of Prop 2.5 follows the per-sample trajectory (directions compared at equal "
            "time sum eta).", "as stated"),
        setting=f"iid_gaussian(10, 20), {ADAM_SETTING}, {epochs} epochs",
        evidence=Evidence(
            main=at_most(d_ps, 0.01, "direction distance at the end"),
            controls=[Control("full-batch Adam against the epoch map",
                              at_most(d_full, 0.01, "direction distance at the end"))]),
        numbers=numbers)


_SEARCHES: dict = {}


def _fixed_points(data):
    """fs.adam_fixed_points, remembered per data set: 002-metric and 002-basins search the same one."""
    key = (data.X.tobytes(), data.y.tobytes())
    if key not in _SEARCHES:
        _SEARCHES[key] = fs.adam_fixed_points(data)
    return _SEARCHES[key]


def fixed_point_metric(out: Path, quick: bool) -> Claim:
    sets = {"scaled Rademacher": fs.datasets.scaled_rademacher(10, 5, seed=3), "Gaussian clusters": fs.datasets.gaussian_clusters(10, 5),
            "shifted diagonal": fs.datasets.shifted_diagonal(10, 5), "iid Gaussian": _discriminating()}
    numbers, outcomes, off_l2 = {}, [], {}
    for name, data in sets.items():
        fp = fs.adam_fixed_point(data)
        off_l2[name] = 1 - fp.direction @ _unit(fs.max_margin(data, 2).direction)
        outcomes.append(at_most(fp.residual, 1e-8, f"{name}: fixed-point residual"))
        numbers[name] = Measured(f"diag M(c*) = {np.round(np.diag(fp.metric), 4).tolist()}, residual {fp.residual:.2g} "
                                 f"after {fp.iterations} iterations; 1 - cos to l2 = {off_l2[name]:.3g}",
                                 (Number("metric_diagonal", np.diag(fp.metric), "1"),
                                  Number("residual", float(fp.residual), "1"),
                                  Number("iterations", int(fp.iterations), "iterations"),
                                  Number("one_minus_cos_l2", float(off_l2[name]), "1")))
        found = _fixed_points(data)
        numbers[f"{name}: every fixed point found (shown, not judged)"] = Measured(
            f"{len(found.points)} distinct fixed point(s) from {found.starts} starts (reached by {list(found.reached)} "
            f"of them; {len(found.failed)} found none); largest residual "
            f"{max(fp.residual for fp in found.points):.2g}",
            (Number("fixed_points", len(found.points), "1"), Number("starts_reaching_each", list(found.reached), "1"),
             Number("starts", found.starts, "1"), Number("starts_failed", len(found.failed), "1")))

    def is_l2(name):
        return at_most(off_l2[name], 1e-10, f"{name}: 1 - cos(fixed point, l2)")

    outcomes.append(is_l2("scaled Rademacher"))
    return claim(
        id="002-metric", seed=SEED,
        statement=Statement(
            "The covariance matrix is determined by a data-dependent dual fixed-point formulation; we further "
            "present concrete datasets where this bias reduces to the standard l2- and l_inf-max-margin "
            "classifiers (abstract); on data whose samples have equal absolute coordinates the limit is the l2 "
            "max-margin (notes).",
            "A fixed point M(c*) = diag(sqrt(sum_i c_i^2 x_i^2)) with c* = T(c*) is found (from uniform c) on "
            "four data sets; on scaled-Rademacher data it gives the l2 max-margin. How many fixed points each "
            "set has (from 21 starts, fs.adam_fixed_points) is shown here; which one an init reaches is "
            "judged in 002-basins.", "as stated"),
        setting="damped fixed-point iteration, tolerance 1e-9",
        evidence=Evidence(
            main=every(outcomes, "checks"),
            controls=[Control("iid Gaussian data: the fixed point is not l2", is_l2("iid Gaussian"))]),
        numbers=numbers)


def _proxy_distances(flow, data, refs, log10_t1):
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", flow), data, 1e-3, log10_t1=log10_t1, throw=False)
    keep = sol.log10_t > 0
    return sol, sol.log10_t[keep], {k: np.linalg.norm(sol.direction[keep] - v, axis=1) for k, v in refs.items()}


def proxy_flow_limit(out: Path, quick: bool) -> Claim:
    # the direction converges like a power of 1/log t (0.055 from the fixed point at t = 1e100 on the Gaussian
    # clusters, 6e-5 at log10 t = 1e5); the schedule clock s = log(1+t) gets there in a few hundred steps
    log10_t1 = 1e5
    sets = {"iid Gaussian": _discriminating(), "Gaussian clusters": fs.datasets.gaussian_clusters(10, 5),
            "scaled Rademacher": fs.datasets.scaled_rademacher(10, 5, seed=3), "shifted diagonal": fs.datasets.shifted_diagonal(10, 5)}
    fig, axes = _fig(1, 4)
    outcomes, numbers = [], {}
    for ax, (name, data) in zip(axes[0], sets.items()):
        refs = _references(data)
        sol, lt, dist = _proxy_distances(fs.AdamProxy(), data, refs, log10_t1)
        o = nearest_reference(dist, "fixed point")
        # on the paper's toy sets the fixed point coincides with one reference: shown, not judged
        judged = min(np.linalg.norm(refs["fixed point"] - v) for k, v in refs.items() if k != "fixed point") > 0.01
        if judged:
            outcomes.append(o)
        numbers[name + ("" if judged else " (fixed point = another reference: shown, not judged)")] = Measured(
            f"[{sol.status}] {o.why}", (Number("log10_t_end", float(sol.log10_t[-1]), "log10 t"), *o.numbers))
        for k, d in dist.items():  # dashed: it can coincide with l2 or l_inf
            (line,) = ax.loglog(lt, np.maximum(d, 1e-8), ":" if k == "fixed point" else "-", label=_NAMES.get(k, k))
            if k == "fixed point":
                _fit_tail(ax, lt, d, line.get_color(), "log t", np.log(10.0))
        ax.set(title=f"Adam proxy flow, {name}", xlabel="log10 t (log axis)", ylabel="|direction - reference direction|")
        ax.title.set_fontsize(9)
        plot.short_log_span_ticks(ax)
        plot.legend_beside(ax)
    fig.suptitle("Prop 4.1 / Thm 4.8: the Adam proxy flow -> the fixed-point max-margin, like a power of 1/log t",
                 fontsize=10)
    fig.savefig(out / "adam_proxy.png", dpi=90)
    data = sets["iid Gaussian"]
    gd, _, dist = _proxy_distances(fs.GD(), data, _references(data), log10_t1)
    control = nearest_reference(dist, "fixed point") if gd.ok else Outcome(None, f"GD flow ended {gd.status!r}")
    return claim(
        id="002-prop4.1", seed=SEED,
        statement=Statement(
            PAPER_THM_4_8 + " Prop 4.1: the proxy's direction is g / sqrt(sum_i g_i^2) elementwise (notes).",
            "The b2 -> 1 proxy flow theta' = -eta g / sqrt(sum_i g_i^2) from init 1e-3 ends nearest the "
            "fixed-point Mahalanobis max-margin found from uniform c, on the data sets where that differs from "
            "l2 and l_inf. One init scale: where several fixed points exist the limit depends on it "
            "(002-basins).",
            "weaker"),
        setting=f"linear model, logistic loss, eta = 1/(t+1) (schedule clock), log10 t1 = {log10_t1:g}",
        evidence=Evidence(
            main=every(outcomes, "discriminating data sets end nearest the fixed point"),
            controls=[Control("GD flow on iid_gaussian(10, 20) (its limit is l2)", control)]),
        numbers=numbers, figure="adam_proxy.png")


#: 002-basins: init = scale * a seeded N(0, I) direction; on the shifted diagonal the direction of seed 2 crosses
#: from the l_inf-like fixed point to another between scales 0.1 and 0.3, that of seed 0 to a third above scale 3.
#: The proxy flow maps every scale of BASIN_SCALES, discrete Adam runs from BASIN_ADAM_SCALES
BASIN_DIRECTIONS = (2, 0)
BASIN_SCALES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: (full, quick): from scale 10, b2 = 0.99 settles only after ~3e6 steps
BASIN_ADAM_SCALES = ((0.01, 1.0, 10.0), (0.01, 1.0))
#: per-sample Adam's b2 -> steps (full, quick): b2 = 0.99 settles at its fixed point in ~3e6 steps from scale 10;
#: b2 = 0.999 still moves by 0.06 over the last quarter of 5e6 steps (more than the fixed points are apart): shown,
#: not judged
BASIN_STEPS = {0.99: (3_000_000, 1_000_000), 0.999: (1_000_000, 200_000)}
BASIN_JUDGED = (0.99,)


def _basin_name(index) -> str:
    return "none" if index is None else f"fixed point {index + 1}"


def _basin_runs(data, search, seed, quick):
    """The proxy flow's basins along direction ``seed`` and, per (scale, b2) of ``BASIN_ADAM_SCALES`` and
    ``BASIN_STEPS``, the discrete per-sample Adam run's distances to every fixed point."""
    u = np.random.default_rng(seed).normal(size=data.d)
    basins = fs.adam_basins(data, BASIN_SCALES, u, search=search)
    points = {_basin_name(i): p.direction for i, p in enumerate(search.points)}
    runs = {(scale, b2): _distances(fs.iterate(OPT.adam(**{**ADAM, "b2": b2}, batch="cyclic"), fs.Linear(), "logistic",
                                               data, steps=steps[quick], init=scale * basins.direction,
                                               records=RECORDS), points)
            for scale in BASIN_ADAM_SCALES[quick] for b2, steps in BASIN_STEPS.items()}
    return basins, runs


def _reached(dist) -> int:
    return int(np.argmin([d[-1] for d in dist.values()]))


def fixed_point_basins(out: Path, quick: bool) -> Claim:
    data = fs.datasets.shifted_diagonal(10, 5)
    search = _fixed_points(data)
    from_uniform = fs.adam_fixed_point(data).direction  # the fixed point a uniqueness assumption would name
    uniform_name = _basin_name(int(np.argmin([np.linalg.norm(p.direction - from_uniform) for p in search.points])))
    fig, axes = _fig(1, len(BASIN_DIRECTIONS))
    outcomes, uniform, numbers = [], [], {}
    for ax, seed in zip(axes[0], BASIN_DIRECTIONS):
        basins, runs = _basin_runs(data, search, seed, quick)
        for scale, index, why in zip(basins.scales, basins.reached, basins.why):
            where = f"direction seed {seed}, scale {scale:g}"
            proxy = Outcome(index is not None, f"the basin of {_basin_name(index)} ({why})" if index is not None
                            else f"in no basin found ({why})",
                            (Number("scale", float(scale), "1"), Number("fixed_point", _basin_name(index), "1-based")))
            outcomes.append(proxy)
            numbers[f"{where}: proxy flow (defines the basin)"] = proxy
            for b2 in BASIN_STEPS if scale in BASIN_ADAM_SCALES[quick] else ():
                dist = runs[(scale, b2)]
                o = nearest_reference(dist, _basin_name(index)) if index is not None else \
                    Outcome(None, "no basin", (Number("fixed_point", "none", "1-based"),))
                judged = b2 in BASIN_JUDGED
                if judged:
                    outcomes.append(o)
                    uniform.append(nearest_reference(dist, uniform_name))
                numbers[f"{where}: Adam b2 {b2}" + ("" if judged else " (shown, not judged)")] = o
        _basin_panel(ax, basins, runs, seed, BASIN_ADAM_SCALES[quick])
    fig.suptitle(f"002-basins: the fixed point reached against the init scale, shifted_diagonal(10, 5) "
                 f"({len(search.points)} fixed points)", fontsize=10)
    fig.savefig(out / "adam_basins.png", dpi=90)
    numbers["fixed points found"] = Measured(
        f"{len(search.points)} from {search.starts} starts, reached by {list(search.reached)} of them; {uniform_name} "
        "is the one from uniform weights (fs.adam_fixed_point)",
        (Number("fixed_points", len(search.points), "1"), Number("starts_reaching_each", list(search.reached), "1")))
    control = every(uniform, f"runs end nearest {uniform_name}")
    control = Outcome(control.holds, control.why, (Number("runs", len(uniform), "1"), Number(
        "runs_nearest_the_uniform_weights_point", sum(o.holds is True for o in uniform), "1")))
    steps = {b2: s[quick] for b2, s in BASIN_STEPS.items()}
    return claim(
        id="002-basins", seed=SEED,
        statement=Statement(
            PAPER_THM_4_8 + " The text speaks of the fixed point, as if unique.",
            "Where the fixed point is not unique, the limit is the fixed point of the init's basin: on "
            "shifted_diagonal(10, 5), from inits scale * u (two directions u), the basin is the fixed point "
            "the b2 -> 1 proxy flow reaches (confirmed by the fixed-point iteration from the flow's end loss "
            "weights; docs/theory.md 6), and discrete per-sample Adam at b2 = 0.99 ends nearest that fixed "
            "point, by more than it still moves. b2 = 0.999 is shown, not judged: it has not settled after "
            f"{steps[0.999]} steps (its first steps, up to lr (1 - b1) / sqrt(1 - b2) = 0.32 per coordinate "
            "without bias correction, move it farther than an init of scale 1).", "beyond the available text"),
        setting=f"shifted_diagonal(10, 5), linear model; proxy flow to log10 t = 1e5 from scales "
                f"{list(BASIN_SCALES)}; "
                f"{ADAM_SETTING} with b2 0.99 ({steps[0.99]} steps) and 0.999 ({steps[0.999]} steps) from scales "
                f"{list(BASIN_ADAM_SCALES[quick])}; init directions N(0, I) of seeds {list(BASIN_DIRECTIONS)}",
        evidence=Evidence(
            main=every(outcomes, "runs end at their basin's fixed point"),
            controls=[Control(f"uniqueness assumed: the Adam b2 0.99 runs judged against {uniform_name}, the fixed "
                              "point from uniform weights", control)]),
        numbers=numbers, figure="adam_basins.png")


def _basin_panel(ax, basins, runs, seed, adam_scales):
    shown = [np.nan if i is None else i + 1 for i in basins.reached]
    ax.semilogx(basins.scales, shown, "ko-", ms=9, mfc="none", drawstyle="steps-mid",
                label="proxy flow (the basin)")
    for b2, marker in zip(BASIN_STEPS, "sx"):
        ax.semilogx(adam_scales, [_reached(runs[(s, b2)]) + 1 for s in adam_scales], marker, ms=6,
                    label=f"Adam b2 {b2}: nearest at the end" + ("" if b2 in BASIN_JUDGED else " (not judged)"))
    ax.set(title=f"init = scale * u (u of seed {seed})", xlabel="init scale (log axis)", ylabel="fixed point reached",
           yticks=range(1, len(basins.search.points) + 1))
    ax.title.set_fontsize(9)
    plot.legend_beside(ax)


CHECKS = [per_sample_vs_full, sampling_schemes, rademacher_pairs, proxy_flow_limit, signum_batches, sign_flow_limit,
          batch_five, epoch_map, fixed_point_metric, fixed_point_basins]


def run(out: Path, quick: bool = False, progress=print) -> Iterator[Claim]:
    return run_checks(CHECKS, out, quick, progress)
