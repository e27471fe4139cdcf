"""Seed 000 (arXiv 2603.08290, "Minor First, Major Last"): SAM on L-layer diagonal networks.

Every check runs the flow with flowsim and compares with the theorem's prediction (MATH.md 5b).
``quick=True`` shortens horizons and grids so the suite runs in seconds (CI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import flowsim as fs
from flowsim import plot

from ._claim import Claim, run_checks, verdict_word

INF = float("inf")
MU = np.array([1.0, 2.0])


def _refs(data):
    return {"l1": fs.max_margin(data, 1), "l2": fs.max_margin(data, 2), "linf": fs.max_margin(data, INF)}


def _gaussian(n, d, seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = np.sign(X @ w)
    return fs.Dataset(X + 0.3 * y[:, None] * w / np.linalg.norm(w), y)


def _setting(**kw) -> str:
    return ", ".join(f"{k}={v}" for k, v in kw.items())


def l1_limits_l2(out: Path, quick: bool) -> Claim:
    t1 = 1e30 if quick else 1e100
    sets = {"one sample mu=(1,2)": fs.Dataset(MU[None], [1]), "Gaussian n=10 d=3": _gaussian(10, 3, 0)}
    flows = {"GD": fs.GD(), "l2-SAM": fs.SAM(0.1, 2), "l_inf-SAM": fs.SAM(0.1, INF)}
    rows, holds = [], []
    fig = Figure(figsize=(12, 3.5), constrained_layout=True)
    axes = fig.subplots(1, 3)
    for dname, data in sets.items():
        refs = _refs(data)
        for ax, (fname, flow) in zip(axes, flows.items()):
            sol = fs.solve(fs.derive(fs.Linear(), "logistic", flow), data, 0.1, t1=t1)
            v = fs.verdict(sol, refs, "l2")
            holds.append(v.holds)
            rows.append((f"{fname}, {dname}", f"{verdict_word(v.holds)}: gap {v.fits['l2'].final_gap:.3g}, "
                         f"rate {v.fits['l2'].rate:.3g}, angle to l2 {v.fits['l2'].final_angle:.3g} deg"))
            if dname.startswith("Gaussian"):
                plot.margin_gaps(sol, refs, ax)
                ax.set_title(f"L=1 {fname}, Gaussian data", fontsize=9)
    fig.savefig(out / "sam_l1.png", dpi=100)
    ok = all(h is True for h in holds)
    return Claim("000-thm3.1", "L = 1: GD, l2-SAM and l_inf-SAM converge in direction to the l2 max-margin (Thm 3.1).",
                 _setting(model="Linear", loss="logistic", rho=0.1, alpha=0.1, t1=t1, backend="auto"),
                 "holds" if ok else ("fails" if any(h is False for h in holds) else "inconclusive"),
                 f"{sum(h is True for h in holds)}/{len(holds)} runs converge to l2 by the fitted-gap verdict", rows,
                 "sam_l1.png")


def linf_trichotomy(out: Path, quick: bool) -> Claim:
    rho = 0.1
    t1 = 1e30 if quick else 1e100
    alphas = [[0.3, 0.15], [0.3, 0.05], [0.05, 0.05], [0.1, 0.3], [0.4, 0.12]]
    rows, ok = [], True
    fig = Figure(figsize=(3 * len(alphas), 6), constrained_layout=True)
    axes = fig.subplots(2, len(alphas))
    data = fs.Dataset(MU[None], [1])
    for row, L in enumerate((2, 3)):
        system = fs.derive(fs.DiagonalNet(L), "logistic", fs.SAM(rho, INF))
        for ax, a in zip(axes[row], alphas):
            pred = fs.linf_sam_prediction(MU, a, rho, L)
            # odd L: w_j = rho is semi-stable (attracting from below, repelling from above), so a
            # solver error of size atol lets w_j escape at t ~ 1/(mu_j atol): shorter horizon, tight atol
            sol = fs.solve(system, data, a, t1=t1 if L % 2 == 0 else min(t1, 1e10), atol=1e-10 if L % 2 == 0 else 1e-14)
            b = sol.beta[-1]
            lead = pred["leader"]
            # at L >= 3 the leader blows up in finite tau (t -> inf), so the other coordinates stop there:
            # a non-leading "grow" has only grown, an odd-L "collapse" has only risen toward rho^L
            checks = []
            for j, f in enumerate(pred["fate"]):
                if f == "grow":
                    checks.append(b[j] > 10 * max(a[j], rho) ** L if j == lead else b[j] > a[j] ** L)
                elif f == "stay":
                    checks.append(abs(b[j] - rho**L) <= 1e-9 * rho**L)
                elif L % 2 == 0:
                    checks.append(b[j] == 0.0)  # slid to w_j = 0 and stayed
                else:
                    checks.append(a[j] ** L < b[j] <= rho**L * (1 + 1e-9)
                                  and (lead is not None or b[j] >= 0.95 * rho**L))
            leader = int(np.argmax(b)) if b.max() > 10 * rho**L else None
            match = all(checks) and leader == lead
            ok &= match
            rows.append((f"L={L}, alpha={a}", f"predicted {pred['fate']}, limit e_{pred['leader']} ; flow beta(t1) = "
                         f"[{b[0]:.4g}, {b[1]:.4g}] [{sol.status}] -> {'match' if match else 'MISMATCH'}"))
            plot.beta_vs_log_t(sol, ax)
            ax.set_title(f"L={L} alpha={a}: {pred['fate']}", fontsize=8)
    fig.savefig(out / "sam_linf.png", dpi=90)
    return Claim("000-thm3.2", "l_inf-SAM, L >= 2, one example: alpha_j < rho collapses (beta_j -> 0 for even L, rho^L for "
                 "odd), alpha_j = rho stays, alpha_j > rho grows; limit e_j* with j* = argmax mu_j (alpha_j - rho)^(L-2), "
                 "or 0 (Thm 3.2, Cor 3.5): the limit depends on the initialisation.",
                 _setting(mu=MU.tolist(), rho=rho, depths=[2, 3], loss="logistic", t1=f"{t1:g} (L=2), 1e10 with atol 1e-14 (L=3)"),
                 "holds" if ok else "fails", "every alpha and depth matches the predicted fates and limit" if ok
                 else "some run disagrees with the prediction (see the table)", rows, "sam_linf.png")


def depth2_limits(out: Path, quick: bool) -> Claim:
    t1 = 1e30 if quick else 1e100
    data = fs.Dataset(MU[None], [1])
    refs = _refs(data)
    rows, verdicts = [], {}
    fig = Figure(figsize=(8, 3.5), constrained_layout=True)
    axes = fig.subplots(1, 2)
    for ax, (name, flow) in zip(axes, {"GD": fs.GD(), "l2-SAM": fs.SAM(0.1, 2)}.items()):
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", flow), data, 0.2, t1=t1)
        v = fs.verdict(sol, refs, "l1")
        verdicts[name] = v.holds
        rows.append((name, v.why))
        plot.margin_gaps(sol, refs, ax)
        ax.set_title(f"L=2 {name}, mu=(1,2)", fontsize=9)
    fig.savefig(out / "sam_l2_limits.png", dpi=100)
    ok = all(h is True for h in verdicts.values())
    return Claim("000-thm4.2", "L = 2: GD's limit is e_argmax mu, and l2-SAM also reaches the l1 max-margin "
                 "(= e_argmax mu for one example) (Thm 4.2).",
                 _setting(mu=MU.tolist(), rho=0.1, alpha=0.2, loss="logistic", t1=t1), verdict_word(True if ok else None),
                 "fitted normalised-margin gap to l1 decays as a power of 1/log t" if ok else "see the table", rows,
                 "sam_l2_limits.png")


def amplification_time(out: Path, quick: bool) -> Claim:
    t1 = 1e30 if quick else 1e100
    rows, ok = [], True
    fig = Figure(figsize=(10, 6.5), constrained_layout=True)
    axes = fig.subplots(2, 2)
    # alpha just above the collapse threshold of each mu (smaller alphas collapse to 0 in finite time)
    for i, (mu, alpha) in enumerate([(MU, 0.06), (np.array([1.0, 2.0, 3.0]), 0.05)]):
        data = fs.Dataset(mu[None], [1])
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2)), data, alpha, t1=t1,
                       track=("magnitude", "growth"))
        amp = fs.sequential_amplification(sol)
        ok &= amp["minor_to_major"] and amp["order"] == list(range(len(mu)))
        sw = fs.switch_times(sol)
        rows.append((f"mu={mu.tolist()}, alpha={alpha}", f"leaders {amp['order']} at log10 t = "
                     + ", ".join(f"{e['log10_t']:.6g} (tau {e['tau']:.6g})" for e in sw)))
        plot.beta_vs_log_t(sol, axes[i, 0], switch_times=[e["log10_t"] for e in sw])
        plot.shares_stacked(sol, axes[i, 1])
    fig.savefig(out / "sam_amplification.png", dpi=100)
    return Claim("000-thm4.4", "Sequential feature amplification along time: l2-SAM at L = 2 from a small uniform "
                 "alpha makes the minor coordinates lead first and the major one last (Thm 4.4).",
                 _setting(rho=0.1, alpha="0.06 (mu=(1,2)), 0.05 (mu=(1,2,3))", loss="logistic", t1=t1),
                 "holds" if ok else "fails", "leading coordinate runs 0 -> ... -> d-1 with event-located switch times"
                 if ok else "the leader order is not minor to major", rows, "sam_amplification.png")


def amplification_alpha(out: Path, quick: bool) -> Claim:
    data = fs.Dataset(MU[None], [1])
    alphas = np.geomspace(0.02, 0.6, 8 if quick else 24)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    lead = fs.leading_by_alpha(system, data, alphas, log10_t=0.5)
    alive = lead[lead >= 0]
    ok = len(alive) > 1 and np.all(np.diff(alive) >= 0) and alive[0] == 0 and alive[-1] == 1
    fig = Figure(figsize=(5, 3), constrained_layout=True)
    ax = fig.add_subplot()
    ax.step(alphas, lead, where="mid")
    ax.set_xscale("log")
    ax.set_xlabel("alpha")
    ax.set_ylabel("leading coordinate at t = 10^0.5 (-1: collapsed)")
    fig.savefig(out / "sam_alpha.png", dpi=100)
    return Claim("000-thm4.5", "Sequential feature amplification along the initialisation scale: at a fixed time, "
                 "small alpha makes the minor coordinate lead, large alpha the major one; very small alpha collapses "
                 "(Thm 4.5).", _setting(mu=MU.tolist(), rho=0.1, log10_t=0.5, alphas=f"{alphas[0]:.3g}..{alphas[-1]:.3g}"),
                 "holds" if ok else "fails", f"leader by alpha: {lead.tolist()}", [("leader", str(lead.tolist()))],
                 "sam_alpha.png")


def gaussian_depth2(out: Path, quick: bool) -> Claim:
    t1 = 1e30 if quick else 1e100
    data = _gaussian(12, 3, 1)
    refs = {**_refs(data)}
    sol = fs.solve(fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.SAM(0.05, 2)), data, 0.1, t1=t1)
    v = fs.verdict(sol, refs, "l1")
    est = fs.limit_direction(sol)
    fig = Figure(figsize=(5, 3.5), constrained_layout=True)
    plot.margin_gaps(sol, refs, fig.add_subplot())
    fig.savefig(out / "sam_gaussian.png", dpi=100)
    rows = [("verdict", v.why), ("extrapolated limit", f"{np.round(est.direction, 4).tolist()} (spread {est.spread:.2g})"),
            ("l1 max-margin", str(np.round(refs['l1'].direction / np.linalg.norm(refs['l1'].direction), 4).tolist()))]
    return Claim("000-gauss", "Multi-sample Gaussian data, L = 2 (u^2 - v^2) l2-SAM: the direction approaches the l1 "
                 "max-margin.", _setting(n=12, d=3, rho=0.05, alpha=0.1, t1=t1), verdict_word(v.holds), v.why, rows,
                 "sam_gaussian.png")


def discrete_tracks_flow(out: Path, quick: bool) -> Claim:
    data = fs.Dataset(MU[None], [1])
    model, T, rho = fs.DiagonalNet(2), 20.0, 0.05
    ref = fs.solve(fs.derive(model, "logistic", fs.SAM(rho)), data, 0.3, t1=T, rtol=1e-12, atol=1e-14)
    etas = [0.1, 0.05, 0.025] if quick else [0.2, 0.1, 0.05, 0.025, 0.0125]
    errs = []
    fig = Figure(figsize=(9, 3.5), constrained_layout=True)
    a, b = fig.subplots(1, 2)
    plot.beta_vs_log_t(ref, a, log_scale=False)
    for eta in etas:
        run = fs.iterate(fs.optimizers.sam(eta, rho), model, "logistic", data, steps=int(round(T / eta)), init=0.3,
                         records=60)
        errs.append(float(np.abs(run.beta[-1] - ref.beta[-1]).max()))
        keep = run.t > 0
        a.plot(np.log10(run.t[keep]), run.beta[keep, 1], ".", ms=2, label=f"discrete SAM eta={eta}")
    a.legend(fontsize=6)
    a.set_title("l2-SAM flow vs discrete SAM, mu=(1,2)", fontsize=9)
    b.loglog(etas, errs, "o-")
    b.set_xlabel("eta")
    b.set_ylabel("max |beta_eta(T) - beta_flow(T)|")
    fig.savefig(out / "sam_discrete.png", dpi=100)
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    ok = bool(np.all(np.abs(orders - 1) < 0.1))
    return Claim("000-discrete", "Discrete SAM with step eta tracks the l2-SAM flow, the error shrinking at order 1 in eta.",
                 _setting(model="DiagonalNet(2)", rho=rho, alpha=0.3, T=T, etas=etas), "holds" if ok else "fails",
                 f"fitted orders {np.round(orders, 3).tolist()}", [(f"eta={e}", f"error {x:.3g}") for e, x in zip(etas, errs)],
                 "sam_discrete.png")


def digits_pixels(out: Path, quick: bool) -> Claim:
    data = fs.datasets.digits(0, 1)
    t1 = 1e6 if quick else 1e30
    model = fs.DiagonalNet(2, "difference")
    sols = {name: fs.solve(fs.derive(model, "logistic", flow), data, 0.05, t1=t1, saves=40, track=())
            for name, flow in {"GD": fs.GD(), "l2-SAM": fs.SAM(0.05, 2)}.items()}
    fig = Figure(figsize=(10, 5), constrained_layout=True)
    axes = fig.subplots(2, 4)
    rows = []
    for r, (name, sol) in enumerate(sols.items()):
        idx = np.linspace(5, len(sol.log10_t) - 1, 4).astype(int)
        for ax, i in zip(axes[r], idx):
            img = sol.beta[i].reshape(8, 8)
            lim = np.abs(img).max() or 1.0
            ax.imshow(img, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_title(f"{name}, log10 t={sol.log10_t[i]:.2g}", fontsize=8)
            ax.axis("off")
        b = sol.beta[-1]
        used = int(np.sum(np.abs(b) > 0.05 * np.abs(b).max()))
        rows.append((name, f"{sol.status}; pixels above 5% of the largest |beta_j|: {used} of 64; "
                     f"min margin {sol.margins[-1].min():.3g}"))
    fig.savefig(out / "sam_digits.png", dpi=100)
    ok = all(s.status == "completed" for s in sols.values())
    return Claim("000-digits", "Real data (sklearn digits 0 vs 1, 8x8) on a depth-2 diagonal network: which pixels GD "
                 "and l2-SAM rely on over time (an image of beta). Descriptive: the figure is the result.",
                 _setting(model="u^2 - v^2", alpha=0.05, rho=0.05, t1=t1, n=data.n), "holds" if ok else "inconclusive",
                 "both flows separate the data; compare the pixel maps", rows, "sam_digits.png")


def linf_phase_diagram(out: Path, quick: bool) -> Claim:
    rho, n = 0.1, (4 if quick else 12)
    # offset grids so no point sits exactly on a predicted boundary alpha_j = rho
    a1, a2 = np.linspace(0.02, 0.4, n), np.linspace(0.023, 0.403, n)
    fig = Figure(figsize=(11, 4.5), constrained_layout=True)
    rows, agree = [], []
    for ax, depth in zip(fig.subplots(1, 2), (2, 3)):
        phase = fs.linf_sam_phase(MU, a1, a2, rho=rho, depth=depth)
        plot.phase_diagram(phase, ax)
        frac = float(phase["match"].values.mean())
        agree.append(frac)
        bad = [(float(x), float(y)) for x, y in zip(*np.nonzero(~phase["match"].values))]
        rows.append((f"L={depth}, {n}x{n} grid of (alpha_1, alpha_2) in [0.02, 0.4]^2",
                     f"flow limit = Cor 3.5 on {frac:.1%} of the points"
                     + (f"; disagreements at grid indices {bad[:4]}" if bad else "")
                     + f" ({phase.attrs['method']}, {phase.attrs['wall_s']:.1f} s)"))
    fig.savefig(out / "sam_linf_phase.png", dpi=90)
    # the prediction is asymptotic: points next to the L=3 boundary mu_1(alpha_1-rho) = mu_2(alpha_2-rho) may
    # still be undecided at the horizon, so a few disagreements there are inconclusive, not a failure
    verdict = "holds" if min(agree) == 1.0 else ("inconclusive" if min(agree) >= 0.9 else "fails")
    return Claim("000-cor3.5", "l_inf-SAM, one example mu = (1, 2): the limit over the whole (alpha_1, alpha_2) plane is "
                 "e_{j*}, j* = argmax_{alpha_j > rho} mu_j (alpha_j - rho)^(L-2), or 0 when every alpha_j < rho (Cor 3.5).",
                 _setting(mu=MU.tolist(), rho=rho, depths=[2, 3], grid=f"{n}x{n}", t1="1e30 (L=2), 1e10 atol 1e-14 (L=3)"),
                 verdict, "the phase diagram of the flow matches the predicted one" if verdict == "holds"
                 else "see the disagreeing points (crossed out in the figure)", rows, "sam_linf_phase.png")


CHECKS = [l1_limits_l2, linf_trichotomy, linf_phase_diagram, depth2_limits, amplification_time, amplification_alpha,
          gaussian_depth2, discrete_tracks_flow, digits_pixels]


def run(out: Path, quick: bool = False, progress=print) -> list[Claim]:
    return run_checks(CHECKS, out, quick, progress)
