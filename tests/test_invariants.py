"""Conserved quantities, the tied/product relation, backend and clock agreement, long horizons."""

import math
import warnings

import numpy as np
import pytest
from conftest import separable, separated_draw

import flowsim as fs


@pytest.mark.parametrize("depth", [2, 3])
def test_gd_conserves_layer_gaps(depth):
    # d(w_l^2)/dt = -2 (dL/dbeta) beta is the same for every layer
    data = separable(8, 3, seed=1)
    rng = np.random.default_rng(2)
    init = rng.uniform(0.3, 0.8, size=(depth, 3))
    sol = fs.solve(fs.derive(fs.DiagonalNet(depth), "logistic", fs.GD()), data, init, t1=1e20, rtol=1e-11, atol=1e-13)
    assert sol.status == "completed"
    gaps = sol.params[:, :, None, :] ** 2 - sol.params[:, None, :, :] ** 2
    scale = np.abs(sol.params).max() ** 2
    np.testing.assert_allclose(gaps, np.broadcast_to(gaps[0], gaps.shape), atol=1e-8 * scale)
    assert np.abs(sol.params[-1]).max() > 3 * np.abs(init).max()  # the weights did move


def test_l2_sam_keeps_balance_and_amplifies_imbalance_rule():
    # docs/theory.md 2: D = w1^2 - w2^2 obeys D' = -2 c (dL~/dbeta)(dL/dbeta) D: D = 0 stays 0 ...
    data = separable(6, 3, seed=3)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05, 2))
    sol = fs.solve(system, data, 0.5, t1=1e20, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(sol.params[:, 0], sol.params[:, 1], rtol=1e-12)
    # ... and a non-zero gap keeps its sign (D' is proportional to D)
    init = np.array([[0.6, 0.5, 0.55], [0.5, 0.6, 0.55]])
    sol = fs.solve(system, data, init, t1=1e20, rtol=1e-11, atol=1e-13)
    D = sol.params[:, 0] ** 2 - sol.params[:, 1] ** 2
    assert np.all(np.sign(D[:, :2]) == np.sign(D[0, :2])) and np.abs(D[:, 2]).max() < 1e-10


@pytest.mark.parametrize("t1", [1e3, 1e40])
def test_tied_equals_product_with_rho_sqrt2_at_twice_the_time(one_sample, t1):
    rho = 0.08
    tied = fs.solve(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(rho)), one_sample, [0.4, 0.3], t1=t1,
                    rtol=1e-11, atol=1e-13)
    prod = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(rho * math.sqrt(2))), one_sample, [0.4, 0.3],
                    t1=2 * t1, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(tied.beta[-1], prod.beta[-1], rtol=1e-8)
    np.testing.assert_allclose(prod.params[-1, 0], prod.params[-1, 1], rtol=1e-12)
    # and it is not an accident of rho: without the sqrt(2) the paths differ
    other = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(rho)), one_sample, [0.4, 0.3], t1=2 * t1)
    assert np.abs(other.beta[-1] / tied.beta[-1] - 1).max() > 1e-4


@pytest.mark.parametrize(
    "model, flow",
    [(fs.Linear(), fs.SAM(0.1, 2)), (fs.DiagonalNet(2), fs.SAM(0.05, 2)), (fs.DiagonalNet(2), fs.GD()),
     (fs.DiagonalNet(2, "difference"), fs.USAM(0.05))],
    ids=str,
)
def test_backends_and_clocks_agree(model, flow):
    data = separable(6, 3, seed=4, positive=model.form != "difference")
    system = fs.derive(model, "logistic", flow)
    runs = {
        (be, clock): fs.solve(system, data, 0.3, t1=1e30, backend=be, clock=clock, rtol=1e-10, atol=1e-12, saves=40)
        for be in ("diffrax:Tsit5", "scipy:DOP853", "scipy:Radau") for clock in ("log_time", "tau")
    }
    ref = runs[("diffrax:Tsit5", "log_time")]
    for key, sol in runs.items():
        assert sol.status == "completed", (key, sol.message)
        np.testing.assert_allclose(sol.log10_t, ref.log10_t, rtol=1e-9, err_msg=str(key))
        np.testing.assert_allclose(sol.direction, ref.direction, atol=1e-6, err_msg=str(key))
        np.testing.assert_allclose(sol.log_loss, ref.log_loss, rtol=1e-6, atol=1e-6, err_msg=str(key))
        np.testing.assert_allclose(sol.tau, ref.tau, rtol=1e-6, err_msg=str(key))


def test_log10_t_of_a_million_linear_closed_form(one_sample):
    # beyond float range of t: m = log(e^{m0} + |x|^2 t) = ln10 * log10 t + log|x|^2 + o(1)
    x = one_sample.X[0]
    sol = fs.solve(fs.derive(fs.Linear(), "exponential", fs.GD()), one_sample, 0.1, log10_t1=1e6, saves=50)
    assert sol.status == "completed" and np.all(np.isfinite(sol.params)) and np.all(np.isfinite(sol.log_loss))
    m_ref = 1e6 * math.log(10) + math.log(x @ x)
    np.testing.assert_allclose(sol.margins[-1, 0], m_ref, rtol=1e-10)
    np.testing.assert_allclose(sol.log_loss[-1], -m_ref, rtol=1e-10)
    assert sol.log10_t[-1] == pytest.approx(1e6, rel=1e-14)


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.05, 2), fs.SAM(0.05, float("inf"))], ids=str)
def test_depth2_to_log10_t_of_a_million(one_sample, flow):
    sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", flow), one_sample, 0.2, log10_t1=1e6, saves=60)
    assert sol.status == "completed"
    for a in (sol.params, sol.beta, sol.log_loss, sol.margins, sol.tau, sol.log10_t):
        assert np.all(np.isfinite(a))
    assert sol.log10_t[0] == pytest.approx(-6.0)  # the first save is just after t = 0
    # the loss decreases like 1/t up to log factors and, for SAM, the factor e^{rho O(|w|)} between
    # L(theta) and L(theta~) (|w| ~ sqrt(log t)): log L / log t -> -1
    assert sol.log_loss[-1] / (sol.log10_t[-1] * math.log(10)) == pytest.approx(-1, abs=1e-3)
    assert np.all(np.diff(sol.log_loss[1:]) < 0)


def test_l2_sam_collapse_small_init(one_sample):
    # docs/theory.md 5 item 5: while N = |x*w| < rho x_j every coordinate shrinks; from a small alpha all collapse
    sol = fs.solve(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(0.1)), one_sample, 0.01, t1=1e30)
    assert sol.status == "collapsed" and sol.ok
    assert np.abs(sol.params[-1]).max() <= 1.01e3 * 1e-10  # the floor: 1000 atol
    assert np.all(np.diff(np.abs(sol.params[:, 0, :]).max(axis=1)) <= 0)
    assert sol.log10_t[-1] < 30
    # a larger alpha does not collapse
    assert fs.solve(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(0.1)), one_sample, 0.5, t1=1e30).status == "completed"


def test_blow_up_is_reported_with_the_trajectory(one_sample):
    sol = fs.solve(fs.derive(fs.DiagonalNet(3, "tied"), "logistic", fs.GD()), one_sample, 0.5, t1=1e100, blowup_size=3.0)
    assert sol.status == "blew_up"
    assert np.abs(sol.params[-1]).max() == pytest.approx(3.0, rel=1e-6)
    assert np.all(np.diff(sol.log10_t[1:]) > 0)


def test_max_steps_raises_with_partial_solution(one_sample):
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    with pytest.raises(fs.IntegrationError) as err:
        fs.solve(system, one_sample, 0.1, t1=1e100, max_steps=20, backend="scipy:RK45")
    sol = err.value.solution
    assert sol.status == "max_steps" and not sol.ok and len(sol.log10_t) >= 2 and sol.log10_t[-1] < 100
    assert fs.solve(system, one_sample, 0.1, t1=1e100, max_steps=20, throw=False).status == "max_steps"


def test_interrupt_keeps_the_trajectory(one_sample):
    from flowsim.testing import interrupt

    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    with interrupt("scipy step", nth=60), pytest.raises(fs.IntegrationError) as err:
        fs.solve(system, one_sample, 0.1, t1=1e100, backend="scipy:RK45")
    sol = err.value.solution
    assert sol.status == "interrupted" and len(sol.log10_t) > 2 and np.all(np.isfinite(sol.beta))
    full = fs.solve(system, one_sample, 0.1, t1=1e100, backend="scipy:RK45")
    m = len(sol.log10_t) - 1  # the saves before the interrupt are the uninterrupted solve's
    assert full.status == "completed" and len(full.log10_t) > m
    np.testing.assert_array_equal(sol.beta[:m], full.beta[:m])


def test_linf_sam_from_a_basis_vector_stays_on_it(one_sample):
    # seed 000: at L = 2 l_inf-SAM from a basis-vector init keeps the other coordinate at 0
    sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05, float("inf"))), one_sample,
                   [0.5, 0.0], t1=1e50)
    assert sol.status == "completed"
    assert np.all(sol.params[:, :, 1] == 0.0) and sol.beta[-1, 0] > 10


@pytest.mark.parametrize("name", ["Tsit5", "Dopri5"])
@pytest.mark.parametrize("clock", ["log_time", "tau"])
def test_unrolled_solvers_take_diffraxs_steps(name, clock):
    # flowsim's Tsit5/Dopri5 are diffrax's tableaus with the stage loop unrolled: the same steps
    # (accepted and rejected) and, to rounding, the same states and dense output
    import diffrax
    import jax.numpy as jnp

    from flowsim.field.vector_field import jax_field
    from flowsim.integrate.backends import _unrolled
    from flowsim.integrate.clock import named
    from flowsim.integrate.segment_args import SegmentArgs

    data = separable(12, 5, seed=6)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05, 2))
    f = jax_field(system, 2, 5).rhs(named(clock), False)
    args = SegmentArgs(jnp.asarray(data.z), jnp.float64(0.05), jnp.ones((2, 5)), jnp.zeros((2, 5), bool))
    y0 = jnp.concatenate([jnp.full(10, 0.5), jnp.zeros(1)])
    s1 = math.log1p(1e40) if clock == "log_time" else 4.0  # tau = 4 is t ~ 1e30 here
    runs = []
    for solver in (getattr(diffrax, name)(), getattr(_unrolled, name)()):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(f), solver, 0.0, s1, None, y0, args,
                                  saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, s1, 37)),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-11), max_steps=10**4)
        runs.append(sol)
    ref, new = runs
    assert int(new.stats["num_accepted_steps"]) == int(ref.stats["num_accepted_steps"]) > 20
    assert int(new.stats["num_rejected_steps"]) == int(ref.stats["num_rejected_steps"])
    scale = float(jnp.abs(ref.ys).max())
    np.testing.assert_allclose(np.asarray(new.ys), np.asarray(ref.ys), rtol=0, atol=1e-12 * scale)


def test_sam_rest_point_where_the_evaluation_point_is_critical_is_held_by_every_backend():
    """Depth-3 l2-SAM from a balanced negative init keeps beta <= 0 (w = 0 is invariant), and coordinate 1
    comes to rest where its evaluation point lands on that plane: w~_1 = w_1 + (rho/sqrt 3) = 0, so
    beta_1 -> -(rho/sqrt 3)^3 while beta_2 -> 0. The rest point attracts from one side only; a solver
    that stepped across it used to reach the loss's own critical point (beta_1 = -0.167) and call it
    converged. Every backend must stop at the rest point."""
    X = np.array([[-1.27288316, 1.88158494], [0.46245432, 0.52199432], [1.27781334, 1.13738853],
                  [0.35180389, 0.24086668], [-1.25543163, 0.70697094], [-0.00727093, -1.60658444]])
    data = fs.Dataset(X, [1, 1, 1, 1, 1, -1])
    rho = 0.331226403393368
    system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(rho, 2))
    with pytest.warns(fs.ReachabilityWarning):
        ends = [fs.solve(system, data, -0.0017383405674502239, log10_t1=74.3, backend=b)
                for b in ("scipy:LSODA", "scipy:Radau", "scipy:BDF", "auto")]
    for sol in ends:
        assert sol.status == "converged" and "rest point of the perturbed flow" in sol.message
        np.testing.assert_allclose(sol.beta[-1], [-(rho / np.sqrt(3)) ** 3, 0.0], rtol=1e-7, atol=1e-12)


def test_l2_sam_comes_to_rest_at_a_saddle_that_traps_it_and_gd_converges_past_it():
    """Gaussian data that beta = w^2 >= 0 cannot separate: l2-SAM (rho = 0.1) reaches a saddle of the loss where
    its field is discontinuous. There the ascent by rho overshoots the saddle along its unstable direction and
    the descent pulls back: the saddle is a rest point of the exact flow (the limits eps -> 0 of the regularised
    flow and step -> 0 of discrete SAM stay there: tests/test_rest_points.py). Every backend ends "converged" at
    the same saddle, which an independent Hessian (jax) confirms is one; GD from the same init converges to a
    minimum, which must not be called a saddle."""
    import jax
    import jax.numpy as jnp

    data = fs.datasets.iid_gaussian(20, 10, 0)
    sam = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    gd = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.GD()), data, 0.1, t1=1e30)
    assert gd.status == "converged" and "saddle" not in gd.message
    loss = lambda v: jnp.mean(jnp.logaddexp(0.0, -jnp.asarray(data.z) @ (v * v)))  # noqa: E731
    lowest = lambda w: np.linalg.eigvalsh(np.asarray(jax.hessian(loss)(jnp.asarray(w)))).min()  # noqa: E731
    assert lowest(gd.params[-1, 0]) > -1e-9
    ends = {be: fs.solve(sam, data, 0.1, t1=1e30, backend=be, throw=False)
            for be in ("auto", "scipy:BDF", "scipy:Radau", "diffrax:Tsit5")}
    w = ends["scipy:BDF"].params[-1, 0]  # balanced: w1 = w2 = w, beta = w^2
    assert np.array_equal(w, ends["scipy:BDF"].params[-1, 1])
    assert float(jnp.linalg.norm(jax.grad(loss)(jnp.asarray(w)))) < 1e-6
    assert lowest(w) < -1e-3  # a saddle, not a minimum
    for be, sol in ends.items():
        assert sol.status == "converged" and "saddle of the loss" in sol.message, (be, sol.message)
        np.testing.assert_allclose(sol.beta[-1], ends["scipy:BDF"].beta[-1], rtol=1e-7, atol=1e-10)
        assert np.abs(sol.beta[-1] - gd.beta[-1]).max() > 0.02  # not the minimum GD reaches (beta_2 = 0.032 there)


SWITCHES_X = [[0.3768728947978823, -0.5456091014622259, 0.6483384560494839, 0.0008651318587030127],
              [-2.4182572051670244, -1.574459831773102, 0.8249893546962269, 0.33546143568049913],
              [1.472168281227504, -0.09139993047104004, -0.19232357176183645, -0.7264721224554068],
              [-1.6020211809948155, 1.4455397811442183, 1.220392801605535, -0.6656884106684543],
              [-0.754135318787993, -0.9463573172628728, -1.942253317979071, 0.1915111761615928],
              [0.21846900929470225, -0.6453195867958206, 0.8533109877310779, -0.449579601445313],
              [-0.3843816132184818, -0.015565697954235949, 0.8587982194864632, -0.3679504072226372],
              [-0.08614287006134244, 1.6474948937283274, 1.738714247297254, 0.010586342317578863],
              [-0.5651857087525601, 0.3495412615902947, -0.5120251685680646, 1.4789364037926707],
              [-0.47472421257733133, -1.5466051829585936, -1.4773038631835742, 0.5974330563406386]]
SWITCHES_Y = [-1, 1, -1, 1, -1, -1, 1, 1, 1, -1]


def test_a_switch_right_after_another_is_not_missed():
    """l_inf-SAM on the linear model: G_2 changes sign at log10 t = -0.267, G_3 at -0.064. The segment after
    the first switch starts with sigma_2 G_2 = 0; as one minimum over the entries it used to disarm the whole
    switch event, so Tsit5 and DOP853 missed the second switch and followed the stale sign (beta 1e-2 off).
    Every backend, at two tolerances, must see both switches and end at the same beta, where G_3 > 0."""
    data = fs.Dataset(np.array(SWITCHES_X), SWITCHES_Y)
    system = fs.derive(fs.Linear(), "exponential", fs.SAM(0.029440255387212184, float("inf")))
    ends = [fs.solve(system, data, 1.0, log10_t1=0.029440255387212184, backend=be, rtol=rtol, atol=rtol / 100)
            for be in ("auto", "scipy:DOP853", "scipy:LSODA", "scipy:Radau") for rtol in (1e-8, 1e-11)]
    for sol in ends:
        assert sol.stats["switches"] == 2, (sol.config["backend"], sol.events)
        np.testing.assert_allclose(sol.beta[-1], ends[-1].beta[-1], rtol=1e-6)
    from flowsim.field.vector_field import numpy_field

    G, _ = numpy_field(system, 1, 4).direction(ends[-1].params[-1], data.z)
    assert G[0, 2] > 0 and G[0, 1] < 0  # both switched, as the events say


def _seed12_lp_sam_case():
    """A random case (issue 12) where l3-SAM puts entries on their planes w = 0 in finite time."""
    r = np.random.default_rng(12)
    r.integers(3), r.integers(1, 5), r.integers(2), r.uniform(0, 0.5)
    alpha = r.choice([-1, 1]) * 10 ** r.uniform(-3, 0)
    n, d = int(r.integers(1, 11)), int(r.integers(1, 7))
    return separated_draw(r, n, d), alpha


def test_lp_sam_entries_reach_their_plane_in_finite_time_on_every_backend():
    """l3-SAM moves the evaluation point by |g|^(1/2): at depth 2 an entry obeys w' ~ -c sign(w)|w|^(1/2)
    and lands on w = 0 at a finite time, where LSODA and Radau used to dither until the step budget ran
    out while BDF and the explicit methods collapsed. Now every backend puts entries 2 and 3 on their
    planes and collapses at the same time."""
    data, alpha = _seed12_lp_sam_case()
    system = fs.derive(fs.DiagonalNet(2, "tied"), "exponential", fs.SAM(0.09466019226988065, 3))
    with pytest.warns(fs.ReachabilityWarning):  # beta = w^2 >= 0 does not separate these data
        ends = {b: fs.solve(system, data, alpha, log10_t1=64.9, backend=b)
                for b in ("scipy:LSODA", "scipy:Radau", "scipy:BDF", "scipy:DOP853", "diffrax:Tsit5")}
    for b, sol in ends.items():
        assert sol.status == "collapsed", (b, sol)
        assert sol.log10_t[-1] == pytest.approx(ends["scipy:BDF"].log10_t[-1], abs=1e-5), b
    arrived = [[(x["layer_index"], x["coordinate"]) for x in e["entries"]]
               for e in ends["scipy:LSODA"].events if e["kind"] == "arrival"]
    assert arrived == [[(0, 2)], [(0, 3)]]


@pytest.mark.parametrize("flow, reaches", [(fs.SAM(0.1, 3), True), (fs.SAM(0.1, 2), False), (fs.GD(), False),
                                           (fs.USAM(0.1), False)], ids=str)
def test_only_a_sub_linear_field_reaches_its_plane(flow, reaches):
    """The arrival test measures the order of vanishing of the entry's field: |w|^(1/2) under l3-SAM at
    depth 2 (finite time), |w| under GD, USAM and l2-SAM (e^{-lambda t}: never), and no entry away from
    its plane is ever put on it."""
    from flowsim.field.vector_field import numpy_field
    from flowsim.integrate.arrival import arrivals

    data, _ = _seed12_lp_sam_case()
    system = fs.derive(fs.DiagonalNet(2, "tied"), "exponential", flow)
    vf = numpy_field(system, 1, data.X.shape[1])
    theta = np.array([[0.3, 1e-11, -0.2]])
    on = arrivals(vf, theta, data.z, flow.rho, np.ones_like(theta), (True,), 1e-10)
    assert on.tolist() == [[False, reaches, False]]


FAMILIES = [fs.GD(), fs.SAM(0.1, 2), fs.SAM(0.1, 3), fs.SAM(0.1, np.inf), fs.USAM(0.1), fs.AdamProxy(), fs.NormalizedGD()]


@pytest.mark.parametrize("flow", FAMILIES, ids=str)
@pytest.mark.parametrize("model", [fs.DiagonalNet(2, "product"), fs.DiagonalNet(3), fs.Linear()], ids=str)
def test_the_field_at_many_states_at_once_is_the_field_at_each(model, flow):
    """``VectorField.fields`` (the arrival and sliding probes, all in one call) gives ``field_and_scale``'s F at
    each state: the sums taken per state (margins, weights, moments, the dual norm), to rounding."""
    from flowsim.field.vector_field import numpy_field

    rng = np.random.default_rng(3)
    data = fs.Dataset(rng.normal(size=(30, 5)), rng.choice([-1.0, 1.0], 30))
    system = fs.derive(model, "logistic", flow)
    K = system.n_layers
    vf, states, sigma = numpy_field(system, K, 5), 0.5 * rng.normal(size=(K, 7, 5)), np.sign(rng.normal(size=(K, 5)))
    each = np.stack([vf.field_and_scale(states[:, i], data.z, float(flow.rho), sigma)[0] for i in range(7)], axis=1)
    assert vf.fields(states, data.z, float(flow.rho), sigma) == pytest.approx(each, rel=1e-11, abs=1e-15)


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.1, 3)], ids=str)
def test_entries_near_their_planes_are_probed_in_a_few_field_evaluations(flow):
    """Probing each entry near its plane (4 fields: on it, both sides, nearer) was 57% of a 2,000 x 500
    product-net solve, one field evaluation of all the data per probe. The probes go in a few batched calls,
    and decide as one entry at a time does (here l3-SAM's entries arrive, GD's do not)."""
    from flowsim.field.vector_field import numpy_field
    from flowsim.integrate.arrival import ORDER, RATIO, arrivals

    rng = np.random.default_rng(5)
    data = fs.Dataset(rng.normal(size=(40, 30)), rng.choice([-1.0, 1.0], 40))
    vf = numpy_field(fs.derive(fs.DiagonalNet(2, "tied"), "exponential", flow), 1, 30)
    theta, sigma, tol = np.where(np.arange(30) % 3, 1e-11, 0.3)[None] * rng.choice([-1, 1], 30), np.ones((1, 30)), 1e-10

    def field(k, w):
        probe = theta.copy()
        probe[0, k] = w
        return vf.field_and_scale(probe, data.z, flow.rho, sigma)[0][0, k]

    def arrives(k):  # the test of the module docstring, one entry at a time
        right, left, near = field(k, tol), field(k, -tol), field(k, tol / RATIO)
        return abs(theta[0, k]) <= tol and field(k, 0.0) == 0.0 and right < 0 < left and 0 < right / near < RATIO**ORDER

    one_at_a_time = [arrives(k) for k in range(30)]
    calls = []

    class Counted:
        """The field, counting the evaluations asked of it."""

        def __getattr__(self, name):
            method = getattr(vf, name)
            if name not in ("field_and_scale", "fields"):
                return method
            return lambda *a: calls.append(name) or method(*a)

    on = arrivals(Counted(), theta, data.z, flow.rho, sigma, (True,), tol)
    assert on[0].tolist() == one_at_a_time and any(one_at_a_time) == (flow.rho > 0)
    assert 1 <= len(calls) <= 2, calls


def _linf_depth3_case(seed):
    """A random depth-3 l_inf-SAM case (issue 12): form, loss, rho, alpha, data and horizon from ``seed``."""
    r = np.random.default_rng(seed)
    form, loss = ["product", "tied", "difference"][r.integers(3)], ["logistic", "exponential"][r.integers(2)]
    rho, alpha = r.uniform(0, 0.5), r.choice([-1, 1]) * 10 ** r.uniform(-3, 0)
    n, d = int(r.integers(1, 11)), int(r.integers(1, 7))
    data = separated_draw(r, n, d)
    system = fs.derive(fs.DiagonalNet(3, form), loss, fs.SAM(rho, float("inf")))
    return system, data, alpha, r.uniform(0, 100)


@pytest.mark.parametrize("seed", [1, 41])
def test_linf_sam_one_sided_rest_point_is_held_by_every_backend(seed):
    """Depth-3 l_inf-SAM comes to rest where every evaluation point w + rho sign(g) lands on w~ = 0, so
    |w| -> rho and beta -> +-rho^3, approached like 1/tau from one side. LSODA used to step across it at
    log10 t ~ 16 and report "completed" with beta_1 = 300 (seed 1) or 150 (seed 41), BDF failed there;
    now every backend holds the rest point to t1, and the records end at t1 itself."""
    system, data, alpha, log10_t1 = _linf_depth3_case(seed)
    rho = system.flow.rho
    for backend in ("scipy:LSODA", "scipy:BDF", "scipy:Radau", "diffrax:Tsit5"):
        sol = fs.solve(system, data, alpha, log10_t1=log10_t1, backend=backend)
        assert sol.status == "converged" and "rest point of the perturbed flow" in sol.message, (backend, sol)
        np.testing.assert_allclose(np.abs(sol.params[-1]), rho, rtol=1e-7, err_msg=backend)
        assert sol.log10_t[-1] == pytest.approx(log10_t1, abs=1e-9), backend


def test_coupled_switches_slide_on_their_shared_surface():
    """A difference net's u_1 and v_1 switch sign together at log10 t = 2.1833: their G's share the factor r_1, so
    they lie on one switching surface r_1 = 0, and no combination of sides holds (each pushes both G's to the
    other side). The run slides on it (one surface, both entries' signs set by one control) until its one-sided
    fields balance with every other entry still: a rest point of the Filippov flow, held. LSODA and Radau agree
    on it; BDF drifts along its near-neutral directions and fails, Tsit5 is stiff there and runs out of steps
    (each says so)."""
    system, data, alpha, log10_t1 = _linf_depth3_case(4)
    ends = {}
    for backend in ("scipy:LSODA", "scipy:Radau"):
        sol = fs.solve(system, data, alpha, log10_t1=log10_t1, backend=backend)
        assert sol.status == "converged" and "came to rest while sliding" in sol.message, backend
        join = next(e for e in sol.events if e.get("sliding"))
        assert join["log10_t"] == pytest.approx(2.18335, abs=1e-4), backend
        assert {(e["layer_index"], e["coordinate"]) for e in join["sliding"]} == {(0, 1), (1, 1)}, backend
        ends[backend] = sol.beta[-1] / np.linalg.norm(sol.beta[-1])
    np.testing.assert_allclose(ends["scipy:LSODA"], ends["scipy:Radau"], atol=1e-6)


@pytest.mark.parametrize("name", ["Tsit5", "Dopri5"])
def test_a_first_step_into_overflow_is_rejected_and_shrunk(name):
    """Depth-4 GD from alpha = 1 grows like w^3: diffrax's first trial step (dt = 0.01 in log-time) overflows
    to y1 = inf, its controller scaled the error by max(|y0|, |y1|) = inf, got NaN, and every later step was
    rejected (0 accepted of 16,384). The unrolled solvers now reject such a step with an infinite error."""
    X = np.array([[-0.41306354, -2.44146738], [1.79970738, 1.14416587], [-0.32542284, 0.77380659],
                  [0.28121067, -0.55382284]])
    data = fs.Dataset(X, [1, -1, -1, 1])
    system = fs.derive(fs.DiagonalNet(4, "tied"), "exponential", fs.GD())
    with pytest.warns(fs.ReachabilityWarning):  # beta = w^4 >= 0 does not separate these data
        ref = fs.solve(system, data, 1.0, log10_t1=0.5, backend="scipy:LSODA")
        sol = fs.solve(system, data, 1.0, log10_t1=0.5, backend=f"diffrax:{name}")
    assert sol.status == "completed" and sol.stats["accepted"] > 0
    np.testing.assert_allclose(sol.beta[-1], ref.beta[-1], rtol=1e-6)


def test_a_step_over_the_collapse_is_a_collapse_not_a_crossing():
    """Tied depth-3 l2-SAM collapses to 0; LSODA, BDF and DOP853 took a step over the whole dip, from w < 0
    past 0 to w = +floor, where the crossing event (past the floor on the other side) and the collapse
    event (the floor on the way in) both fall through zero, and the root found was the crossing's: they
    said 'failed' where Radau and Tsit5 said 'collapsed'. Every entry within the floor is a collapse."""
    X = np.array([[-1.2464470429373242, 0.21545286985931658, -1.2909929073899196],
                  [2.749015463348207, 0.04109452671349467, 1.033681471969891],
                  [0.658775309125931, -1.3013912887379624, -1.199500609565068],
                  [2.2583923522856826, -0.189104343659503, 0.934872062331375],
                  [0.7734059933873, 0.139931522943486, 1.2359978602932467],
                  [0.39598145996255474, -2.2782399657809957, 0.8105399769338778],
                  [-1.4128882127888192, -0.5067320668076853, -1.461965988622038],
                  [-0.02697111924351951, -1.1376747387520816, 0.35834614329573994],
                  [-0.42701466405456145, 0.22132720795157218, -0.16268657528613487],
                  [0.8397513459602891, -0.6999398320524431, 0.439293951186822]])
    data = fs.Dataset(X, [-1, 1, 1, 1, 1, -1, -1, -1, -1, 1])
    system = fs.derive(fs.DiagonalNet(3, "tied"), "logistic", fs.SAM(0.06773551861003825, 2))
    with pytest.warns(fs.ReachabilityWarning):  # beta = w^3 <= 0 from this init does not separate them
        ends = [fs.solve(system, data, -0.08651270074030394, log10_t1=85.8, backend=b)
                for b in ("scipy:LSODA", "scipy:BDF", "scipy:DOP853", "scipy:Radau", "diffrax:Tsit5")]
    for sol in ends:
        assert sol.status == "collapsed", sol
        assert sol.log10_t[-1] == pytest.approx(ends[3].log10_t[-1], abs=1e-4)


def test_sliding_on_a_plane_is_judged_on_the_plane():
    """l_inf-SAM with rho = 2.9e-78: coordinate 2 decays onto w = 0 and slides there. BDF stopped at
    |w| = 1.1e-79, where the one-sided fields -2(w +- rho) r are no mirror images (w/rho = 0.04), and said
    'chattering'; on the plane, where the entry is held, they are. Every backend now converges."""
    X = np.array([[0.2953617703611253, -1.2554676524996362], [1.3001240293422884, -1.8325187235374665],
                  [0.2487357769778854, -1.4805964033075505], [-0.7497609821648068, 1.573160486323046],
                  [-0.6388446962611337, -0.3762803074288157], [-0.7255647622180819, 0.1598811481971678],
                  [-0.4329117669769793, -1.1928623875575899]])
    data = fs.Dataset(X, [1, 1, 1, -1, 1, 1, 1])
    system = fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(2.88136615526456e-78, float("inf")))
    with pytest.warns(fs.ReachabilityWarning):
        ends = [fs.solve(system, data, -1.0, log10_t1=44.5, backend=b) for b in ("scipy:BDF", "scipy:LSODA")]
    for sol in ends:
        assert sol.status == "converged", sol
        np.testing.assert_allclose(sol.beta[-1], ends[1].beta[-1], rtol=1e-7, atol=1e-12)


def _depth3_sliding_case():
    """A random depth-3 l2-SAM case (issue 12): entries 1-5 head for 0 while entry 6 sits where g_6 changes sign."""
    X = np.array([[0.6457265646506497, -0.3971752729171744, 0.4943433397866406, 1.7814758977638663,
                   -1.0650325124359086, -1.3931595219608626],
                  [-0.509622447939616, -1.9903655019419368, -0.7930500923891605, -0.07708328632119317,
                   -0.41886184324747294, -0.5293640470385137],
                  [0.05912480678875151, 0.4213256021895783, -0.3019440772684465, -1.0010071551849082,
                   -0.7450923395284051, 1.1398773788520105],
                  [0.6646091588161834, 0.07867275385111436, 0.06714396171277652, 0.04676628361028227,
                   -0.35721770860023666, 1.0193766991641182]])
    return fs.derive(fs.DiagonalNet(3), "exponential", fs.SAM(0.09112067806381142, 2)), fs.Dataset(X, [-1, 1, 1, 1])


def test_normalised_sam_arriving_at_a_degenerate_critical_point_converges_there_on_every_backend():
    """l2-SAM on a depth-3 product: coordinates 1-5 decay to 0 in every layer with a gradient quadratic in them
    while g_6 -> 0, a degenerate critical point of the loss. Radau dithered there for its whole budget (16,384 steps,
    48 s) where LSODA and BDF stepped across a plane and failed; then it was named as a sliding entry and ended
    "chattering". It is the flow's end: the entries are held at 0 (the limit of Newton's method that shrinks them
    geometrically), coordinate 6 is the minimum of the loss restricted to it, which traps the flow, and every
    backend converges there within three chunks of steps."""
    system, data = _depth3_sliding_case()
    ends = {}
    for backend in ("scipy:Radau", "scipy:LSODA"):
        with pytest.warns(fs.ReachabilityWarning):  # beta = w^3 >= 0 from this init does not separate the data
            sol = fs.solve(system, data, 1.0, log10_t1=3.0, backend=backend, throw=False)
        assert sol.status == "converged" and sol.stats["steps"] <= 3072, sol
        assert "a degenerate critical point: entries w[layer 1, coordinate 1]" in sol.message, sol.message
        assert sol.log10_t[-1] == 3.0 and np.all(sol.params[-1][:, :5] == 0.0)
        ends[backend] = sol.params[-1]
    np.testing.assert_allclose(ends["scipy:Radau"], ends["scipy:LSODA"], rtol=1e-6)


def test_a_stiff_decay_onto_a_plane_is_not_called_sliding():
    """l2-SAM decaying to a critical point with an entry going to 0 at rate ~2e5: BDF converges; Tsit5 dithers
    at 1e-12..1e-8 around the plane (its stability bound). The field vanishes linearly at the plane, so no
    sliding mode: probed about the entry's value (2.9e-12, at a distance of 1e-10) it had looked sub-linear
    and Tsit5's run ended "chattering" with a message about a discontinuity that is not there. Tsit5 then ran out
    of steps; it is now accepted at the minimum that traps the flow, BDF's limit."""
    data = fs.datasets.scaled_rademacher(10, 4)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, 2))
    init = np.array([0.05, 0.1, 0.1, 0.1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        bdf = fs.solve(system, data, init, t1=1e6, saves=20, backend="scipy:BDF", throw=False)
        tsit5 = fs.solve(system, data, init, t1=1e6, saves=20, backend="diffrax:Tsit5", throw=False)
    assert bdf.status == "converged", bdf
    # within l2-SAM's arrival radius of the minimum, whose field traps it (rest_points.normalised_minimum_traps)
    assert tsit5.status == "converged", tsit5
    np.testing.assert_allclose(tsit5.beta[-1], bdf.beta[-1], rtol=1e-6, atol=1e-9)


def test_sliding_needs_a_field_that_jumps_at_the_state():
    """The sliding test about an entry's value: true on the surface g_6 = 0 where l2-SAM's field jumps, false a
    little off it (one side only) and false for GD there (its field is continuous: it vanishes with the distance)."""
    from flowsim.field.vector_field import numpy_field
    from flowsim.integrate.arrival import sliding

    system, data = _depth3_sliding_case()
    with pytest.warns(fs.ReachabilityWarning):
        sol = fs.solve(system, data, 1.0, log10_t1=3.0, backend="scipy:Radau", throw=False)
    theta = sol.params[-1]
    vf = numpy_field(system, 3, 6)
    on = sliding(vf, theta, data.z, system.flow.rho, np.ones_like(theta), 1e-8, 1e-10)
    assert on[:, :5].sum() == 0 and on[:, 5].any(), on
    off = theta + 1e-3 * (np.arange(6) == 5)
    assert not sliding(vf, off, data.z, system.flow.rho, np.ones_like(theta), 1e-8, 1e-10).any()
    gd = numpy_field(fs.derive(fs.DiagonalNet(3), "exponential", fs.GD()), 3, 6)
    assert not sliding(gd, theta, data.z, 0.0, np.ones_like(theta), 1e-8, 1e-10).any()


L3_X = [[1.4998616202102704, -1.1682047539308045], [0.8106216312560561, 1.8988979078111143],
        [0.4469642342488036, 1.629147622744753], [-0.13815213257224668, -0.4209144822054169],
        [0.46615477458847776, -1.4397901612502337], [1.109784940584752, 0.044554538418871914],
        [-1.2931625626496468, 1.1320646767059128], [0.6771097802695434, -0.3272091716034584]]
L3_Y = [-1, -1, -1, 1, -1, -1, 1, -1]


def test_a_critical_point_with_an_entry_on_its_plane_is_found_under_lp_sam():
    """l3-SAM puts coordinate 1 on its plane (finite-time arrival) on the way to a critical point. The
    critical-point test linearises the loss's gradient field (radius 0) there, and the perturbation's
    derivative, infinite at g = 0, came in multiplied by rho = 0: NaN, no critical point, and LSODA spent
    its whole budget where BDF converged. Now the three implicit methods converge to one limit."""
    system = fs.derive(fs.DiagonalNet(2), "exponential", fs.SAM(0.47412912234326826, 3))
    data = fs.Dataset(np.array(L3_X), L3_Y)
    with pytest.warns(fs.ReachabilityWarning):
        ends = [fs.solve(system, data, 0.004519451149903088, log10_t1=5.737647996441231, backend=b, throw=False)
                for b in ("scipy:LSODA", "scipy:BDF", "scipy:Radau")]
    for sol in ends:
        assert sol.status == "converged", (sol.config["backend"], sol.message)
        np.testing.assert_allclose(sol.beta[-1], ends[1].beta[-1], rtol=1e-6, atol=1e-12)
    assert ends[0].beta[-1][0] == 0.0


def test_the_jacobian_at_radius_zero_is_the_gradient_fields_even_where_g_vanishes():
    """At rho = 0 the evaluation point is theta: l3-SAM's Jacobian there is GD's (the derived gradient
    field), finite with an entry exactly 0, where the perturbation's own derivative is infinite."""
    from flowsim.field.jacobian import FieldJacobian
    from flowsim.field.vector_field import numpy_field

    data = fs.Dataset(np.array(L3_X), L3_Y)
    theta = np.array([[0.0, 0.08], [0.0, 0.08]])
    out = {}
    for name, flow in (("l3", fs.SAM(0.47, 3)), ("gd", fs.GD())):
        vf = numpy_field(fs.derive(fs.DiagonalNet(2), "exponential", flow), 2, 2)
        out[name] = FieldJacobian(vf).field_and_scale(theta, data.z, 0.0, np.ones_like(theta))
    assert np.all(np.isfinite(out["l3"][2]))
    for a, b in zip(out["l3"], out["gd"]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_entries_decaying_to_0_near_a_critical_point_make_it_a_degenerate_one_on_every_backend():
    """All of g is small near a critical point: coordinates 5 and 6 have |g_k| at 0.5-1% of max |g| (Radau spent
    16,384 steps, 36 s, 'max_steps'; LSODA failed crossing a plane; then both were named as sliding there, and the
    run ended 'chattering'). Coordinates 1-4 decay to 0 with a gradient quadratic in them: the point is a degenerate
    critical point whose restricted part traps l2-SAM, and every backend converges there alike."""
    X = np.array([[1.50700561, 0.84325445, 0.20733528, -1.58543638, -0.18617751, -0.54675248],
                  [0.35405732, 0.49836524, -0.02870169, -0.06724912, -0.09071704, -0.71659597],
                  [0.0268449, 2.31344621, 1.05762873, -0.43534083, -0.38025481, 0.07268685],
                  [0.4623903, 0.09975066, 0.79567356, 0.6530468, -0.21609658, 0.55602082],
                  [-0.69323086, -1.79662041, 0.7855192, 0.41277667, 1.51318161, 1.31242498],
                  [0.7306772, 0.76791251, -0.2361798, 0.53171291, 0.88995255, -0.71642245]])
    system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(0.331226403393368, 2))
    ends = []
    for backend in ("scipy:Radau", "scipy:LSODA"):
        with pytest.warns(fs.ReachabilityWarning):  # beta = w^3 <= 0 from this init does not separate the data
            sol = fs.solve(system, fs.Dataset(X, [1, 1, 1, 1, -1, 1]), -0.0017383405674502239, log10_t1=74.3,
                           backend=backend, throw=False)
        assert sol.status == "converged" and sol.stats["steps"] <= 3072, sol
        assert "a degenerate critical point: entries w[layer 1, coordinate 1], w[layer 1, coordinate 2], " \
               "w[layer 1, coordinate 3], w[layer 1, coordinate 4] go to 0" in sol.message, sol.message
        ends.append(sol.beta[-1])
    assert np.all(ends[0][:4] == 0.0) and np.all(ends[0][4:] < 0)
    np.testing.assert_allclose(ends[1], ends[0], rtol=1e-6)


def test_an_explicit_method_dithering_near_its_plane_puts_the_entry_there():
    """l3-SAM entries arrive on their planes; Tsit5 dithered 2-30 atol from them (its steps at their
    stability bound), the arrival test (within atol) did not fire, and it ran out of steps where LSODA,
    BDF, Radau and DOP853 collapsed. An entry that one mean step carries onto its plane is on it."""
    X = [[1.1441658720372287, -0.32542283686782436, 0.7738065867276614, 0.28121066979764925, -0.5538228364240524],
         [0.9775674511260357, -0.31055654665915255, -0.3288239040579627, -0.7921467553588982, 0.45495807124085547],
         [-0.09919805171738795, 0.5452887139646817, -0.6071856998706371, 0.12682784711186987, -0.8922740434297903],
         [0.8414649723701431, 0.18803508698068597, 0.33057100813532614, 0.41050391297026284, -1.0107575001533344],
         [0.7831809961440773, 2.0567028183423686, -1.6384425032355252, -1.7294114671544816, -1.50483141386432],
         [0.8414588934539998, 0.12871565747406846, 1.078342440739298, 0.722430872307499, 0.21057181237528058],
         [0.28403814525037085, -0.16976049772313542, 0.8684602112115102, -1.1297159617807548, -0.4218588261783162],
         [0.2429388530987352, 1.8014208584493328, -0.7644641157203993, -1.0790604591369424, -0.5632871985040379]]
    data = fs.Dataset(np.array(X), [-1, 1, -1, -1, 1, -1, 1, 1])
    system = fs.derive(fs.DiagonalNet(2, "tied"), "exponential", fs.SAM(0.0868189257283012, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        ends = {b: fs.solve(system, data, 0.0016220795734162951, log10_t1=1.0, backend=b, throw=False)
                for b in ("scipy:LSODA", "diffrax:Tsit5")}
    for b, sol in ends.items():
        assert sol.status == "collapsed", (b, sol.message)
    assert ends["diffrax:Tsit5"].log10_t[-1] == pytest.approx(ends["scipy:LSODA"].log10_t[-1], abs=1e-5)


@pytest.mark.parametrize("backend", ["scipy:BDF", "scipy:Radau", "scipy:LSODA"])
def test_a_completed_run_ends_at_its_horizon(backend):
    """Depth-3 l_inf-SAM with an entry exactly at alpha = rho, in the tau clock: BDF's horizon event ended the
    run 1.4e-9 short in u, the last target was dropped, and "completed, reached the horizon t1" came with a last
    row at log10 t = 99.31 (beta_1 = 248.7 for 250.38 at t1 = 1e100). The end is the last row now, at its own
    time, within the clock's resolution of t1, and equal to DOP853's state at t1."""
    data = fs.Dataset(np.array([[1.0, 2.0]]), [1])
    system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(0.1, float("inf")))
    ref = fs.solve(system, data, np.array([0.100001, 0.1]), t1=1e100, backend="scipy:DOP853")
    sol = fs.solve(system, data, np.array([0.100001, 0.1]), t1=1e100, backend=backend)
    assert ref.log10_t[-1] == 100.0 and sol.status == "completed"
    assert sol.log10_t[-1] == pytest.approx(100.0, abs=1e-6) and sol.log10_t[-2] < 99.5
    np.testing.assert_allclose(sol.beta[-1], ref.beta[-1], rtol=1e-5)


def test_a_horizon_event_far_short_of_the_horizon_fails(monkeypatch):
    """Where a horizon event's root lands a save or more short of t1 (a dense output that does not bracket it:
    the step's start is taken), the run fails saying so; "completed" there presented an earlier state as t1's.
    Here BDF's dense output is stale: it gives the step's start wherever asked, missing the change that the
    step's end shows."""
    import scipy.integrate

    made = scipy.integrate.BDF.dense_output

    def stale(self):
        start = made(self)(self.t_old)
        return lambda s: start if np.ndim(s) == 0 else np.repeat(start[:, None], np.size(s), axis=1)

    monkeypatch.setattr(scipy.integrate.BDF, "dense_output", stale)
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset([[1.0, 2.0]], [1]), 0.1, t1=1e100,
                   backend="scipy:BDF", throw=False)
    assert sol.status == "failed" and "short of log10 t1 = 100" in sol.message and sol.log10_t[-1] < 99.99


def test_normalised_gd_through_the_origin_is_a_collapse_on_every_backend():
    """NormalizedGD moves at unit speed in its clock, and on a depth-3 tied net from (-0.01, -0.02) it keeps
    1/w_1 - 1/w_2 = -50: both entries reach 0 together, from below, at log10 t = -1.6402 (solve_ivp of the
    hand-written field, rtol 1e-12). The planes w = 0 were not armed for this flow (its clock), the passage
    is V-shaped, and four backends went through to beta = (0, 3.3e5) or (3.3e5, 0), "completed"."""
    from scipy.integrate import solve_ivp

    data = fs.Dataset(np.array([[1.0, 1.0]]), [1])
    w0 = np.array([-0.01, -0.02])
    system = fs.derive(fs.DiagonalNet(3, "tied"), "exponential", fs.NormalizedGD())
    assert fs.reachable_signs(system.model, w0[None], system.flow).tolist() == [-1, -1]

    def field(s, w):
        g = -3 * w**2 * np.exp(-(w**3).sum())  # x = (1, 1), exponential loss
        return -g / np.linalg.norm(g)

    near = lambda s, w: np.abs(w).max() - 1e-7  # noqa: E731
    near.terminal = True
    s_star = solve_ivp(field, (0, 1), w0, rtol=1e-12, atol=1e-16, events=near, method="DOP853").t_events[0][0]
    for backend in ("diffrax:Tsit5", "diffrax:Dopri8", "scipy:DOP853", "scipy:BDF", "scipy:LSODA"):
        sol = fs.solve(system, data, w0, t1=1e30, backend=backend)
        assert sol.status == "collapsed" and np.all(sol.beta[-1] <= 0), (backend, sol.beta[-1])
        assert sol.log10_t[-1] == pytest.approx(math.log10(math.expm1(s_star)), abs=1e-4)


def test_a_long_step_over_two_leader_switches_does_not_hide_them():
    """DOP853 stepped over a round trip of the leader (beta_4 -> beta_3 -> beta_1 -> beta_4) its own saves
    show: one switch where every other backend located four. Leader events are probed inside each step,
    whatever the saves."""
    X = np.array([[-0.8182, 0.7317, -0.5014, 0.8792], [-1.0718, 0.9145, -0.0201, -1.2487],
                  [-0.3139, 0.0541, 0.2728, -0.9822], [-1.1074, 0.1996, -0.4667, 0.2355],
                  [0.7595, -1.6488, 0.2544, 1.2246]])
    init = np.array([[-0.0407, 0.0709, 0.0177, -0.1491], [-0.1092, 0.0808, 0.0621, -0.0585]])
    system = fs.derive(fs.DiagonalNet(1, "difference"), "logistic", fs.NormalizedGD())
    data = fs.Dataset(X, [1, 1, -1, 1, 1])
    switches = {}
    for backend, saves in (("diffrax:Tsit5", None), ("scipy:DOP853", None), ("scipy:DOP853", 2), ("scipy:RK45", 2),
                           ("scipy:BDF", 2)):
        sol = fs.solve(system, data, init, t1=1e30, backend=backend, track=("magnitude",), saves=saves)
        switches[backend, saves] = [(e["from_index"], e["to_index"], e["log10_t"]) for e in fs.switch_times(sol)]
        lead = np.abs(sol.beta).argmax(axis=1)
        assert len(switches[backend, saves]) >= np.count_nonzero(np.diff(lead))  # (the saves' changes are there)
    ref = switches["diffrax:Tsit5", None]  # (with 2 saves, probed at save points only, DOP853 found one)
    assert [s[:2] for s in ref] == [(3, 2), (2, 0), (0, 3), (3, 0)]
    for backend, found in switches.items():
        assert [s[:2] for s in found] == [s[:2] for s in ref], backend
        np.testing.assert_allclose([s[2] for s in found], [s[2] for s in ref], atol=1e-5)


def test_a_jacobian_that_is_not_finite_says_what_to_use():
    """lp-SAM with p = 3 perturbs by |g_k|^(1/2): not differentiable where g_k = 0 (a frozen coordinate here,
    which the warning names). Radau failed at s = 0 with scipy's "array must not contain infs or NaNs"."""
    data = fs.Dataset(np.array([[1.0, 2.0], [-0.5, 1.0]]), [1, 1])
    init = np.array([[0.3, 0.1], [0.2, 0.0], [0.1, 0.0]])
    system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(0.05, norm=3))
    with pytest.warns(fs.ReachabilityWarning, match="keeps beta_2 = 0"):
        sol = fs.solve(system, data, init, t1=1e30, backend="scipy:Radau", throw=False)
    assert sol.status == "failed" and "not differentiable there" in sol.message and "needs no Jacobian" in sol.message


def test_a_step_budget_spent_on_the_way_is_not_a_saddle(one_sample):
    """l2-SAM from 0.05 < rho = 0.2 collapses at log10 t = 0.07; with a budget of 4 steps the run was "chattering:
    reached a saddle of the loss" at log10 t = -0.79, 0.05 away from it, its loss still moving."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.2))
    assert fs.solve(system, one_sample, 0.05, t1=1e20).status == "collapsed"
    short = fs.solve(system, one_sample, 0.05, t1=1e20, max_steps=4, throw=False)
    assert short.status == "max_steps" and "saddle" not in short.message, short.message


@pytest.mark.parametrize("backend", ["auto", "scipy:DOP853", "scipy:Radau"])
def test_a_collapse_is_not_a_leader_switch(one_sample, backend):
    """l2-SAM from 0.05 < rho = 0.1 collapses at log10 t = 0.7725 with beta_1 leading all the way: a root of the
    leader event in the collapsing step was recorded as a switch to beta_2 at beta = (1e-14, 2e-22)."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1))
    sol = fs.solve(system, one_sample, 0.05, t1=1e20, track=("magnitude",), backend=backend)
    assert sol.status == "collapsed" and fs.switch_times(sol) == []
    assert np.all(np.abs(sol.beta[1:, 0]) >= np.abs(sol.beta[1:, 1]))
