"""A layout checker for figures: renders a figure with the Agg canvas and lists what a reader could not read:
texts (tick labels, axis labels, titles, legends, annotations, colour bars) overlapping one another, texts partly
outside the figure (clipped in the saved file), tick labels running together or too few to read, legends lying over plotted data or over
another axes, and labelled lines hidden under another line drawn the same way at the same place."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.transforms import Bbox

#: pixels two boxes may share (antialiased edges, a tick label touching its neighbour) before they overlap
TOLERANCE = 1.0


def _shrunk(box: Bbox, by: float = TOLERANCE) -> Bbox:
    return Bbox.from_extents(box.x0 + by, box.y0 + by, box.x1 - by, box.y1 - by)


def _overlap(a: Bbox, b: Bbox) -> bool:
    return _shrunk(a).overlaps(_shrunk(b))


#: the least gap between neighbouring tick labels of one axis, in units of their font size ("10 20" with less ran
#: together into one number)
TICK_GAP_EM = 0.5


def _crowded_ticks(ax, renderer) -> list[str]:
    """Neighbouring tick labels of one axis closer than TICK_GAP_EM of their font size."""
    problems = []
    for axis, lo, hi in ((ax.xaxis, "x0", "x1"), (ax.yaxis, "y0", "y1")):
        if not (ax.axison and axis.get_visible()):
            continue
        labels = [tick.label1 for tick in axis._update_ticks() if _shown(tick.label1) and tick.label1.get_rotation() == 0]
        boxes = sorted(((t.get_window_extent(renderer), t) for t in labels), key=lambda bt: getattr(bt[0], lo))
        for (a, ta), (b, tb) in pairwise(boxes):
            em = ta.get_fontsize() * renderer.points_to_pixels(1.0)
            if getattr(b, lo) - getattr(a, hi) < TICK_GAP_EM * em:
                problems.append(f"{axis.axis_name} tick labels {ta.get_text()!r} and {tb.get_text()!r} run together")
    return problems


def _few_ticks(ax) -> list[str]:
    """Axes of a plot (not images, not colour bars) with fewer than three labelled ticks in view: too few to read a
    value off (a log axis spanning under a decade showed two)."""
    if not ax.axison or not ax.get_lines():
        return []
    problems = []
    for axis in (ax.xaxis, ax.yaxis):
        labelled = [t for t in axis._update_ticks() if _shown(t.label1)]
        if len(labelled) < 3 and axis.get_scale() in ("log", "linear"):
            problems.append(f"the {axis.axis_name} axis has {len(labelled)} labelled ticks")
    return problems


def _hidden_lines(ax) -> list[str]:
    """Labelled lines drawn exactly over another labelled line of the same style: the one below cannot be seen."""
    lines = [ln for ln in ax.get_lines() if ln.get_visible() and not ln.get_label().startswith("_") and len(ln.get_xdata())]
    problems = []
    for i, a in enumerate(lines):
        for b in lines[i + 1:]:
            style = [(ln.get_linestyle(), ln.get_linewidth(), ln.get_marker()) for ln in (a, b)]
            if style[0] != style[1] or len(a.get_xdata()) != len(b.get_xdata()):
                continue
            pa, pb = (ln.get_transform().transform(ln.get_xydata()) for ln in (a, b))
            if np.nanmax(np.abs(pa - pb), initial=0.0) <= 2 * TOLERANCE:
                problems.append(f"line {b.get_label()!r} hides line {a.get_label()!r} (same style, same place)")
    return problems


def _shown(text) -> bool:
    return text.get_visible() and bool(text.get_text().strip()) and text.get_alpha() != 0


def _axis_texts(ax, renderer):
    """(name, text) of the texts an axes draws: titles, axis labels, the tick labels drawn, offset texts, texts
    and annotations."""
    texts = [(f"title {t.get_text()!r}", t) for t in (ax.title, ax._left_title, ax._right_title)]
    for axis in (ax.xaxis, ax.yaxis):
        if not (ax.axison and axis.get_visible()):
            continue
        texts.append((f"{axis.axis_name}label {axis.label.get_text()!r}", axis.label))
        texts.append((f"{axis.axis_name} offset text", axis.offsetText))
        for tick in axis._update_ticks():  # the ticks inside the view, as drawn
            for label in (tick.label1, tick.label2):
                if label.get_visible() and tick.get_visible():
                    texts.append((f"{axis.axis_name} tick label {label.get_text()!r}", label))
    texts += [(f"text {t.get_text()!r}", t) for t in ax.texts]
    return [(name, t) for name, t in texts if _shown(t)]


def _texts(fig, renderer):
    """(where, name, window extent) of every text drawn; a legend counts as one box."""
    boxes = []
    for t in {id(t): t for t in fig.texts + [fig._suptitle, fig._supxlabel, fig._supylabel] if t is not None}.values():
        if _shown(t):
            boxes.append(("figure", f"text {t.get_text()!r}", t.get_window_extent(renderer)))
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {k} ({ax.get_title() or ax.get_label() or 'untitled'})"
        boxes += [(where, name, t.get_window_extent(renderer)) for name, t in _axis_texts(ax, renderer)]
        if ax.get_legend() is not None:
            boxes.append((where, "legend", ax.get_legend().get_window_extent(renderer)))
    for legend in fig.legends:
        boxes.append(("figure", "legend", legend.get_window_extent(renderer)))
    return boxes


def _data_paths(ax):
    """(name, path in display coordinates, whether filled) of the data an axes draws: its lines (markers alone
    as points) and filled collections (stack plots, meshes, scatter points)."""
    from matplotlib.path import Path

    paths = []
    for line in ax.get_lines():
        if not line.get_visible() or len(line.get_xdata()) == 0:
            continue
        path = line.get_transform().transform_path(line.get_path())
        if line.get_linestyle() in ("None", "none", "", " "):  # markers only: each point
            for x, y in path.vertices:
                paths.append((f"marker of {line.get_label()!r}", Path([[x, y], [x, y]]), False))
        else:
            paths.append((f"line {line.get_label()!r}", path, False))
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, PathCollection):  # scatter: one marker per offset
            for x, y in coll.get_offset_transform().transform(coll.get_offsets()):
                paths.append((f"point of {coll.get_label()!r}", Path([[x, y], [x, y]]), False))
        else:
            transform = coll.get_transform()
            paths += [(f"area of {coll.get_label()!r}", transform.transform_path(p), True) for p in coll.get_paths()]
    return paths


def _legend_over_data(ax, renderer):
    legend = ax.get_legend()
    if legend is None or not legend.get_visible():
        return []
    box = _shrunk(legend.get_window_extent(renderer), 2 * TOLERANCE)
    if not box.overlaps(ax.get_window_extent(renderer)):
        return []
    box = Bbox.intersection(box, ax.get_window_extent(renderer))  # (data outside the axes is not drawn)
    return [name for name, path, filled in _data_paths(ax) if path.intersects_bbox(box, filled=filled)]


def layout_problems(fig) -> list[str]:
    """What is unreadable in ``fig`` once drawn: overlapping texts, texts outside the figure, legends over data
    or over another axes. An empty list for a clean figure."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    page = _shrunk(fig.bbox, -TOLERANCE)
    texts = _texts(fig, renderer)
    for where, name, box in texts:
        if not (page.containsx(box.x0) and page.containsx(box.x1) and page.containsy(box.y0) and page.containsy(box.y1)):
            problems.append(f"{where}: {name} is cut off at the figure's edge")
    for i, (where_a, a, box_a) in enumerate(texts):
        for where_b, b, box_b in texts[i + 1:]:
            if _overlap(box_a, box_b):
                problems.append(f"{where_a}: {a} overlaps {where_b}: {b}")
    for k, ax in enumerate(fig.axes):
        where = f"axes {k} ({ax.get_title() or 'untitled'})"
        problems += [f"{where}: {p}" for p in _crowded_ticks(ax, renderer) + _few_ticks(ax) + _hidden_lines(ax)]
        hits = _legend_over_data(ax, renderer)
        if hits:
            problems.append(f"{where}: the legend covers data: {', '.join(sorted(set(hits))[:4])}")
        if ax.get_legend() is not None:
            legend_box = ax.get_legend().get_window_extent(renderer)
            for j, other in enumerate(fig.axes):
                if other is not ax and _overlap(legend_box, other.get_window_extent(renderer)):
                    problems.append(f"{where}: the legend lies over axes {j} ({other.get_title() or 'untitled'})")
    return problems
