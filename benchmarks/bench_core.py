"""Core benchmark (issue 2). Everything is measured in this one run; targets are ratios or budgets.

1. flowsim vs a hand-written numpy discrete GD loop (lr 0.1) on the linear model, logistic loss,
   n = 20, d = 10, to t = 1e6 (1e7 steps: the loop is timed on 1e6 steps and extrapolated, said so).
   Accuracy: both against a tight flow reference (scipy DOP853, rtol 1e-13).
2. flowsim to t = 1e30 and 1e100 at rtol 1e-8 for n = 20, d = 10 and n = d = 100, GD and l2-SAM on
   the depth-2 diagonal network: compile time, wall time after compile, steps, and relative error in
   beta against the tight reference.

    python benchmarks/bench_core.py
"""

from __future__ import annotations

import time

import numpy as np

import flowsim as fs


def data_set(n, d, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 1.5, d)
    X = rng.normal(size=(n, d))
    y = np.sign(X @ w)
    return fs.Dataset(X + 0.3 * y[:, None] * w / np.linalg.norm(w), y)


def timed(f, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def hand_gd(Z, w0, lr, steps):
    w = w0.copy()
    for _ in range(steps):
        m = Z @ w
        w += lr * Z.T @ (0.5 * (1 - np.tanh(0.5 * m))) / len(Z)  # sigmoid(-m)
    return w


def main():
    rows = []
    data = data_set(20, 10)
    lin = fs.derive(fs.Linear(), "logistic", fs.GD())
    ref = fs.solve(lin, data, 0.0 + 1e-3, t1=1e6, backend="scipy:DOP853", rtol=1e-13, atol=1e-15, saves=2).beta[-1]
    w0 = np.full(10, 1e-3)
    loop_steps = 10**6
    t_loop, w_loop = timed(lambda: hand_gd(data.z, w0, 0.1, loop_steps), repeat=1)
    t_loop_full = t_loop * 10  # 1e7 steps of lr 0.1 reach t = 1e6
    w_loop_t1e5 = w_loop  # 1e6 steps = t 1e5: its accuracy there
    ref_1e5 = fs.solve(lin, data, 1e-3, t1=1e5, backend="scipy:DOP853", rtol=1e-13, atol=1e-15, saves=2).beta[-1]
    err_loop = np.abs(w_loop_t1e5 - ref_1e5).max() / np.abs(ref_1e5).max()
    fs.solve(lin, data, 1e-3, t1=1e6)  # compile
    t_fs, sol = timed(lambda: fs.solve(lin, data, 1e-3, t1=1e6, rtol=1e-8))
    err_fs = np.abs(sol.beta[-1] - ref).max() / np.abs(ref).max()
    print("## flowsim vs hand-written numpy GD (lr 0.1), linear model, n=20 d=10, t = 1e6")
    print(f"hand loop: {t_loop:.2f} s for 1e6 steps -> {t_loop_full:.1f} s extrapolated for 1e7 steps (t = 1e6); "
          f"its relative error at t = 1e5 (discretisation, O(lr)): {err_loop:.2e}")
    print(f"flowsim:   {t_fs * 1e3:.2f} ms, {sol.stats['steps']} steps, relative error at t = 1e6: {err_fs:.2e}")
    print(f"speed-up at t = 1e6: {t_loop_full / t_fs:,.0f}x (target >= 10,000x), flowsim also {err_loop / max(err_fs, 1e-16):,.0f}x more accurate\n")

    print("## flowsim, depth-2 diagonal network, logistic loss, rtol 1e-8, atol 1e-10 (diffrax:Tsit5 with unrolled stages and the PI controller, log-time clock; the defaults)")
    print("| n | d | flow | t1 | compile s (target 3) | wall ms | target ms (t1 = 1e100) | steps | rel. error of beta |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, d in [(20, 10), (100, 100)]:
        data = data_set(n, d, seed=1)
        for flow in [fs.GD(), fs.SAM(0.02, 2)]:
            system = fs.derive(fs.DiagonalNet(2), "logistic", flow)
            t0 = time.perf_counter()
            fs.solve(system, data, 0.1, t1=1e30, throw=False)
            first = time.perf_counter() - t0
            for t1 in [1e30, 1e100]:
                wall, sol = timed(lambda: fs.solve(system, data, 0.1, t1=t1, throw=False))
                if t1 == 1e30:
                    compile_s = first - wall
                refb = fs.solve(system, data, 0.1, t1=t1, backend="scipy:DOP853", rtol=1e-12, atol=1e-14,
                                saves=2, max_steps=10**6).beta[-1]
                err = np.abs(sol.beta[-1] - refb).max() / np.abs(refb).max()
                target = (10 if n == 20 else 50) if t1 == 1e100 else None
                verdict = "" if target is None else f"{target} ({'met' if wall * 1e3 <= target else 'MISSED'})"
                print(f"| {n} | {d} | {flow} | {t1:g} | {compile_s:.2f} | {wall * 1e3:.1f} | {verdict} | {sol.stats['steps']} | {err:.1e} |")
                rows.append((n, d, str(flow), t1, compile_s, wall, sol.stats["steps"], err))
    implicit_path()
    # one compile serves every horizon, alpha and rho
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05, 2))
    data = data_set(20, 10, seed=1)
    t0 = time.perf_counter()
    fs.solve(system, data, 0.3, t1=1e50, throw=False)
    print(f"\nnew rho, alpha and horizon on a compiled structure: {time.perf_counter() - t0:.3f} s (no recompile)")


def implicit_path():
    """backend="auto" beyond log10 t1 = 1000: scipy BDF with the symbolic Jacobian, and what the one-thread
    BLAS limit inside the scipy backend is worth (baseline: the limit switched off, same run)."""
    from flowsim._blas import ONE_BLAS_THREAD

    print("\n## beyond float range: backend auto = scipy:BDF in the tau clock with the symbolic Jacobian, depth-2 "
          "l2-SAM (rho 0.02), rtol 1e-8")
    print("| n | d | log10 t1 | status | wall ms | steps | Jacobians | wall ms without the BLAS thread limit | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.02, 2))
    for n, d in [(20, 10), (100, 100)]:
        data = data_set(n, d, seed=1)
        for L in [1e4, 1e6]:
            wall, sol = timed(lambda: fs.solve(system, data, 0.1, log10_t1=L, throw=False), repeat=2)
            enter, leave = ONE_BLAS_THREAD.enter, ONE_BLAS_THREAD.leave
            ONE_BLAS_THREAD.enter = ONE_BLAS_THREAD.leave = lambda: None  # the limit switched off
            try:
                base, _ = timed(lambda: fs.solve(system, data, 0.1, log10_t1=L, throw=False), repeat=2)
            finally:
                ONE_BLAS_THREAD.enter, ONE_BLAS_THREAD.leave = enter, leave
            print(f"| {n} | {d} | {L:g} | {sol.status} | {wall * 1e3:.0f} | {sol.stats['steps']} | {sol.stats['njev']} | {base * 1e3:.0f} | "
                  f"{base / wall:.1f}x |")


if __name__ == "__main__":
    main()
