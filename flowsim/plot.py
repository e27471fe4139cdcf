"""Plots. Each takes an ``ax`` (or makes a figure of its own) and returns it; none touches global
matplotlib state."""

from __future__ import annotations

import numpy as np


def _axes(ax):
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(6, 4), constrained_layout=True).add_subplot()
    return ax


def beta_vs_log_t(sol, ax=None, *, log_scale=True, label_prefix="", switch_times=None, **line_kw):
    """beta_j against log10 t, one line per coordinate (|beta_j| on a log axis if ``log_scale``);
    optional vertical lines at ``switch_times`` (values of log10 t)."""
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    for j in range(sol.beta.shape[1]):
        y = np.abs(sol.beta[keep, j]) if log_scale else sol.beta[keep, j]
        ax.plot(sol.log10_t[keep], y, label=f"{label_prefix}beta_{j + 1}", **line_kw)
    for x in switch_times or ():
        ax.axvline(x, color="0.5", lw=0.8, ls=":")
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel("log10 t")
    ax.set_ylabel("|beta_j|" if log_scale else "beta_j")
    ax.set_title(f"{sol.system.flow} on {sol.system.model} [{sol.status}]", fontsize=9)
    ax.legend(fontsize=7)
    return ax


def loss_vs_t(sol, ax=None, **line_kw):
    """log10 L against log10 t (a log-log loss curve that survives t = 1e100)."""
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    ax.plot(sol.log10_t[keep], sol.log_loss[keep] / np.log(10.0), **line_kw)
    ax.set_xlabel("log10 t")
    ax.set_ylabel("log10 L")
    return ax


def shares_stacked(sol, ax=None):
    """Stacked share |beta_j| / ||beta||_1 of each coordinate against log10 t (feature usage)."""
    from flowsim.theory.analysis import shares

    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    sh = shares(sol)[keep]
    ax.stackplot(sol.log10_t[keep], sh.T, labels=[f"beta_{j + 1}" for j in range(sh.shape[1])])
    ax.set_xlabel("log10 t")
    ax.set_ylabel("share of ||beta||_1")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="lower left")
    return ax


def margin_gaps(sol, refs: dict, ax=None):
    """Normalised-margin gap to each max-margin reference against log10 t (log y axis)."""
    from flowsim.theory.analysis import margin_gap

    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t) & (sol.log10_t > 0)
    for name, ref in refs.items():
        ax.plot(sol.log10_t[keep], np.maximum(margin_gap(sol, ref)[keep], 1e-16), label=name)
    ax.set_yscale("log")
    ax.set_xlabel("log10 t")
    ax.set_ylabel("max-margin gap")
    ax.legend(fontsize=7)
    return ax


def _edges(v):
    """Cell edges around grid values (geometric for positive, spread values: alpha grids are)."""
    v = np.asarray(v, float)
    if len(v) == 1:
        return np.array([v[0] * 0.9, v[0] * 1.1]) if v[0] else np.array([-0.5, 0.5])
    geometric = np.all(v > 0) and v[-1] / v[0] > 20
    w = np.log(v) if geometric else v
    mid = 0.5 * (w[1:] + w[:-1])
    e = np.concatenate([[2 * w[0] - mid[0]], mid, [2 * w[-1] - mid[-1]]])
    return np.exp(e) if geometric else e


def _label_names(labels):
    return ["beta -> 0 (bounded)" if k < 0 else f"e_{k + 1}" for k in labels]


def phase_diagram(ds, ax=None):
    """The l_inf-SAM limit over (alpha_1, alpha_2) from :func:`flowsim.linf_sam_phase`: cells coloured
    by the observed limit (e_j or bounded), Cor 3.5's predicted boundaries as black lines, cells
    where flow and prediction disagree crossed out."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    from flowsim.theory.phase import linf_sam_boundaries

    ax = _axes(ax)
    a1, a2 = ds["alpha_1"].values, ds["alpha_2"].values
    obs, pred = ds["observed"].values, ds["predicted"].values
    labels = np.unique(np.concatenate([obs.ravel(), pred.ravel()]))
    colors = ["0.85", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    cmap = ListedColormap([colors[(k + 1) % len(colors)] for k in labels])
    norm = BoundaryNorm(np.concatenate([labels - 0.5, [labels[-1] + 0.5]]), cmap.N)
    ax.pcolormesh(_edges(a1), _edges(a2), obs.T, cmap=cmap, norm=norm, shading="flat")
    top = max(a1.max(), a2.max())
    for line in linf_sam_boundaries(ds.attrs["mu"], ds.attrs["rho"], ds.attrs["depth"], top):
        ax.plot(line[:, 0], line[:, 1], "k-", lw=1.2)
    ax.set_xlim(_edges(a1)[[0, -1]])
    ax.set_ylim(_edges(a2)[[0, -1]])
    bad = ~ds["match"].values
    if bad.any():
        i, j = np.nonzero(bad)
        ax.plot(a1[i], a2[j], "kx", ms=8, label="flow != Cor 3.5")
    for k, name in zip(labels, _label_names(labels)):
        ax.plot([], [], "s", color=colors[(k + 1) % len(colors)], label=name)
    ax.plot([], [], "k-", label="Cor 3.5 boundary (formula)")
    ax.set_xlabel("alpha_1")
    ax.set_ylabel("alpha_2")
    ax.set_title(f"{ds.attrs.get('flow', 'l_inf-SAM')} limit, L={ds.attrs.get('depth')}, mu={ds.attrs.get('mu')}",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return ax


def leader_map(ds, ax=None, key="alpha", curves=True):
    """Leading coordinate argmax |beta_j| of a one-dimensional :func:`flowsim.sweep` over
    (log10 t, ``key``), with the switch-time curves of :func:`flowsim.switch_log10_t` on top."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    from flowsim.theory.phase import switch_log10_t

    ax = _axes(ax)
    lead = ds["leader"].transpose(key, "log10_t").values[:, 1:]  # drop t = 0
    x = ds["log10_t"].values[1:]
    y = ds[key].values
    d = ds.sizes["coordinate"]
    cmap = ListedColormap(["0.85"] + [f"C{j}" for j in range(d)])
    mesh = ax.pcolormesh(_edges(x), _edges(y), lead, cmap=cmap, norm=BoundaryNorm(np.arange(-1.5, d), cmap.N))
    if curves:
        sw = switch_log10_t(ds).transpose(key, "switch").values
        for k in range(sw.shape[1]):
            ax.plot(sw[:, k], y, "k.-", lw=1, ms=3, label="switch times" if k == 0 else None)
    if np.all(y > 0) and y[-1] / y[0] > 20:
        ax.set_yscale("log")
    cb = ax.figure.colorbar(mesh, ax=ax, ticks=np.arange(-1, d))
    cb.ax.set_yticklabels(["ended"] + [f"beta_{j + 1}" for j in range(d)])
    ax.set_xlabel("log10 t")
    ax.set_ylabel(key)
    ax.set_title("leading coordinate argmax |beta_j|", fontsize=9)
    if curves:
        ax.legend(fontsize=7, loc="lower right")
    return ax


def switch_time_map(da, ax=None):
    """A two-dimensional map of a DataArray over two grid keys (e.g. :func:`flowsim.first_switch_log10_t`
    of an (alpha, rho) sweep); NaN cells (no switch) are left blank."""
    ax = _axes(ax)
    yk, xk = da.dims
    mesh = ax.pcolormesh(_edges(da[xk].values), _edges(da[yk].values), da.values, cmap="viridis")
    for k, axis in ((xk, "x"), (yk, "y")):
        v = da[k].values
        if np.all(v > 0) and v[-1] / v[0] > 20:
            getattr(ax, f"set_{axis}scale")("log")
    ax.figure.colorbar(mesh, ax=ax, label=da.name or "")
    ax.set_xlabel(xk)
    ax.set_ylabel(yk)
    return ax
