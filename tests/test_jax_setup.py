"""The JAX settings flowsim makes (``flowsim._configure_jax``, ``flowsim._jax``), whether jax was imported
before flowsim or not."""

import os
import subprocess
import sys

import pytest

#: records how JAX's CPU client is made (jax's own module, looked up at call time); then one solve
SOLVE = """
from jax._src.lib import xla_client
made, real = [], xla_client.make_cpu_client
xla_client.make_cpu_client = lambda *a, **k: made.append(k["asynchronous"]) or real(*a, **k)
import numpy as np, jax.numpy as jnp
sol = fs.solve(fs.derive(fs.DiagonalNet(1), "logistic", fs.GD()), fs.Dataset(np.eye(2), [1, -1]), 0.1, t1=1e3)
print(sol.beta.dtype, jnp.ones(1).dtype, made)
"""


@pytest.mark.parametrize("imports", ["import flowsim as fs, jax", "import jax, flowsim as fs"])
def test_float64_and_synchronous_cpu_dispatch(imports):
    """float64 arrays, and JAX's CPU client made synchronous: kernels run where they are called (XLA's
    asynchronous CPU dispatch overlaps nothing here and has known rare hangs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "EQX_"))}  # as a fresh process has
    done = subprocess.run([sys.executable, "-c", imports + SOLVE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["float64", "float64", "[False]"]


#: one solve whose kernel JAX caches (it compiles in over 0.5 s); prints the final beta exactly
CACHED_SOLVE = """
import numpy as np, flowsim as fs
sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), fs.Dataset(np.array([[1.0, 2.0], [0.5, -1.0]]), [1, 1]),
               0.1, t1=1e6)
print(sol.status, sol.beta[-1].tolist())
"""

#: records, for every compile-cache entry JAX reads or writes, whether a file lock was held then
LOCK_HELD = """
import pathlib, filelock
held, seen = [0], []
acquire, release = filelock.BaseFileLock.acquire, filelock.BaseFileLock.release
def acquiring(self, *a, **k):
    proxy = acquire(self, *a, **k)
    held[0] += 1
    return proxy
def releasing(self, *a, **k):
    held[0] -= 1
    return release(self, *a, **k)
filelock.BaseFileLock.acquire, filelock.BaseFileLock.release = acquiring, releasing
for name in ("read_bytes", "write_bytes"):
    def recording(self, *a, _real=getattr(pathlib.Path, name), _name=name, **k):
        if self.name.endswith("-cache"):
            seen.append((_name, held[0] > 0))
        return _real(self, *a, **k)
    setattr(pathlib.Path, name, recording)
""" + CACHED_SOLVE + """
print(sorted(set(seen)))
"""


def _fresh_env(cache):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "EQX_"))}
    return {**env, "FLOWSIM_JAX_CACHE": str(cache)}


def test_the_compile_cache_is_read_and_written_under_its_file_lock(tmp_path):
    """JAX writes a compile-cache entry in place: a process sharing the folder could read it half written.
    flowsim bounds the cache, so that JAX holds the folder's file lock around every read and write of it."""
    env = _fresh_env(tmp_path)
    for _ in range(2):  # the first process writes the entry, the second reads it
        done = subprocess.run([sys.executable, "-c", LOCK_HELD], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        seen = done.stdout.splitlines()[-1]
        assert "False" not in seen and "True" in seen, seen


@pytest.mark.slow  # two cold processes; CI's suite keeps the file-lock test
def test_two_processes_compile_into_and_load_from_one_cache_folder_at_once(tmp_path):
    """Two processes that compile the same kernel into one empty cache folder at once, then two that load it
    at once: each ends cleanly, with no cache entry read broken, and all four give the same numbers."""
    env, outputs = _fresh_env(tmp_path), []
    for _ in range(2):
        pair = [subprocess.Popen([sys.executable, "-c", "import flowsim" + CACHED_SOLVE], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
        for process in pair:
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, err
            assert "persistent compilation cache" not in err, err
            outputs.append(out)
    assert any(tmp_path.rglob("*-cache")) and outputs[0].startswith("completed")
    assert outputs == outputs[:1] * 4
