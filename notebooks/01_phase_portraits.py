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
# l_inf-SAM; the crossover curve, where both coordinates grow at the same relative rate
# (d log w_1/dtau = d log w_2/dtau: on one side the minor coordinate w_1 outgrows the major one, on the
# other the major one wins); the sliding lines w_j = 0 of l_inf-SAM; and trajectories from several
# inits, integrated to t = 1e30 by `fs.solve`.
#
# For l2-SAM on this tied net the crossover has a closed form. With G_j = -2 mu_j w_j (the gradient
# direction for one sample) and N = ||G||_2 = 2 ||mu * w||_2, the evaluation point is
# w~_j = w_j (1 - 2 rho mu_j / N) and d log w_j/dtau = 2 mu_j (1 - 2 rho mu_j / N), so the rates of
# coordinates j and k are equal where N = 2 rho (mu_j + mu_k), i.e. ||mu * w||_2 = rho (mu_j + mu_k). (The
# balanced product network of docs/theory.md 5b, with twice as many gradient entries and radius rho, crosses
# over where ||mu * w||_2 = rho (mu_j + mu_k)/sqrt 2, which is that section's N.) The curve drawn below is
# found from the field itself, and the closed form is checked against it.
# Run with `FLOWSIM_NB_SMALL=1` for a coarse, fast version (what the tests do).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import flowsim as fs

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


# %% [markdown]
# The field is evaluated on the whole grid at once: `system.field_on(data)` is the single-point field
# (the one the JAX backend integrates) mapped over many points and compiled once; rho is an argument,
# so the slider below needs no recompile. It is checked against `system.vector_field` point by point.

# %%
import functools


@functools.cache
def field_on(system):
    """(points (M, 2) of (w_1, w_2), rho) -> F (M, 2): the rescaled field at every point, both layers equal."""
    at_points = system.field_on(data)
    return lambda w, rho: at_points(np.repeat(np.asarray(w)[:, None, :], system.n_layers, axis=1), rho)[:, 0]


def field_grid(system, lo, hi, n, log=False, rho=None):
    """F on an n x n grid of (w_1, w_2) (log-spaced if log), evaluated in one vectorised call."""
    axis = np.geomspace(lo, hi, n) if log else np.linspace(lo, hi, n)
    W1, W2 = np.meshgrid(axis, axis)
    rho = float(system.flow.rho) if rho is None else float(rho)
    F = field_on(system)(np.stack([W1.ravel(), W2.ravel()], axis=1), rho)
    return axis, W1, W2, F.T.reshape(2, n, n)


for name, system in systems.items():  # the vectorised field is the point-by-point one
    _, W1, W2, F = field_grid(system, 1e-3, 0.45, 5)
    for i, j in ((0, 0), (1, 3), (4, 2), (3, 4)):
        np.testing.assert_allclose(F[:, i, j], system.vector_field([W1[i, j], W2[i, j]], data)[0][0], rtol=1e-9, atol=1e-12)

def rate_gap(system, W1, W2, F):
    """d log w_1/dtau - d log w_2/dtau: the crossover curve is its zero level."""
    return F[0] / W1 - F[1] / W2


# the l2-SAM crossover lies on ||mu * w||_2 = rho (mu_1 + mu_2): the rate gap changes sign across it
angles = np.linspace(0.1, 1.4, 7)
on_curve = RHO * MU.sum() * np.stack([np.cos(angles) / MU[0], np.sin(angles) / MU[1]], axis=1)
for scale, sign in ((0.99, 1.0), (1.01, -1.0)):  # inside, the minor coordinate w_1 grows faster
    w = scale * on_curve
    F = field_on(systems["l2-SAM"])(w, RHO).T
    assert np.all(sign * rate_gap(systems["l2-SAM"], w[:, 0], w[:, 1], F) > 0)


def solver_system(name, rho):
    """The system to integrate trajectories with: the flow ``name`` at radius rho (GD at rho = 0)."""
    if rho == flows[name].rho:
        return systems[name]
    return systems["GD"] if rho == 0 else fs.derive(model, "logistic", fs.SAM(rho, flows[name].norm))


def portrait(ax, name, system, rho=None, n=N_GRID, trajectories=True):
    """Streamlines of F (shaded by |F|), the crossover curve (equal relative growth rates) and trajectories."""
    rho = float(system.flow.rho) if rho is None else float(rho)
    _, W1, W2, F = field_grid(system, 1e-3, 0.45, n, rho=rho)
    speed = np.hypot(F[0], F[1])
    strm = ax.streamplot(W1, W2, F[0], F[1], density=0.9, color=speed, cmap="Greys", linewidth=0.8)
    ax.figure.colorbar(strm.lines, ax=ax, label="|F| = |dw/dtau|")
    if rho > 0:  # the crossover: d log w_1/dtau = d log w_2/dtau, from this panel's own field
        ax.contour(W1, W2, rate_gap(system, W1, W2, F), levels=[0.0], colors="k", linestyles="--", linewidths=1.5)
        ax.plot([], [], "k--", label="equal growth rates of w_1, w_2")
    if name == "l_inf-SAM":
        ax.axhline(0, color="tab:green", lw=3, alpha=0.6)
        ax.axvline(0, color="tab:green", lw=3, alpha=0.6, label="sliding lines w_j = 0")
    if trajectories:
        flow_system = solver_system(name, rho)
        for k, a in enumerate(inits):
            sol = fs.solve(flow_system, data, a, t1=T1, saves=200, throw=False)
            w = sol.params[:, 0, :]
            keep = (np.abs(w) < 0.45).all(axis=1)
            line, = ax.plot(w[keep, 0], w[keep, 1], lw=1.8, color=f"C{k}", label=f"from ({a[0]:g}, {a[1]:g})")
            ax.plot(*a, "o", color=line.get_color(), ms=4)
    ax.set(xlim=(-0.01, 0.45), ylim=(-0.01, 0.45), xlabel="w_1", ylabel="w_2",
           title=f"{name}, rho={rho:g}: field F = dw/dtau, trajectories to t = {T1:.0e}")
    ax.legend(fontsize=7, loc="upper right")
    return ax


fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), constrained_layout=True)
for ax, (name, system) in zip(axes, systems.items()):
    portrait(ax, name, system)
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
    ax.set(xlabel="log10 w_1", ylabel="log10 w_2", title=f"{name}: log coordinates, d log w_j / dtau = F_j / w_j")
plt.show()

# %% [markdown]
# ## Interactive: the l2-SAM portrait as rho changes
# With ipywidgets a slider redraws the l2-SAM phase portrait (field, crossover curve, trajectories)
# for a new rho: the field is one vectorised call with rho as an argument (no recompile), the
# trajectories are re-solved. Without ipywidgets (or in a static rendering) the same portrait is drawn
# for three radii below.

# %%
def portrait_at(rho):
    _, ax = plt.subplots(figsize=(6, 4.8), constrained_layout=True)
    portrait(ax, "l2-SAM", systems["l2-SAM"], rho=rho, trajectories=not SMALL or rho == RHO)
    plt.show()


try:
    import ipywidgets
except ImportError:
    ipywidgets = None
# headless runs (the tests, the documentation's build: FLOWSIM_NB_STATIC=1) draw what the slider draws first: a
# widget's messages have no frontend there, and executing this interact headless hung nbclient (idle kernel)
if ipywidgets is not None and not SMALL and os.environ.get("FLOWSIM_NB_STATIC") != "1":
    ipywidgets.interact(portrait_at, rho=ipywidgets.FloatSlider(value=RHO, min=0.0, max=0.3, step=0.01))
else:
    portrait_at(RHO)

# %%
# the static fallback: the portrait at three radii (rho = 0 is GD)
_, axes = plt.subplots(1, 3, figsize=(16, 4.5), constrained_layout=True)
for ax, rho in zip(axes, (0.0, 0.1, 0.2)):
    portrait(ax, "l2-SAM", systems["l2-SAM"], rho=rho)
plt.show()
