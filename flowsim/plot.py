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
    from ._analysis import shares

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
    from ._analysis import margin_gap

    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t) & (sol.log10_t > 0)
    for name, ref in refs.items():
        ax.plot(sol.log10_t[keep], np.maximum(margin_gap(sol, ref)[keep], 1e-16), label=name)
    ax.set_yscale("log")
    ax.set_xlabel("log10 t")
    ax.set_ylabel("max-margin gap")
    ax.legend(fontsize=7)
    return ax
