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
# # Regression: from kernel to rich, and saddle to saddle
#
# Gradient flow on the square loss of the difference net beta = u^2 - v^2 from u = v = alpha, on an
# underdetermined Gaussian problem (5 samples, 12 features). Where it ends depends on alpha: Woodworth et al.
# (COLT 2020) give the limit in closed form, the interpolator minimising Q_alpha (`fs.implicit_regularizer_limit`,
# solved without running any flow), which moves from the minimum-l2 interpolator at large alpha (the kernel regime)
# to the minimum-l1 one at small alpha (the rich regime). How it gets there at small alpha is Pesme and Flammarion's
# (NeurIPS 2023) saddle-to-saddle path (`fs.saddle_to_saddle`): in the rescaled time t / log(1/alpha) the flow jumps
# between plateaus, coordinate by coordinate. docs/theory.md 11 and 12 have the formulas.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import linprog

import flowsim as fs

SMALL = os.environ.get("FLOWSIM_NB_SMALL") == "1"
rng = np.random.default_rng(0)
X, y = rng.standard_normal((5, 12)), rng.standard_normal(5)
data = fs.Dataset(X, y)  # real targets: the task is inferred as regression
n, d = X.shape

min_l2 = np.linalg.pinv(X) @ y
lp = linprog(np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None), method="highs")
min_l1 = lp.x[:d] - lp.x[d:]  # argmin ||beta||_1 subject to X beta = y, as a linear program
print("min-l2 interpolator:", np.round(min_l2, 3))
print("min-l1 interpolator:", np.round(min_l1, 3), f"({np.count_nonzero(np.abs(min_l1) > 1e-9)} nonzero)")

# %% [markdown]
# ## The flow's limit against alpha
#
# Each flow runs until it stops at an interpolating global minimum (status `converged`); its end is compared
# with the Q_alpha interpolator at depth 2 and 3 (u^3 - v^3 from alpha: the same idea, a different Q).

# %%
alphas = np.geomspace(1e-2, 10, 4) if SMALL else np.geomspace(1e-3, 10, 9)
ends = {}
for depth in (2, 3):
    system = fs.derive(fs.DiagonalNet(depth, "difference"), "square", fs.GD())
    for alpha in alphas[alphas >= 1e-2] if depth == 3 else alphas:  # depth 3: the limit resolves to alpha ~ 1e-4
        sol = fs.solve(system, data, alpha, t1=1e8, rtol=1e-10)
        ends[depth, alpha] = sol.beta[-1]
        error = np.abs(sol.beta[-1] - fs.implicit_regularizer_limit(X, y, alpha, depth)).max()
        print(f"depth {depth}, alpha {alpha:8.3g}: {sol.status}, |flow - Q_alpha limit| = {error:.1e}")


def relative(beta, reference):
    return np.linalg.norm(beta - reference) / np.linalg.norm(reference)


grid = np.geomspace(alphas[0], alphas[-1], 60)
fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), constrained_layout=True)
for depth, style in ((2, "-"), (3, "--")):
    shown = grid[grid >= 1e-2] if depth == 3 else grid
    limits = [fs.implicit_regularizer_limit(X, y, a, depth) for a in shown]
    run = [a for (k, a) in ends if k == depth]
    for colour, (name, interpolator) in enumerate((("min-l2", min_l2), ("min-l1", min_l1))):
        axes[0].plot(shown, [relative(b, interpolator) for b in limits], style, color=f"C{colour}",
                     label=f"depth {depth}: Q_alpha limit to the {name}")
        axes[0].plot(run, [relative(ends[depth, a], interpolator) for a in run], "o", color=f"C{colour}", mfc="none")
axes[0].set(xscale="log", yscale="log", xlabel="alpha", ylabel="relative distance",
            title="kernel (large alpha) to rich (small alpha); circles: the flow's ends")
axes[0].legend(fontsize=8)
limits = np.array([fs.implicit_regularizer_limit(X, y, a, 2) for a in grid])
support = np.flatnonzero(np.abs(min_l1) > 1e-9)
for colour, j in enumerate(support):
    axes[1].plot(grid, limits[:, j], color=f"C{colour}", label=f"beta_{j + 1}")
    axes[1].plot(alphas, [ends[2, a][j] for a in alphas], "o", color=f"C{colour}", mfc="none")
others = np.setdiff1d(np.arange(d), support)
axes[1].plot(grid, limits[:, others], color="0.75", lw=0.8)
axes[1].set(xscale="log", xlabel="alpha", ylabel="beta_j at the limit",
            title="depth 2: coordinates of the limit (grey: off the min-l1 support)")
axes[1].legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Saddle to saddle at small alpha
#
# In the rescaled time t~ = t / log(1/alpha) the flow from a small alpha stays near 0, then jumps from plateau to
# plateau: each plateau minimises the loss on the coordinates whose s_i = -int grad L dt / log(1/alpha) has
# reached +-1/2 (with their signs), and the last one is the min-l1 interpolator. The path is computed by Pesme and
# Flammarion's algorithm alone; the flows are run at two alphas and drawn on it.

# %%
path = fs.saddle_to_saddle(X, y)
print(path)
print("last plateau = min-l1 interpolator:", np.allclose(path.plateaus[-1], min_l1, atol=1e-9))

small_alphas = (1e-4, 1e-16) if SMALL else (1e-4, 1e-16, 1e-64)
system = fs.derive(fs.DiagonalNet(2, "difference"), "square", fs.GD())
rescaled = np.linspace(0, 1.5 * path.jump_times[-1], 1501)[1:]
fig, axes = plt.subplots(1, len(small_alphas), figsize=(6.5 * len(small_alphas), 4), constrained_layout=True)
for ax, alpha in zip(axes, small_alphas):
    scale = np.log(1 / alpha)
    sol = fs.solve(system, data, alpha, t1=rescaled[-1] * scale, save_at_t=rescaled * scale)
    fs.plot_saddle_to_saddle(path, ax, flow_times=sol.t / scale, flow_beta=sol.beta, flow_label=f"flow, alpha {alpha:g}")
    ax.set_title(f"alpha = {alpha:g}: flow (solid), path (dashed)", fontsize=10)
plt.show()

# %% [markdown]
# As alpha falls the flow's jumps move onto the path's: their distance shrinks like 1/log(1/alpha), halving each
# time log(1/alpha) doubles, and the plateaus are met ever more closely. `flowsim reproduce classics` checks both
# results (and Soudry's and Gunasekar's max-margin limits) with negative controls (docs/reproduction.md).
