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
# # The Adam side (seed 002): per-sample vs full-batch Adam, and the fixed point
#
# On scaled-Rademacher data (every sample has equal absolute coordinates) per-sample Adam goes to
# the l2 max-margin while full-batch Adam goes to the l_inf one; on Gaussian data the limit is the
# Mahalanobis max-margin whose metric is the fixed point c* = T(c*) (`fs.adam_fixed_point`).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import flowsim as fs
from flowsim import plot

SMALL = os.environ.get("FLOWSIM_NB_SMALL") == "1"
STEPS = 20_000 if SMALL else 1_000_000
data = fs.datasets.scaled_rademacher(10, 5, seed=3)  # its l2 and l_inf max-margins differ
refs = {"l2": fs.max_margin(data, 2), "linf": fs.max_margin(data, float("inf"))}

runs = {}
for name, batch in (("per-sample Adam", "cyclic"), ("full-batch Adam", "full")):
    opt = fs.optimizers.adam(lr=0.1, b1=0.9, b2=0.99, decay=0.3, batch=batch)  # a slow decay: the limit within 1e5 steps
    runs[name] = fs.iterate(opt, fs.Linear(), "logistic", data, steps=STEPS, init=1e-3, records=60)

fig, ax = plt.subplots(figsize=(6.5, 4.2), constrained_layout=True)
for name, run in runs.items():
    later = run.steps > 0  # step 0 (the init) has no place on a log axis
    for rname, ref in refs.items():
        ratio = fs.normalised_margin(data, run.beta[later], ref.norm) / ref.margin
        ax.plot(run.steps[later], ratio, label=f"{name}: {rname} margin ratio")
ax.set(xscale="log", xlabel="step (log axis)", ylabel="normalised margin / max-margin", ylim=(0.5, 1.01),
       title="scaled Rademacher: per-sample Adam -> l2, full-batch Adam -> l_inf")
ax.legend(fontsize=7)
plt.show()

# %% [markdown]
# ## The Adam-proxy flow and the data-adaptive metric

# %%
gauss = fs.datasets.gaussian_clusters(12, 3, seed=1)
fp = fs.adam_fixed_point(gauss)
print(f"fixed point: residual {fp.residual:.1e} after {fp.iterations} iterations")
proxy = fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy(batch=1)), gauss, 1e-3, t1=1e30 if SMALL else 1e100)
l2 = fs.max_margin(gauss, 2).direction
cos = lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))  # noqa: E731
print(f"proxy flow end: cosine to the fixed-point direction {cos(proxy.beta[-1], fp.direction):.4f}, "
      f"to the l2 max-margin {cos(proxy.beta[-1], l2):.4f}")
fig, ax = plt.subplots(figsize=(6.5, 4.2), constrained_layout=True)
plot.beta_vs_log_t(proxy, ax)
plt.show()
