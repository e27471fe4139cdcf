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
# # Phase portraits of the two-coordinate flows (mu = (1, 2))
#
# One example mu = (1, 2), label +1, the depth-2 diagonal network with tied layers
# (beta_j = w_j^2, the balanced case of seed 000). We draw streamlines of the **rescaled** field
# F = dw/dtau (`system.vector_field`), which stays O(1) however small the loss, for GD, l2-SAM and
# l_inf-SAM; the crossover curve N = rho (mu_1 + mu_2)/sqrt(2) of docs/theory.md 5b; the sliding lines
# w_j = 0 of l_inf-SAM; and trajectories from several inits, integrated to t = 1e30 by `fs.solve`.
# Run with `FLOWSIM_NB_SMALL=1` for a coarse, fast version (what the tests do).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import flowsim as fs
from flowsim import plot

SMALL = os.environ.get("FLOWSIM_NB_SMALL") == "1"
N_GRID = 12 if SMALL else 40
T1 = 1e10 if SMALL else 1e30
RHO = 0.1
MU = np.array([1.0, 2.0])
data = fs.Dataset(MU[None], [1])
model = fs.DiagonalNet(2, form="tied")
flows = {"GD": fs.GD(), "l2-SAM": fs.SAM(RHO, 2), "l_inf-SAM": fs.SAM(RHO, float("inf"))}
systems = {name: fs.derive(model, "logistic", flow) for name, flow in flows.items()}
inits = [[0.3, 0.05], [0.05, 0.3], [0.2, 0.2], [0.08, 0.25], [0.35, 0.15]]


# %%
def field_grid(system, lo, hi, n, log=False):
    """F on an n x n grid of (w_1, w_2) (log-spaced if log), and the gradient norm N = ||G||_2."""
    axis = np.geomspace(lo, hi, n) if log else np.linspace(lo, hi, n)
    W1, W2 = np.meshgrid(axis, axis)
    F = np.zeros((2, n, n))
    for i in range(n):
        for j in range(n):
            F[:, i, j] = system.vector_field([W1[i, j], W2[i, j]], data)[0][0]
    return axis, W1, W2, F


fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), constrained_layout=True)
for ax, (name, system) in zip(axes, systems.items()):
    axis, W1, W2, F = field_grid(system, 1e-3, 0.45, N_GRID)
    ax.streamplot(W1, W2, F[0], F[1], density=0.9, color=np.hypot(F[0], F[1]), cmap="Greys", linewidth=0.8)
    # crossover curve: N = ||G||_2 = rho (mu_1 + mu_2)/sqrt(2), with G from the GD field at the point
    N = np.hypot(*field_grid(systems["GD"], 1e-3, 0.45, N_GRID)[3])
    ax.contour(W1, W2, N, levels=[RHO * MU.sum() / np.sqrt(2)], colors="tab:red", linewidths=1.5)
    if name == "l_inf-SAM":
        ax.axhline(0, color="tab:green", lw=3, alpha=0.6)
        ax.axvline(0, color="tab:green", lw=3, alpha=0.6, label="sliding lines w_j = 0")
    for a in inits:
        sol = fs.solve(system, data, a, t1=T1, saves=200, throw=False)
        w = sol.params[:, 0, :]
        keep = (np.abs(w) < 0.45).all(axis=1)
        ax.plot(w[keep, 0], w[keep, 1], lw=1.8)
        ax.plot(*a, "ko", ms=4)
    ax.plot([], [], color="tab:red", label="N = rho (mu_1 + mu_2)/sqrt 2")
    ax.set(xlim=(-0.01, 0.45), ylim=(-0.01, 0.45), xlabel="w_1", ylabel="w_2", title=f"{name}, rho={RHO}")
    ax.legend(fontsize=7, loc="upper right")
plt.show()

# %% [markdown]
# In log coordinates (log w_1, log w_2) the field is d log w_j / dtau = F_j / w_j: straight
# streamlines are exponential growth at fixed relative rates; l2-SAM first bends toward the minor
# coordinate w_1 (sequential feature amplification) before the major one takes over.

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), constrained_layout=True)
for ax, (name, system) in zip(axes, systems.items()):
    axis, W1, W2, F = field_grid(system, 1e-3, 10.0, N_GRID, log=True)
    L1, L2 = np.log10(W1), np.log10(W2)
    ax.streamplot(L1, L2, F[0] / W1, F[1] / W2, density=0.9, color="0.4", linewidth=0.7)
    for a in inits:
        sol = fs.solve(system, data, a, t1=T1, saves=200, throw=False)
        w = np.abs(sol.params[:, 0, :])
        keep = (w > 1e-3).all(axis=1) & (w < 10).all(axis=1)
        ax.plot(np.log10(w[keep, 0]), np.log10(w[keep, 1]), lw=1.8)
    ax.set(xlabel="log10 w_1", ylabel="log10 w_2", title=f"{name}: log coordinates")
plt.show()

# %% [markdown]
# ## Interactive: trajectories as rho changes
# With ipywidgets a slider re-solves l2-SAM for a new rho (no recompile: rho is a run-time
# argument). Without ipywidgets, a static panel of three radii is drawn instead.

# %%
def trajectories(rho, init=(0.3, 0.05)):
    system = fs.derive(model, "logistic", fs.SAM(rho, 2))
    fig, ax = plt.subplots(figsize=(5, 4))
    plot.beta_vs_log_t(fs.solve(system, data, list(init), t1=T1, saves=200, throw=False), ax)
    ax.set_title(f"l2-SAM rho={rho:.3f}, init {init}", fontsize=9)
    plt.show()


try:
    import ipywidgets

    ipywidgets.interact(trajectories, rho=ipywidgets.FloatSlider(value=RHO, min=0.0, max=0.3, step=0.01),
                        init=ipywidgets.fixed((0.3, 0.05)))
except ImportError:
    for rho in (0.0, 0.1, 0.2):
        trajectories(rho)
