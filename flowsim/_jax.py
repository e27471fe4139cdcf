"""jax as flowsim uses it: flowsim's modules import jax from here, so the settings that JAX reads from no
environment variable are made before flowsim's first computation (``flowsim._configure_jax`` sets the
others, float64 first among them, through the environment).

CPU kernels run where they are called, not dispatched asynchronously: flowsim reads every kernel's result
as soon as it returns, so asynchronous dispatch overlaps nothing, and XLA's CPU dispatcher has known rare
hangs (jax issue #25861; other projects turned it off in their CI); turning it off cost nothing measurable
in the benchmarks. (A hang of our documentation build first suspected here was a widget cell executed
headless: docs/_ext/hooks.py.) Too late where a computation has already started JAX's CPU backend in this
process.
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_cpu_enable_async_dispatch", False)

__all__ = ["jax", "jnp"]
