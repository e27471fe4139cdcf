"""Open question of seed 000: which coordinates lead, and in what order, for l2-SAM at depth L = 3 and 4.

The paper's title law "minor first, major last" is stated at L = 2; at L >= 3 the available text reports
experiments only. Here one example (mu = (1, 2, 3), as 000-depth3) is run over an (alpha, rho) grid at L = 3 and 4
to log10 t = 1e4 (the long-time clocks integrate that far), and each cell's order of leaders (argmax |beta_j|,
switches located by solver events) is classified. "Major last" is judged per cell only where the order is
certified final (:func:`flowsim.reproduce.horizons.order_is_final`); elsewhere the cell is undecided. Orders that
go back to a smaller coordinate (3 -> 1 -> 3: at L = 3 a large perturbation first makes the major coordinate grow
fastest, dw_j/dtau = mu_j w_j^2 (1 - rho mu_j / (sqrt 3 N))^2) are the non-monotone region of the map.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap, SymLogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

import flowsim as fs

from . import sam
from ._claim import Claim, Measured, Number, Outcome, Statement
from .horizons import order_is_final

MAP_LOG10_T1 = 1e4
DEPTHS = (3, 4)
#: how a cell's order of leaders (1-based) is classified; "collapsed": every weight reached 0 in finite time (even L,
#: large rho / small alpha), so no coordinate leads at the end; "undecided": not certified final at the horizon
KINDS = ("major throughout", "monotone, major last", "non-monotone, major last", "major not last", "collapsed",
         "undecided")


@dataclass(frozen=True)
class Cell:
    """One run of the map: its ``leaders`` in order (1-based), the ``switch_log10_t`` between them, whether the
    order is ``final`` (certified) and the run's ``status`` and ``log10_t_end``."""

    alpha: float
    rho: float
    depth: int
    leaders: tuple
    switch_log10_t: tuple
    final: bool
    status: str
    log10_t_end: float

    @property
    def collapsed(self) -> bool:
        return self.status == fs.Status.COLLAPSED

    @property
    def label(self) -> str:
        """The leaders as digits, then "c" if the run collapsed, "?" if its order is not final."""
        return "".join(map(str, self.leaders)) + ("c" if self.collapsed else "" if self.final else "?")

    def kind(self, major: int) -> str:
        return sequence_kind(self.leaders, self.final, major, self.collapsed)


def sequence_kind(leaders, final: bool, major: int, collapsed: bool = False) -> str:
    """The kind (one of ``KINDS``) of an order of ``leaders`` (1-based), ``major`` the coordinate of the largest
    feature: non-monotone when a later leader is a smaller coordinate than an earlier one."""
    if collapsed:
        return "collapsed"
    if not final or not leaders:
        return "undecided"
    if leaders[-1] != major:
        return "major not last"
    if len(leaders) == 1:
        return "major throughout"
    rising = all(a < b for a, b in zip(leaders, leaders[1:]))
    return "monotone, major last" if rising else "non-monotone, major last"


def major_last(cell: Cell, major: int) -> Outcome:
    """"The major coordinate leads last" of one cell: undecided where its order is not certified final or the run
    collapsed (no leader at the end)."""
    if cell.collapsed:
        return Outcome(None, f"order {list(cell.leaders)}, then every weight collapsed to 0 by log10 t = "
                             f"{cell.log10_t_end:.4g}: no leader at the end")
    if not cell.final:
        return Outcome(None, f"order {list(cell.leaders)} not certified final at log10 t = {cell.log10_t_end:.4g} "
                             f"([{cell.status}])")
    return Outcome(cell.leaders[-1] == major, f"order {list(cell.leaders)}, final")


@dataclass(frozen=True)
class Band:
    """The cells of one leader sequence (``label``) sorted by rho / alpha: from ``lowest`` to ``highest``."""

    label: str
    lowest: float
    highest: float


def ratio_bands(cells) -> tuple[list, bool]:
    """The cells sorted by rho / alpha, cut where the sequence changes: (bands, whether each sequence is one band).
    From a uniform init the order of leaders depends on rho / alpha alone (docs/theory.md 5b), so each sequence
    should fill one interval of rho / alpha."""
    cells = sorted(cells, key=lambda c: c.rho / c.alpha)
    bands = []
    for c in cells:
        ratio = c.rho / c.alpha
        if bands and bands[-1].label == c.label:
            bands[-1] = Band(c.label, bands[-1].lowest, ratio)
        else:
            bands.append(Band(c.label, ratio, ratio))
    return bands, len(bands) == len({b.label for b in bands})


def run_cell(alpha: float, rho: float, depth: int, mu=sam.MU3) -> Cell:
    """l2-SAM on one example ``mu`` from ``alpha`` to log10 t = ``MAP_LOG10_T1``, its order of leaders read off."""
    flow = fs.SAM(rho, 2)
    sol = sam._solve(sam._model(depth), flow, fs.Dataset(np.asarray(mu)[None], [1]), alpha, log10_t1=MAP_LOG10_T1,
                     track=("magnitude",))
    sw = fs.switch_times(sol)
    leaders = [sw[0]["from_coordinate"]] + [e["to_coordinate"] for e in sw] if sw else [int(np.argmax(sol.beta[-1])) + 1]
    final = sol.ok and order_is_final(flow, sol.beta[-1], mu, depth).final
    return Cell(float(alpha), float(rho), depth, tuple(int(j) for j in leaders), tuple(float(e["log10_t"]) for e in sw),
                bool(final), str(sol.status), float(sol.log10_t[-1]))


def grid(quick: bool):
    """(alphas, rhos) of the map: log-spaced, coarser with ``quick``."""
    n = 3 if quick else 8
    return np.geomspace(0.03, 0.6, n), np.geomspace(0.03, 0.8, n)


def _depth_rows(depth, cells, major) -> dict:
    kinds = Counter(c.kind(major) for c in cells)
    seqs = Counter(c.label for c in cells)
    verdicts = Counter(major_last(c, major).word for c in cells)
    odd = [c for c in cells if c.kind(major) == "non-monotone, major last"]
    last = [c.switch_log10_t[-1] for c in cells if c.switch_log10_t]
    bands, contiguous = ratio_bands(cells)
    return {
        f"L = {depth}: leader sequences": Measured(
            ", ".join(f"{s}: {n}" for s, n in seqs.most_common()) + " cells ('c': collapsed, '?': not certified final)",
            (Number("sequences", list(seqs), "1"), Number("cells", list(seqs.values()), "cells"))),
        f"L = {depth}: kinds": Measured(", ".join(f"{k}: {kinds.get(k, 0)}" for k in KINDS),
                                        (Number("kinds", list(KINDS), "1"),
                                         Number("cells", [kinds.get(k, 0) for k in KINDS], "cells"))),
        f"L = {depth}: major last, per cell": Measured(
            f"holds in {verdicts['holds']}, fails in {verdicts['fails']}, undecided in {verdicts['inconclusive']} "
            f"({kinds['collapsed']} of them collapsed) of {len(cells)} cells",
            (Number("holds", verdicts["holds"], "cells"), Number("fails", verdicts["fails"], "cells"),
             Number("undecided", verdicts["inconclusive"], "cells"), Number("collapsed", kinds["collapsed"], "cells"))),
        f"L = {depth}: non-monotone region": Measured(
            "; ".join(f"alpha {c.alpha:.3g}, rho {c.rho:.3g}: {c.label}" for c in odd) or "none",
            (Number("alpha", [c.alpha for c in odd], "1"), Number("rho", [c.rho for c in odd], "1"),
             Number("sequence", [c.label for c in odd], "1"))),
        f"L = {depth}: bands of rho / alpha": Measured(
            "; ".join(f"{b.label}: {b.lowest:.3g}-{b.highest:.3g}" for b in bands)
            + (" (each sequence one band: the order depends on rho / alpha alone)" if contiguous
               else " (NOT one band per sequence: the order is not a function of rho / alpha alone)"),
            (Number("sequence", [b.label for b in bands], "1"), Number("lowest_rho_over_alpha", [b.lowest for b in bands], "1"),
             Number("highest_rho_over_alpha", [b.highest for b in bands], "1"),
             Number("one_band_per_sequence", contiguous, "1"))),
        f"L = {depth}: every cell": Measured(
            f"{len(cells)} cells; latest switch at log10 t = {max(last, default=float('nan')):.4g}",
            (Number("alpha", [c.alpha for c in cells], "1"), Number("rho", [c.rho for c in cells], "1"),
             Number("sequence", [c.label for c in cells], "1"), Number("final", [c.final for c in cells], "1"),
             Number("last_switch_log10_t", [c.switch_log10_t[-1] if c.switch_log10_t else float("nan") for c in cells],
                    "log10 t"))),
    }


def depth_switch_map(out: Path, quick: bool) -> Claim:
    alphas, rhos = grid(quick)
    major = int(np.argmax(sam.MU3)) + 1
    maps, numbers = {}, {}
    for depth in DEPTHS:
        maps[depth] = [[run_cell(a, r, depth) for a in alphas] for r in rhos]
        numbers.update(_depth_rows(depth, [c for row in maps[depth] for c in row], major))
    map_figure(alphas, rhos, maps, major).savefig(out / "sam_depth_map.png", dpi=90)
    every_cell = [c for cells in maps.values() for row in cells for c in row]
    collapsed = sum(c.collapsed for c in every_cell)
    undecided = sum(not c.final for c in every_cell) - collapsed
    why = (f"measured, no law to test: the leader sequences over {len(alphas)} x {len(rhos)} (alpha, rho) at L = "
           f"{', '.join(map(str, DEPTHS))} are in the map; {collapsed} cell(s) collapsed, {undecided} not certified "
           f"final by log10 t = {MAP_LOG10_T1:g} (undecided)")
    return Claim("000-depthL-map", sam.SEED, Statement(
                     "Minor first, major last (title); network depth plays a decisive role in shaping SAM's implicit "
                     "bias (summary); no law for the order of leaders at L >= 3 is stated in the available text.",
                     f"l2-SAM on one example mu = (1, 2, 3) at L = 3 and 4 over an (alpha, rho) grid to log10 t = "
                     f"{MAP_LOG10_T1:g}: each cell's order of leaders and switch times, 'major last' judged per cell "
                     "where the order is certified final (horizons.order_is_final), undecided elsewhere, and the "
                     "region where the order is non-monotone (a smaller coordinate leads after a larger one) mapped. "
                     "Measured, no verdict.", "beyond the available text"),
                 sam._setting(mu=sam.MU3.tolist(), depths=list(DEPTHS), alphas=f"{len(alphas)} in {alphas[0]:g}..{alphas[-1]:g} "
                              "(log-spaced)", rhos=f"{len(rhos)} in {rhos[0]:g}..{rhos[-1]:g} (log-spaced)",
                              log10_t1=MAP_LOG10_T1),
                 "open", why, numbers, [], "sam_depth_map.png")


def map_figure(alphas, rhos, maps: dict, major: int):
    """For each depth (``maps``: depth -> rows over ``rhos`` of cells over ``alphas``): the cells coloured by their
    leader sequence and labelled with it (non-monotone ones outlined, collapsed ones dark grey with 'c', undecided ones
    light grey with '?'), and below, log10 t of each cell's last switch."""
    labels = sorted({c.label for cells in maps.values() for row in cells for c in row if c.final}, key=lambda s: (len(s), s))
    grey = {"collapsed": ("0.55", "collapsed (c)"), "undecided": ("0.85", "not final (?)")}
    palette = [matplotlib.colormaps["tab20"](k % 20) for k in range(len(labels))]
    colour = {s: k for k, s in enumerate(labels)}
    fig = Figure(figsize=(4.6 * len(maps) + 2.2, 7.6), constrained_layout=True)
    axes = np.atleast_2d(fig.subplots(2, len(maps)))
    cmap = ListedColormap(palette + [g for g, _ in grey.values()])
    last_switch = {d: np.array([[c.switch_log10_t[-1] if c.switch_log10_t else np.nan for c in row] for row in cells])
                   for d, cells in maps.items()}
    switches = np.concatenate([v.ravel() for v in last_switch.values()])
    switches = switches[np.isfinite(switches)]
    norm = SymLogNorm(1.0, vmin=switches.min(), vmax=switches.max()) if switches.size else None
    for col, (depth, cells) in enumerate(maps.items()):
        index = np.array([[len(labels) if c.collapsed else colour[c.label] if c.final else len(labels) + 1
                           for c in row] for row in cells])
        ax = axes[0, col]
        ax.imshow(index, origin="lower", cmap=cmap, vmin=-0.5, vmax=len(labels) + 1.5, aspect="auto")
        for i, row in enumerate(cells):
            for j, c in enumerate(row):
                ax.text(j, i, c.label, ha="center", va="center", fontsize=6.5)
                if c.kind(major) == "non-monotone, major last":
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="k", lw=1.6))
        _grid_axes(ax, alphas, rhos, f"l2-SAM, L = {depth}: order of leaders beta_j\n(outlined: non-monotone; c: collapsed; ?: not final)")
        ax = axes[1, col]
        image = ax.imshow(last_switch[depth], origin="lower", aspect="auto", cmap="viridis", norm=norm)
        _grid_axes(ax, alphas, rhos, f"L = {depth}: when the last switch happens\n(blank: no switch)")
    handles = [Patch(color=palette[colour[s]], label=s) for s in labels] + [Patch(color=g, label=t) for g, t in grey.values()]
    fig.colorbar(image, ax=axes[1, :], label="log10 t of the last switch")
    fig.legend(handles=handles, title="leaders", fontsize=7, title_fontsize=7, loc="outside right upper")
    fig.suptitle(f"Depth-L switch laws (open): l2-SAM on mu = (1, 2, 3) to log10 t = {MAP_LOG10_T1:g}", fontsize=10)
    return fig


def _grid_axes(ax, alphas, rhos, title):
    ax.set_xticks(range(len(alphas)), [f"{a:.2g}" for a in alphas], fontsize=7)
    ax.set_yticks(range(len(rhos)), [f"{r:.2g}" for r in rhos], fontsize=7)
    ax.set(xlabel="alpha (log-spaced)", ylabel="rho (log-spaced)", title=title)
    ax.title.set_fontsize(9)


CHECKS = [depth_switch_map]
