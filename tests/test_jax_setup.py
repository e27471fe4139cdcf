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
