"""Figures: the format follows the extension (PNG, SVG, PDF, checked by magic bytes), `flowsim plot` on a
saved run, a bad extension is a one-line error with exit code 2, the sequential-amplification figure
puts its two leader switches apart on a time axis that still shows the 1e100 horizon, and a
convergence figure draws the fitted rate the verdict quotes; sweeps: the leader map's colours, the
direction each point reached, and `flowsim plot` on a saved sweep."""

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from typer.testing import CliRunner

import flowsim as fs
from flowsim import io, plot
from flowsim.cli import app

runner = CliRunner()
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-"}


def _is_format(path, ext) -> bool:
    head = path.read_bytes()[:400]
    if ext == ".svg":
        return head.lstrip().startswith(b"<?xml") and b"<svg" in head
    return head.startswith(MAGIC[ext])


@pytest.fixture(scope="module")
def sol():
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    return fs.solve(system, fs.Dataset([[1.0, 2.0, 3.0]], [1]), 0.05, t1=1e100, saves=200, track=("magnitude",))


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_summary_saved_in_the_format_of_its_extension(sol, tmp_path, ext):
    fig = plot.summary(sol)
    assert len(fig.axes) == 4
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert all(labels) and all(ax.get_title() for ax in fig.axes)
    assert any("direction" in s for s in labels) and any("share" in s for s in labels)
    assert "SAM" in fig.get_suptitle() and "DiagonalNet" in fig.get_suptitle() and sol.status in fig.get_suptitle()
    assert "Solution(" not in fig.get_suptitle()
    path = plot.save(fig, tmp_path / f"run{ext.upper() if ext == '.pdf' else ext}")
    assert _is_format(path, ext)
    for other in set(MAGIC) - {ext}:
        assert not path.read_bytes().startswith(MAGIC[other])


def test_save_rejects_other_extensions(tmp_path):
    for name in ("run.jpg", "run", "run.png.txt"):
        with pytest.raises(ValueError, match="extension"):
            plot.save(Figure(), tmp_path / name)
        assert not (tmp_path / name).exists()


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_cli_plot_on_a_saved_run(sol, tmp_path, ext):
    run = tmp_path / "run.nc"
    io.save(sol, run)
    out = tmp_path / f"fig{ext}"
    r = runner.invoke(app, ["plot", str(run), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert _is_format(out, ext)


def test_cli_plot_on_a_saved_discrete_run_draws_its_records(tmp_path, monkeypatch):
    data = fs.Dataset([[1.0, 2.0, 3.0]], [1])
    run = fs.iterate(fs.optimizers.sam(0.05, 0.1), fs.DiagonalNet(2), "logistic", data, steps=3000, init=0.05,
                     records=60)
    io.save(run, tmp_path / "it.nc")
    drawn, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **kw: drawn.append(fig) or savefig(fig, *a, **kw))
    r = runner.invoke(app, ["plot", str(tmp_path / "it.nc"), "--out", str(tmp_path / "it.png")])
    assert r.exit_code == 0, r.output
    assert _is_format(tmp_path / "it.png", ".png")
    fig = drawn[0]
    assert "sam (discrete) on DiagonalNet" in fig.get_suptitle() and "logistic loss" in fig.get_suptitle()
    lines = fig.axes[0].get_lines()[:3]  # |beta_j| against log10 t (t = the sum of the step sizes), step 0 left out
    np.testing.assert_allclose(lines[2].get_xdata(), np.log10(run.t[1:]), rtol=0, atol=1e-15)
    np.testing.assert_allclose(lines[2].get_ydata(), np.abs(run.beta[1:, 2]), rtol=1e-15)
    assert lines[0].get_label() == "beta_1"


def test_cli_plot_bad_extension_is_a_one_line_error(sol, tmp_path):
    run = tmp_path / "run.nc"
    io.save(sol, run)
    r = runner.invoke(app, ["plot", str(run), "--out", str(tmp_path / "fig.jpg")])
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("flowsim: error:") and ".jpg" in err
    assert "Traceback" not in r.output and not (tmp_path / "fig.jpg").exists()


def test_amplification_figure_separates_the_switches(sol):
    from flowsim.reproduce.sam import amplification_figure

    sw = [e["log10_t"] for e in fs.switch_times(sol)]
    assert len(sw) == 2 and sw[0] < 1 and sw[1] > 5  # log10 t = 0.46 and 6.38
    fig = amplification_figure({"mu=(1, 2, 3), alpha=0.05": sol})
    fig.draw_without_rendering()
    for ax in fig.axes[:2]:
        assert ax.get_xlim()[1] >= 99  # the horizon t = 1e100 is on the axis ...
        frac = [ax.transAxes.inverted().transform(ax.transData.transform((x, 1.0)))[0] for x in sw]
        assert 0.05 < frac[0] < frac[1] < 0.95
        assert frac[1] - frac[0] > 0.1  # ... and the switches are not squeezed together near its start
        assert ax.get_title() and ax.get_ylabel() and ax.get_xlabel()


def test_margin_gaps_draw_the_rate_the_verdict_quotes():
    data = fs.Dataset([[1.0, 2.0]], [1])
    s = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), data, 0.2, t1=1e30)
    refs = {"l1": fs.max_margin(data, 1), "l2": fs.max_margin(data, 2)}
    ax = plot.margin_gaps(s, refs)
    rate = fs.convergence(s, refs["l1"]).rate
    fits = [t.get_text() for t in ax.get_legend().get_texts() if "fit" in t.get_text()]
    assert any(t.startswith("l1 fit") and f"^-{rate:.3g}" in t for t in fits), fits
    assert ax.get_xscale() == "log" and ax.get_title() and ax.get_ylabel()


@pytest.fixture(scope="module")
def sweeps():
    """Sweeps of l2-SAM over alpha (small alphas collapse), over (alpha, rho), and over three keys."""
    system, data = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2)), fs.Dataset([[1.0, 2.0, 3.0]], [1])
    alphas = np.geomspace(0.02, 1.0, 7)
    return (fs.sweep(system, data, {"alpha": alphas}, t1=1e20, saves=40),
            fs.sweep(system, data, {"alpha": alphas[::2], "rho": [0.0, 0.1, 0.2]}, t1=1e20, saves=40),
            fs.sweep(system, data, {"alpha_1": [0.05, 0.1], "alpha_2": [0.05, 0.1], "rho": [0.1, 0.2]}, t1=1e5,
                     saves=10))


def test_leader_map_colours_each_leader_as_its_colour_bar_names_it(sweeps):
    """Cell colours and colour-bar labels agree: 0 (the point had ended) grey, j the colour labelled beta_j
    (the map drew 'ended' as beta_1's colour and beta_2, beta_3 alike)."""
    ds = sweeps[0]
    d = ds.sizes["coordinate"]
    ax = plot.leader_map(ds)
    mesh = ax.collections[0]
    assert set(np.unique(ds["leader"].values)) == set(range(d + 1))  # every label occurs: collapsed points too
    colours = mesh.to_rgba(np.arange(d + 1))
    assert len({tuple(c) for c in colours}) == d + 1
    np.testing.assert_allclose(colours, [to_rgba(c) for c in ["0.85"] + [f"C{j}" for j in range(d)]])
    bar = ax.figure.axes[-1]
    labels = {round(t): label.get_text() for t, label in zip(bar.get_yticks(), bar.get_yticklabels())}
    assert labels == {0: "ended (or beta = 0)", **{j: f"beta_{j}" for j in range(1, d + 1)}}


def test_many_coordinates_name_the_largest_and_grey_the_rest():
    """A digits run (d = 64) drew 64 legend entries over its panels, 10 colours repeating, and a leader map's
    colour bar 64 overlapping names: the 8 largest shares are named now, the others one grey entry, and a
    map's bar names the leaders that occur."""
    data = fs.datasets.iid_gaussian(30, 20, seed=3)
    system = fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.GD())
    sol = fs.solve(system, data, 0.05, log10_t1=10)
    fig = plot.summary(sol)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert ("dashed: beta_j < 0" in legend) == bool((sol.beta < 0).any())
    legend = [t for t in legend if t != "dashed: beta_j < 0"]
    assert len(legend) == 9 and legend[0] == "the other 12 coordinates"
    shares = np.abs(sol.beta) / np.abs(sol.beta).sum(axis=1, keepdims=True)
    named = sorted(np.argsort(-shares.max(axis=0))[:8] + 1)
    assert legend[1:] == [f"beta_{j}" for j in named]
    ds = fs.sweep(system, data, {"alpha": [0.02, 0.05]}, log10_t1=10, saves=20)
    ax = plot.leader_map(ds)
    bar = ax.figure.axes[-1]
    assert [t.get_text() for t in bar.get_yticklabels()] == [
        "ended (or beta = 0)" if k == 0 else f"beta_{k}" for k in np.unique(ds["leader"].values[:, 1:])]


def test_a_switch_map_leaves_points_not_run_to_the_end_blank(sweeps):
    """Interrupted or failed points were hatched "no switch", as if their runs had been seen through."""
    ds = sweeps[1].copy()
    none = np.argwhere(np.isnan(fs.first_switch_log10_t(ds).transpose(*ds["status"].dims).values))
    status = ds["status"].values.astype("<U16")
    status[tuple(none[0])] = "interrupted"  # (its switches unknown: NaN, as a point without any)
    ds["status"] = (ds["status"].dims, status)
    first = fs.first_switch_log10_t(ds)
    ax = plot.switch_time_map(first)
    hatched = [p for p in ax.patches if p.get_hatch()]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "not run to the end (failed, interrupted)" in legend
    assert len(hatched) == int((np.isnan(first.values) & (first["status"].values != "interrupted")).sum())


def test_a_map_of_one_key_over_a_sweep_of_two_says_what_to_select(sweeps):
    with pytest.raises(ValueError, match=r"also runs over \['rho'\].*isel\(rho=0\)"):
        plot.leader_map(sweeps[1])
    with pytest.raises(ValueError, match="no grid key 'rho'"):
        plot.leader_map(sweeps[0], key="rho")
    plot.leader_map(sweeps[1].isel(rho=1))  # one value selected: drawn


def test_end_direction_draws_the_directions_reached_and_marks_the_rest(sweeps):
    ds = sweeps[0]
    ax = plot.end_direction(ds)
    lines = {line.get_label(): line for line in ax.get_lines()}
    done = np.isin(ds["status"].values, ("completed", "converged"))
    assert (~done).any() and done.any()
    beta = ds["beta_end"].values
    np.testing.assert_allclose(lines["beta_3"].get_ydata()[done], (beta[:, 2] / np.linalg.norm(beta, axis=1))[done])
    assert np.isnan(lines["beta_3"].get_ydata()[~done]).all()
    assert lines["collapsed"].get_xdata().size == (ds["status"].values == "collapsed").sum()
    # a point held at its limit (stalled) has a direction; each other status gets a marker of its own
    status = ds["status"].values.copy()
    first_done, last_done = np.flatnonzero(done)[[0, -1]]
    status[first_done], status[last_done] = "stalled", "failed"
    drawn = plot.end_direction(ds.assign(status=(ds["status"].dims, status)))
    lines = {line.get_label(): line for line in drawn.get_lines()}
    assert np.isfinite(lines["beta_3"].get_ydata()[first_done]) and np.isnan(lines["beta_3"].get_ydata()[last_done])
    markers = [lines[name].get_marker() for name in ("collapsed", "failed")]
    assert "None" not in markers and len(set(markers)) == 2


@pytest.mark.parametrize("which", [0, 1])
def test_cli_plot_on_a_saved_sweep(sweeps, tmp_path, which):
    io.save(sweeps[which], tmp_path / "sweep.nc")
    r = runner.invoke(app, ["plot", str(tmp_path / "sweep.nc"), "--out", str(tmp_path / "sweep.png")])
    assert r.exit_code == 0, r.output
    assert _is_format(tmp_path / "sweep.png", ".png")
    fig = plot.sweep_summary(sweeps[which])
    assert "collapsed" in fig.get_suptitle() and ("alpha, rho" in fig.get_suptitle()) == (which == 1)


def test_a_two_key_summary_marks_points_that_stopped_and_ticks_the_grid(sweeps):
    """Collapsed points looked like 'no switch' on the switch-time map and 'ended' beside it: each panel
    marks them at their grid points, named in its legend (beside 'no switch'); the axes are ticked at the
    grid's own values."""
    ds = sweeps[1]
    fig = plot.sweep_summary(ds)
    stopped = ds["status"].transpose("rho", "alpha").values == "collapsed"
    assert stopped.any()
    X, Y = np.meshgrid(ds["alpha"].values, ds["rho"].values)
    maps = [ax for ax in fig.axes if ax.get_title()]  # (their colour bars are axes too)
    assert len(maps) == 2
    for ax in maps:
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "collapsed" in legend and ("no switch" in legend) == (ax is maps[0])
        mark = [line for line in ax.get_lines() if line.get_label() == "collapsed"][0]
        assert sorted(zip(mark.get_xdata(), mark.get_ydata())) == sorted(zip(X[stopped], Y[stopped]))
        np.testing.assert_allclose(ax.get_xticks(), ds["alpha"].values)
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"{r:g}" for r in ds["rho"].values]


def test_the_status_legend_is_below_the_map_and_no_values_get_no_colour_bar(sweeps):
    """The legend sat on the map's top right and hid markers there; a map with no switch anywhere had a colour
    bar from -0.1 to 0.1."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plot.sweep_summary(sweeps[1])
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for ax in [ax for ax in fig.axes if ax.get_title()]:
        assert ax.get_legend().get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0
    none = fs.first_switch_log10_t(sweeps[1]).transpose("rho", "alpha") * np.nan
    assert len(plot.switch_time_map(none).figure.axes) == 1


def test_a_short_time_span_gets_ticks_of_its_own():
    """A span of under a decade (log10 t from 0.3 to 1.6) showed one tick, "1", on the symlog axis."""
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    ax.plot([0.3, 1.6], [0.0, 1.0])
    plot.log_time_axis(ax)
    lo, hi = ax.get_xlim()
    assert np.sum((ax.get_xticks() >= lo) & (ax.get_xticks() <= hi)) >= 3
    ax.plot([-5.0, 100.0], [0.0, 1.0])  # a long span keeps the decade ticks
    plot.log_time_axis(ax)
    assert {-1.0, 0.0, 1.0, 10.0, 100.0} <= set(ax.get_xticks().tolist())


def test_the_modules_a_user_reaches_for_are_attributes_of_flowsim():
    """``fs.plot`` and ``fs.io`` after ``import flowsim as fs`` (the README's snippets use them)."""
    import flowsim.io
    import flowsim.plot

    assert fs.plot is flowsim.plot and fs.io is flowsim.io
    assert set(fs.__all__) >= {"plot", "io", "datasets", "optimizers"}


def test_a_map_over_one_key_names_what_was_selected_and_switch_time_map_wants_two(sweeps):
    ds = sweeps[1]
    rho = float(ds["rho"].values[1])
    assert f"rho = {rho:.4g}" in plot.leader_map(ds.isel(rho=1)).get_title()
    assert plot.leader_map(ds.sel(rho=rho, method="nearest")).get_title().endswith(f"rho = {rho:.4g}")
    with pytest.raises(ValueError, match="over two grid keys; this one is over \\['alpha'\\]: for a sweep over one"):
        plot.switch_time_map(fs.first_switch_log10_t(sweeps[0]))


def test_a_sweep_figure_goes_to_a_new_folder_and_its_title_says_rho_is_swept(sweeps, tmp_path):
    io.save(sweeps[1], tmp_path / "sweep.nc")
    out = tmp_path / "figures" / "new" / "sweep.png"
    r = runner.invoke(app, ["plot", str(tmp_path / "sweep.nc"), "--out", str(out)])
    assert r.exit_code == 0 and _is_format(out, ".png"), r.output
    title = plot.sweep_summary(sweeps[1]).get_suptitle()
    assert "rho swept" in title and "rho=0.1" not in title
    assert "rho swept" in sweeps[1].attrs["system"] and sweeps[1].attrs["init"] == "alpha swept"  # so the file says
    assert "rho=0.1" in plot.sweep_summary(sweeps[0]).get_suptitle()  # not swept: the flow's own


def test_cells_follow_the_grid_spacing_and_positive_values_stay_positive():
    """Cell edges lie midway between grid values: in log for geometric grids (alpha), linearly for even ones
    (the phase diagram's linspace(0.02, 0.4) spans a factor 20 and stays linear); of two positive values,
    in log where a linear first cell would reach below 0 (alpha = [0.05, 0.2] drew a cell from -0.025)."""
    even, geometric = np.linspace(0.02, 0.4, 5), np.geomspace(0.02, 0.4, 5)
    np.testing.assert_allclose(np.diff(plot._edges(even)), 0.095)
    np.testing.assert_allclose(np.diff(np.log(plot._edges(geometric))), np.log(20) / 4)
    np.testing.assert_allclose(plot._edges([0.05, 0.2]), [0.025, 0.1, 0.4])
    np.testing.assert_allclose(plot._edges([0.1, 0.2, 0.3]), [0.05, 0.15, 0.25, 0.35])
    np.testing.assert_allclose(plot._edges([0.0, 0.1]), [-0.05, 0.05, 0.15])  # rho = 0 is a value like any
    ax = plot.leader_map(sweep_over("alpha", geometric))
    assert ax.get_yscale() == "log" and plot.leader_map(sweep_over("alpha", even)).get_yscale() == "linear"


def sweep_over(key, values):
    """A made-up sweep Dataset over one key (leaders only), for the axes and cells."""
    import xarray as xr

    t = np.linspace(-3, 10, 6)
    lead = np.ones((len(values), len(t)), int)
    beta = np.ones(lead.shape + (2,))
    return xr.Dataset({"leader": ((key, "log10_t"), lead), "beta": ((key, "log10_t", "coordinate"), beta)},
                      coords={key: values, "log10_t": t, "coordinate": [1, 2]})


def test_cli_plot_on_a_sweep_over_three_keys_is_one_line(sweeps, tmp_path):
    io.save(sweeps[2], tmp_path / "sweep.nc")
    r = runner.invoke(app, ["plot", str(tmp_path / "sweep.nc"), "--out", str(tmp_path / "sweep.png")])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "3 grid keys" in r.stderr
    assert not (tmp_path / "sweep.png").exists()


def test_a_regression_summary_draws_residuals_not_a_direction():
    """A regression run converges to a point: its summary's second panel is the residuals x_i.beta - y_i (read from
    beta here, not from the run's margins), labelled so, and margin gaps refuse it."""
    X, y = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]), np.array([0.5, -1.5])
    run = fs.solve(fs.derive(fs.Linear(), "square", fs.GD()), fs.Dataset(X, y, task="regression"), 0.0, t1=1e4,
                   saves=40)
    fig = plot.summary(run)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert "residual |x_i.beta - y_i|" in labels and not any("direction" in lb or "margin" in lb for lb in labels)
    panel = next(ax for ax in fig.axes if ax.get_ylabel().startswith("residual"))
    keep = np.isfinite(run.log10_t)
    largest = np.abs(run.beta[keep] @ X.T - y).max(axis=1)
    np.testing.assert_allclose(panel.lines[0].get_ydata(), np.maximum(largest, np.finfo(float).tiny), rtol=1e-9,
                               atol=1e-14)
    with pytest.raises(ValueError, match="regression run converges to a point"):
        plot.margin_gaps(run, {"l2": fs.max_margin(fs.Dataset(X, [1, 1]), 2)})
    with pytest.raises(ValueError, match="a classification run has margins"):
        plot.residuals_vs_log_t(fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset(X, [1, 1]), 0.1,
                                         t1=10.0))
