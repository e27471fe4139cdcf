"""A warm start that is warm (issue 16, item 3): the time to a process's first solve, in a fresh
process with an empty compile cache and in a second fresh process reusing that cache.

Target: second / first <= 0.25. Each process imports flowsim, derives the system (not timed) and
times its first ``fs.solve`` (compile or cache load + tracing + the solve), then a second solve (the
steady state). Run as ``python benchmarks/bench_warm_start.py``; set FLOWSIM_BENCH_KEEP_CACHE=1 to
keep the cache folder it makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

TARGET = 0.25

CHILD = textwrap.dedent("""
    import json, time
    import numpy as np
    import flowsim as fs
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 1.5, 10)
    X = rng.normal(size=(20, 10))
    y = np.sign(X @ w)
    data = fs.Dataset(X + 0.3 * y[:, None] * w / np.linalg.norm(w), y)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        sol = fs.solve(system, data, 0.1, t1=1e30, backend="diffrax:Tsit5")
        times.append(time.perf_counter() - t0)
    print(json.dumps({"first": times[0], "steady": times[1], "status": sol.status}))
""")


def child(cache):
    env = dict(os.environ, FLOWSIM_JAX_CACHE=cache)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    import jax

    print(f"device: {jax.devices()}")
    with tempfile.TemporaryDirectory(prefix="flowsim-cache-") as cache:
        cold, warm = child(cache), child(cache)
        entries = len(os.listdir(cache))
        if os.environ.get("FLOWSIM_BENCH_KEEP_CACHE"):
            print(f"cache kept in {cache}")
    ratio = warm["first"] / cold["first"]
    print(f"first solve, empty cache:  {cold['first']:.2f} s (steady state {cold['steady'] * 1e3:.1f} ms)")
    print(f"first solve, warm cache:   {warm['first']:.2f} s (steady state {warm['steady'] * 1e3:.1f} ms); "
          f"{entries} cache entries")
    print(f"warm / cold = {ratio:.2f} (target <= {TARGET}): {'met' if ratio <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
