"""Every bad input gets a ValueError (or a typed flowsim error) that names the argument and the fix."""

import numpy as np
import pytest
import sympy

import flowsim as fs

GOOD = fs.Dataset(np.array([[1.0, 2.0]]), [1.0])
SYSTEM = fs.derive(fs.Linear(), "logistic", fs.GD())
DEPTH2 = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
DEPTH3 = fs.derive(fs.DiagonalNet(3), "logistic", fs.GD())
LOGISTIC = sympy.log(1 + sympy.exp(-sympy.Symbol("m")))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: fs.Dataset(np.ones((3, 2)), [1, -1]), "one label per row"),
        (lambda: fs.Dataset(np.ones((2, 2)), [0, 1]), r"y = 2\*y - 1"),
        (lambda: fs.Dataset(np.ones((2, 2)), [1, 2]), r"\+1 and -1"),
        (lambda: fs.Dataset([[1.0, np.nan]], [1]), "NaN or inf"),
        (lambda: fs.Dataset(np.ones((2, 2)), [1, np.nan]), "NaN or inf"),
        (lambda: fs.Dataset(np.ones((2, 2, 2)), [1, 1]), "2-D array"),
        (lambda: fs.Dataset(np.ones((0, 2)), []), "non-empty"),
        (lambda: fs.DiagonalNet(depth=0), "depth must be an integer >= 1"),
        (lambda: fs.DiagonalNet(depth=1.5), "depth must be an integer"),
        (lambda: fs.DiagonalNet(depth=True), "depth must be an integer"),
        (lambda: fs.DiagonalNet(2, form="resnet"), "form must be one of"),
        (lambda: fs.SAM(rho=-0.1), "rho must be finite and >= 0"),
        (lambda: fs.SAM(rho=float("nan")), "rho must be finite"),
        (lambda: fs.SAM(rho="big"), "rho must be a real number"),
        (lambda: fs.SAM(rho=0.1, norm=1), "norm must be > 1"),
        (lambda: fs.USAM(rho=-1), "rho must be finite and >= 0"),
        (lambda: fs.GD(rho=0.1), "GD takes no rho"),
        (lambda: fs.derive(fs.Linear(), "hinge", fs.GD()), "unknown loss 'hinge'"),
        (lambda: fs.derive("linear", "logistic", fs.GD()), "model must be"),
        (lambda: fs.derive(fs.Linear(), "logistic", "sam"), "flow must be"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=1e10, backend="torch:adam"), "unknown backend family"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=1e10, backend="diffrax:Euler2"), "unknown diffrax solver"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=1e10, backend="scipy:RK23x"), "unknown scipy method"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=1e10, backend="Tsit5"), "must look like"),
        (lambda: fs.solve(SYSTEM, GOOD, np.ones(3), t1=1e10), r"init must be .* shape \(d,\) = \(2,\)"),
        (lambda: fs.solve(SYSTEM, GOOD, [0.1, np.nan], t1=1e10), "init contains NaN"),
        (lambda: fs.iterate(fs.optimizers.gd(0.1), fs.Linear(), "logistic", GOOD, 10, init="a"),
         "init must be numbers"),  # numpy's "could not convert string to float"
        (lambda: fs.solve(DEPTH2, GOOD, 0.0, t1=1e10), "init is all zeros, an equilibrium"),
        (lambda: fs.iterate(fs.optimizers.gd(0.1), fs.DiagonalNet(2), "logistic", GOOD, 10, init=0.0),
         "init is all zeros, an equilibrium"),  # it ran, never moving
        (lambda: fs.solve(DEPTH2, GOOD, 0.1, t1=10, atol=1.0), "atol=1.0 is not small against the init's size"),
        (lambda: fs.solve(DEPTH2, GOOD, 0.1, t1=10, atol=1e-3), r"below 0.01 x that size"),
        (lambda: fs.solve(DEPTH2, GOOD, 1e-200, t1=10, backend="scipy:BDF"), "below 1e-150, where scipy:BDF fails"),
        (lambda: fs.solve(DEPTH2, GOOD, 1e-200, log10_t1=2000), "below 1e-150, where scipy:BDF fails"),  # auto's
        (lambda: fs.solve(DEPTH2, GOOD, 0.1, t1=10, blowup_size=1e-10), "blowup_size=1e-10 is not above the init"),
        (lambda: fs.solve(DEPTH3, GOOD, 1e-250, t1=10), "underflows float64"),  # was 'stalled'
        (lambda: fs.solve(SYSTEM, GOOD, np.ma.array([0.1, 0.2], mask=[0, 1]), t1=10), "init is a numpy masked array"),
        (lambda: fs.Dataset(np.ma.array([[1.0, 2.0]], mask=[[0, 1]]), [1]), "X is a numpy masked array"),
        (lambda: fs.Dataset([[1.0, 2.0]], np.ma.array([1.0], mask=[1])), "y is a numpy masked array"),
        (lambda: fs.Dataset([[10**400, 1]]), "X holds a number beyond float64's range"),  # an OverflowError
        (lambda: fs.solve(SYSTEM, GOOD, [10**400, 1.0], t1=10), "init holds a number beyond float64's range"),
        (lambda: fs.DiagonalNet(60), "depth must be at most 16 for form='product'"),  # derive did not finish
        (lambda: fs.DiagonalNet(10**5), "depth must be at most 16"),  # construction did not finish
        (lambda: fs.Parametrization("deep", 17, lambda *w: w[0]), r"count in \[1, 16\]"),
        (lambda: fs.SAM(0.1, norm=1.0000001), "norm must be at least 1.02"),  # a solve that did not finish
        (lambda: fs.SAM(0.1, norm=1.01), "norm must be at least 1.02"),  # an OverflowError deep in jax
        (lambda: fs.SteepestDescent(norm=1.001), "at least 1.02"),
        (lambda: fs.Loss("scaled", 10**400 * LOGISTIC), "loss 'scaled': the constant 1.000E[+]400 is beyond"),
        (lambda: fs.Loss("scaled", LOGISTIC / sympy.Integer(10)**400), "the constant 1.000E-400 is beyond"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1), "exactly one of t1"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=1e10, log10_t1=10), "exactly one of t1"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=-1.0), "t1 must be a positive finite"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=float("inf")), "log10_t1"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, log10_t1=float("nan")), "log10_t1 must be a finite number"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, log10_t1=10**400), "log10_t1 must be a finite"),  # OverflowError
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=True), "t1 must be a positive number"),  # was t1 = 1
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=5e-324), "below -300"),  # saves at log10 t = -inf, "completed"
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=1e3, save_at_log10_t=[-400, 1]), "from log10 t = -306 on"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=10, rtol=0), "rtol must be a positive"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=10, saves=1), "saves must be an integer in \\[2"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=10, max_steps=0), "max_steps must be a positive integer"),
        (lambda: fs.solve(SYSTEM, GOOD, 0.1, t1=10, clock="wall"), "clock must be one of"),
        (lambda: fs.solve(SYSTEM, (np.ones((1, 2)), [1]), 0.1, t1=10), "flowsim.Dataset"),
        (lambda: fs.solve("system", GOOD, 0.1, t1=10), "flowsim.derive"),
    ],
)
def test_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_non_separable_is_refused_unless_asked():
    xor = fs.Dataset(np.array([[1.0, 1.0], [1.0, 1.0]]), [1, -1])
    assert not xor.is_separable and GOOD.is_separable
    with pytest.raises(fs.NonSeparableError, match=r"allow_nonseparable=True \(in a config file: allow_nonseparable = true\)"):
        fs.solve(SYSTEM, xor, 0.1, t1=10)
    sol = fs.solve(SYSTEM, xor, 0.1, t1=10, allow_nonseparable=True, backend="scipy:DOP853")
    assert sol.status == "completed"
    # the loss of two opposite copies of one point is minimised at w . x = 0
    assert abs(sol.margins[-1, 0]) < 1e-2


def test_discrete_runs_refuse_non_separable_data_as_the_flows_do():
    xor = fs.Dataset(np.array([[1.0, 1.0], [1.0, 1.0]]), [1, -1])
    gd = fs.optimizers.gd(0.5)
    with pytest.raises(fs.NonSeparableError, match="allow_nonseparable=True"):
        fs.iterate(gd, fs.Linear(), "logistic", xor, steps=10)
    run = fs.iterate(gd, fs.Linear(), "logistic", xor, steps=200, init=0.3, allow_nonseparable=True)
    # GD on the logistic loss of opposite copies of a point: beta . x = 0.6 at the init, 0 in the limit
    assert run.status == "completed" and abs(run.margins[0, 0] - 0.6) < 1e-12 and abs(run.margins[-1, 0]) < 1e-6


# l_inf-SAM with alpha = rho sits at an equilibrium (seed 000, Thm 3.2: beta stays rho^2): the field is exactly 0
AT_EQUILIBRIUM = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, float("inf")))


@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:LSODA", "auto"])
@pytest.mark.parametrize("clock", ["log_time", "tau"])
def test_an_exact_equilibrium_is_stalled_to_any_horizon(backend, clock):
    sol = fs.solve(AT_EQUILIBRIUM, GOOD, 0.1, log10_t1=1e4, backend=backend, clock=clock, saves=20)
    assert sol.status == "stalled" and sol.stats["steps"] == 0
    assert sol.log10_t[-1] == pytest.approx(1e4) and np.all(np.diff(sol.log10_t) > 0)
    np.testing.assert_allclose(sol.beta, 0.01, rtol=1e-15)
    np.testing.assert_allclose(sol.log_loss, sol.log_loss[0], rtol=1e-15)
    # just off it the state moves (the equilibrium is unstable), and is integrated
    moved = fs.solve(AT_EQUILIBRIUM, GOOD, 0.1 * (1 + 1e-9), t1=1e30, backend=backend, clock=clock, saves=20)
    assert moved.status == "completed" and moved.beta[-1].max() > 10


# Were an equilibrium not recognised (at_rest off), the loss would stay put, t = tau e^{-S} would grow only like
# tau, and in log-time the rate t e^{S~} would overflow past t ~ 1e308: both clocks must say so, not stop quietly.
@pytest.fixture
def unrecognised_equilibrium(monkeypatch):
    import flowsim.integrate.run

    monkeypatch.setattr(flowsim.integrate.run, "at_rest", lambda *a: False)


def test_tau_clock_that_cannot_reach_the_horizon_fails_loudly(unrecognised_equilibrium):
    with pytest.raises(fs.IntegrationError, match="tau reached 1e300 before t1") as err:
        fs.solve(AT_EQUILIBRIUM, GOOD, 0.1, log10_t1=1e4, backend="scipy:LSODA", saves=20)
    sol = err.value.solution
    assert sol.status == "failed" and 299 < sol.log10_t[-1] < 301
    np.testing.assert_allclose(sol.beta[-1], [0.01, 0.01], rtol=1e-8)


def test_log_time_rate_overflow_is_named_not_blamed_on_the_step_budget(unrecognised_equilibrium):
    with pytest.raises(fs.IntegrationError, match="beyond float range: the loss no longer decreases") as err:
        fs.solve(AT_EQUILIBRIUM, GOOD, 0.1, log10_t1=500, backend="diffrax:Tsit5", saves=20, max_steps=6000)
    sol = err.value.solution
    assert 308 < sol.log10_t[-1] < 309 and np.all(np.isfinite(sol.params))
    np.testing.assert_allclose(sol.beta[-1], [0.01, 0.01], rtol=1e-8)


@pytest.mark.parametrize("bad, match", [(dict(saves=10**7), "saves must be an integer in"),
                                        (dict(rtol=2.0), r"rtol must be in \[2.22e-16, 1\)"),
                                        (dict(rtol=1e-300), "below float64's epsilon"),  # failed with NaNs
                                        (dict(init=1e40), "init has entries up to 1e\\+40")])
def test_absurd_numbers_get_a_clear_error(bad, match):
    data = fs.Dataset([[1.0, 2.0]], [1])
    with pytest.raises(ValueError, match=match):
        fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), data, **{"init": 0.1, "t1": 10.0, **bad})


def test_dataset_copies_its_input_and_rejects_complex_data():
    X = np.array([[1.0, 2.0]])
    data = fs.Dataset(X, [1])
    X[0, 0] = 5.0
    np.testing.assert_array_equal(data.X, [[1.0, 2.0]])
    np.testing.assert_array_equal(data.z, [[1.0, 2.0]])
    with pytest.raises(ValueError, match="must be real"):
        fs.Dataset(np.array([[1 + 1j, 2.0]]), [1])


@pytest.mark.parametrize("X, y, match", [
    ([[1.0, 2.0], [1.0]], [1, 1], "X must be an array of numbers, every row of the same length"),  # numpy's words
    ([[1.0, 2.0]], [[1, 1], [1]], "y must be an array of numbers"),
    (np.array([1.0, 2.0, -3.0]), [1, 1, -1], r"X was 1-D, taken as one sample of d features; .* X\[:, None\]"),
])
def test_dataset_names_ragged_or_misshapen_input(X, y, match):
    with pytest.raises(ValueError, match=match):
        fs.Dataset(X, y)


def test_track_takes_one_score_as_a_string():
    """track="magnitude" was read letter by letter ("got ('m', 'a', 'g', ...)")."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1))
    data = fs.Dataset([[1.0, 2.0, 3.0]], [1])
    one = fs.solve(system, data, 0.05, t1=1e10, track="magnitude")
    assert [e["to_index"] for e in fs.switch_times(one)] == [1, 2]


@pytest.mark.parametrize("steps, records", [(2000, 50), (10**5, 200), (100, 200), (7, 2), (1, 5), (10**6, 3)])
def test_iterate_records_as_many_distinct_steps_as_asked(steps, records):
    """0 and ``steps`` always, ``records`` distinct steps in all (every step where there are fewer), log-spaced
    once the spacing exceeds a step (rounding and dropping repeats gave 46 of 50 asked at 2,000 steps)."""
    from flowsim.discrete.iterate import _record_points

    pts = _record_points(steps, records)
    assert pts[0] == 0 and pts[-1] == steps and (np.diff(pts) > 0).all()
    assert len(pts) == min(records, steps + 1)
    spread = np.round(np.geomspace(1, steps, len(pts) - 1))
    spread[-1] = steps
    # from where the log grid has overtaken one record a step (and stays ahead), it is kept as it is
    late = np.cumprod((spread >= np.arange(1, len(spread) + 1))[::-1])[::-1].astype(bool)
    assert late[-len(late) // 3:].all() or len(pts) == steps + 1
    np.testing.assert_array_equal(pts[1:][late], spread[late])


def test_iterate_refuses_too_few_records(one_sample):
    for records in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="records must be an integer >= 2"):
            fs.iterate(fs.optimizers.gd(0.1), fs.Linear(), "logistic", one_sample, steps=10, records=records)


def test_iterate_times_do_not_depend_on_a_whole_schedule_in_memory():
    from flowsim.discrete.iterate import _elapsed, _record_points

    schedule = fs.optimizers.adam(0.1, decay=0.3).schedule
    pts = _record_points(10**5, 50)
    full = np.concatenate([[0.0], np.cumsum(schedule(np.arange(10**5, dtype=np.float64)))])[pts]
    np.testing.assert_allclose(_elapsed(schedule, pts, block=997), full, rtol=1e-12)


def test_an_int_horizon_past_float_range_is_read_exactly():
    """t1 = 10**400 (a Python int) was an OverflowError traceback; it is log10_t1 = 400."""
    system, data = fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset([[1.0, 2.0]], [1])
    by_int = fs.solve(system, data, 0.1, t1=10**400, saves=5)
    np.testing.assert_array_equal(by_int.beta, fs.solve(system, data, 0.1, log10_t1=400, saves=5).beta)
    assert by_int.log10_t[-1] == 400.0


@pytest.mark.parametrize("flow, kwargs, match", [
    (fs.SignFlow(), dict(clock="tau"), "schedule's clock; clock='tau' would be ignored"),
    (fs.AdamProxy(batch=1), dict(clock="log_time"), "would be ignored"),
    (fs.NormalizedGD(), dict(clock="tau"), "would be ignored"),
    (fs.GD(), dict(allow_nonseparable="no"), "allow_nonseparable must be True or False"),
    (fs.GD(), dict(collapse_tol=2.0), "collapse_tol must be < 1"),
])
def test_settings_that_would_be_ignored_or_mean_nothing_are_refused(flow, kwargs, match):
    """Each was accepted with no effect (exit 0 on the command line, the saved config showing what was asked)."""
    data = fs.Dataset([[1.0, 2.0], [0.5, 1.5], [2.0, 0.3]])
    with pytest.raises(ValueError, match=match):
        fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", flow), data, 0.1, t1=1e3, **kwargs)


@pytest.mark.parametrize("rho", ["0.1", True, b"1"])
def test_a_radius_that_is_not_a_number_is_refused(rho):
    with pytest.raises(ValueError, match="rho must be a real number"):
        fs.SAM(rho)
