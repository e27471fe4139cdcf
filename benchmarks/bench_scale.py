"""Big problems (issue 37, item 6), all in this one process.

Data: ``X`` Gaussian (n, d), labels +-1 at random, n = 10,000, d = 1,000 by default: with n > 2 d such data
are not linearly separable (Cover), which each row checks by its certificate.

a) Non-separability certified: ``Dataset.is_separable`` on these data (a fresh Dataset: nothing cached),
   against the peer a user would write, scipy's ``linprog`` (HiGHS) on the plain feasibility LP
   ``Z beta >= 1`` (infeasible: not separable; the LP gives no checked certificate). Target: flowsim
   <= 10 s (the issue's budget), and the ratio flowsim / peer printed as information.
b) The depth-2 diagonal network from a balanced start (alpha = 0.1), GD, logistic loss, t1 = 1e30, defaults
   otherwise (backend "auto": diffrax:Tsit5, handing over to scipy:BDF), ``allow_nonseparable=True``: the
   product net (kept beta >= 0) against the difference net (any sign) on the same data. Both end at a critical
   point ("converged"). Target: product / difference <= 3.

One run each (at full size a run takes minutes; the machine's other load hits both sides of a ratio alike only
roughly, so the load average is printed with them).

    python benchmarks/bench_scale.py                      # both parts, 10,000 x 1,000
    python benchmarks/bench_scale.py --n 2000 --d 500     # smaller
    python benchmarks/bench_scale.py --part a             # only the certificate
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import linprog

import flowsim as fs


def random_labels(n, d, seed=0):
    rng = np.random.default_rng(seed)
    return fs.Dataset(rng.normal(size=(n, d)), rng.choice([-1.0, 1.0], n))


def load():
    return f"load average {os.getloadavg()[0]:.1f}"


def verdict(ok):
    return "met" if ok else "MISSED"


def part_a(n, d):
    data = random_labels(n, d)
    t0 = time.perf_counter()
    separable = data.is_separable
    t_fs = time.perf_counter() - t0
    z = data.z
    t0 = time.perf_counter()
    peer = linprog(np.zeros(d), A_ub=-z, b_ub=-np.ones(n), bounds=(None, None), method="highs")
    t_peer = time.perf_counter() - t0
    print(f"## a) non-separability certified, {n} x {d} ({load()})")
    print("| case | flowsim s | peer s (linprog HiGHS, Z beta >= 1) | ratio | target | verdict |")
    print("|---|---|---|---|---|---|")
    ok = not separable and peer.status == 2 and t_fs <= 10.0
    print(f"| is_separable -> {separable} | {t_fs:.2f} | {t_peer:.2f} (status {peer.status}: "
          f"{'infeasible' if peer.status == 2 else peer.message}) | {t_fs / t_peer:.2f} (info) | <= 10 s | "
          f"{verdict(ok)} |\n")


def solved(form, data):
    system = fs.derive(fs.DiagonalNet(2, form), "logistic", fs.GD())
    t0 = time.perf_counter()
    sol = fs.solve(system, data, 0.1, t1=1e30, allow_nonseparable=True, throw=False)
    return time.perf_counter() - t0, sol


def part_b(n, d):
    data = random_labels(n, d)
    fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), random_labels(20, 5), 0.1, t1=1e30,
             allow_nonseparable=True, throw=False)  # imports and the first compile, outside the timings
    t_prod, prod = solved("product", data)
    t_diff, diff = solved("difference", data)
    print(f"## b) depth-2 diagonal network, balanced start 0.1, GD, t1 = 1e30, {n} x {d} ({load()})")
    print("| case | s | status | log10 t at the end | backend | steps | jacobians | LUs |")
    print("|---|---|---|---|---|---|---|---|")
    for name, t, sol in [("product", t_prod, prod), ("difference", t_diff, diff)]:
        st = sol.stats
        print(f"| {name} | {t:.1f} | {sol.status} | {sol.log10_t[-1]:.4g} | {sol.config['backend']} | {st['steps']} | "
              f"{st.get('njev', '-')} | {st.get('nlu', '-')} |")
    ratio = t_prod / t_diff
    ok = ratio <= 3.0 and prod.status == "converged"
    print(f"\nproduct / difference: {ratio:.2f} (target <= 3): {verdict(ok)}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=1_000)
    parser.add_argument("--part", choices=("a", "b", "both"), default="both")
    args = parser.parse_args()
    if args.part in ("a", "both"):
        part_a(args.n, args.d)
    if args.part in ("b", "both"):
        part_b(args.n, args.d)


if __name__ == "__main__":
    main()
