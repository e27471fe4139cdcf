"""fs.sweep (vmapped, per point, on Dask) against per-point fs.solve, and the phase diagrams
against seed 000's Cor 3.5."""

import warnings

import numpy as np
import pytest

import flowsim as fs
from flowsim.testing import interrupt

MU3 = fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1])
L2SAM = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
ALPHAS = [0.01, 0.05, 0.3]
RHOS = [0.05, 0.2]


@pytest.fixture(scope="module")
def l2_sweep():
    return fs.sweep(L2SAM, MU3, {"alpha": ALPHAS, "rho": RHOS}, t1=1e30, saves=120, chunk_size=4)


def _compare(ds, index, sol):
    b = ds["beta"].values[index]
    reached = np.isfinite(b).all(axis=1)
    k = int(reached.sum())
    assert reached[:k].all()  # saves are a prefix of the grid
    # the vmapped solve rounds differently from the single one (7e-12 of the largest entry seen): an entry
    # passing through 0 is not resolved relative to itself, so each save also allows 1e-11 of its largest
    # entry (a scale that shrinks with the state, so collapses, beta = w1 w2 << atol**2, are still checked)
    scale = np.abs(sol.beta[:k]).max(axis=1, keepdims=True)
    assert np.all(np.abs(b[:k] - sol.beta[:k]) <= 1e-10 * np.abs(sol.beta[:k]) + 1e-11 * scale)
    np.testing.assert_allclose(ds["log_loss"].values[index][:k], sol.log_loss[:k], rtol=1e-10)
    # a collapse ends where the event's bisection puts it, on a trajectory that falls to 0 in finite time:
    # rounding differences between the vmapped and the single solve move that end point by ~1e-8 (relative to
    # its largest entry; entries far below it, and below atol, differ by more relative to themselves)
    end_rtol = 1e-7 if sol.status == "collapsed" else 1e-10
    scale = np.abs(sol.beta[-1]).max()
    np.testing.assert_allclose(ds["beta_end"].values[index], sol.beta[-1], rtol=end_rtol, atol=end_rtol * scale)
    assert ds["status"].values[index] == sol.status
    assert ds["steps"].values[index] == sol.stats["steps"]
    return k


def test_vmapped_sweep_equals_per_point_solves(l2_sweep):
    ds = l2_sweep
    assert ds.attrs["method"] == "vmap" and ds.attrs["chunks"] == 2
    assert ds["beta"].dims == ("alpha", "rho", "log10_t", "coordinate")
    statuses = set()
    for i, a in enumerate(ALPHAS):
        for j, r in enumerate(RHOS):
            sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(r, 2)), MU3, a, t1=1e30, saves=120,
                           throw=False)
            k = _compare(ds, (i, j), sol)
            statuses.add(sol.status)
            if sol.status == "completed":
                assert k == 120
            else:
                assert k < 120 and ds["leader"].values[i, j, k:].tolist() == [0] * (120 - k)
    assert statuses == {"completed", "collapsed"}  # the grid crosses the collapse boundary


def test_per_point_sweep_for_sign_flows_equals_solve():
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, float("inf")))
    data = fs.Dataset(np.array([[1.0, 2.0]]), [1])
    ds = fs.sweep(system, data, {"alpha_1": [0.05, 0.3], "alpha_2": [0.2]}, init=0.1, t1=1e20, saves=50)
    assert ds.attrs["method"] == "solve per point"
    assert ds.attrs["init"] == "alpha_1, alpha_2 swept, the others from 0.1"  # (it said "0.1")
    for i, a1 in enumerate([0.05, 0.3]):
        _compare(ds, (i, 0), fs.solve(system, data, [a1, 0.2], t1=1e20, saves=50, throw=False))


def test_a_vmapped_sweep_says_which_points_it_solved_again():
    """Points the lockstep solve hands to solve (here every one: a start that cannot separate the data ends at
    a critical point) said "method: vmap, backend: diffrax:Tsit5" in the attrs."""
    data = fs.datasets.gaussian_clusters(20, 6, seed=0)
    with pytest.warns(fs.ReachabilityWarning):
        ds = fs.sweep(L2SAM, data, {"alpha": [0.1, 0.3]}, t1=1e30, saves=20)
    again = int((ds["solver"].values != "diffrax:Tsit5 (vmap)").sum())
    assert again >= 1 and ds.attrs["solved_again"] == again
    assert ds.attrs["method"] == f"vmap ({again} points solved again one by one: 'solver')"


def test_a_sweep_solved_point_by_point_counts_its_progress_in_points(capsys):
    """Sign flows are solved a point at a time: here each point is its own chunk, so progress moves with
    every point (it was one chunk of all the points, 0/1 until the end)."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, float("inf")))
    ds = fs.sweep(system, fs.Dataset(np.array([[1.0, 2.0]]), [1]), {"alpha_1": [0.05, 0.1, 0.3]}, t1=1e10, saves=20,
                  progress=True)
    assert ds.attrs["method"] == "solve per point" and ds.attrs["chunks"] == 3
    assert "(3/3 points)" in capsys.readouterr().err


def test_schedule_flow_sweeps_in_its_clock():
    system = fs.derive(fs.Linear(), "logistic", fs.AdamProxy(lr=1.0, batch=1))
    data = fs.datasets.scaled_rademacher(4, 3, seed=0)
    ds = fs.sweep(system, data, {"alpha": [1e-3, 1e-2]}, t1=1e20, saves=30)
    assert ds.attrs["clock"] == "schedule"
    for i, a in enumerate([1e-3, 1e-2]):
        _compare(ds, (i,), fs.solve(system, data, a, t1=1e20, saves=30))


def test_dask_local_cluster_equals_local_path(l2_sweep, capsys, monkeypatch):
    """On Dask: the local numbers; progress as plain lines in a log (dask's bar wrote carriage returns); a
    Ctrl-C keeps the chunks finished (it lost the sweep)."""
    distributed = pytest.importorskip("dask.distributed")
    grid = {"alpha": ALPHAS, "rho": RHOS}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        ds = fs.sweep(L2SAM, MU3, grid, t1=1e30, saves=120, chunk_size=2, executor=client, progress=True)
        workers = {w for w in client.run(lambda: __import__("os").getpid()).values()}
        real = distributed.as_completed

        def first_then_ctrl_c(futures):
            yield next(iter(real(futures)))
            raise KeyboardInterrupt

        monkeypatch.setattr(distributed, "as_completed", first_then_ctrl_c)
        with pytest.warns(RuntimeWarning, match="sweep interrupted"):
            part = fs.sweep(L2SAM, MU3, grid, t1=1e30, saves=120, chunk_size=1, executor=client)
    log = capsys.readouterr().err
    assert "flowsim: sweep 100% (3/3 chunks)" in log and "\r" not in log
    assert ds.attrs["executor"].startswith("dask tcp://127.0.0.1") and ds.attrs["chunks"] == 3 and len(workers) == 2
    for var in ("beta", "log_loss", "beta_end"):
        np.testing.assert_allclose(ds[var].values, l2_sweep[var].values, rtol=1e-10, atol=1e-300)
    assert (ds["status"].values == l2_sweep["status"].values).all()
    kept = part["status"].values != "interrupted"
    assert 1 <= kept.sum() < kept.size and part.attrs["interrupted"] == kept.size - kept.sum()
    np.testing.assert_allclose(part["beta"].values[kept], l2_sweep["beta"].values[kept], rtol=1e-10, atol=1e-300)


def test_chunks_on_threads_equal_chunks_one_after_another(l2_sweep):
    """Vmapped chunks run a thread per core (here three at once): the same numbers as one at a time."""
    ds = fs.sweep(L2SAM, MU3, {"alpha": ALPHAS, "rho": RHOS}, t1=1e30, saves=120, chunk_size=2, workers=3)
    one = fs.sweep(L2SAM, MU3, {"alpha": ALPHAS, "rho": RHOS}, t1=1e30, saves=120, chunk_size=2, workers=1)
    assert ds.attrs["chunks"] == 3
    for var in ("beta", "log_loss", "beta_end", "steps", "status", "leader"):
        np.testing.assert_array_equal(ds[var].values, one[var].values)


def test_chunks_on_threads_run_on_the_callers_default_device():
    """``with jax.default_device(...)`` is thread-local: the worker threads are given the caller's (they ran
    on JAX's default device whatever the caller chose). The sweep says where its chunks ran."""
    import jax

    device = jax.devices("cpu")[0]
    with jax.default_device(device):
        ds = fs.sweep(L2SAM, MU3, {"alpha": ALPHAS[:2]}, t1=1e10, saves=20, chunk_size=1, workers=2)
    assert ds.attrs["device"] == str(device) and ds.attrs["chunks"] == 2
    assert fs.sweep(L2SAM, MU3, {"alpha": ALPHAS[:2]}, t1=1e10, saves=20, chunk_size=1, workers=2).attrs["device"] \
        == "default"


@pytest.mark.parametrize("workers", [1, 3])
def test_a_ctrl_c_keeps_the_chunks_finished_and_marks_the_rest_interrupted(l2_sweep, workers):
    """A Ctrl-C as the second of three chunks starts (one after another, or on threads): the sweep returns, the
    chunks finished as in a whole sweep and the others' points "interrupted" with NaN (one after another: the first
    finished, the second interrupted, the third never started; on threads, which chunk starts second and which are
    still running when the sweep returns is the threads' race); never anything else."""
    with pytest.warns(RuntimeWarning, match=r"sweep interrupted \(KeyboardInterrupt\): \d+ of 6 points"), \
            interrupt("sweep chunk", nth=2):
        ds = fs.sweep(L2SAM, MU3, {"alpha": ALPHAS, "rho": RHOS}, t1=1e30, saves=120, chunk_size=2, workers=workers)
    status = ds["status"].values
    stopped = status == "interrupted"
    assert ds.attrs["interrupted"] == stopped.sum() >= 2 and l2_sweep.attrs["interrupted"] == 0
    # chunks are (rho, then alpha) pairs of points: each chunk ends whole or interrupted whole
    pairs = [[(0, 0), (1, 0)], [(2, 0), (0, 1)], [(1, 1), (2, 1)]]
    whole = [all(stopped[p] for p in pair) for pair in pairs]
    assert all(whole[k] or not any(stopped[p] for p in pair) for k, pair in enumerate(pairs))
    assert sum(whole) >= 1
    if workers == 1:  # one after another: the first finished, the second interrupted, the third never started
        assert whole == [False, True, True]
    for p in zip(*np.nonzero(stopped)):
        assert np.isnan(ds["beta"].values[p]).all() and (ds["leader"].values[p] == 0).all()
    done = ~stopped
    np.testing.assert_array_equal(ds["beta"].values[done], l2_sweep["beta"].values[done])


def test_a_point_interrupted_inside_a_per_point_chunk_ends_the_sweep():
    """Sign flows run point by point: a solve that a Ctrl-C stopped ("interrupted", its saves kept) ends
    its chunk, and the sweep, there; the points after it are "interrupted"."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, float("inf")))
    data = fs.Dataset(np.array([[1.0, 2.0]]), [1])
    first, second = (fs.solve(system, data, [a, 0.3], t1=1e20, saves=50) for a in (0.02, 0.05))
    assert second.stats["segments"] >= 2
    with pytest.warns(RuntimeWarning, match="3 of 4 points did not finish"), \
            interrupt("segment", nth=first.stats["segments"] + 2):  # the second point's second segment
        ds = fs.sweep(system, data, {"alpha_1": [0.02, 0.05, 0.2, 0.3]}, init=[0.1, 0.3], t1=1e20, saves=50,
                      chunk_size=2)
    status = ds["status"].values.tolist()
    assert status[0] == first.status and status[1:] == ["interrupted"] * 3
    kept = np.isfinite(ds["beta"].values[1]).all(axis=1)
    assert 0 < kept.sum() < kept.size  # its first segment's saves kept
    np.testing.assert_allclose(ds["beta"].values[1][kept], second.beta[kept], rtol=1e-12)


@pytest.mark.parametrize("depth", [2, 3])
def test_linf_sam_phase_matches_cor_3_5(depth):
    # off the boundaries alpha_j = rho and (for L = 3) mu_1 (alpha_1 - rho) = mu_2 (alpha_2 - rho) (alpha_2 = 0.13 with
    # alpha_1 = 0.16 was on that curve, where the prediction is now a tie, -2)
    a1 = np.array([0.03, 0.07, 0.16, 0.33])
    a2 = np.array([0.05, 0.12, 0.21, 0.27])
    ds = fs.linf_sam_phase([1.0, 2.0], a1, a2, rho=0.1, depth=depth)
    pred = ds["predicted"].values
    assert set(np.unique(pred)) == {-1, 0, 1}  # all three phases are on the grid
    np.testing.assert_array_equal(ds["observed"].values, pred)
    assert ds["match"].values.all()
    legend = [t.get_text() for t in fs.plot.phase_diagram(ds).get_legend().get_texts()]
    assert ("beta -> 0 (bounded)" in legend) == (depth == 2)
    assert ("each beta_j -> rho^L (bounded)" in legend) == (depth == 3)
    if depth == 3:
        on_curve = fs.linf_sam_phase([1.0, 2.0], [0.16], [0.13], rho=0.1, depth=3)
        assert on_curve["predicted"].values.tolist() == [[-2]] and not on_curve["match"].values.any()
        legend = [t.get_text() for t in fs.plot.phase_diagram(on_curve).get_legend().get_texts()]
        assert "on a boundary: tie, no e_j predicted" in legend and "flow != Cor 3.5" not in legend


def test_a_phase_cell_is_judged_by_its_asymptotic_order_not_its_leader_at_t1():
    """The README's 16 x 16 grid at L = 2: at (0.4, 0.117) beta_1 still leads at t = 1e30 (alpha_2 is just above
    rho) but beta_2 grows (w_2 - rho ~ e^{2 tau}): its limit is e_2, as predicted, read at t1 already."""
    alpha = np.geomspace(0.01, 0.4, 16)
    at_t1 = fs.linf_sam_phase([1.0, 2.0], alpha[-1:], alpha[10:11], rho=0.1, depth=2, late_log10_t1=None)
    assert at_t1["beta_end"].values[0, 0, 0] > at_t1["beta_end"].values[0, 0, 1]  # beta_1 leads at t1
    assert at_t1["observed"].values.tolist() == [[1]] and at_t1["match"].values.all()


def test_a_gd_control_cell_that_agrees_by_accident_is_not_called_a_limit():
    """GD at L = 2, mu = (1, 2) from (0.4, 0.0175): beta_1 leads at t = 1e30 and 1e100, as l_inf-SAM's
    prediction (e_1, alpha_2 < rho) says, but GD's w_j = alpha_j e^{mu_j tau} makes beta_2 overtake (at log10 t
    ~ 106, seen in a run to log10 t = 300): the cell's limit is e_2, a disagreement, at t1 and after."""
    gd = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    far = fs.solve(gd, fs.Dataset([[1.0, 2.0]], [1]), np.array([0.4, 0.0175]), log10_t1=300)
    assert far.beta[-1, 1] > far.beta[-1, 0]  # the limit, independently of the phase diagram
    for late in (None, 1e5):
        ds = fs.linf_sam_phase([1.0, 2.0], [0.4], [0.0175], rho=0.1, depth=2, flow=fs.GD(), t1=1e30,
                               late_log10_t1=late)
        assert ds["beta_end"].values[0, 0, 0] > ds["beta_end"].values[0, 0, 1]  # beta_1 leads at t1
        assert ds["observed"].values.tolist() == [[1]] and ds["predicted"].values.tolist() == [[0]]
        assert not ds["match"].values.any()


def test_an_order_the_horizon_does_not_settle_is_undecided():
    """L = 3: a leader whose rival's log grows nearly as fast (both yet to blow up) is no limit; one whose rival
    stands still is; L = 2 with two growing coordinates of the same mu names neither."""
    from flowsim.theory.phase import UNDECIDED, asymptotic_limit

    mu = np.array([1.0, 2.0])
    assert asymptotic_limit([[10.0, 5.0], [20.0, 9.0]], mu, 0.1, 3) == UNDECIDED
    assert asymptotic_limit([[10.0, 5.0], [20.0, 5.001]], mu, 0.1, 3) == 0
    assert asymptotic_limit([[10.0, 5.0], [20.0, 6.0]], mu, 0.1, 2) == 1  # the larger mu grows: it wins
    assert asymptotic_limit([[10.0, 5.0], [20.0, 4.0]], mu, 0.1, 2) == 0
    assert asymptotic_limit([[1e-3, 1e-3], [0.0, 1e-4]], mu, 0.1, 2) == -1
    assert asymptotic_limit([[10.0, 5.0], [20.0, 6.0]], np.array([1.0, 1.0]), 0.1, 2) == UNDECIDED


def test_a_phase_diagram_of_a_grid_below_rho_draws():
    """Every cell bounded (alpha <= rho): the boundaries lie past the plot's edge, which raised "alpha_max must be
    above rho" once the boundaries checked their setting."""
    ds = fs.linf_sam_phase([1.0, 2.0], [0.02, 0.05], [0.03, 0.06], rho=0.1, depth=2)
    assert (ds["observed"].values == -1).all() and ds["match"].values.all()
    assert fs.plot.phase_diagram(ds).get_xlim()[1] <= 0.1


def test_a_phase_cell_whose_solve_failed_is_undecided_not_a_match():
    """L = 3, alpha_2 = rho + 1e-11 on BDF: the cell's solve failed at log10 t = 11 with beta_2 = 0.0187 > 10 rho^3,
    and the end of a failed run was read as the limit e_2: "match". Its re-solve fails too: undecided, drawn
    blank with a "?", never crossed out or coloured; the diagram's verdict is inconclusive. A flow with
    another rho than the prediction's is refused."""
    from flowsim.reproduce.criteria import cells_match

    ds = fs.linf_sam_phase([1.0, 2.0], [0.05], [0.1 + 1e-11, 0.2], rho=0.1, depth=3, t1=1e20, backend="scipy:BDF")
    assert ds["status"].values[0, 0] == "failed" and ds["predicted"].values[0, 0] == 1
    assert ds["observed"].values[0, 0] == -3 and not ds["decided"].values[0, 0] and not ds["match"].values[0, 0]
    assert ds["match"].values[0, 1] and ds.attrs["undecided"] == 1
    legend = [t.get_text() for t in fs.plot.phase_diagram(ds).get_legend().get_texts()]
    assert "undecided: the solve failed (see status)" in legend and "flow != Cor 3.5" not in legend
    assert cells_match(ds["match"].values, ds["predicted"].values, ds["decided"].values).holds is None
    with pytest.raises(ValueError, match=r"has rho = 0.3, the prediction is for rho = 0.1: give both"):
        fs.linf_sam_phase([1.0, 2.0], [0.05], [0.2], rho=0.1, flow=fs.SAM(0.3, float("inf")))


def test_switch_times_from_a_sweep_agree_with_solver_events():
    ds = fs.sweep(L2SAM, MU3, {"alpha": [0.05, 0.1]}, t1=1e30, saves=400)
    sw = fs.switch_log10_t(ds)
    spacing = np.diff(ds["log10_t"].values[1:]).max()
    for i, a in enumerate([0.05, 0.1]):
        events = [e["log10_t"] for e in fs.switch_times(fs.solve(L2SAM, MU3, a, t1=1e30, track=("magnitude",)))]
        got = sw.values[i][np.isfinite(sw.values[i])]
        assert len(got) == len(events)
        np.testing.assert_allclose(got, events, atol=spacing / 2)
    first = fs.first_switch_log10_t(ds)
    assert first.dims == ("alpha",) and np.isclose(first.values[0], sw.values[0, 0])


@pytest.mark.parametrize("grid, match", [
    ({}, "non-empty dict"),
    ({"beta": [1.0]}, "unknown grid key 'beta'"),
    ({"rhoo": [0.1]}, "unknown grid key 'rhoo': did you mean 'rho'?"),
    ({"rho": [0.1, 0.2, 0.1]}, "repeats values"),
    ({"alpha_4": [0.1]}, "the data have no coordinate 4; .* j in 1..3"),  # was "did you mean 'alpha'?"
    ({"alpha": [0.1], "alpha_1": [0.2]}, "not both"),
    ({"rho": [-0.1]}, "must be >= 0"),
    ({"alpha": [np.nan]}, "finite numbers"),
    ({"alpha": []}, "non-empty"),
    ({"alpha": [0.0]}, "all zeros"),
    ({"alpha_1": [0.1, 0.4], "alpha_01": [0.3]}, "unknown grid key 'alpha_01': write it 'alpha_1'"),  # 0.3 ran
    ({"alpha": "abc"}, r"grid\['alpha'\] must be a non-empty 1-D list"),  # numpy's "could not convert"
])
def test_bad_grids_are_refused(grid, match):
    with pytest.raises(ValueError, match=match):
        fs.sweep(L2SAM, MU3, grid, t1=1e10)


@pytest.mark.parametrize("call, match", [
    (lambda: fs.linf_sam_boundaries([1, 2], -0.1, 2, 0.4), "rho must be a finite number >= 0"),  # polylines
    (lambda: fs.linf_sam_boundaries([1, 2], 0.1, 2.5, 0.4), "integer depth >= 2"),
    (lambda: fs.linf_sam_boundaries([1, -2], 0.1, 2, 0.4), "mu must be a vector of >= 2 positive"),
    (lambda: fs.linf_sam_boundaries([1], 0.1, 2, 0.4), "mu must be a vector"),       # "not enough values to unpack"
    (lambda: fs.linf_sam_boundaries([1, 2], 0.1, "3", 0.4), "integer depth >= 2"),  # a TypeError
    (lambda: fs.linf_sam_boundaries([1, 2], 0.1, 3, 0.05), "alpha_max must be a finite number above rho"),
    (lambda: fs.linf_sam_phase([1, np.nan], [0.1], [0.2], rho=0.1), "mu must be a vector"),  # an error about "X"
    (lambda: fs.switch_log10_t(None), "must be the Dataset of a flowsim.sweep"),   # a TypeError
])
def test_phase_helpers_check_their_setting(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_rho_grid_needs_a_radius_and_executor_must_be_known():
    gd = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    with pytest.raises(ValueError, match="has none"):
        fs.sweep(gd, MU3, {"rho": [0.1]}, t1=1e10)
    with pytest.raises(ValueError, match="executor must be"):
        fs.sweep(L2SAM, MU3, {"alpha": [0.1]}, t1=1e10, executor="ray")
    with pytest.raises(ValueError, match="chunk_size"):
        fs.sweep(L2SAM, MU3, {"alpha": [0.1]}, t1=1e10, chunk_size=0)
    for bad in ({"workers": 0}, {"workers": 2.5}, {"workers": 2, "executor": "dask"}):
        with pytest.raises(ValueError, match="workers must be a positive integer, and only without executor="):
            fs.sweep(L2SAM, MU3, {"alpha": [0.1]}, t1=1e10, **bad)


def test_plateau_at_end_reads_each_points_last_two_finite_saves():
    """The vectorised test against a plain per-point reading, on saves with NaN and inf anywhere."""
    from flowsim.integrate.critical import LOSS_STILL
    from flowsim.integrate.sweep import _plateau_at_end

    def plain(log_loss):
        last = [row[np.isfinite(row)][-2:] for row in log_loss]
        return np.array([len(v) == 2 and abs(v[1] - v[0]) <= LOSS_STILL for v in last], bool)

    rng = np.random.default_rng(1)
    for _ in range(500):
        a = rng.choice([1.0, 1.0 + 1e-7, 2.0, np.nan, np.inf], size=(6, 5))
        np.testing.assert_array_equal(_plateau_at_end(a), plain(a))
    assert _plateau_at_end(np.array([[3.0, 2.0, 2.0 + 1e-9, np.nan]])).tolist() == [True]


def test_a_point_the_lockstep_solve_fails_is_solved_again_as_solve_would():
    """l2-SAM on a difference net: the vmapped Tsit5 solve runs out of its 3,000 steps at this point, and
    solve with backend "auto" hands over to scipy:BDF and completes. The sweep solves the point again
    with the backend and clock asked for ("auto"), so it hands over too, and equals solve; it had passed
    the resolved ones (diffrax:Tsit5, log_time), which never hand over, and reported max_steps."""
    data = fs.datasets.iid_gaussian(20, 10, 0)
    system = fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.SAM(0.1, 2))
    ds = fs.sweep(system, data, {"alpha": [0.074], "rho": [0.184]}, t1=1e30, max_steps=3000)
    sol = fs.solve(fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.SAM(0.184, 2)), data, 0.074, t1=1e30,
                   max_steps=3000, save_at_log10_t=ds["log10_t"].values.tolist())
    assert sol.config["backend"] == "diffrax:Tsit5 -> scipy:BDF" and sol.status == "completed"
    assert ds["status"].values[0, 0] == "completed" and ds["steps"].values[0, 0] == sol.stats["steps"]
    np.testing.assert_array_equal(ds["beta"].values[0, 0], sol.beta)


def test_chunks_are_as_few_and_as_equal_as_chunk_size_allows(l2_sweep):
    """6 points in chunks of at most 5: two of 3 (they were 5 and 1, padded to 5: 4 points solved for
    nothing), with the numbers of any other chunking."""
    ds = fs.sweep(L2SAM, MU3, {"alpha": ALPHAS, "rho": RHOS}, t1=1e30, saves=120, chunk_size=5)
    assert ds.attrs["chunks"] == 2 and ds.attrs["chunk_points"] == 3
    for var in ("beta", "log_loss", "status", "steps"):
        np.testing.assert_array_equal(ds[var].values, l2_sweep[var].values)


def test_a_sweep_from_layers_equal_up_to_signs_equals_its_solves():
    """Such a start is reduced to the tied net on flipped data by solve; the lockstep solve, which shares
    one data set, hands it to solve (it integrated the product, which can leave the manifold)."""
    data = fs.Dataset(np.array([[1.0, 0.5], [1.0, -0.2]]), [1, 1])
    init = np.array([[0.1, 0.1], [-0.1, 0.1]])
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        ds = fs.sweep(system, data, {"rho": [0.02, 0.05]}, init=init, t1=1e100, saves=50)
        for k, rho in enumerate((0.02, 0.05)):
            sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(rho)), data, init, t1=1e100, saves=50,
                           throw=False)
            np.testing.assert_array_equal(ds["beta_end"].values[k], sol.beta[-1])
            assert ds["status"].values[k] == sol.status and sol.beta[-1][0] == 0


def test_a_point_solve_hands_over_is_handed_over_in_the_sweep():
    """With backend and clock "auto", solve continues on BDF once Tsit5 spends a chunk of steps; the lockstep
    sweep kept Tsit5 (11,953 steps at this point) and ended 5e-8 away from the solve it promises to equal."""
    data = fs.datasets.iid_gaussian(5, 4, seed=1)
    system = fs.derive(fs.DiagonalNet(3, "difference"), "exponential", fs.SAM(0.2, 2))
    ds = fs.sweep(system, data, {"alpha": [0.3, 1.0]}, t1=1e30, saves=40)
    for i, a in enumerate([0.3, 1.0]):
        _compare(ds, (i,), fs.solve(system, data, a, t1=1e30, saves=40))
    assert "scipy:BDF" in ds["solver"].values.tolist()  # the point handed over says so


def test_lockstep_points_with_an_excluded_sign_are_solved_again():
    """The lockstep solve has no sign check of its own: a point ending with a beta_j its start excludes (a
    balanced start of a model of your own, integrated in full) is handed to solve, which fails it and says why."""
    from flowsim.integrate.backends import backend_for
    from flowsim.integrate.clock import clock_for
    from flowsim.integrate.options import Options
    from flowsim.integrate.solve import set_up
    from flowsim.integrate.sweep import _signs_left

    system = fs.derive(fs.Parametrization("w1 w2", 2, lambda a, b: a * b), "logistic", fs.GD())
    data = fs.datasets.iid_gaussian(4, 2, seed=0)
    opts = Options.checked(t1=10.0, rtol=1e-8)
    be = backend_for("auto", opts.log10_t1)
    clock = clock_for(system.flow, "auto", be.default_clock)
    problems = [set_up(system, data, system.model.init_params(a, 2), opts, be, clock) for a in (0.5, 0.5)]
    out = {"beta_end": np.array([[1.0, 2.0], [1.0, -2.0]])}
    assert _signs_left(problems, out).tolist() == [False, True]


def test_a_sweep_sets_each_point_up_as_solve_does():
    """The lockstep solve takes each point's set-up from solve's own (``set_up``): a depth-3 product whose layers are
    equal up to two sign flips per entry (flips whose product is +1, so the tied net runs on the data as they are)
    is reduced there as in solve, runs in lockstep, and equals its solves."""
    data = fs.datasets.iid_gaussian(6, 3, seed=2)
    init = np.array([[0.2, 0.3, 0.25], [-0.2, 0.3, -0.25], [-0.2, 0.3, -0.25]])
    system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(0.05))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        ds = fs.sweep(system, data, {"rho": [0.02, 0.05]}, init=init, t1=1e3, saves=40, backend="diffrax:Tsit5")
        assert ds.attrs["method"] == "vmap" and all(s.endswith("(vmap)") for s in ds["solver"].values.tolist())
        for k, rho in enumerate((0.02, 0.05)):
            sol = fs.solve(fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(rho)), data, init, t1=1e3, saves=40,
                           backend="diffrax:Tsit5", throw=False)
            _compare(ds, (k,), sol)
