"""What a model can reach (issue 12): balanced starts stay balanced on every backend, critical points
are an outcome ('converged'), a flow that only slows down is not called converged, reachable sign
sets, separability by certificate, and no backend raises on the event root-find."""

import warnings

import numpy as np
import pytest
from conftest import separated_draw

import flowsim as fs

SLOW = pytest.mark.slow

EVERY_BACKEND = ["diffrax:Tsit5", "diffrax:Dopri8", "scipy:RK45", "scipy:DOP853", "scipy:Radau", "scipy:BDF",
                 "scipy:LSODA", "auto"]
QUICK = ["diffrax:Tsit5", "scipy:DOP853", "scipy:BDF", "scipy:LSODA"]


@pytest.fixture(scope="module")
def gaussian():
    """20 samples in d = 10, labels from a random direction: separable, but only with mixed signs."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=10)
    X = rng.normal(size=(20, 10))
    return fs.Dataset(X, np.sign(X @ w))


def _plateau(gaussian, flow, backend, **horizon):
    system = fs.derive(fs.DiagonalNet(2), "logistic", flow)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        return fs.solve(system, gaussian, 0.5, backend=backend, **horizon)


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.05, 2)], ids=str)
@pytest.mark.parametrize("backend", QUICK)
def test_unreachable_separation_converges_on_every_backend(gaussian, flow, backend):
    # today's BDF left the balanced manifold near log10 t = 205 and reported 'completed' with margin 2.3e4;
    # the exact flow keeps beta = w^2 >= 0, which cannot separate these data
    sol = _plateau(gaussian, flow, backend, t1=1e30)
    ref = _plateau(gaussian, flow, "scipy:Radau", t1=1e30)
    assert sol.status == ref.status == "converged", sol.message
    assert "limit loss" in sol.message and "minimum margin" in sol.message
    np.testing.assert_array_equal(sol.params[:, 0], sol.params[:, 1])  # balanced at every save
    assert np.all(sol.beta >= 0)
    np.testing.assert_allclose(sol.beta[-1], ref.beta[-1], rtol=1e-6, atol=1e-6 * np.abs(ref.beta[-1]).max())
    assert sol.margins[-1].min() < -2.9 and sol.log10_t[-1] == pytest.approx(30.0)
    assert sol.stats["steps"] <= 8192  # bounded work, not a step budget run out


@pytest.mark.slow
@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.05, 2)], ids=str)
@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_unreachable_separation_every_backend_beyond_float_range(gaussian, flow, backend):
    sol = _plateau(gaussian, flow, backend, log10_t1=1e4)
    ref = _plateau(gaussian, flow, "scipy:Radau", t1=1e30)
    assert sol.status == "converged" and sol.log10_t[-1] == pytest.approx(1e4)
    np.testing.assert_allclose(sol.beta[-1], ref.beta[-1], rtol=1e-6, atol=1e-6 * np.abs(ref.beta[-1]).max())


def test_converged_limit_is_a_critical_point_of_the_loss(gaussian):
    """Independent check: the held limit has zero gradient (jax.grad of the loss on the tied net)."""
    import jax
    import jax.numpy as jnp

    sol = _plateau(gaussian, fs.GD(), "scipy:LSODA", t1=1e30)
    w = jnp.asarray(sol.params[-1, 0])
    Z = jnp.asarray(gaussian.z)

    def loss(w):
        return jnp.mean(jnp.logaddexp(0.0, -(Z @ w**2)))

    g = jax.grad(loss)(w)
    assert float(jnp.abs(g).max()) < 1e-8
    assert sol.log_loss[-1] == pytest.approx(float(jnp.log(loss(w))), abs=1e-12)


def test_above_the_dense_limit_no_critical_point_test_runs_and_the_budget_message_says_so(monkeypatch):
    """The critical-point test is dense O((Kd)^3) linear algebra on the (Kd)^2 Jacobian: above 4,096 entries it
    is skipped everywhere (it had been guarded on every cold path but this one), and a spent budget says why.
    Two samples in d = 4,100 (all but two features 0) that the tied net (beta >= 0) cannot separate: its loss
    stops decreasing within the budget, where the test would run (removing the guard, it does)."""
    d = 4100
    X = np.zeros((2, d))
    X[:, :2] = [[-1.0, 1.0], [1.0, -2.0]]  # separable, by beta = (-3, -2), but by no beta >= 0

    def refuse_dense(solve):
        def checked(a, *args, **kwargs):
            assert np.shape(a)[0] <= 4096, "a dense critical-point test ran above 4,096 entries"
            return solve(a, *args, **kwargs)
        return checked

    for name in ("lstsq", "eigvals"):  # (what the test solves with)
        monkeypatch.setattr(np.linalg, name, refuse_dense(getattr(np.linalg, name)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), fs.Dataset(X, [1, 1]), 0.5,
                       backend="diffrax:Tsit5", log10_t1=1e4, max_steps=2048, throw=False)
    assert sol.status == "max_steps"
    assert "With 4100 parameter entries integrated (over 4096) flowsim does not test whether the flow has converged" \
        in sol.message


@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:DOP853"])
@pytest.mark.parametrize("clock", ["tau", "log_time"])
def test_a_disarmed_event_is_never_named_as_the_ending(backend, clock):
    # a zero init of the linear model disarms the collapse event (below its floor from the start); the compiled
    # solve named the lowest of all events at the end, so a tau-clock run that reached its horizon said 'blew_up'
    data = fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1])
    system = fs.derive(fs.Linear(), "logistic", fs.GD())
    sol = fs.solve(system, data, 0.0, t1=1e30, backend=backend, clock=clock, throw=False)
    assert sol.status == "completed" and sol.log10_t[-1] == pytest.approx(30.0), sol.message


@pytest.mark.parametrize("backend", ["scipy:BDF", "scipy:Radau", "scipy:LSODA", "scipy:DOP853"])
def test_scipy_counts_every_field_and_jacobian_evaluation(gaussian, backend, monkeypatch):
    """stats['nfev'] / ['njev'] are the solver's own counters over all segments, start-up evaluations
    included, against a count kept by wrapping the field and Jacobian handed to each scipy solver made (a
    plateau: several chunks, each resuming the last one's solver)."""
    import scipy.integrate

    calls = {"f": 0, "J": 0}

    def counted(f, key):
        def g(*b):
            calls[key] += 1
            return f(*b)
        return g

    solver = getattr(scipy.integrate, backend.removeprefix("scipy:"))
    made = solver.__init__

    def init(self, fun, *args, jac=None, **kwargs):
        jac = counted(jac, "J") if callable(jac) else jac
        made(self, counted(fun, "f"), *args, **({} if jac is None else {"jac": jac}), **kwargs)

    monkeypatch.setattr(solver, "__init__", init)
    sol = _plateau(gaussian, fs.GD(), backend, t1=1e30, max_steps=4096, throw=False)
    assert sol.stats["segments"] >= 2
    assert sol.stats["nfev"] == calls["f"], (calls, sol.stats)
    if backend != "scipy:DOP853":
        assert sol.stats["njev"] == calls["J"], (calls, sol.stats)
    assert all(type(sol.stats[k]) is int for k in ("steps", "nfev"))


def test_a_flow_that_only_slows_down_is_not_converged():
    # depth-2 GD on one sample: beta_2/beta_1 ~ (log t)^-0.1, still moving at t = 1e100 (docs/theory.md 4)
    data = fs.Dataset(np.array([[1.0, 0.9]]), [1])
    for backend in ("diffrax:Tsit5", "scipy:BDF"):
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "exponential", fs.GD()), data, 0.1, t1=1e100, backend=backend)
        assert sol.status == "completed"
    sol = fs.solve(fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.GD()),
                   fs.Dataset(np.array([[1.0, -0.5], [0.3, 1.0]]), [1, -1]), 0.1, log10_t1=1e4)
    assert sol.status == "completed"


@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:DOP853", "scipy:Radau", "scipy:BDF", "scipy:LSODA"])
def test_gd_conserves_layer_gaps_to_t_1e100(backend):
    data = fs.Dataset(np.array([[1.0, 2.0]]), [1])
    init = np.array([[0.3, 0.2], [0.1, 0.25]])  # unbalanced: integrated as the product itself
    sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), data, init, t1=1e100, backend=backend)
    gap = sol.params[:, 0] ** 2 - sol.params[:, 1] ** 2
    assert sol.status == "completed" and "integrated_as" not in sol.config
    assert np.abs(gap - gap[0]).max() <= 10 * 1e-8 * np.abs(sol.params).max() ** 2


SIGNED = {2: np.array([[0.3, -0.3], [-0.3, -0.3]]), 3: np.array([[0.3, 0.3], [-0.3, 0.3], [-0.3, -0.3]])}


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.3, 2), fs.SAM(0.3, 3), fs.USAM(0.3), fs.SAM(0.05, float("inf")),
                                  fs.ASAM(0.3, 3, eta=0.2), fs.SteepestDescent(3), fs.SteepestDescent(1.5),
                                  fs.NormalizedGD(decay=0.5), fs.Flow(fs.points.Here(), fs.directions.Normalized(3))],
                         ids=str)
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("signed", [False, True], ids=["equal", "equal-up-to-signs"])
def test_balanced_product_equals_the_product_integrated_as_is(flow, depth, signed):
    """The tied reduction (rho L^(-1/p) for SAM and ASAM, USAM rho/L, time x L^(2/p) for steepest descent,
    lr x L^(-1/p) for normalised flows; layers equal up to signs on sign-flipped data) against the full
    product integrated by an explicit method, which keeps the layers equal (up to their signs) to
    rounding: the rescalings and the flips are checked, not assumed. The product is integrated from the
    same start with one entry of its last layer moved by one rounding unit (2e-16 relative), so that the
    layers are not balanced and no reduction applies."""
    data = fs.Dataset(np.array([[1.0, 2.0], [0.5, 1.5]]), [1, 1])
    system = fs.derive(fs.DiagonalNet(depth), "logistic", flow)
    init = SIGNED[depth] if signed else np.full((depth, 2), 0.3)
    unbalanced = init.copy()
    unbalanced[-1, 0] = np.nextafter(unbalanced[-1, 0], np.inf)
    tight = dict(t1=1e3, backend="scipy:DOP853", rtol=1e-11, atol=1e-13, allow_nonseparable=signed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)  # (the signed start keeps beta_1 <= 0)
        reduced = fs.solve(system, data, init, **tight)
        assert reduced.config["integrated_as"].startswith(f"System(DiagonalNet(depth={depth}, form='tied')")
        assert ("flipped" in reduced.config["integrated_as"]) == signed
        full = fs.solve(system, data, unbalanced, throw=False, **tight)
    assert "integrated_as" not in full.config and reduced.status == "completed"
    # the product cannot follow an anti-balanced coordinate that reaches 0 in finite time (l3 steepest descent,
    # l3-normalised flow: both layers at once): it stops stiff there or, a rounding unit off balance, goes
    # through where the reduced flow is held at 0; compared up to a little before that
    ends = [full.log10_t[-1] + 1.0 if full.status == "completed" else full.log10_t[-1]]
    held = np.any(reduced.params == 0, axis=(1, 2))
    ends += [reduced.log10_t[np.argmax(held)]] if held.any() else []
    n = int(np.sum(full.log10_t < min(ends) - 0.1))
    assert n >= 20, (full.status, full.log10_t[-1])
    np.testing.assert_allclose(reduced.log10_t[1:n], full.log10_t[1:n], rtol=0, atol=1e-9)
    np.testing.assert_allclose(reduced.params[:n], full.params[:n], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(reduced.beta[:n], full.beta[:n], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(reduced.tau[:n], full.tau[:n], rtol=1e-7, atol=1e-9)  # (a schedule flow's clock s)


# ASAM and p = 3 (the slowest two, a minute between them) run in the slow set: SAM and p = inf stand for them in CI
@pytest.mark.parametrize("flow", [fs.GD(), fs.USAM(0.05), fs.SAM(0.05), pytest.param(fs.ASAM(0.05), marks=SLOW),
                                  pytest.param(fs.SteepestDescent(3), marks=SLOW), fs.NormalizedGD(),
                                  fs.SteepestDescent(float("inf")), fs.SignFlow()], ids=str)
def test_an_anti_balanced_start_never_separates_what_the_exact_flow_cannot(flow):
    """w_2 = -w_1 in coordinate 1 keeps beta_1 = -w^2 <= 0 for ever, so these data (separable only with
    beta_1 > 0) are never separated. Integrated as a product, BDF, Radau and LSODA left that manifold and
    returned 'completed' with beta_1 up to +2.6e4 (GD, USAM, steepest descent, normalised GD; Tsit5 and
    DOP853 did not): every backend now stays at beta_1 <= 0, and those that end at a rest point end at
    the same one, beta_1 = 0 (the others fail or chatter there, and say so)."""
    data = fs.Dataset(np.array([[1.0, 0.5], [1.0, -0.2]]), [1, 1])
    init = np.array([[0.1, 0.1], [-0.1, 0.1]])
    system = fs.derive(fs.DiagonalNet(2), "logistic", flow)
    assert fs.reachable_signs(system.model, init, flow)[0] == -1 and not data.is_separable_by(system.model, init, flow)
    ends = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        for backend in ("auto", "scipy:BDF", "scipy:Radau", "scipy:LSODA", "scipy:DOP853"):
            sol = fs.solve(system, data, init, t1=1e100, backend=backend, throw=False)
            assert sol.status != "completed" and np.all(sol.beta[:, 0] <= 0), (backend, sol)
            assert np.all(sol.params[:, 1, 0] == -sol.params[:, 0, 0])
            if sol.status in ("converged", "stalled"):
                ends[backend] = sol.beta[-1]
    assert "auto" in ends or flow.uses_sign
    for end in ends.values():
        np.testing.assert_allclose(end, next(iter(ends.values())), rtol=1e-6, atol=1e-9)
        assert end[0] == 0 and end[1] > 2  # the loss's minimiser over beta_2 with beta_1 = 0


def test_reachable_signs_and_is_separable_by(gaussian):
    positive = np.full(10, 0.5)
    assert fs.reachable_signs(fs.DiagonalNet(2), np.tile(positive, (2, 1)), fs.GD()).tolist() == [1.0] * 10
    assert np.isnan(fs.reachable_signs(fs.DiagonalNet(2, "difference"), np.tile(positive, (2, 1)), fs.GD())).all()
    assert fs.reachable_signs(fs.DiagonalNet(3, "tied"), -positive[None], fs.SAM(0.1)).tolist() == [-1.0] * 10
    unbalanced = np.array([[0.5] * 10, [0.4] * 10])
    assert np.isnan(fs.reachable_signs(fs.DiagonalNet(2), unbalanced, fs.GD())).all()
    assert gaussian.is_separable
    assert not gaussian.is_separable_by(fs.DiagonalNet(2), 0.5)
    assert not gaussian.is_separable_by(fs.DiagonalNet(4, "tied"), 0.5)
    assert gaussian.is_separable_by(fs.DiagonalNet(2, "difference"), 0.5)
    assert gaussian.is_separable_by(fs.Linear(), 0.5)
    with pytest.raises(ValueError, match="model must be a flowsim.Parametrization"):
        gaussian.is_separable_by("product", 0.5)
    with pytest.raises(ValueError, match="init must be"):
        gaussian.is_separable_by(fs.DiagonalNet(2), np.ones((3, 10)))
    # an init whose signs match a separator: the product keeps them, and separates
    w = np.linalg.lstsq(gaussian.z, np.ones(20), rcond=None)[0]
    signs = np.where(w >= 0, 1.0, -1.0)
    sep = fs.Dataset(gaussian.X, np.sign(gaussian.X @ (signs * np.abs(w))))
    assert sep.is_separable_by(fs.DiagonalNet(2), np.stack([np.full(10, 0.5), 0.5 * signs]))


def test_solve_warns_when_the_model_cannot_separate(gaussian):
    with pytest.warns(fs.ReachabilityWarning, match="form='difference'"):
        fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), gaussian, 0.5, t1=10.0, backend="scipy:LSODA")
    with warnings.catch_warnings():
        warnings.simplefilter("error", fs.ReachabilityWarning)
        fs.solve(fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.GD()), gaussian, 0.5, t1=10.0,
                 backend="scipy:LSODA")


@pytest.mark.parametrize("k", range(-30, 31, 6))
def test_separability_is_scale_invariant(gaussian, k):
    assert fs.Dataset(gaussian.X * 10.0**k, gaussian.y).is_separable


def test_separability_certificates_and_rejections():
    assert fs.Dataset([[1.0, 1e-9], [-1.0, 1e-9]], [1, 1]).is_separable  # relative margin 1e-9
    assert not fs.Dataset([[1.0, 1.0], [-1.0, -1.0]], [1, 1]).is_separable
    assert not fs.Dataset([[1.0, 0.0], [0.0, 0.0]], [1, 1]).is_separable  # a zero sample
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    assert not fs.Dataset(X, np.sign(X[:, 0] * X[:, 1])).is_separable  # XOR
    with pytest.raises(fs.NonSeparableError, match="allow_nonseparable"):
        fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset(X, np.sign(X[:, 0] * X[:, 1])), 0.1, t1=10)


def _seed_case(seed, form):
    """The issue's reproducer: l_inf-SAM on a depth-4 network whose sign-switch root-find raised."""
    r = np.random.default_rng(seed)
    r.integers(3), r.integers(1, 5), r.integers(2), r.integers(5)
    rho, alpha = r.uniform(0, 0.5), 10 ** r.uniform(-3, 0)
    n, d = r.integers(1, 11), r.integers(1, 7)
    while True:
        w, X = r.normal(size=d), r.normal(size=(n, d))
        if np.min(np.abs(X @ w)) > 0.05:
            break
    system = fs.derive(fs.DiagonalNet(4, form), "logistic", fs.SAM(rho, float("inf")))
    return system, fs.Dataset(X, np.sign(X @ w)), alpha, 10 ** r.uniform(0, 100)


@pytest.mark.parametrize("seed,form", [(1039, "tied"), (1041, "difference")])
def test_event_root_find_never_raises(seed, form):
    system, data, alpha, t1 = _seed_case(seed, form)
    ends = [fs.solve(system, data, alpha, t1=t1, backend=b, throw=False) for b in ("scipy:DOP853", "scipy:RK45",
                                                                                  "scipy:BDF")]
    assert {s.status for s in ends} == {"stalled"}
    for s in ends[1:]:
        np.testing.assert_allclose(s.beta[-1], ends[0].beta[-1], rtol=1e-6, atol=1e-9)


def test_an_implicit_step_across_an_invariant_plane_goes_no_further():
    """Tied depth-3 l2-SAM from a positive init: w_j = 0 is invariant, yet BDF and LSODA stepped across it
    and went on to beta_3 = -577 'completed'. The crossing event stops them; here the flow was arriving at a
    degenerate critical point (w_1, w_3 -> 0 with a gradient quadratic in them), so the entries are put back on
    their sides and the run converges there, as Radau's does, keeping nothing past the crossing."""
    r = np.random.default_rng(16)
    r.integers(3), r.integers(1, 5), r.integers(2), r.integers(5)
    rho = r.uniform(0, 0.5)
    alpha = r.choice([-1, 1]) * 10 ** r.uniform(-3, 0)
    n, d = int(r.integers(1, 11)), int(r.integers(1, 7))
    data = separated_draw(r, n, d)
    system = fs.derive(fs.DiagonalNet(3, "tied"), "exponential", fs.SAM(rho, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        for backend in ("scipy:BDF", "scipy:LSODA"):
            sol = fs.solve(system, data, alpha, log10_t1=40.7, backend=backend, throw=False)
            assert sol.status == "converged" and "a degenerate critical point: entries w[layer 1, coordinate 1], " \
                "w[layer 1, coordinate 3] go to 0" in sol.message, sol.message
            assert np.all(sol.params >= -1e-6)  # nothing past a crossing is kept
    assert fs.kept_entry_signs(system.model, np.full((1, d), alpha), system.flow).tolist() == [[1.0] * d]
    assert not fs.kept_entry_signs(fs.DiagonalNet(2), np.full((2, d), alpha), fs.GD()).any()


def test_auto_hands_stability_limited_stepping_to_an_implicit_method(gaussian):
    """backend="auto": Tsit5 spends a whole chunk (1,024 steps) on the plateau, then BDF in the tau clock
    continues from the same state; the records before and after the swap of clocks join up."""
    sol = _plateau(gaussian, fs.SAM(0.05, 2), "auto", t1=1e30)
    ref = _plateau(gaussian, fs.SAM(0.05, 2), "scipy:Radau", t1=1e30)
    (event,) = [e for e in sol.events if e["kind"] == "backend"]
    assert (event["from_backend"], event["to_backend"]) == ("diffrax:Tsit5", "scipy:BDF")
    # what ran, where "auto" was asked (the re-run arguments keep "auto")
    assert sol.config["backend"] == "diffrax:Tsit5 -> scipy:BDF" and sol.config["arguments"]["backend"] == "auto"
    assert sol.config["clock"] == "log_time -> tau" and sol.config["arguments"]["clock"] == "auto"
    assert sol.status == "converged" and np.all(np.diff(sol.log10_t[1:]) > 0) and np.all(np.diff(sol.tau) >= 0)
    np.testing.assert_allclose(sol.beta[-1], ref.beta[-1], rtol=1e-6, atol=1e-6 * np.abs(ref.beta[-1]).max())
    before = sol.log10_t <= event["log10_t"]
    forced = _plateau(gaussian, fs.SAM(0.05, 2), "diffrax:Tsit5", t1=1e30)  # a named backend is kept
    assert not [e for e in forced.events if e["kind"] == "backend"] and forced.config["backend"] == "diffrax:Tsit5"
    np.testing.assert_allclose(sol.beta[before], forced.beta[: before.sum()], rtol=1e-12, atol=1e-14)


def test_sweep_on_unreachable_separation_converges_like_solve(gaussian):
    """The vmapped sweep is one lockstep segment with no critical-point check: on data the model cannot
    separate it used to end 'max_steps' where solve says 'converged'. Points that fail or end on a
    plateau are now solved again by solve; a point that separates stays on the vmapped path."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        ds = fs.sweep(system, gaussian, grid={"alpha": [0.3, 0.5]}, t1=1e30, saves=40)
        ref = fs.solve(system, gaussian, 0.5, t1=1e30)
    assert ds.attrs["method"] == "vmap (2 points solved again one by one: 'solver')" and ds.attrs["solved_again"] == 2
    assert list(ds.status.values) == ["converged", "converged"]
    np.testing.assert_allclose(ds.beta_end.sel(alpha=0.5).values, ref.beta[-1], rtol=1e-8,
                               atol=1e-8 * np.abs(ref.beta[-1]).max())
    ds = fs.sweep(fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.GD()), gaussian,
                  grid={"alpha": [0.3, 0.5]}, t1=1e30, saves=40)  # any sign: separates, nothing to redo
    assert list(ds.status.values) == ["completed", "completed"]


def test_explicit_method_out_of_steps_on_a_stiff_plateau_says_why(gaussian):
    """Tied depth-3 GD from a positive init cannot separate these data; coordinates decay to 0 like 1/t, and
    in the log-time clock the field's Jacobian grows like t: Tsit5's steps sit at its stability bound, so it
    runs out of steps near log10 t = 4.4 where LSODA converges. It says so (step x spectral radius, the
    methods that are not so limited); a budget cut short while accuracy still limits the steps does not."""
    system = fs.derive(fs.DiagonalNet(3, "tied"), "logistic", fs.GD())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        stiff = fs.solve(system, gaussian, 0.5, t1=1e30, backend="diffrax:Tsit5", throw=False)
        implicit = fs.solve(system, gaussian, 0.5, t1=1e30, backend="scipy:LSODA")
    assert implicit.status == "converged"
    assert stiff.status == "max_steps" and "limited by stability" in stiff.message and "backend='auto'" in stiff.message
    product = float(stiff.message.split("Jacobian is ")[1].split(",")[0])
    assert 1.0 <= product <= 4.0  # Tsit5's real stability interval ends near 3.5
    early = fs.solve(fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.GD()), gaussian, 0.5, t1=1e30,
                     backend="diffrax:Tsit5", max_steps=20, throw=False)
    assert early.status == "max_steps" and "stability" not in early.message


def test_the_warning_names_the_status_a_limit_at_beta_0_ends_with():
    """Data that only beta <= 0 separates, a positive init: GD's limit over beta >= 0 is beta = 0, which
    the balanced parameters approach exponentially until they fall below the collapse floor (status
    'collapsed', the loss log 2 there): the warning must name that status, not only 'converged'."""
    data = fs.Dataset(np.array([[-1.0, -2.0]]), [1])
    with pytest.warns(fs.ReachabilityWarning, match="'collapsed' where that point is beta = 0"):
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), data, 0.1, t1=1e30, throw=False)
    assert sol.status == "collapsed" and np.abs(sol.beta[-1]).max() < 1e-12
    assert sol.log_loss[-1] == pytest.approx(np.log(np.log(2.0)), abs=1e-9)


@pytest.mark.parametrize("theta0, flow, match", [
    ([0.5, 0.5], fs.GD(), r"theta0 must be finite parameters of shape \(layers, d\) = \(2, d\)"),  # unpack error
    (np.ones((3, 2)), fs.GD(), r"got shape \(3, 2\)"),                                         # accepted, said -1
    (np.full((2, 2), np.nan), fs.GD(), "theta0 must be finite"),                                # said nan
    (np.ones((2, 2)), None, "flow must be a flowsim flow"),                                     # AttributeError
])
def test_reachable_signs_bad_arguments(theta0, flow, match):
    with pytest.raises(ValueError, match=match):
        fs.reachable_signs(fs.DiagonalNet(2), theta0, flow)


def test_a_coordinate_with_two_zero_layers_of_a_depth_3_product_is_frozen():
    """Every df/dw_k is 0 there, so beta_2 = 0 for ever: "either sign" said no ReachabilityWarning where the
    data need beta_2 != 0, and six backends failed six ways with no word why. A Linear entry at 0 still
    moves, and l_inf-SAM (a sign flow) is not judged by this rule."""
    data = fs.Dataset(np.array([[1.0, 2.0], [-0.5, 1.0]]), [1, 1])
    init = np.array([[0.3, 0.1], [0.2, 0.0], [0.1, 0.0]])
    gd = fs.derive(fs.DiagonalNet(3), "logistic", fs.GD())
    signs = fs.reachable_signs(gd.model, init, gd.flow)
    assert np.isnan(signs[0]) and signs[1] == 0
    with pytest.warns(fs.ReachabilityWarning, match="keeps beta_2 = 0 for ever"):
        sol = fs.solve(gd, data, init, t1=1e5, throw=False)
    assert np.all(sol.beta[:, 1] == 0)
    assert np.isnan(fs.reachable_signs(fs.Linear(), np.array([[0.3, 0.0]]), fs.GD())).all()
    assert np.isnan(fs.reachable_signs(gd.model, init, fs.SAM(0.1, float("inf")))).all()


# positive labels: every beta > 0 separates them, a product network from a positive init reaches one
TINY_DATA = fs.Dataset(np.array([[1.0, 0.3], [0.5, 1.0], [-0.2, 0.8]]), [1, 1, 1])


@pytest.mark.parametrize("depth, alpha", [(2, 1e-170), (3, 1e-120), (6, 1e-60), (6, 1e-70)])
def test_a_tiny_init_keeps_its_signs_where_beta_underflows(depth, alpha):
    """beta = alpha^depth rounds to 0 here; the signs it keeps come from the layer entries (the product of their
    signs, and exact arithmetic where the partials round to 0), not from the rounded beta, which read as beta = 0
    for ever and 'not separable'."""
    model = fs.DiagonalNet(depth)
    assert np.all(fs.reachable_signs(model, model.init_params(alpha, 2), fs.GD()) == 1.0)
    assert TINY_DATA.is_separable_by(model, alpha)
    # two zero layers of a depth-3 product freeze the coordinate; a tiny layer does not
    frozen = np.array([[0.0, 1.0], [0.0, 1e-200], [1.0, 1e-200]])
    assert fs.reachable_signs(fs.DiagonalNet(3), frozen, fs.GD()).tolist()[0] == 0.0


@pytest.mark.parametrize("alpha", [1e-170, 1e-250])
def test_gd_from_a_tiny_init_follows_the_flow_in_log_coordinates(alpha):
    """Depth-2 GD from equal layers alpha: u = log w obeys du/dt = Z^T q(Z e^{2u}) / n exactly, an independent
    reference with no underflow. The run warned 'keeps beta = 0 for ever' and ran at 1e-170."""
    from scipy.integrate import solve_ivp
    from scipy.special import expit

    z = TINY_DATA.z
    with warnings.catch_warnings():
        warnings.simplefilter("error", fs.ReachabilityWarning)
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), TINY_DATA, alpha, t1=1e4)
    ref = solve_ivp(lambda t, u: z.T @ expit(-(z @ np.exp(2 * u))) / len(z), (0, 1e4), np.full(2, np.log(alpha)),
                    method="LSODA", rtol=1e-11, atol=1e-12)
    assert sol.status == "completed"
    np.testing.assert_allclose(np.log(sol.beta[-1]), 2 * ref.y[:, -1], rtol=1e-6)


def test_auto_hands_a_stiff_schedule_clock_run_over_to_an_implicit_method():
    """A flow on a learning-rate schedule's clock (NormalizedGD) whose explicit steps are limited by stability:
    backend='auto' hands it over to scipy:BDF in the same clock and ends where BDF alone ends; a run told to keep
    Tsit5 is told that backend='auto' would hand over. Before, auto kept Tsit5 on a schedule's clock and ran out of
    steps."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 10))
    data = fs.Dataset(X, np.sign(X @ rng.normal(size=10)))
    system = fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.NormalizedGD())
    stiff = fs.solve(system, data, 0.1, log10_t1=30, max_steps=200, backend="diffrax:Tsit5", throw=False)
    assert stiff.status == "max_steps" and "limited by stability" in stiff.message
    assert "backend='auto'" in stiff.message
    auto = fs.solve(system, data, 0.1, log10_t1=30, max_steps=200)
    bdf = fs.solve(system, data, 0.1, log10_t1=30, backend="scipy:BDF")
    assert auto.status == bdf.status == "completed"
    assert auto.config["backend"] == "diffrax:Tsit5 -> scipy:BDF" and auto.config["clock"] == "schedule"
    (event,) = [e for e in auto.events if e["kind"] == "backend"]
    assert event["log10_t"] == pytest.approx(stiff.log10_t[-1], abs=1e-9)
    np.testing.assert_allclose(auto.beta[-1], bdf.beta[-1], rtol=1e-5)


def test_the_step_budget_message_advises_auto_only_where_auto_hands_over():
    """Under the tau clock backend='auto' keeps its explicit method, so a stiff run there must not be told to use
    backend='auto'; it is pointed to the implicit methods."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 10))
    data = fs.Dataset(X, np.sign(X @ rng.normal(size=10)))
    system = fs.derive(fs.DiagonalNet(2, "difference"), "logistic", fs.GD())
    stiff = fs.solve(system, data, 0.1, log10_t1=30, max_steps=200, clock="tau", throw=False)
    assert stiff.status == "max_steps" and "backend='auto'" not in stiff.message
    assert "backend='scipy:BDF'" in stiff.message
