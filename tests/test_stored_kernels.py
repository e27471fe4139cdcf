"""Compiled solves kept on disk between processes (``flowsim.integrate.backends._stored``, issue 16)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

#: counts the kernels a process exports
COUNTING = """
    import json
    import numpy as np, jax, flowsim as fs
    exports = []
    real = jax.export.export
    def counting(*a, **k):
        exports.append(1)
        return real(*a, **k)
    jax.export.export = counting
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
"""
SCRIPT = textwrap.dedent(COUNTING + """
    out = {}
    for n in (3, 1, 3):  # a new n within one process: another module, as jit would trace anew
        X = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 0.5], [0.5, 3.0, 1.0]])[:n]
        sol = fs.solve(system, fs.Dataset(X, [1] * n), 0.1, t1=1e30, backend="diffrax:Tsit5")
        out[n] = sol.beta[-1].tolist()
    print(json.dumps({"exports": len(exports), "beta": out}))
""")
SWEEP = textwrap.dedent(COUNTING + """
    # the three chunks below start together, each on its thread
    ds = fs.sweep(system, fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1]),
                  {"alpha": [0.01, 0.05, 0.3], "rho": [0.05, 0.2]}, t1=1e30, saves=50, chunk_size=2, workers=3)
    print(json.dumps({"exports": len(exports), "chunks": int(ds.attrs["chunks"])}))
""")


def _run(cache, script=SCRIPT):
    env = {**os.environ, "FLOWSIM_JAX_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_kernels_the_first_exported(tmp_path):
    """The first process exports one kernel per argument shape (n = 3, then 1); the second exports none
    (it loads them rather than tracing diffrax) and its solves agree with the first's to the last bit."""
    first, second = _run(tmp_path), _run(tmp_path)
    assert first["exports"] == 2 and second["exports"] == 0
    assert len(list((tmp_path / "kernels").glob("*.jaxexport"))) == 2
    assert first["beta"] == second["beta"]


def test_chunks_that_arrive_together_export_their_kernel_once(tmp_path):
    """A sweep's chunks run on threads and make their first call of the one kernel together: one of them
    exports it (and compiles), the others wait and use it (without the lock each exported it)."""
    out = _run(tmp_path, SWEEP)
    assert out["chunks"] == 3 and out["exports"] == 1
    assert len(list((tmp_path / "kernels").glob("*.jaxexport"))) == 1


def test_a_changed_formula_makes_a_new_kernel_not_a_stale_one():
    """The file name digests the generated code, renumbering sympy's process-wide dummy symbols: one
    system gives one text, and another flow another."""
    import flowsim as fs
    from flowsim.field.vector_field import jax_field
    from flowsim.integrate.backends._stored import _canonical, formulas

    assert _canonical("f(_Dummy_168, _Dummy_170, _Dummy_168)") == "f(_Dummy_0, _Dummy_1, _Dummy_0)"
    l2 = formulas(jax_field(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2)), 1, 3))
    l3 = formulas(jax_field(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 3)), 1, 3))
    assert l2 != l3 and l2 == formulas(jax_field(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.3, 2)), 1, 3))


@pytest.mark.slow  # two cold processes; the export tests in CI's suite use the same kernels
def test_without_a_cache_folder_nothing_is_exported_and_the_solves_agree(tmp_path):
    """FLOWSIM_JAX_CACHE=0: plain jit, no export, no file; the same numbers as a loaded kernel's."""
    plain, stored = _run("0"), _run(tmp_path)
    assert plain["exports"] == 0 and stored["exports"] == 2
    assert plain["beta"] == stored["beta"]


def test_the_longest_unused_kernels_are_pruned(tmp_path):
    from flowsim.integrate.backends._stored import _prune

    for i in range(5):
        (tmp_path / f"{i}.jaxexport").write_bytes(b"x")
        os.utime(tmp_path / f"{i}.jaxexport", (1000 + i, 1000 + i))
    (tmp_path / "other.txt").write_bytes(b"x")
    _prune(tmp_path, keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2.jaxexport", "3.jaxexport", "4.jaxexport", "other.txt"]


RELEASING = textwrap.dedent("""
    import json
    import numpy as np, flowsim as fs
    maps = lambda: sum(1 for _ in open("/proc/self/maps"))
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.Dataset(np.array([[1.0, 2.0], [0.5, -1.0]]), [1, 1])
    solve = lambda steps: fs.solve(system, data, 0.1, t1=1e6, backend="diffrax:Tsit5", max_steps=steps).beta[-1]
    first = solve(1000)
    after_one = maps()
    for steps in range(1001, 1013):  # a step budget of its own: a kernel of its own each
        solve(steps)
    print(json.dumps({"grown": maps() - after_one, "again": (solve(1000) - first).tolist()}))
""")


@pytest.mark.slow  # a process compiling many kernels: CI's suite keeps the export and reload tests
def test_a_process_keeps_a_bounded_number_of_compiled_kernels(tmp_path):
    """Each compiled kernel holds ~450 memory mappings: a test worker that kept every kernel it compiled passed
    Linux's 65,530 and crashed inside XLA's next compile. Beyond FLOWSIM_KERNELS_KEPT the least recently used
    are released (their mappings with them), and a released kernel compiles again with the same numbers."""
    env = {**os.environ, "FLOWSIM_JAX_CACHE": str(tmp_path), "FLOWSIM_KERNELS_KEPT": "3"}
    done = subprocess.run([sys.executable, "-c", RELEASING], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["grown"] < 6 * 450, out  # 12 more kernels kept would be ~5,400 mappings more
    assert out["again"] == [0.0, 0.0], out
