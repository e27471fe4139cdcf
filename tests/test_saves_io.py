"""Save points (the default grid, save_at_log10_t, save_at_t), dense evaluation (Solution.evaluate) and saved runs read
back as Solutions (flowsim.io), with the file layout, permissions and interrupted writes."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp

import flowsim as fs
from flowsim import io
from flowsim.symbolic.spec import spec, system_from_spec

MU3 = fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1])
L2SAM = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))


@pytest.fixture(scope="module")
def readme_run():
    return fs.solve(L2SAM, MU3, 0.05, t1=1e100, track=("magnitude",))


def test_default_grid_resolves_the_early_dynamics_at_any_horizon():
    sol = fs.solve(L2SAM, MU3, 0.05, log10_t1=1e6, saves=300)
    lt = sol.log10_t
    assert len(lt) == 300 and np.all(np.isfinite(lt)) and np.all(np.diff(lt) > 0)
    assert lt[0] == pytest.approx(-6.0) and lt[-1] == pytest.approx(1e6)
    assert ((lt > 0) & (lt < 10)).sum() >= 15  # the old log-spaced grid had none below log10 t = 3353
    # uniform in log10 t near the start, in log10 log10 t far out
    near = np.diff(lt[(lt > -3) & (lt < 1)])
    assert near.max() < 1.3 * near.min()
    far = np.log10(lt[lt > 1e3])
    assert np.diff(far).max() < 2 * np.diff(far).min()


def test_switches_of_the_readme_example_fall_between_close_saves(readme_run):
    lt = readme_run.log10_t
    for ev in fs.switch_times(readme_run):  # log10 t = 0.46 and 6.38
        k = np.searchsorted(lt, ev["log10_t"])
        assert lt[k] - lt[k - 1] < 0.15


def test_save_at_saves_exactly_there_and_appends_t1():
    sol = fs.solve(L2SAM, MU3, 0.05, t1=1e30, save_at_log10_t=[-2, 0.5, 7])
    np.testing.assert_allclose(sol.log10_t, [-2, 0.5, 7, 30], atol=1e-12)
    assert sol.config["saves"] == 4


def test_save_at_t_saves_at_those_times_not_at_ten_to_them():
    times = [0.5, 1, 2, 5]
    sol = fs.solve(L2SAM, MU3, 0.05, t1=1e30, save_at_t=times)
    np.testing.assert_allclose(sol.t[:4], times, rtol=1e-12)
    by_log = fs.solve(L2SAM, MU3, 0.05, t1=1e30, save_at_log10_t=np.log10(times))
    np.testing.assert_allclose(sol.beta, by_log.beta, rtol=1e-12)
    # the saves read the asked points exactly (t = 1 read log10 t = -5.6e-17 and ds.sel(log10_t=0) failed),
    # on the reduced balanced solve and on a direct one
    for system, init in ((L2SAM, 0.05), (L2SAM, [[0.05, 0.05, 0.05], [0.05, 0.04, 0.05]])):
        sol = fs.solve(system, MU3, np.array(init), t1=1e30, save_at_t=times)
        assert sol.log10_t[:4].tolist() == np.log10(times).tolist() and sol.log10_t[-1] == 30.0
        assert float(io.to_xarray(sol).sel(log10_t=0)["log10_t"]) == 0.0


def test_sweeps_take_save_times_by_either_name_and_refuse_the_unitless_one():
    by_t = fs.sweep(L2SAM, MU3, {"alpha": [0.05, 0.3]}, t1=1e10, save_at_t=[1.0, 100.0])
    np.testing.assert_allclose(by_t["log10_t"].values, [0, 2, 10], atol=1e-12)
    by_log = fs.sweep(L2SAM, MU3, {"alpha": [0.05, 0.3]}, t1=1e10, save_at_log10_t=[0, 2])
    np.testing.assert_allclose(by_t["beta"].values, by_log["beta"].values, rtol=1e-12)
    with pytest.raises(ValueError, match="save_at does not say its unit"):
        fs.sweep(L2SAM, MU3, {"alpha": [0.05]}, t1=1e10, save_at=[1.0, 100.0])


def test_the_save_finders_chebyshev_basis_and_roots_are_numpys_and_brentqs():
    from numpy.polynomial import chebyshev
    from scipy.optimize import brentq

    from flowsim.integrate.backends._tau_saves import NODES, chebyshev_basis, roots

    x = np.concatenate([[-1.0, 1.0, -1 + 1e-9, 1 - 1e-9], np.random.default_rng(0).uniform(-1, 1, 50)])
    T, dT = chebyshev_basis(x)
    np.testing.assert_allclose(T, chebyshev.chebvander(x, NODES - 1), rtol=1e-13, atol=1e-13)
    eye = np.eye(NODES)
    np.testing.assert_allclose(dT, np.stack([chebyshev.chebval(x, chebyshev.chebder(eye[k])) for k in range(NODES)], 1),
                               rtol=1e-12, atol=1e-11)  # (the trigonometric form was off by 300 at x = -1)
    # increasing u of every degree up to 12 over [-1, 1] (a positive derivative), targets inside, at the
    # ends and beyond them (rounding), one u so flat that its values at the nodes do not increase
    rng = np.random.default_rng(1)
    rows, targets, want = [], [], []
    for degree in range(1, NODES):
        slope = chebyshev.chebfit(np.linspace(-1, 1, 40), np.exp(rng.normal(size=40) * 0.3), degree - 1)
        c = np.pad(chebyshev.chebint(slope), (0, NODES - degree - 1)) + eye[0] * 50.0
        lo, hi = chebyshev.chebval(-1.0, c), chebyshev.chebval(1.0, c)
        for t in (lo, hi, lo - 1e-12, hi + 1e-12, *rng.uniform(lo, hi, 5)):
            rows.append(c)
            targets.append(t)
            want.append(-1.0 if t <= lo else 1.0 if t >= hi else brentq(lambda z: chebyshev.chebval(z, c) - t, -1, 1,
                                                                          xtol=1e-15, rtol=1e-15))
    flat = np.zeros(NODES)
    flat[0], flat[1], flat[5] = 50.0, 1e-15, 2e-15  # increasing by rounding only, wiggling across the nodes
    rows.append(flat)
    targets.append(50.0)
    got = roots(np.array(rows), np.array(targets))
    np.testing.assert_allclose(got[:-1], want, rtol=0, atol=1e-12)
    assert -1.0 <= got[-1] <= 1.0
    np.testing.assert_allclose(chebyshev.chebval(got[-1], flat), 50.0, rtol=1e-15)


@pytest.mark.parametrize("method", ["LSODA", "BDF", "Radau", "DOP853"])
def test_batched_tau_saves_are_the_dense_outputs_roots_and_values(method):
    """The saves of each step, found later in one batch from 13 samples of its dense output, are that
    dense output's roots of u = target and its values there, to rounding."""
    from scipy import integrate

    from flowsim.integrate.backends._tau_saves import _X, TauSaves, at_nodes

    solver = getattr(integrate, method)(lambda s, y: np.array([-y[0] * np.cos(y[1]), 1.0 + 0.5 * np.sin(3 * s)]),
                                        0.0, np.array([1.0, 0.0]), 20.0, rtol=1e-9, atol=1e-12)
    saves, kept, done = TauSaves(), [], 0  # targets 0.05 k, k = 1, 2, ...
    while solver.status == "running" and len(kept) < 40:
        s_old = solver.t
        solver.step()
        dense = solver.dense_output()
        k = np.arange(done + 1, int(solver.y[1] / 0.05) + 1)
        if len(k):
            saves.add(dense, k * 0.05, s_old, solver.t)
            kept.append((dense, k * 0.05))
            done = k[-1]
        for lo, hi in [(s_old, solver.t), (s_old, 0.3 * s_old + 0.7 * solver.t)]:  # a whole step, a part
            mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
            np.testing.assert_allclose(at_nodes(dense, lo, hi), dense(mid + half * _X).T, rtol=1e-14, atol=1e-15)
    s, y = saves.take()
    dense_at = np.concatenate([[k for _ in t] for k, t in kept])
    targets = np.concatenate([t for _, t in kept])
    assert len(s) == len(targets) >= 40 and np.all(np.diff(s) > 0)
    np.testing.assert_allclose(y[:, 1], targets, rtol=1e-14)
    np.testing.assert_allclose(y, [d(si) for d, si in zip(dense_at, s)], rtol=1e-13, atol=1e-15)
    assert saves.take()[0].size == 0 and saves.nbytes == 0


@pytest.mark.parametrize("d, saves, nth", [(10, 400, 1), (3000, 1000, 2)])
def test_a_ctrl_c_while_tau_saves_are_taken_keeps_them_in_order(d, saves, nth):
    """A (second) Ctrl-C landing while a batch of saves is root-found, at the segment's end (d = 10: one
    batch) or at a flush inside it (d = 3000: a step's dense output at the nodes is 13 x 3001 floats, and
    the batch is flushed every 16 MiB, three times in this segment): the batch is taken again, the solve
    ends 'interrupted' with every save it made, in order, equal to an uninterrupted solve's (the batch was
    emptied first and lost, and the end state came before the last saves)."""
    from flowsim.testing import interrupt

    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.datasets.gaussian_clusters(20, d, separation=4, seed=0)
    kw = dict(t1=1e30, backend="scipy:LSODA", clock="tau", saves=saves, throw=False)
    full = fs.solve(system, data, 0.1, **kw)
    with interrupt("tau saves", nth):
        sol = fs.solve(system, data, 0.1, **kw)
    assert sol.status == "interrupted" and full.status == "completed"
    assert len(sol.log10_t) > 50 and np.all(np.diff(sol.log10_t) >= 0) and np.isfinite(sol.beta).all()
    m = len(sol.log10_t) - 1  # the last is the state the solve ended at
    assert m == np.sum(full.log10_t <= sol.log10_t[-1]), "saves before the state the solve ended at were lost"
    np.testing.assert_allclose(sol.beta[:m], full.beta[:m], rtol=1e-12)
    np.testing.assert_allclose(sol.log10_t[:m], full.log10_t[:m], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("method", ["LSODA", "BDF", "Radau", "DOP853", "RK45"])
def test_tau_clock_saves_land_on_the_grid_to_rounding(method):
    # under the tau clock the save targets are values of the state u, found on each step's dense output
    # (of degree up to 12 for LSODA): they must be hit to rounding, not to the solver's tolerance
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.datasets.gaussian_clusters(20, 10, separation=4, seed=0)
    grid = np.linspace(-3, 25, 57)
    sol = fs.solve(system, data, 0.1, t1=1e25, save_at_log10_t=grid, backend=f"scipy:{method}", clock="tau")
    assert sol.config["clock"] == "tau" and sol.status in ("completed", "converged")
    lt = sol.log10_t[: len(grid)]
    np.testing.assert_allclose(lt, grid, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("kw, match", [
    ({"save_at_log10_t": [1, 0.5]}, "strictly increasing"),
    ({"save_at_log10_t": [1, float("nan")]}, "finite"),
    ({"save_at_log10_t": [1, 40]}, "beyond the horizon"),
    ({"save_at_log10_t": [[1, 2]]}, "1-D"),
    ({"save_at_log10_t": "soon"}, "save_at_log10_t"),
    ({"save_at_log10_t": [1], "saves": 10}, "only one of saves"),
    ({"save_at_t": [1], "save_at_log10_t": [1]}, "got save_at_log10_t and save_at_t"),
    ({"save_at_t": [0, 1]}, "save_at_t must be finite and strictly increasing times t > 0"),
    ({"save_at_t": [2, 1]}, "save_at_t must be finite and strictly increasing"),
    ({"save_at_t": [1, 1e31]}, "save_at_t goes to log10 t = 31"),
    ({"save_at": [0.5, 1, 2, 5]}, "give save_at_t=.* or save_at_log10_t="),
    ({"saves": 1}, "saves must be an integer"),
])
def test_bad_save_points_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        fs.solve(L2SAM, MU3, 0.05, t1=1e30, **kw)


def test_evaluate_repeats_the_saves_and_adds_points_on_the_same_trajectory(readme_run):
    again = readme_run.evaluate(readme_run.log10_t[100:140])
    np.testing.assert_allclose(again.beta, readme_run.beta[100:140], rtol=1e-12)
    asked = [0.3, 0.47, 6.0, 6.5, 55.5]
    new = readme_run.evaluate(asked)
    np.testing.assert_array_equal(new.log10_t, asked)
    tight = fs.solve(L2SAM, MU3, 0.05, t1=1e100, save_at_log10_t=asked, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(new.beta, tight.beta[:5], rtol=1e-6)
    with pytest.raises(ValueError, match="beyond this solve's horizon"):
        readme_run.evaluate(101)


def test_evaluate_returns_one_row_per_asked_time_in_the_order_asked(readme_run):
    asked = [7.5, 2.0, 2.0]
    rows = readme_run.evaluate(asked)
    np.testing.assert_array_equal(rows.log10_t, asked)
    tight = fs.solve(L2SAM, MU3, 0.05, t1=1e100, save_at_log10_t=[2.0, 7.5], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rows.beta, tight.beta[[1, 0, 0]], rtol=1e-6)
    np.testing.assert_allclose(rows.tau, tight.tau[[1, 0, 0]], rtol=1e-6)


def test_evaluate_past_a_collapse_names_the_times_the_flow_did_not_reach():
    sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.2, 2)), MU3, 0.05, t1=1e30, throw=False)
    assert sol.status == "collapsed"
    end = sol.log10_t[-1]
    part = sol.evaluate([end - 0.5, end - 1])
    np.testing.assert_array_equal(part.log10_t, [end - 0.5, end - 1])
    with pytest.raises(ValueError, match=rf"did not reach log10 t = {end + 1:g}, 10: .*'collapsed'"):
        sol.evaluate([end - 1, end - 0.5, end + 1, 10])


def test_evaluate_a_sign_flow_across_its_switches():
    data = fs.Dataset(np.array([[1.0, -2.0, 3.0], [2.0, 1.0, -1.0]]), [1, 1])
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.SignFlow()), data, 0.05, t1=1e30, saves=30)
    assert sol.stats["switches"] > 0
    np.testing.assert_allclose(sol.evaluate(sol.log10_t[3:]).beta, sol.beta[3:], rtol=1e-12, atol=1e-15)


def test_a_saved_run_reads_back_as_a_solution_every_analysis_takes(readme_run, tmp_path):
    path = io.save(readme_run, tmp_path / "run.nc")
    back = io.load(path, as_solution=True)
    for name in ("log10_t", "tau", "params", "beta", "log_loss", "margins"):
        np.testing.assert_array_equal(getattr(back, name), getattr(readme_run, name))
    assert (back.status, back.events, back.config) == (readme_run.status, readme_run.events, readme_run.config)
    assert fs.switch_times(back) == fs.switch_times(readme_run)
    np.testing.assert_array_equal(fs.limit_direction(back).direction, fs.limit_direction(readme_run).direction)
    np.testing.assert_allclose(back.evaluate([6.0]).beta, readme_run.evaluate([6.0]).beta, rtol=1e-12)


def test_a_saved_switch_names_the_coordinate_the_file_labels(readme_run, tmp_path):
    """A saved run labels its coordinates 1..d as the papers; its events name them by ``*_coordinate`` (1-based)
    next to ``*_index`` (0-based columns of sol.beta): ``ds.sel(coordinate=e["to_coordinate"])`` is the new
    leader, the largest |beta_j| just after the switch. No bare "from"/"to" key is left to misread."""
    ds = io.load(io.save(readme_run, tmp_path / "run.nc"))
    events = json.loads(ds.attrs["events"])
    switches = [e for e in events if e["kind"] == "lead_magnitude"]
    assert len(switches) == 2 and all(not {"from", "to"} & set(e) for e in events)
    for e in switches:
        after = ds["beta"].sel(log10_t=slice(e["log10_t"], None)).isel(log10_t=0)
        lead = int(np.argmax(np.abs(after.values)))
        assert ds["coordinate"].values[lead] == e["to_coordinate"] == e["to_index"] + 1
        assert float(abs(ds["beta"].sel(coordinate=e["to_coordinate"]).sel(log10_t=after["log10_t"]))) == \
            float(np.abs(after).max())
        assert float(abs(after.sel(coordinate=e["from_coordinate"]))) < float(np.abs(after).max())


def test_events_and_config_read_back_equal(tmp_path):
    """l_inf-SAM's entries pinned on their planes, and the tracked scores, read back equal (they were tuples
    in memory and lists from the file)."""
    sol = fs.solve(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(0.1, float("inf"))),
                   fs.Dataset([[1.0, 2.0]], [1]), [0.3, 0.05], t1=1e20, track=("magnitude",))
    assert any(e.get("pinned") for e in sol.events)
    path = io.save(sol, tmp_path / "run.nc")
    back = io.load(path, as_solution=True)
    assert (back.events, back.config) == (sol.events, sol.config)
    # a pinned entry names its place in the file's labels: that entry of params is 0 from then on (w_2 < rho)
    ds = io.load(path)
    (entry,) = [x for e in json.loads(ds.attrs["events"]) for x in e.get("pinned", [])]
    assert (entry["layer"], entry["coordinate"]) == (ds["layer"].values[0], 2)
    assert float(ds["params"].sel(layer=entry["layer"], coordinate=entry["coordinate"]).isel(log10_t=-1)) == 0.0
    assert float(ds["params"].isel(layer=0, coordinate=0, log10_t=-1)) > 0


def test_saved_layout(readme_run, tmp_path):
    ds = io.load(io.save(readme_run, tmp_path / "run.nc"))
    assert ds["beta"].dims == ("log10_t", "coordinate") and ds.indexes["log10_t"].is_monotonic_increasing
    assert np.all(np.isfinite(ds["log10_t"].values))
    assert ds["coordinate"].values.tolist() == [1, 2, 3] and ds["sample"].values.tolist() == [1]
    assert ds.attrs["Conventions"].startswith("CF-")
    for name in ds.variables:
        if name != "layer":
            assert ds[name].attrs["long_name"] and "units" in ds[name].attrs, name


def test_sweeps_share_the_layout(tmp_path):
    ds = fs.sweep(L2SAM, MU3, {"alpha": [0.05, 0.3]}, t1=1e10, saves=30)
    back = io.load(io.save(ds, tmp_path / "sweep.nc"))
    assert back["coordinate"].values.tolist() == [1, 2, 3] and "long_name" in back["leader"].attrs
    assert set(np.unique(back["leader"].values)) <= {0, 1, 2, 3} and np.all(np.isfinite(back["log10_t"].values))
    # the numbers among the attrs read back as the Python numbers saved (they were numpy scalars)
    numbers = {k: v for k, v in ds.attrs.items() if isinstance(v, (int, float))}
    assert numbers and {k: (back.attrs[k], type(back.attrs[k])) for k in numbers} == {
        k: (v, type(v)) for k, v in numbers.items()}
    with pytest.raises(ValueError, match="holds a sweep"):
        io.load(tmp_path / "sweep.nc", as_solution=True)


def test_a_saved_run_holds_its_state_at_t_0(tmp_path):
    init = np.array([[0.3, -0.2, 0.1], [0.5, 0.4, -0.6]])
    sol = fs.solve(L2SAM, MU3, init, t1=1e10, saves=10)
    ds = io.load(io.save(sol, tmp_path / "run.nc"))
    beta0 = init[0] * init[1]  # the product network's beta = w1 w2
    np.testing.assert_array_equal(ds["params_init"].values, init)
    np.testing.assert_allclose(ds["beta_init"].values, beta0, rtol=1e-15)
    margin = float(MU3.X[0] @ beta0)
    np.testing.assert_allclose(ds["margins_init"].values, [margin], rtol=1e-15)
    np.testing.assert_allclose(float(ds["log_loss_init"]), np.log(np.log1p(np.exp(-margin))), rtol=1e-14)
    assert "t = 0" in ds["beta_init"].attrs["long_name"]


def test_a_saved_run_says_its_save_points_as_asked(tmp_path):
    default = io.load(io.save(fs.solve(L2SAM, MU3, 0.05, t1=1e10), tmp_path / "default.nc"))
    arguments = json.loads(default.attrs["config"])["arguments"]
    assert arguments["saves"] == 400 and "save_at_log10_t" not in arguments and len(default.attrs["config"]) < 1000
    given = io.load(io.save(fs.solve(L2SAM, MU3, 0.05, t1=1e10, save_at_log10_t=[2, 5]), tmp_path / "given.nc"))
    assert json.loads(given.attrs["config"])["arguments"]["save_at_log10_t"] == [2, 5, 10]
    assert "just after t = 0" not in given["log10_t"].attrs["long_name"]  # its first save is at t = 100
    back = io.load(tmp_path / "default.nc", as_solution=True)
    np.testing.assert_allclose(back.evaluate(back.log10_t[::50]).beta, back.beta[::50], rtol=1e-12)


@pytest.mark.parametrize("thing", [None, {"beta": [1.0]}, np.ones(3)])
def test_saving_what_is_not_a_run_is_named(thing, tmp_path):
    with pytest.raises(TypeError, match="sol must be a flowsim.Solution"):
        io.save(thing, tmp_path / "run.nc")
    assert not list(tmp_path.iterdir())


def _altered(path, out, change):
    import xarray as xr

    with xr.open_dataset(path) as ds:
        ds = ds.load()
    change(ds)
    ds.to_netcdf(out)
    return out


def _nan_beta(ds):
    ds["beta"][3] = np.nan


@pytest.mark.parametrize("change, match", [
    (_nan_beta, "its beta is not finite \\(row 3\\) although its status 'completed'"),
    (lambda ds: ds.attrs.update(status="done"), "its status 'done' is none of flowsim's"),
    (lambda ds: ds.attrs.update(config="{oops"), "its attribute 'config' is not valid JSON"),
    (lambda ds: ds.attrs.update(events='{"a": 1}'), "its attribute 'events' holds dict, not list"),
    (lambda ds: ds.attrs.update(system_spec='{"model": 1}'), "its system_spec does not rebuild a system"),
    (lambda ds: ds.attrs.update(flow="GD()"), "a run of another system: its spec has flow SAM"),
    (lambda ds: ds.attrs.pop("stats"), "not a whole saved run: it has no attribute 'stats'"),
    (lambda ds: ds.__delitem__("margins"), "not a whole saved run: it has no variable 'margins'"),
])
def test_a_damaged_run_is_refused_as_a_solution_naming_the_file(readme_run, tmp_path, change, match):
    path = _altered(io.save(readme_run, tmp_path / "run.nc"), tmp_path / "damaged.nc", change)
    with pytest.raises(ValueError, match="damaged.nc.*" + match):
        io.load(path, as_solution=True)


def _blown_up(ds):
    ds.attrs["status"] = "blew_up"
    ds["beta"][-1] = np.inf  # w^4 at |w| = 1e100 is past float range; the state itself is finite


def test_a_blown_up_run_whose_beta_overflowed_reads_back(readme_run, tmp_path):
    path = _altered(io.save(readme_run, tmp_path / "run.nc"), tmp_path / "blown.nc", _blown_up)
    assert io.load(path, as_solution=True).status == "blew_up"


def test_a_run_read_with_the_system_of_another_flow_is_refused(readme_run, tmp_path):
    path = io.save(readme_run, tmp_path / "run.nc")
    other = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.2, 2))
    with pytest.raises(ValueError, match=r"run.nc is a run of another system: system= has flow SAM\(rho=0.2"):
        io.load(path, as_solution=True, system=other)
    with pytest.raises(ValueError, match="another system: system= has loss exponential"):
        io.load(path, as_solution=True, system=fs.derive(fs.DiagonalNet(2), "exponential", fs.SAM(0.1, 2)))
    assert io.load(path, as_solution=True, system=L2SAM).system is L2SAM


def test_files_are_0644_and_no_temporary_is_left(readme_run, tmp_path):
    old = os.umask(0o022)
    try:
        path = io.save(readme_run, tmp_path / "run.nc")
    finally:
        os.umask(old)
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert os.listdir(tmp_path) == ["run.nc"]


def test_bad_paths_are_named(readme_run, tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        io.save(readme_run, tmp_path)
    for name, instead in (("run.png", "run.nc"), ("run", "run.nc"), ("run_rho0.1", "run_rho0.1.nc"),
                          ("run.nc.png", "run.nc")):
        with pytest.raises(ValueError, match=rf"saved as netCDF: name the file with \.nc, e\.g\. \S*/{instead};"):
            io.save(readme_run, tmp_path / name)
    assert os.listdir(tmp_path) == []  # nothing written next to the folder
    with pytest.raises(ValueError, match="no saved run"):
        io.load(tmp_path / "missing.nc")
    with pytest.raises(ValueError, match="is a folder"):
        io.load(tmp_path)
    (tmp_path / "junk.nc").write_text("not netCDF")
    with pytest.raises(ValueError, match="cannot read"):
        io.load(tmp_path / "junk.nc")


def test_a_kill_during_save_finishes_the_file_then_ends_the_process(tmp_path):
    """SIGTERM mid-write raised SystemExit and removed the temporary: the run was lost with the file. The write
    now finishes, the file is put in place whole, and then the signal ends the process as it would have."""
    script = textwrap.dedent(f"""
        import time, numpy as np, xarray as xr
        from flowsim import io
        write = xr.Dataset.to_netcdf
        def slow(self, *a, **k):
            write(self, *a, **k)
            time.sleep(3)
        xr.Dataset.to_netcdf = slow
        io.save(xr.Dataset({{"beta": ("log10_t", np.ones(3))}}, coords={{"log10_t": [0.0, 1.0, 2.0]}}), {str(tmp_path / "run.nc")!r})
        print("after the save")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not any(p.endswith(".tmp") for p in os.listdir(tmp_path)):
        assert time.time() < deadline and proc.poll() is None, "the save never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM and "after the save" not in out  # the kill took its effect after
    assert os.listdir(tmp_path) == ["run.nc"]
    np.testing.assert_array_equal(io.load(tmp_path / "run.nc")["beta"].values, np.ones(3))


def test_a_signal_handled_inside_a_gc_callback_still_waits_for_the_file(tmp_path):
    """Python runs a signal handler at its next chance, which can be inside a __del__ or a gc callback (JAX has
    one), where an exception it raised was printed and dropped: the handler now only records the signal."""
    class Victim:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))  # bytecodes: the handler runs here, inside __del__

    from flowsim._interrupts import received_after

    # Python's own Ctrl-C handling, whatever this test process had (once, in a full CI run, no KeyboardInterrupt came)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with received_after():
                Victim()
                done = True  # the block goes on to its end
        assert done and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def test_git_revision_is_this_checkout():
    rev = io._git_revision()
    assert rev == "unknown" or len(rev.split("+")[0]) == 40


M = sp.Symbol("m")
SYSTEMS = [
    (fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2)),
    (fs.Linear(), "exponential", fs.AdamProxy(batch=2)),
    (fs.Parametrization("w1 w2^2", 2, lambda a, b: a * b**2), fs.Loss("two", sp.exp(-M) + 3 * sp.exp(-2 * M)),
     fs.ASAM(0.1, 2, 0.01)),
    (fs.DiagonalNet(3, "difference"), "logistic", fs.SteepestDescent(3)),
    (fs.Linear(), "logistic", fs.Flow(fs.points.Here(), fs.directions.Preconditioned("p", sp.Symbol("w", real=True) ** 2 + 1))),
]


@pytest.mark.parametrize("parts", SYSTEMS, ids=lambda p: str(p[2]))
def test_a_spec_rebuilds_the_same_system(parts):
    system = fs.derive(*parts)
    back = system_from_spec(json.loads(json.dumps(spec(system))))
    assert (back.model, back.loss, back.flow) == (system.model, system.loss, system.flow)


@dataclass(frozen=True)
class Slower(fs.directions.Gradient):
    """A part of the user's own: a run of it has no spec."""


def test_a_run_of_a_users_own_part_needs_its_system(tmp_path):
    system = fs.derive(fs.Linear(), "logistic", fs.Flow(fs.points.Here(), Slower()))
    assert spec(system) is None
    path = io.save(fs.solve(system, MU3, 0.1, t1=1e5, saves=10), tmp_path / "own.nc")
    with pytest.raises(ValueError, match="system=flowsim.derive"):
        io.load(path, as_solution=True)
    assert io.load(path, as_solution=True, system=system).status == "completed"


def test_ctrl_c_during_a_compiled_solve_keeps_what_it_computed(tmp_path):
    """A real SIGINT arrives while the second backend call runs: that call finishes, its saves are
    recorded, and the solve ends "interrupted" with every save so far."""
    script = textwrap.dedent("""
        import os, signal, numpy as np, flowsim as fs
        from flowsim.integrate.backends._diffrax import DiffraxBackend
        real, calls = DiffraxBackend.integrate, []
        def integrate(self, *a, **k):
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGINT)
            return real(self, *a, **k)
        DiffraxBackend.integrate = integrate
        sys = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
        sol = fs.solve(sys, fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1]), 0.05, t1=1e100, track=("magnitude",),
                       throw=False)
        n_calls = len(calls)
        full = fs.solve(sys, fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1]), 0.05, t1=1e100, track=("magnitude",))
        k = len(sol.log10_t) - 1  # the last row is where the solve stopped
        print(sol.status, n_calls, k, len(full.log10_t), float(np.abs(sol.beta[:k] - full.beta[:k]).max()))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    status, calls, kept, total, diff = out.stdout.split()
    assert status == "interrupted" and int(calls) == 2, out.stderr
    # the first segment ends at the first switch (log10 t = 0.46); the second call's saves are kept too
    first = np.searchsorted(fs.solve(L2SAM, MU3, 0.05, t1=1e100).log10_t, 0.46)
    assert first < int(kept) < int(total) and float(diff) == 0.0


def test_the_step_error_holds_the_parameters_to_the_tolerance_and_the_clock_on_its_own():
    """diffrax's RMS over every state entry averaged the clock's ~0 scaled error in, loosening the
    parameters' tolerance by sqrt((n + 1) / n); the clock is held to the tolerance by itself."""
    import jax.numpy as jnp

    from flowsim.integrate.backends._diffrax import error_norm

    params = np.array([0.3, -1.2, 0.7])
    assert float(error_norm(jnp.array([*params, 0.0]))) == pytest.approx(np.sqrt(np.mean(params**2)), rel=1e-15)
    assert float(error_norm(jnp.array([0.0, 0.0, 0.0, 5.0]))) == 5.0
    assert float(error_norm(jnp.array([2.0, 0.0]))) == 2.0  # one parameter: 2, where the RMS of both said 1.41


def test_blas_is_held_at_one_thread_while_any_solve_runs_and_restored_after_the_last():
    """Solves in several threads (a sweep's chunks) limit BLAS together: each restoring the limits it
    found left BLAS at one thread for good when two overlapped."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from flowsim._blas import _OneBlasThread

    def blas():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    with threadpool_limits(limits=2, user_api="blas"):
        if blas() != {2}:
            pytest.skip("this BLAS runs on one thread only")
        one = _OneBlasThread()
        one.enter()
        one.enter()  # a second solve, from another thread
        assert blas() == {1}
        one.leave()
        assert blas() == {1}  # the other still runs
        one.leave()
        assert blas() == {2}


def test_a_diffrax_solve_finds_the_margins_and_losses_of_its_saves_with_blas_on_one_thread(monkeypatch):
    """The saves' margins (a (saves, d) x (d, n) product), read just after the compiled solve: BLAS threads
    woken then waited for cores XLA's still held (up to twice the solve itself at n = d = 100, 400 saves).
    They are found with BLAS on one thread, which is restored after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from flowsim.field import vector_field

    def blas():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    seen = []
    observe = vector_field.VectorField.margins_and_log_loss

    def observing(self, *args, **kwargs):
        seen.append(blas())
        return observe(self, *args, **kwargs)

    monkeypatch.setattr(vector_field.VectorField, "margins_and_log_loss", observing)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.datasets.gaussian_clusters(20, 10, seed=0, separation=4.0)
    with threadpool_limits(limits=2, user_api="blas"):
        if blas() != {2}:
            pytest.skip("this BLAS runs on one thread only")
        sol = fs.solve(system, data, [[0.1] * 10, [0.2] * 10], t1=1e6, backend="diffrax:Tsit5")
        assert sol.status == "completed" and sol.margins.shape == (400, 20) and seen and all(s == {1} for s in seen)
        assert blas() == {2}


def test_the_log_of_softplus_is_exact_to_rounding_across_float_range():
    """log(log(1 + e^x)), the logistic loss's log (each save's loss): against mpmath at 50 digits, to a few
    roundings of the result and of softplus (the log of a number rounded to relative eps is off by eps: near
    x = 0.5413, where softplus is 1, that is all the digits), on either side of the small-x branch at -30,
    and at the ends of float range."""
    import mpmath

    from flowsim.symbolic.functions import _np_log_softplus

    x = np.concatenate([np.linspace(-745, 709, 2001), np.linspace(-31, -29, 201), [0.0, 1e-300, -1e-300, 0.5413]])
    with mpmath.workdps(50):
        exact = [mpmath.log(mpmath.log1p(mpmath.exp(mpmath.mpf(v)))) for v in x]
        error = np.array([float(abs(mpmath.mpf(g) - e)) for g, e in zip(_np_log_softplus(x), exact)])
    assert np.all(error <= 4 * np.spacing(np.abs(np.array(exact, float))) + 4 * 2.0**-53)
    assert _np_log_softplus(np.array([np.inf, -np.inf])).tolist() == [np.inf, -np.inf]
    large = x >= -30  # margins with no entry below -30 take a shorter path: the same numbers
    assert np.array_equal(_np_log_softplus(x[large]), _np_log_softplus(x)[large])


@pytest.mark.parametrize("backend", ["scipy:LSODA", "scipy:BDF", "auto"])
def test_the_losses_found_for_the_rest_point_look_back_are_the_solutions(backend):
    """Each save's loss is found once, by the look-back for rest points, and kept for the Solution. Here
    (test_invariants' depth-3 l2-SAM rest point) saves past the rest point a solver stepped across are
    dropped and their targets saved again, held: every loss must still be its own save's."""
    from flowsim.integrate.timeline import beta_margins_loss

    X = np.array([[-1.27288316, 1.88158494], [0.46245432, 0.52199432], [1.27781334, 1.13738853],
                  [0.35180389, 0.24086668], [-1.25543163, 0.70697094], [-0.00727093, -1.60658444]])
    data = fs.Dataset(X, [1, 1, 1, 1, 1, -1])
    system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(0.331226403393368, 2))
    with pytest.warns(fs.ReachabilityWarning):
        sol = fs.solve(system, data, -0.0017383405674502239, log10_t1=74.3, backend=backend)
    assert sol.status == "converged" and "rest point of the perturbed flow" in sol.message
    # (the tied system w^3 that ran, against the product w1 w2 w3 here: rounding apart)
    np.testing.assert_allclose(sol.log_loss, beta_margins_loss(sol.system, data, sol.params)[2], rtol=1e-14)
