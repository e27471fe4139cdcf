"""Plots. Each takes an ``ax`` (or makes a figure of its own) and returns it; none touches global
matplotlib state. Time axes show x = log10 t on a symlog scale (linear for |log10 t| < 1, logarithmic
beyond), so leader switches at log10 t ~ 0.5 and ~ 6 and a horizon of t = 1e100 all get room.
:func:`summary` is the figure of ``flowsim plot`` for a run, :func:`sweep_summary` for a sweep;
:func:`save` writes a figure in the format its file extension names (.png, .svg or .pdf). Legends stand beside
their axes (:func:`legend_beside`), off the data; |beta_j| on a log axis is dashed where beta_j < 0."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from flowsim._files import FIGURE_FORMATS, writable_place
from flowsim.integrate.status import FAILURES, HELD, Status

#: figure formats :func:`save` writes, by file extension
FORMATS = FIGURE_FORMATS


def _axes(ax):
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(6, 4), constrained_layout=True).add_subplot()
    return ax


def check_format(path) -> str:
    """The format ("png", "svg" or "pdf") a figure file's extension names; ValueError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"the figure format follows the file extension, one of {', '.join(FORMATS)}; "
                         f"got {repr(suffix) if suffix else 'no extension'} in {str(path)!r}.")
    writable_place(path)
    return suffix[1:]


def save(fig, path, dpi: int = 110):
    """Write ``fig`` to ``path`` as PNG, SVG or PDF, by the extension (ValueError for any other); missing
    parent folders are made, as for saved runs."""
    kind = check_format(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=kind, dpi=dpi)
    return Path(path)


def _tick_priority(ticks):
    """Ticks ordered by how much a reader needs them: 0, then +-1, +-10, ... (nearest first), then 2 and 5 times them."""
    mantissa = np.abs(ticks) / 10.0 ** np.floor(np.log10(np.where(ticks == 0, 1.0, np.abs(ticks))))
    rank = np.where(ticks == 0, -1.0, np.round(mantissa) * 100 + np.log10(np.where(ticks == 0, 1.0, np.abs(ticks))))
    return ticks[np.argsort(rank, kind="stable")]


#: room a tick label of log_time_axis needs beside its neighbour: this many ems per character, plus one em of gap
CHAR_EM, GAP_EM = 0.65, 1.0


def _spaced_time_locator(candidates):
    """A locator that ticks ``candidates`` (values of log10 t) inside the view, most needed first (0, +-1, +-10, ...)
    and leaving out each one whose label would come closer to a chosen one than its width and a gap (the labels
    "10 20" ran together on a narrow panel); under three candidates in view, six plain ticks instead."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties
    from matplotlib.ticker import Locator, MaxNLocator

    class SpacedTimeTicks(Locator):
        def __call__(self):
            lo, hi = sorted(self.axis.get_view_interval())
            inside = candidates[(candidates >= lo) & (candidates <= hi)]
            if len(inside) < 3:
                return MaxNLocator(nbins=6).tick_values(lo, hi)
            scale = self.axis.get_transform()
            s_lo, s_hi = scale.transform(np.array([lo, hi]))
            pixels = (scale.transform(inside) - s_lo) / (s_hi - s_lo) * self.axis.axes.bbox.width
            size = FontProperties(size=rcParams[f"{self.axis.axis_name}tick.labelsize"]).get_size_in_points()
            em = size * self.axis.figure.dpi / 72.0
            widths = {v: len(f"{v:g}") * CHAR_EM * em for v in inside}
            at = dict(zip(inside, pixels))
            chosen = []
            for v in _tick_priority(inside):
                if all(abs(at[v] - at[c]) >= (widths[v] + widths[c]) / 2 + GAP_EM * em for c in chosen):
                    chosen.append(v)
            return np.sort(chosen)

    return SpacedTimeTicks()


def log_time_axis(ax, label: str = "log10 t (symlog axis)", linthresh: float = 1.0):
    """x = log10 t on a symlog scale: linear for |log10 t| < ``linthresh``, logarithmic beyond. Ticks
    read as values of log10 t (-1, 0, 1, 10, 100), not as powers; at 1, 2 and 5 times the powers of ten where
    the panel is wide enough for their labels, fewer where it is not."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("symlog", linthresh=linthresh, linscale=0.6)
    steps = np.array([m * 10.0**k for k in range(-1, 6) for m in (1, 2, 5)])
    ticks = np.concatenate([-steps[::-1], [0.0], steps])
    ticks = np.array(ticks[np.abs(ticks) >= min(linthresh, 1.0) - 1e-12].tolist() + [0.0])
    ax.xaxis.set_major_locator(_spaced_time_locator(np.unique(ticks)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel(label)
    return ax


def legend_beside(ax, **legend_kw):
    """The legend of ``ax`` to the right of its axes, off the data (a constrained-layout figure makes room)."""
    return ax.legend(**{"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0,
                        **legend_kw})


def short_log_span_ticks(ax, which: str = "xy"):
    """On each log axis of ``ax`` spanning under three decades (as autoscaled so far), major ticks labelled at 1, 2
    and 5 times the powers of ten, at every digit where those give under three in view, at plain evenly spaced
    values where even those do (a span under a factor of two); minor ones unlabelled. matplotlib's own ticks there
    are two or fewer, or minor labels that run together. ``which``: the axes to treat, "x", "y" or "xy"."""
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, MaxNLocator, NullFormatter

    # (its default thresholds leave the labels of some digits out)
    powers = LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(np.inf, np.inf))
    choices = [(LogLocator(subs=(1.0, 2.0, 5.0)), powers), (LogLocator(subs=np.arange(1.0, 10.0)), powers),
               (MaxNLocator(nbins=4), FuncFormatter(lambda v, _: f"{v:.3g}"))]
    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        lo, hi = sorted(limits)
        if axis.axis_name not in which or axis.get_scale() != "log" or lo <= 0 or hi >= 1000 * lo:  # (hi / lo overflows for a subnormal lo)
            continue
        for locator, formatter in choices:
            ticks = locator.tick_values(lo, hi)
            if np.sum((ticks >= lo) & (ticks <= hi)) >= 3:
                break
        axis.set_major_locator(locator)
        axis.set_major_formatter(formatter)
        axis.set_minor_formatter(NullFormatter())
    return ax


def _describe(sol) -> str:
    if hasattr(sol, "optimizer"):  # a discrete run
        return f"{sol.optimizer} (discrete) on {sol.problem or 'a model'} [{sol.status}]"
    system = sol.system
    flow, model = getattr(system, "flow", system), getattr(system, "model", "")
    loss = getattr(getattr(system, "loss", None), "name", None)
    return f"{flow} on {model}" + (f", {loss} loss" if loss else "") + f" [{sol.status}]"


def _switches(sol) -> list:
    """Magnitude leader switches of ``sol`` where they were tracked (else none)."""
    from flowsim.theory.analysis import switch_times

    try:
        return switch_times(sol)
    except (ValueError, AttributeError, KeyError, TypeError):
        return []


#: past this many coordinates a line plot names only the NAMED with the largest peak share |beta_j| / ||beta||_1
#: (the others thin and grey, one legend entry): a digits run's 64 entries covered its panels, 10 colours repeating
MANY, NAMED = 10, 8


def _named(beta) -> np.ndarray:
    """The coordinates a line plot names and colours: every one up to MANY, else the NAMED largest peak shares."""
    d = beta.shape[1]
    if d <= MANY:
        return np.arange(d)
    a = np.abs(beta)
    total = a.sum(axis=1, keepdims=True)
    share = np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    return np.sort(np.argsort(-share.max(axis=0, initial=0.0), kind="stable")[:NAMED])


def _coordinate_lines(ax, x, Y, named, label, **line_kw) -> dict:
    """One line per column of Y: the ``named`` coordinates coloured and labelled ``label(j)``, the others thin
    and grey under one legend entry. The line of each column, by column."""
    others = [j for j in range(Y.shape[1]) if j not in set(named.tolist())]
    lines = {}
    for k, j in enumerate(others):
        (lines[j],) = ax.plot(x, Y[:, j], **{"color": "0.75", "lw": 0.6, **line_kw},
                              label=f"the other {len(others)} coordinates" if k == 0 else None)
    for c, j in enumerate(named):
        (lines[j],) = ax.plot(x, Y[:, j], **{"color": f"C{c % 10}", **line_kw}, label=label(j))
    return lines


def _negative_parts(ax, x, beta, lines):
    """|beta_j| dashed, in the colour of its line, where beta_j < 0 (the solid lines draw beta_j >= 0): a log axis
    of magnitudes keeps the signs."""
    negative = beta < 0
    for j, line in lines.items():
        if negative[:, j].any():
            ax.plot(x, np.where(negative[:, j], -beta[:, j], np.nan), ls=(0, (3, 2)), color=line.get_color(),
                    lw=line.get_linewidth())
    if negative.any():
        ax.plot([], [], ls=(0, (3, 2)), color="0.3", label="dashed: beta_j < 0")


def _time_axis(ax, xscale):
    """The x axis in log10 t: symlog (``log_time_axis``, the default) or as drawn."""
    if xscale == "symlog":
        log_time_axis(ax)
    else:
        ax.set_xlabel("log10 t")


def beta_vs_log_t(sol, ax=None, *, log_scale=True, label_prefix="", switch_times=None, xscale="symlog", legend=True,
                  **line_kw):
    """beta_j against log10 t, one line per coordinate (past 10 coordinates the 8 with the largest share named,
    the others grey); with ``log_scale`` |beta_j| on a log axis, solid where beta_j >= 0 and dashed where
    beta_j < 0. Optional vertical lines at ``switch_times`` (values of log10 t). ``xscale``: "symlog" (default,
    see :func:`log_time_axis`) or "linear". ``legend``: a legend beside the axes (see :func:`legend_beside`);
    without it, a figure gathering the panels' entries draws one."""
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    x, beta = sol.log10_t[keep], sol.beta[keep]
    Y = np.where(beta >= 0, beta, np.nan) if log_scale else beta
    if "color" in line_kw:  # one colour for the run (runs compared on one axis): every coordinate named
        lines = {j: ax.plot(x, Y[:, j], label=f"{label_prefix}beta_{j + 1}", **line_kw)[0] for j in range(Y.shape[1])}
    else:
        lines = _coordinate_lines(ax, x, Y, _named(sol.beta), lambda j: f"{label_prefix}beta_{j + 1}", **line_kw)
    if log_scale:
        _negative_parts(ax, x, beta, lines)
    for k, v in enumerate(switch_times or ()):
        ax.axvline(v, color="0.4", lw=0.9, ls=":", label="leader switch" if k == 0 else None)
    if log_scale:
        ax.set_yscale("log")
        short_log_span_ticks(ax, "y")
    _time_axis(ax, xscale)
    ax.set_ylabel("|beta_j| (dashed: beta_j < 0)" if log_scale and (beta < 0).any() else
                  "|beta_j|" if log_scale else "beta_j")
    ax.set_title(_describe(sol), fontsize=9)
    if legend:
        legend_beside(ax)
    return ax


def loss_vs_t(sol, ax=None, xscale="symlog", **line_kw):
    """log10 L against log10 t (a log-log loss curve that survives t = 1e100)."""
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    ax.plot(sol.log10_t[keep], sol.log_loss[keep] / np.log(10.0), **line_kw)
    _time_axis(ax, xscale)
    ax.set_ylabel("log10 L")
    ax.set_title("loss", fontsize=9)
    return ax


def direction_vs_log_t(sol, ax=None, xscale="symlog"):
    """The direction beta_j / ||beta||_2 against log10 t, one line per coordinate."""
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    u = sol.direction[keep]
    _coordinate_lines(ax, sol.log10_t[keep], u, _named(sol.beta), lambda j: f"beta_{j + 1} / ||beta||_2")
    ax.axhline(0, color="0.6", lw=0.6)
    _time_axis(ax, xscale)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("direction beta_j / ||beta||_2")
    ax.set_title("direction", fontsize=9)
    legend_beside(ax)
    return ax


def _is_regression(sol) -> bool:
    data = getattr(sol, "data", None)
    return data is not None and data.is_regression


def residuals_vs_log_t(sol, ax=None, xscale="symlog"):
    """A regression run's residuals x_i.beta - y_i against log10 t (log axis): the largest |residual| and their
    root mean square; both go to 0 at an interpolating minimum."""
    if not _is_regression(sol):
        raise ValueError("residuals_vs_log_t draws a regression run (real targets); a classification run has margins "
                         "y_i x_i.beta, not residuals: draw its direction (direction_vs_log_t) or margin_gaps.")
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    residuals = np.abs(sol.margins[keep])  # a regression's margins are its residuals (docs/theory.md 12)
    tiny = np.finfo(float).tiny  # an exact 0 stays on the log axis
    ax.plot(sol.log10_t[keep], np.maximum(residuals.max(axis=1), tiny), label="largest |x_i.beta - y_i|")
    ax.plot(sol.log10_t[keep], np.maximum(np.sqrt(np.mean(residuals**2, axis=1)), tiny), ls="--",
            label="root mean square")
    ax.set_yscale("log")
    _time_axis(ax, xscale)
    ax.set_ylabel("residual |x_i.beta - y_i|")
    ax.set_title("residuals", fontsize=9)
    legend_beside(ax)
    return ax


def shares_stacked(sol, ax=None, xscale="symlog"):
    """Stacked share |beta_j| / ||beta||_1 of each coordinate against log10 t (feature usage)."""
    from flowsim.theory.analysis import shares

    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t)
    sh = shares(sol)[keep]
    named = _named(sol.beta).tolist()
    rest = sh.shape[1] - len(named)
    colors = [f"C{named.index(j) % 10}" if j in named else "0.8" for j in range(sh.shape[1])]
    first_other = next((j for j in range(sh.shape[1]) if j not in named), None)
    labels = [f"beta_{j + 1}" if j in named else f"the other {rest} coordinates" if j == first_other else "_nolegend_"
              for j in range(sh.shape[1])]
    ax.stackplot(sol.log10_t[keep], sh.T, labels=labels, colors=colors)
    _time_axis(ax, xscale)
    ax.set_ylabel("share |beta_j| / ||beta||_1")
    ax.set_ylim(0, 1)
    if keep.any():
        ax.set_xlim(sol.log10_t[keep][0], sol.log10_t[keep][-1])
    ax.set_title("shares of ||beta||_1 (feature usage)", fontsize=9)
    legend_beside(ax)  # (the stacked shares fill the axes)
    return ax


def summary(sol, fig=None):
    """The figure of ``flowsim plot``: |beta_j| (log axis), the direction beta / ||beta||_2 (a regression run's
    residuals instead: it converges to a point, :func:`residuals_vs_log_t`), the shares |beta_j| / ||beta||_1 and
    log10 L, all against log10 t on a symlog axis, leader switches (where the run tracked them) dotted; the title
    names the flow, the model, the loss and the status."""
    from matplotlib.figure import Figure

    fig = fig or Figure(figsize=(11, 7), constrained_layout=True)
    axes = fig.subplots(2, 2)
    sw = [e["log10_t"] for e in _switches(sol)]
    beta_vs_log_t(sol, axes[0, 0], switch_times=sw)
    axes[0, 0].set_title("|beta_j|", fontsize=9)
    (residuals_vs_log_t if _is_regression(sol) else direction_vs_log_t)(sol, axes[0, 1])
    shares_stacked(sol, axes[1, 0])
    loss_vs_t(sol, axes[1, 1])
    keep = np.isfinite(sol.log10_t)
    for ax in axes.ravel():
        if keep.any():  # one time range on every panel
            ax.set_xlim(sol.log10_t[keep][0], sol.log10_t[keep][-1])
        for x in sw if ax is not axes[0, 0] else ():
            ax.axvline(x, color="0.4", lw=0.9, ls=":")
    end = sol.log10_t[-1] if len(sol.log10_t) else float("nan")
    fig.suptitle(f"{_describe(sol)}, log10 t reached {end:.4g}", fontsize=10)
    return fig


def _power_fit(x, y, keep):
    """Least squares log y = log A - k log x on ``keep``: (k, A), or None with fewer than 3 points."""
    keep = keep & (y > 0) & np.isfinite(y) & (x > 0)
    if keep.sum() < 3:
        return None
    coef = np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)
    return -coef[0], float(np.exp(coef[1]))


def gap_fit(sol, ref, tail: float = 0.5):
    """The fit gap ~ A (log t)^(-k) of :func:`flowsim.convergence` (same save points, same tail):
    (k, A, mask of the fitted save points) or None where it fits nothing."""
    from flowsim.theory.analysis import margin_gap

    gap = np.maximum(margin_gap(sol, ref), 0.0)
    lt = sol.log10_t
    fin = np.isfinite(lt)
    if not fin.any():
        return None
    keep = fin & (lt >= lt[-1] - tail * (lt[-1] - max(lt[fin][0], 0.0))) & (lt > 0)
    if keep.sum() < 4 or not np.all(gap[keep] > 0):
        return None
    fit = _power_fit(np.where(fin, lt, 1.0) * np.log(10.0), gap, keep)
    return None if fit is None else (*fit, keep)


def draw_fit(ax, x, k, A, *, color=None, label="fit", var="log t", scale=1.0, extend=4.0):
    """The fitted power law A (scale x)^-k as a wide dashed line over the fitted range of ``x`` and,
    thinner, back to x[0] / ``extend`` (so it is not hidden under the data it fits); the exponent
    is in the legend."""
    x = np.asarray(x, float)
    lo, hi = x.min(), x.max()
    color = color or "k"

    def law(v):
        return A * (scale * v) ** (-k)

    text = f"{label}: ~ ({var})^-{k:.3g}" if k >= 0 else f"{label}: ~ ({var})^{-k:.3g}"
    if extend > 1:
        xe = np.geomspace(lo / extend, lo, 20)
        ax.plot(xe, law(xe), ls=(0, (2, 2)), color=color, lw=1.0, alpha=0.8)
    xs = np.geomspace(lo, hi, 40)
    ax.plot(xs, law(xs), ls=(0, (5, 2)), color=color, lw=3.0, alpha=0.45, label=text)
    return ax


_REF_NAMES = {"l1": "l1-norm max-margin", "l2": "l2-norm max-margin", "linf": "l_inf-norm max-margin"}


def margin_gaps(sol, refs: dict, ax=None, fit=True):
    """Normalised-margin gap to each max-margin reference against log10 t, both axes logarithmic, so
    a gap ~ A (log t)^-k is a straight line; with ``fit`` the fit of :func:`flowsim.convergence`
    (the one a verdict quotes) is drawn dashed over the save points it uses, its rate in the legend."""
    from flowsim.theory.analysis import margin_gap

    if _is_regression(sol):
        raise ValueError("margin_gaps compares a classification run with max-margin directions; a regression run "
                         "converges to a point and its margins are residuals x_i.beta - y_i: draw residuals_vs_log_t.")
    ax = _axes(ax)
    keep = np.isfinite(sol.log10_t) & (sol.log10_t > 0)
    for k, (name, ref) in enumerate(refs.items()):
        color = f"C{k}"
        ax.plot(sol.log10_t[keep], np.maximum(margin_gap(sol, ref)[keep], 1e-16), color=color,
                label=f"gap to the {_REF_NAMES.get(name, name)}")
        f = gap_fit(sol, ref) if fit else None
        if f is not None:
            rate, A, used = f
            draw_fit(ax, sol.log10_t[used], rate, A, color=color, label=f"{name} fit", scale=np.log(10.0))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("log10 t (log axis)")
    ax.set_ylabel("normalised-margin gap")
    short_log_span_ticks(ax)
    ax.set_title(_describe(sol), fontsize=9)
    legend_beside(ax, fontsize=6)
    return ax


def _geometric(v) -> bool:
    """Whether grid values are spaced geometrically (alpha grids), so cells and axes are logarithmic: positive
    values whose ratios vary less than their differences; of two values (no spacing to compare), those
    whose linear first cell would reach 0 or below (alpha = [0.05, 0.2] drew a cell from -0.025)."""
    v = np.asarray(v, float)
    if len(v) < 2 or not np.all(v > 0):
        return False
    if len(v) == 2:
        return bool(v[1] >= 3 * v[0] or v[0] >= 3 * v[1])

    def spread(d):
        return np.std(d) / abs(np.mean(d))

    return bool(spread(np.diff(np.log(v))) < spread(np.diff(v)))


def _edges(v):
    """Cell edges around grid values, midway in log where they are spaced geometrically (``_geometric``)."""
    v = np.asarray(v, float)
    if len(v) == 1:
        return np.array([v[0] * 0.9, v[0] * 1.1]) if v[0] else np.array([-0.5, 0.5])
    geometric = _geometric(v)
    w = np.log(v) if geometric else v
    mid = 0.5 * (w[1:] + w[:-1])
    e = np.concatenate([[2 * w[0] - mid[0]], mid, [2 * w[-1] - mid[-1]]])
    return np.exp(e) if geometric else e


def _label_names(labels, depth):
    """Cor 3.5's limits: e_j, or bounded (beta -> 0 at even depth, every beta_j -> rho^L at odd)."""
    bounded = "beta -> 0 (bounded)" if depth % 2 == 0 else "each beta_j -> rho^L (bounded)"
    return [bounded if k < 0 else f"e_{k + 1}" for k in labels]


def phase_diagram(ds, ax=None):
    """The l_inf-SAM limit over (alpha_1, alpha_2) from :func:`flowsim.linf_sam_phase`: cells coloured
    by the observed limit (e_j or bounded), Cor 3.5's predicted boundaries as black lines, cells
    where flow and prediction disagree crossed out, cells whose solve failed left blank with a "?"."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    from flowsim.theory.phase import linf_sam_boundaries

    ax = _axes(ax)
    a1, a2 = ds["alpha_1"].values, ds["alpha_2"].values
    obs, pred = ds["observed"].values, ds["predicted"].values
    decided = ds["decided"].values if "decided" in ds else np.ones(obs.shape, bool)
    # (-2: a tie, -3: undecided, drawn apart)
    labels = np.unique(np.concatenate([obs[decided].ravel(), pred[pred != -2].ravel(), [-1]]))
    colors = ["0.85", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    cmap = ListedColormap([colors[(k + 1) % len(colors)] for k in labels])
    norm = BoundaryNorm(np.concatenate([labels - 0.5, [labels[-1] + 0.5]]), cmap.N)
    ax.pcolormesh(_edges(a1), _edges(a2), np.ma.masked_array(obs, ~decided).T, cmap=cmap, norm=norm, shading="flat")
    top = max(_edges(a1)[-1], _edges(a2)[-1], 2.0 * ds.attrs["rho"])  # (to the plot's edge, which may lie below rho)
    for line in linf_sam_boundaries(ds.attrs["mu"], ds.attrs["rho"], ds.attrs["depth"], top):
        ax.plot(line[:, 0], line[:, 1], "k-", lw=1.2)
    ax.set_xlim(_edges(a1)[[0, -1]])
    ax.set_ylim(_edges(a2)[[0, -1]])
    tie = pred == -2
    bad = ~ds["match"].values & ~tie & decided
    if bad.any():
        i, j = np.nonzero(bad)
        ax.plot(a1[i], a2[j], "kx", ms=8, label="flow != Cor 3.5")
    if not decided.all():
        i, j = np.nonzero(~decided)
        ax.plot(a1[i], a2[j], ls="none", marker="$?$", color="k", ms=8,
                label="undecided: the solve failed (see status)")
    if tie.any():
        i, j = np.nonzero(tie)
        ax.plot(a1[i], a2[j], "k+", ms=8, label="on a boundary: tie, no e_j predicted")
    for k, name in zip(labels, _label_names(labels, int(ds.attrs["depth"]))):
        ax.plot([], [], "s", color=colors[(k + 1) % len(colors)], label=name)
    ax.plot([], [], "k-", label="Cor 3.5 boundary (formula)")
    ax.set_xlabel("alpha_1")
    ax.set_ylabel("alpha_2")
    ax.set_title(f"{ds.attrs.get('flow', 'l_inf-SAM')} limit, L={ds.attrs.get('depth')}, mu={ds.attrs.get('mu')}",
                 fontsize=9)
    legend_beside(ax)  # (the cells fill the axes)
    return ax


def _grid_keys(ds) -> list:
    """A sweep's grid keys: the dimensions of its ``beta`` other than the save grid and the coordinate."""
    if "leader" not in ds or "log10_t" not in ds.dims:
        raise ValueError("expected the Dataset of a flowsim.sweep (with 'leader' over its grid and log10_t).")
    return [k for k in ds["beta"].dims if k not in ("log10_t", "coordinate")]


def _leaders(ax, values, x, y, d):
    """Leader labels (0: the point had ended, j: beta_j leads) as coloured cells with a colour bar naming the
    leaders that occur (a digits sweep's bar listed 64 overlapping names, its 10 colours repeating)."""
    from matplotlib import colormaps
    from matplotlib.colors import BoundaryNorm, ListedColormap

    present = np.unique(values)
    if d <= MANY:
        colors = ["0.85" if k == 0 else f"C{k - 1}" for k in present]
    else:  # distinct colours for the leaders that occur
        leaders = present[present > 0]
        many = len(leaders) > 20
        palette = colormaps["turbo"](np.linspace(0, 1, len(leaders))) if many else colormaps["tab20"].colors
        colors = (["0.85"] if present[0] == 0 else []) + list(palette[: len(leaders)])
    cmap = ListedColormap(colors)
    rank = np.searchsorted(present, values)
    norm = BoundaryNorm(np.arange(-0.5, len(present)), cmap.N)
    mesh = ax.pcolormesh(_edges(x), _edges(y), rank, cmap=cmap, norm=norm)
    cb = ax.figure.colorbar(mesh, ax=ax, ticks=np.arange(len(present)))
    cb.ax.set_yticklabels(["ended (or beta = 0)" if k == 0 else f"beta_{k}" for k in present])
    return mesh


def _log_if_geometric(ax, axis, v):
    if _geometric(v) and max(v) / min(v) >= 3:
        from matplotlib.ticker import NullFormatter

        getattr(ax, f"set_{axis}scale")("log")
        getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())
        short_log_span_ticks(ax, axis)  # (under three decades: 1, 2, 5 of each labelled)


def _grid_axes(ax, xk, x, yk, y):
    """Axes of a map over two grid keys: named, logarithmic where the grid is geometric, ticked at the grid's
    own values where there are few (a log axis labelled only 1e-1 and 2e-1 left the cells unnamed)."""
    from matplotlib.ticker import NullLocator

    for axis, v in (("x", x), ("y", y)):
        _log_if_geometric(ax, axis, v)
        if len(v) <= GRID_TICKS:  # (with :g, 0.0316228 beside 0.0501187 ran together)
            slant = 45 if axis == "x" and len(v) > 4 else 0
            getattr(ax, f"set_{axis}ticks")(v, [f"{a:.3g}" for a in v], rotation=slant)
            getattr(ax, f"{axis}axis").set_minor_locator(NullLocator())
    ax.set(xlabel=xk, ylabel=yk)


#: grid axes of at most this many values are ticked at each value
GRID_TICKS = 8


def _mark_unfinished(ax, ds, xk, yk):
    """A marker per status at each grid point that did not run to the horizon nor come to rest (collapsed,
    failed, ...), named in the legend: a map's colour alone does not say why a point has no switch."""
    status = ds["status"].transpose(yk, xk).values
    X, Y = np.meshgrid(ds[xk].values, ds[yk].values)
    marks = [ax.plot(X[status == name], Y[status == name], "xo+sv^"[k % 6], color="w", mec="k", ms=7, mew=1.2, ls="",
                     label=name)[0] for k, name in enumerate(sorted(set(status.ravel()) - {Status.COMPLETED, *HELD}))]
    if marks:  # beside what the map's legend already names ("no switch"), below the map: on it, it hid markers
        before = ax.get_legend()
        handles = (list(before.legend_handles) if before else []) + marks
        below = -0.3 if any(t.get_rotation() for t in ax.get_xticklabels()) else -0.13  # (under slanted ticks)
        ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, below), ncol=len(handles),
                  frameon=False)


def leader_map(ds, ax=None, key=None, curves=True):
    """Leading coordinate argmax |beta_j| of a one-dimensional :func:`flowsim.sweep` over
    (log10 t on a symlog axis, ``key``; default: the sweep's grid key), with the switch times of
    :func:`flowsim.switch_log10_t` on top as points. A sweep over more keys: select one value of the others first,
    e.g. ``leader_map(ds.isel(rho=0))`` or ``ds.sel(rho=0.1, method="nearest")`` (grid values are floats).
    The title names the values selected."""
    from flowsim.theory.phase import switch_log10_t

    keys = _grid_keys(ds)
    key = key or keys[0]
    others = [k for k in keys if k != key]
    if key not in keys:
        raise ValueError(f"leader_map: the sweep has no grid key {key!r}; its keys are {keys}.")
    if others:
        raise ValueError(f"leader_map draws one grid key against log10 t, and this sweep also runs over {others}: "
                         f"select one value, e.g. leader_map(ds.isel({others[0]}=0)) or ds.sel({others[0]}=..., "
                         "method='nearest').")
    ax = _axes(ax)
    x, y = ds["log10_t"].values[1:], ds[key].values  # (t = 0 dropped: a uniform alpha ties every coordinate)
    _leaders(ax, ds["leader"].transpose(key, "log10_t").values[:, 1:], x, y, ds.sizes["coordinate"])
    if curves:  # points, not lines: the k-th switch of one row and of the next need not be the same transition
        sw = switch_log10_t(ds).transpose(key, "switch").values
        for k in range(sw.shape[1]):
            ax.plot(sw[:, k], y, "k.", ms=6, label="switch times" if k == 0 else None)
    _log_if_geometric(ax, "y", y)
    ax.set_xlim(x[0], x[-1])
    log_time_axis(ax)
    ax.set_ylabel(key)
    fixed = [f"{k} = {float(v):.4g}" for k, v in ds.coords.items() if v.ndim == 0]  # keys ds.isel/sel fixed
    ax.set_title("leading coordinate argmax |beta_j|" + (f" at {', '.join(fixed)}" if fixed else ""), fontsize=9)
    if curves and np.isfinite(sw).any():
        legend_beside(ax)
    return ax


def end_direction(ds, ax=None):
    """The direction each point of a one-dimensional sweep reached, beta_end_j / ||beta_end||_2 against the
    grid key, where it completed or was held at a limit (converged, stalled); the points that ended
    otherwise (collapsed, failed, ...) are marked on the axis by status."""
    keys = _grid_keys(ds)
    if len(keys) != 1:
        raise ValueError(f"end_direction draws a sweep over one grid key; this one runs over {keys}: select one "
                         f"value of the others first, e.g. ds.isel({keys[-1]}=0).")
    key = keys[0]
    ax = _axes(ax)
    x, beta, status = ds[key].values, ds["beta_end"].transpose(key, "coordinate").values, ds["status"].values
    reached = np.isin(status, (Status.COMPLETED, *HELD))
    with np.errstate(all="ignore"):
        u = np.where(reached[:, None], beta / np.linalg.norm(beta, axis=1, keepdims=True), np.nan)
    _coordinate_lines(ax, x, u, _named(np.nan_to_num(beta)), lambda j: f"beta_{j + 1}", marker=".")
    for k, name in enumerate(np.unique(status[~reached])):
        at = status == name
        ax.plot(x[at], np.zeros(at.sum()), "xo+sv^"[k % 6], color="0.3", ms=7, ls="", label=name)
    _log_if_geometric(ax, "x", x)
    ax.axhline(0, color="0.6", lw=0.6)
    ax.set_xlabel(key)
    ax.set_ylabel("beta_j / ||beta||_2 at the end")
    ax.set_title(f"direction reached at log10 t = {ds.attrs.get('log10_t1', np.nan):.4g}", fontsize=9)
    legend_beside(ax)
    return ax


def sweep_summary(ds, fig=None):
    """The figure of ``flowsim plot`` for a sweep. Over one grid key: the leading coordinate over
    (log10 t, key) with its switch times, and the direction each point reached. Over two: log10 t of the
    first leader switch, and the leading coordinate at the end, each over the two keys."""
    from matplotlib.figure import Figure

    from flowsim.theory.phase import first_switch_log10_t

    keys = _grid_keys(ds)
    if len(keys) > 2:
        raise ValueError(f"a sweep over {len(keys)} grid keys {keys} has no summary figure: select values of all but "
                         "two (xarray's ds.sel / ds.isel) and plot that.")
    fig = fig or Figure(figsize=(12, 4.6), constrained_layout=True)
    left, right = fig.subplots(1, 2)
    if len(keys) == 1:
        leader_map(ds, left)
        end_direction(ds, right)
    else:
        xk, yk = keys  # the first key across, as in phase_diagram (alpha_1 across, alpha_2 up)
        switch_time_map(first_switch_log10_t(ds).transpose(yk, xk), left)
        x, y = ds[xk].values, ds[yk].values
        _leaders(right, ds["leader"].isel(log10_t=-1).transpose(yk, xk).values, x, y, ds.sizes["coordinate"])
        _grid_axes(right, xk, x, yk, y)
        right.set_title("leading coordinate at the end (ended: the point stopped earlier)", fontsize=9)
        for ax in (left, right):
            _mark_unfinished(ax, ds, xk, yk)
    statuses, counts = np.unique(ds["status"].values, return_counts=True)
    title = (f"sweep over {', '.join(keys)} of {ds.attrs.get('system', 'a flow')}: "
             + ", ".join(f"{c} {s}" for s, c in zip(statuses, counts)))
    fig.suptitle(textwrap.fill(title, 120), fontsize=10)  # one line was clipped at both ends
    return fig


_MAP_LABELS = {"first_switch_log10_t": "log10 t of the first leader switch"}


def switch_time_map(da, ax=None, title=None):
    """A two-dimensional map of a DataArray over two grid keys (e.g. :func:`flowsim.first_switch_log10_t`
    of an (alpha, rho) sweep); NaN cells (no switch) are hatched, not blank, and named in the legend, where
    the point reached an outcome: one that failed or was interrupted (the ``status`` coordinate that
    :func:`flowsim.switch_log10_t` carries) is left blank, its switches unknown."""
    from matplotlib.patches import Patch

    if da.ndim != 2:
        one = ": for a sweep over one key, plot.leader_map draws the switch times" if da.ndim == 1 else ""
        raise ValueError(f"switch_time_map draws a map over two grid keys; this one is over {list(da.dims)}{one}.")
    ax = _axes(ax)
    yk, xk = da.dims
    xe, ye = _edges(da[xk].values), _edges(da[yk].values)
    values = np.asarray(da.values, float)
    mesh = ax.pcolormesh(xe, ye, values, cmap="viridis")
    _grid_axes(ax, xk, da[xk].values, yk, da[yk].values)
    label = _MAP_LABELS.get(da.name, da.name or "value")
    if np.isfinite(values).any():  # (a colour bar for no values ran from -0.1 to 0.1)
        ax.figure.colorbar(mesh, ax=ax, label=label)
    ran = ~np.isin(da.coords["status"].transpose(yk, xk).values, list(FAILURES)) if "status" in da.coords else True
    none = np.isnan(values) & ran
    handles = []
    if none.any():
        from matplotlib.patches import Rectangle

        for i, j in zip(*np.nonzero(none)):
            ax.add_patch(Rectangle((xe[j], ye[i]), xe[j + 1] - xe[j], ye[i + 1] - ye[i], fill=False, hatch="///",
                                   edgecolor="0.5", lw=0))
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="no switch"))
    if (np.isnan(values) & ~none).any():
        handles.append(Patch(facecolor="white", edgecolor="0.3", label="not run to the end (failed, interrupted)"))
    if handles:
        legend_beside(ax, handles=handles)
    ax.set_title(title or f"{label} over ({xk}, {yk})", fontsize=9)
    return ax


def plot_saddle_to_saddle(path, ax=None, *, flow_times=None, flow_beta=None, flow_label="flow"):
    """The path's plateaus against rescaled time t~ = t / log(1/alpha), dashed steps, one colour per coordinate
    that is ever nonzero, with dotted lines at the jumps; optionally a flow's beta (``flow_beta``, (k, d), at the
    rescaled times ``flow_times``) solid in the same colours (its other coordinates grey).

    Args:
        path: a :class:`flowsim.SaddleToSaddle`, from :func:`flowsim.saddle_to_saddle`.
        ax: matplotlib axes to draw on; a new figure's when None.
        flow_times: (k,) rescaled times of a flow's saves.
        flow_beta: (k, d) the flow's beta there.
        flow_label: what the legend calls the flow.

    Returns:
        The axes.
    """
    if (flow_times is None) != (flow_beta is None):
        raise ValueError("flow_times and flow_beta go together: pass both (a flow's rescaled times and its beta) or "
                         "neither.")
    ax = _axes(ax)
    end = 1.25 * path.jump_times[-1] if len(path.jump_times) else 1.0
    times = np.concatenate([[0.0], path.jump_times, [end]])
    steps = np.vstack([path.plateaus, path.plateaus[-1:]])
    active = np.flatnonzero(np.any(path.plateaus != 0, axis=0))
    if flow_times is not None:
        flow_times, flow_beta = np.asarray(flow_times, float), np.asarray(flow_beta, float)
        if flow_beta.shape != (len(flow_times), path.plateaus.shape[1]):
            raise ValueError(f"flow_beta must have shape (len(flow_times), d) = ({len(flow_times)}, "
                             f"{path.plateaus.shape[1]}); got {flow_beta.shape}.")
        for j in np.setdiff1d(np.arange(path.plateaus.shape[1]), active):
            ax.plot(flow_times, flow_beta[:, j], color="0.75", lw=0.6)
        for colour, j in enumerate(active):
            ax.plot(flow_times, flow_beta[:, j], color=f"C{colour % 10}", lw=1.2)
        ax.plot([], [], color="0.3", lw=1.2, label=flow_label)
    for colour, j in enumerate(active):
        ax.plot(times, steps[:, j], drawstyle="steps-post", ls=(0, (4, 2)), color=f"C{colour % 10}", lw=1.6,
                label=f"beta_{j + 1}")
    for jump in path.jump_times:
        ax.axvline(jump, color="0.6", ls=":", lw=0.8)
    ax.set_xlabel("rescaled time t / log(1/alpha)")
    ax.set_ylabel("beta_j (dashed: the alpha -> 0 path)")
    legend_beside(ax)
    return ax
