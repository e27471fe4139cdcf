"""What a model can reach (issue 12), measured in one run.

1. Separability at scale: ``Dataset.is_separable`` (certificate first) against the LP alone (HiGHS,
   Z beta >= 1, as flowsim did before), on separable Gaussian data with labels from a random
   direction. The LP gets a time limit; "> limit" means it did not finish. Target: n = 10,000,
   d = 1,000 in <= 10 s.
2. The unreachable-separation data of issue 12 (20 x 10 Gaussian, product net, init 0.5): status,
   wall time, steps and end-state spread of every backend, GD and l2-SAM, t1 = 1e30 and
   log10 t1 = 1e4.

    python benchmarks/bench_reach.py [--quick]
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from scipy.optimize import linprog

import flowsim as fs

LP_LIMIT = 120.0
BACKENDS = ["diffrax:Tsit5", "diffrax:Dopri8", "scipy:RK45", "scipy:DOP853", "scipy:Radau", "scipy:BDF",
            "scipy:LSODA", "auto"]


def gaussian(n, d, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    return fs.Dataset(X, np.sign(X @ w))


def separability(sizes):
    print(f"{'n':>6} {'d':>5} | {'certificate (s)':>15} | {'LP alone (s)':>12} | agree")
    for n, d in sizes:
        data = gaussian(n, d)
        t0 = time.perf_counter()
        ours = data.is_separable
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = linprog(np.zeros(d), A_ub=-data.z, b_ub=-np.ones(n), bounds=[(None, None)] * d, method="highs",
                      options={"time_limit": LP_LIMIT})
        t_lp = time.perf_counter() - t0
        lp = "> %.0f" % LP_LIMIT if res.status == 1 else f"{t_lp:.2f}"
        agree = "n/a" if res.status == 1 else str(ours == (res.status == 0))
        target = " (target <= 10 s: %s)" % ("met" if t_ours <= 10 else "MISSED") if (n, d) == (10_000, 1_000) else ""
        print(f"{n:>6} {d:>5} | {t_ours:>15.2f} | {lp:>12} | {agree}{target}")


def backends():
    data = gaussian(20, 10)
    print(f"\n{'flow':>8} {'horizon':>14} {'backend':>14} | {'status':>10} {'wall s':>7} {'steps':>6} | max |beta - Radau|/|beta|")
    for flow in (fs.GD(), fs.SAM(0.05, 2)):
        system = fs.derive(fs.DiagonalNet(2), "logistic", flow)
        for horizon in ({"t1": 1e30}, {"log10_t1": 1e4}):
            ends = {}
            for backend in BACKENDS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", fs.ReachabilityWarning)
                    fs.solve(system, data, 0.5, backend=backend, throw=False, **horizon)  # compile
                    t0 = time.perf_counter()
                    ends[backend] = fs.solve(system, data, 0.5, backend=backend, throw=False, **horizon)
                    ends[backend].stats["bench_s"] = time.perf_counter() - t0
            ref = ends["scipy:Radau"].beta[-1]
            for backend, sol in ends.items():
                err = np.abs(sol.beta[-1] - ref).max() / np.abs(ref).max()
                print(f"{str(flow):>8} {str(horizon):>14} {backend:>14} | {sol.status:>10} {sol.stats['bench_s']:>7.2f} "
                      f"{sol.stats['steps']:>6} | {err:.1e}")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    separability([(2000, 500)] if quick else [(2000, 500), (10_000, 1_000)])
    backends()
