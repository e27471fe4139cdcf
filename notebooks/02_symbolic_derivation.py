# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The symbolic derivation
#
# flowsim derives every flow with sympy, per coordinate, from (model x loss x flow). Here: the
# derived equations in LaTeX, the rescaled clock, the generated code, and the tied-vs-product
# relation (docs/theory.md: SAM on the tied network w^2 with radius rho equals SAM on the product network
# w_1 w_2 with balanced init and radius rho sqrt 2), checked numerically.

# %%
import numpy as np
from IPython.display import Math, display

import flowsim as fs

system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
for name, eq in system.equations.items():
    display(Math(f"\\text{{{name}}}:\\quad " + __import__("sympy").latex(eq)))

# %% [markdown]
# The rescaled clock: grad L = e^S G with G = O(1), the flow is dtheta/dt = -e^{S~} G(theta~);
# integrating in tau with dt = e^{-S~} dtau (or in log-time s = log(1 + t)) keeps every quantity
# O(1) at t = 1e100. The whole derivation as one `align` block:

# %%
print(system.latex())
print(system.source("field")[:600])

# %% [markdown]
# ## Tied vs product: rho_product = rho_tied * sqrt(2), at twice the time
# With beta = w^2 the tied gradient is twice the product one at balance (d beta/dw = 2w), so the
# product flow with radius rho sqrt 2 follows the tied path at half speed: tied(t) = product(2t).

# %%
data = fs.Dataset(np.array([[1.0, 2.0]]), [1])
rho, t1 = 0.08, 1e6
tied = fs.solve(fs.derive(fs.DiagonalNet(2, form="tied"), "logistic", fs.SAM(rho, 2)), data, [0.4, 0.3], t1=t1,
                rtol=1e-11, atol=1e-13)
product = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(rho * np.sqrt(2), 2)), data, [0.4, 0.3],
                   t1=2 * t1, rtol=1e-11, atol=1e-13)
rel = np.abs(tied.beta[-1] - product.beta[-1]).max() / np.abs(tied.beta[-1]).max()
print(f"|beta_tied(t1) - beta_product(2 t1)| / |beta| = {rel:.2e}")
assert rel < 1e-7, rel

# %% [markdown]
# The derived field equals autodiff: dtheta/dt = -grad L at the perturbed point (tested to 1e-12 in
# `tests/test_derive.py`); here one point by hand for GD.

# %%
import jax
import jax.numpy as jnp

gd = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
theta = np.array([[0.3, 0.2], [0.1, 0.4]])
F, logs = gd.vector_field(theta, data)
grad = jax.grad(lambda th: jnp.mean(jnp.logaddexp(0.0, -(data.z @ (th[0] * th[1])))))(jnp.asarray(theta))
print(np.exp(logs) * F, -np.asarray(grad))
assert np.allclose(np.exp(logs) * F, -np.asarray(grad), rtol=1e-12)
