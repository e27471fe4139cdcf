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
# # Your own model, loss and flow
#
# Three expressions, and flowsim derives the rest (docs/theory.md 10): a model whose second layer is
# squared, beta = w1 w2^2; a loss that is a sum of two exponentials; and l2-SAM rebuilt from its parts
# with the evaluation point written by hand. Then: the derivation, the check against autodiff, a
# solve to t = 1e100, and a comparison with the built-ins.

# %%
import os
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

import flowsim as fs
from flowsim import plot

SMALL = os.environ.get("FLOWSIM_NB_SMALL") == "1"
T1 = 1e30 if SMALL else 1e100

m = sp.Symbol("m")
loss = fs.Loss("two exponentials", sp.exp(-m) + sp.exp(-2 * m))
model = fs.Parametrization("w1 w2^2", 2, lambda a, b: a * b**2)
print(loss.log_q, "| tail rate", loss.tail_rate)
print(model.beta, "| reachable signs from a positive init under GD:",
      fs.reachable_signs(model, np.full((2, 3), 0.3), fs.GD()))

# %% [markdown]
# ## A flow from parts
# The evaluation point of l2-SAM is theta + rho g/||g||_2. Written as a part: a frozen dataclass with a
# `perturbation` rule in the symbols of one entry (`s.G` its gradient direction, `s.N` the dual norm of
# all of them); `norm = 2` asks for N = ||G||_2.

# %%
@dataclass(frozen=True)
class MyAscent(fs.points.EvaluationPoint):
    norm = 2.0

    def perturbation(self, s):
        return s.G / s.N


mine = fs.Flow(MyAscent(), fs.directions.Gradient(), rho=0.1, name="my SAM", shows=("rho",))
system = fs.derive(model, loss, mine)
print(system.latex())
print("largest relative error against autodiff:", system.check())

# %% [markdown]
# ## The same flow as the built-in, to 1e-12
# On the built-in product network the hand-written flow and `fs.SAM(0.1, 2)` are two separate
# derivations; their solutions agree to rounding.

# %%
data = fs.Dataset(np.array([[1.0, 0.4, -0.3], [0.2, 1.0, 0.5]]), [1, 1])
ours = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", mine), data, 0.2, t1=T1, rtol=1e-12, atol=1e-14)
builtin = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2)), data, 0.2, t1=T1, rtol=1e-12, atol=1e-14)
gap = np.abs(ours.beta[-1] - builtin.beta[-1]).max() / np.abs(builtin.beta[-1]).max()
print(f"relative gap at t = {T1:g}: {gap:.1e}")
assert gap < 1e-10, gap

# %% [markdown]
# ## Solve the new system to t = 1e100 and compare with the product network
# w1 w2^2 is homogeneous of degree 3, like a depth-3 net, so its direction should head to a KKT point of
# min ||beta||_(2/3); the depth-2 product heads to the l1 max-margin (on these two samples the two
# references coincide, and both runs are within 2e-3 of them at t = 1e100).

# %%
sol = fs.solve(system, data, 0.3, t1=T1)
product = fs.solve(fs.derive(fs.DiagonalNet(2), loss, fs.SAM(0.1, 2)), data, 0.3, t1=T1)
refs = {"l1": fs.max_margin(data, 1).direction, "l2": fs.max_margin(data, 2).direction,
        "KKT 2/3": fs.kkt_max_margin(data, depth=3).direction}
for name, s in (("w1 w2^2", sol), ("product w1 w2", product)):
    end = s.direction[-1]
    print(name, s.status, {k: round(float(np.linalg.norm(end - v / np.linalg.norm(v))), 4) for k, v in refs.items()})

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
plot.beta_vs_log_t(sol, axes[0])
axes[0].set_title("beta = w1 w2^2, two-exponential loss, my SAM")
plot.beta_vs_log_t(product, axes[1])
axes[1].set_title("beta = w1 w2 (built-in), same loss, SAM(0.1, 2)")
for ax in axes:
    ax.legend(fontsize=8)
fig.tight_layout()
