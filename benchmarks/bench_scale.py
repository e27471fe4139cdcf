"""Big problems (issue 37, item 6), all in this one process.

Data: ``X`` Gaussian (n, d), labels +-1 at random, n = 10,000, d = 1,000 by default: with n > 2 d such data
are not linearly separable (Cover), which each row checks by its certificate.

a) Non-separability certified: ``Dataset.is_separable`` on these data (a fresh Dataset: nothing cached),
   against the peer a user would write, scipy's ``linprog`` (HiGHS) on the plain feasibility LP
   ``Z beta >= 1`` (infeasible: not separable; the LP gives no checked certificate), with ``--peer``: it ran
   860 s to status "unknown" at full size. Target: flowsim <= 10 s (the issue's budget); the ratio flowsim /
   peer is printed as information.
b) The depth-2 diagonal network from a balanced start (alpha = 0.1), GD, logistic loss, t1 = 1e30, defaults
   otherwise (backend "auto": diffrax:Tsit5, handing over to scipy:BDF), ``allow_nonseparable=True``: the
   product net (kept beta >= 0) against the difference net (any sign) on the same data. Both end at a critical
   point ("converged"). Target: product / difference <= 3.

One run each (at full size a run takes minutes; the machine's other load hits both sides of a ratio alike only
roughly, so the load average and each side's CPU seconds, this process's over all its threads, are printed with
the wall times).

Run from the repository root with this checkout importable (``PYTHONPATH=.``: a script's folder, not the
current one, is first on ``sys.path``).

    python benchmarks/bench_scale.py                      # both parts, 10,000 x 1,000 (about 35 min on 2 busy cores)
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


def timed(f):
    """f(), its wall seconds and this process's CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def part_a(n, d, with_peer):
    data = random_labels(n, d)
    separable, t_fs, cpu_fs = timed(lambda: data.is_separable)
    if with_peer:
        peer, t_peer, cpu_peer = timed(lambda: linprog(np.zeros(d), A_ub=-data.z, b_ub=-np.ones(n),
                                                        bounds=(None, None), method="highs"))
        answer = "infeasible" if peer.status == 2 else peer.message
        peer_cell = f"{t_peer:.2f} ({cpu_peer:.2f}), status {peer.status}: {answer} | {t_fs / t_peer:.3f} (info)"
    else:
        peer_cell = "not run (--peer) | -"
    print(f"## a) non-separability certified, {n} x {d} ({load()})")
    print("| case | flowsim s (CPU s) | peer s (CPU s): linprog HiGHS, Z beta >= 1 | ratio | target | verdict |")
    print("|---|---|---|---|---|---|")
    ok = not separable and t_fs <= 10.0
    print(f"| is_separable -> {separable} | {t_fs:.2f} ({cpu_fs:.2f}) | {peer_cell} | <= 10 s | {verdict(ok)} |\n")


def solved(form, data):
    system = fs.derive(fs.DiagonalNet(2, form), "logistic", fs.GD())
    return timed(lambda: fs.solve(system, data, 0.1, t1=1e30, allow_nonseparable=True, throw=False))


def part_b(n, d):
    data = random_labels(n, d)
    fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), random_labels(20, 5), 0.1, t1=1e30,
             allow_nonseparable=True, throw=False)  # imports and the first compile, outside the timings
    prod, t_prod, cpu_prod = solved("product", data)
    diff, t_diff, cpu_diff = solved("difference", data)
    print(f"## b) depth-2 diagonal network, balanced start 0.1, GD, t1 = 1e30, {n} x {d} ({load()})")
    print("| case | s (CPU s) | status | log10 t at the end | backend | steps | jacobians | LUs |")
    print("|---|---|---|---|---|---|---|---|")
    for name, t, cpu, sol in [("product", t_prod, cpu_prod, prod), ("difference", t_diff, cpu_diff, diff)]:
        st = sol.stats
        print(f"| {name} | {t:.1f} ({cpu:.1f}) | {sol.status} | {sol.log10_t[-1]:.4g} | {sol.config['backend']} | {st['steps']} | "
              f"{st.get('njev', '-')} | {st.get('nlu', '-')} |")
    ratio = t_prod / t_diff
    ok = ratio <= 3.0 and prod.status == "converged"
    print(f"\nproduct / difference: {ratio:.2f} (CPU {cpu_prod / cpu_diff:.2f}; target <= 3): {verdict(ok)}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=1_000)
    parser.add_argument("--part", choices=("a", "b", "both"), default="both")
    parser.add_argument("--peer", action="store_true", help="also time HiGHS on Z beta >= 1 (minutes at full size)")
    args = parser.parse_args()
    if args.part in ("a", "both"):
        part_a(args.n, args.d, args.peer)
    if args.part in ("b", "both"):
        part_b(args.n, args.d)


if __name__ == "__main__":
    main()
