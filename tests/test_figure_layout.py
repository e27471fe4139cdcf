"""Every figure the report and ``flowsim plot`` write is readable: no texts overlapping or cut off at the figure's
edge, tick labels apart and at least three per axis, legends off the data, no line hidden under another (the
checker of figure_layout.py, on figures made to break each rule, then on flowsim's own figures)."""

import numpy as np
import pytest
from figure_layout import layout_problems
from matplotlib.figure import Figure

import flowsim as fs
from flowsim import plot
from flowsim.reproduce import adam, depth_maps, sam, scans


def _axes(**kw):
    return Figure(figsize=(5, 3.5), constrained_layout=True, **kw).subplots()


def test_the_checker_finds_a_legend_over_lines_and_over_a_filled_area():
    ax = _axes()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="rising")
    ax.plot(x, 1 - x, label="falling")
    ax.legend(loc="center")
    assert any("legend covers data" in p for p in layout_problems(ax.figure))
    ax = _axes()
    ax.stackplot(x, [x, 1 - x], labels=["a", "b"])
    ax.legend(loc="lower left")
    assert any("legend covers data" in p for p in layout_problems(ax.figure))
    plot.legend_beside(ax)
    assert layout_problems(ax.figure) == []


def test_the_checker_finds_overlapping_texts_a_clipped_title_and_ticks_that_run_together():
    ax = _axes()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "one label")
    ax.text(0.52, 0.5, "another label")
    assert any("overlaps" in p for p in layout_problems(ax.figure))
    ax = _axes()
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title far too long for a figure five inches wide, so that it runs off both of its edges")
    assert any("cut off" in p for p in layout_problems(ax.figure))
    ax = _axes()
    ax.plot([0, 1], [0, 1])
    ax.set_xticks([0.0, 0.02, 0.5, 1.0], ["100000", "200000", "0.5", "1"])
    assert any("run together" in p for p in layout_problems(ax.figure))


def test_the_checker_finds_a_hidden_line_and_an_axis_of_two_ticks():
    ax = _axes()
    x = np.linspace(0, 1, 30)
    ax.plot(x, x**2, "--", label="control, SAM")
    ax.plot(x, x**2, "--", label="control, GD")
    assert any("hides" in p for p in layout_problems(ax.figure))
    ax = _axes()
    ax.semilogy([1, 2, 3], [0.85, 1.0, 1.4])
    assert any("2 labelled ticks" in p for p in layout_problems(ax.figure))
    plot.short_log_span_ticks(ax)
    assert layout_problems(ax.figure) == []


def test_narrow_time_panels_to_log10_t_100_keep_their_labels_apart():
    """sam_linf's ten panels (22 inches for six columns) to log10 t = 100: every tick at 1, 2, 5 of each decade
    ran "10 20 50 100" together; log_time_axis leaves out the ticks whose labels would collide, keeping 0, 1, 10, 100."""
    from matplotlib.ticker import FixedLocator

    fig = Figure(figsize=(22, 6.8), constrained_layout=True)
    axes = fig.subplots(2, 6)
    for ax in axes.ravel():
        ax.plot(np.linspace(-2, 100, 50), np.linspace(0, 1, 50))
        plot.log_time_axis(ax)
        ax.set_xlim(-2, 100)
    assert layout_problems(fig) == []
    assert {0.0, 1.0, 10.0, 100.0} <= set(axes[0, 0].get_xticks().tolist())
    every = [m * 10.0**k for k in range(3) for m in (1, 2, 5)] + [-2.0, -1.0, 0.0]
    for ax in axes.ravel():
        ax.xaxis.set_major_locator(FixedLocator(every))
    assert any("run together" in p for p in layout_problems(fig))


@pytest.fixture(scope="module")
def runs():
    data = fs.Dataset([[1.0, 2.0, 3.0]], [1])
    flow = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2)), data, 0.05, t1=1e100, saves=200,
                    track=("magnitude",))
    steps = fs.iterate(fs.optimizers.sam(0.05, 0.1), fs.DiagonalNet(2), "logistic", data, steps=3000, init=0.05,
                       records=60)
    signed = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()),
                      fs.Dataset([[1.0, -2.0, 0.5], [0.3, -1.0, 2.0]], [1, -1]), 0.1, t1=1e10)
    return {"flow": flow, "iterate": steps, "signed": signed}


@pytest.mark.parametrize("which", ["flow", "iterate", "signed"])
def test_the_summary_of_flowsim_plot_is_readable(runs, which):
    """The four panels of a run's figure: the legends of |beta_j|, the direction and the stacked shares were on the
    data of an iterate run."""
    fig = plot.summary(runs[which])
    assert layout_problems(fig) == []
    for ax in fig.axes[:3]:
        legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
        assert legend.x0 >= ax.get_window_extent(fig.canvas.get_renderer()).x1  # beside the axes


def test_beta_vs_log_t_keeps_the_signs_on_its_log_axis(runs):
    """|beta_j| solid where beta_j >= 0 and dashed where beta_j < 0, each part the run's own values."""
    sol = runs["signed"]
    assert (sol.beta[-1] < 0).any() and (sol.beta[-1] > 0).any()
    ax = plot.beta_vs_log_t(sol)
    assert layout_problems(ax.figure) == []
    keep = np.isfinite(sol.log10_t)
    beta = sol.beta[keep]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    for j in range(beta.shape[1]):
        solid = lines[f"beta_{j + 1}"]
        np.testing.assert_array_equal(np.isfinite(solid.get_ydata()), beta[:, j] >= 0)
        dashed = [ln for ln in ax.get_lines() if ln.get_color() == solid.get_color() and ln is not solid]
        assert bool(dashed) == bool((beta[:, j] < 0).any())
        for ln in dashed:
            assert ln.get_linestyle() != "-"
            np.testing.assert_allclose(ln.get_ydata()[beta[:, j] < 0], -beta[beta[:, j] < 0, j], rtol=0)
    assert "dashed: beta_j < 0" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_margin_gaps_and_a_sweep_summary_are_readable():
    data = fs.Dataset([[1.0, 2.0]], [1])
    s = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), data, 0.2, t1=1e30)
    ax = plot.margin_gaps(s, {"l1": fs.max_margin(data, 1), "l2": fs.max_margin(data, 2)})
    assert layout_problems(ax.figure) == []
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    ds = fs.sweep(system, fs.Dataset([[1.0, 2.0, 3.0]], [1]), {"alpha": np.geomspace(0.02, 1.0, 5)}, t1=1e20, saves=40)
    assert layout_problems(plot.sweep_summary(ds)) == []


def test_the_depth3_figure_names_the_order_of_leaders_at_each_switch():
    alphas, rhos = (0.1, 0.2, 0.3), (0.1, 0.2, 0.4)
    table = np.array([[0.7, np.nan, np.nan], [1.48, 0.4, np.nan], [1.35, 1.2, 0.76]])
    orders = {(i, j): ([2, 3] if np.isfinite(table[i, j]) else [3]) for i in range(3) for j in range(3)}
    orders[1, 0], orders[2, 1] = [1, 2, 3], [1, 2, 3]
    last = np.full_like(table, np.nan)
    last[1, 0], last[2, 1] = 2.5, 32.05  # the 2 -> 3 switch past the first horizon, 1e30
    fig = sam._depth3_figure(alphas, rhos, table, last, orders)
    assert layout_problems(fig) == []  # (1.48 and 1.35 at alpha 0.1: their labels overlapped)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == sorted(["2 > 3"] * 4 + ["1 > 2 > 3"] * 2)
    squares = [line for line in fig.axes[0].lines if line.get_marker() == "s" and len(line.get_xdata())]
    assert sorted(y for line in squares for y in line.get_ydata() if np.isfinite(y)) == [2.5, 32.05]
    legend = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert "alpha 0.2: beta_3" in legend and "alpha 0.3: beta_3" in legend


def _figures_of(check, tmp_path, monkeypatch):
    """The figures a reproduction check saves, kept as drawn (quick mode)."""
    saved = {}
    original = Figure.savefig

    def keep(fig, path, *args, **kw):
        saved[str(path).rsplit("/", 1)[-1]] = fig
        return original(fig, path, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    check(tmp_path, quick=True)
    return saved


DRAWING = [c for c in sam.CHECKS if c not in (sam.depth3_switches, sam.crossover_identity)] + [adam.per_sample_vs_full, adam.signum_batches, adam.sign_flow_limit,
                                                                    adam.proxy_flow_limit, adam.fixed_point_basins] + scans.CHECKS + depth_maps.CHECKS


@pytest.mark.slow
@pytest.mark.parametrize("check", DRAWING, ids=[c.__name__ for c in DRAWING])
def test_every_figure_of_the_report_is_readable(check, tmp_path, monkeypatch):
    """Each figure of ``flowsim reproduce --quick`` (5-30 s each): the legends over the data of sam_depth2 and the
    Adam figures, sam_linf's clipped title and crowded ticks, the signum panel of two ticks, the digits control
    hidden under its claim's curve."""
    figures = _figures_of(check, tmp_path, monkeypatch)
    assert figures
    for name, fig in figures.items():
        assert layout_problems(fig) == [], name


@pytest.mark.slow
def test_the_summary_of_a_sweep_over_two_keys_is_readable():
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    ds = fs.sweep(system, fs.Dataset([[1.0, 2.0, 3.0]], [1]), {"alpha": np.geomspace(0.02, 1.0, 4), "rho": [0.0, 0.1, 0.2]},
                  t1=1e20, saves=40)
    assert layout_problems(plot.sweep_summary(ds)) == []
