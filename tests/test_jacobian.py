"""The Jacobian that the implicit scipy methods get: assembled by the chain rule from sympy's partial
derivatives (flowsim.field.jacobian), checked against forward-mode autodiff of an independent gradient
(jax.grad of a hand-written loss) and of the compiled field, for every model x loss x flow, clock and
the Filippov sliding field; and a work budget for BDF with it."""

import itertools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_derive import LOSSES, MODELS, reference_beta, reference_field, reference_point

import flowsim as fs
from flowsim.field.jacobian import FieldJacobian
from flowsim.field.vector_field import jax_field, numpy_field
from flowsim.integrate.clock import Schedule, named
from flowsim.integrate.segment_args import SegmentArgs


def clock_of(name):
    """The clock of that name (a schedule's lr and decay do not enter the field)."""
    return Schedule(1.0, 1.0) if name == "schedule" else named(name)


def symbolic_jacobian(system, K, d, clock, sliding, s, y, args):
    vf = numpy_field(system, K, d)
    return FieldJacobian(vf).rhs_jacobian(clock_of(clock), sliding)(s, y, args)


@pytest.mark.parametrize("model", MODELS, ids=str)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.3, 2), fs.SAM(0.2, 3.0), fs.SAM(0.1, float("inf")), fs.USAM(0.4)], ids=str)
@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1))
def test_log_time_jacobian_equals_autodiff_of_an_independent_gradient(model, loss, flow, seed):
    # log-time clock: d theta/ds = e^s (-grad L(theta~)), d tau/ds = e^s e^{S~} with e^{S~} = mean_i q(m~_i)
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    K = model.n_layers
    Z = rng.normal(size=(n, d))
    theta = rng.uniform(0.2, 1.0, size=(K, d)) * rng.choice([-1, 1], size=(K, d))
    system = fs.derive(model, loss, flow)
    Zj = jnp.asarray(Z)

    def field(th):
        return reference_field(model, loss, flow, th, Zj)[0]

    ref = np.asarray(jax.jacfwd(field)(jnp.asarray(theta))).reshape(K * d, K * d)
    assume(bool(np.all(np.isfinite(ref))) and np.abs(ref).max() < 1e100)
    g = np.asarray(reference_field(model, loss, flow, jnp.asarray(theta), Zj)[1])
    sigma = np.sign(g)  # the side of every switching surface the point is on
    s = 0.4
    y = np.concatenate([theta.ravel(), [0.0]])
    J = symbolic_jacobian(system, K, d, "log_time", False, s, y, SegmentArgs(Z, flow.rho, sigma, np.zeros((K, d), bool)))
    np.testing.assert_allclose(J[:-1, :-1], np.exp(s) * ref, rtol=1e-9, atol=1e-11 * np.abs(ref).max())
    assert np.all(J[:, -1] == 0)  # nothing depends on tau
    # the clock row: e^s d e^{S~}/d theta, e^{S~} = mean_i q(m~_i) with q = -l' at the evaluation point's margins
    def mean_q(th):
        m = Zj @ reference_beta(model, reference_point(model, loss, flow, th, Zj)[0])
        return jnp.mean(jnp.exp(-m) if loss == "exponential" else jax.nn.sigmoid(-m))

    ref_row = np.asarray(jax.grad(mean_q)(jnp.asarray(theta))).ravel()
    np.testing.assert_allclose(J[-1, :-1], np.exp(s) * ref_row, rtol=1e-9, atol=1e-11 * max(np.abs(ref_row).max(), 1e-300))


def _has_planes(model, flow):
    """Smooth flows hold entries that reached an invariant plane (``flowsim.integrate.arrival``)."""
    return model.form in ("tied", "difference") and flow.follows_gradient


CASES = [(model, loss, flow, clock, sliding)
         for model, loss, flow in itertools.product(
             [fs.Linear(), fs.DiagonalNet(2), fs.DiagonalNet(3, "tied"), fs.DiagonalNet(2, "difference")], LOSSES,
             [fs.GD(), fs.SAM(0.3, 2), fs.SAM(0.1, float("inf")), fs.USAM(0.4), fs.SignFlow(), fs.AdamProxy(batch=1),
              fs.AdamProxy(batch=2)])
         for clock in (["schedule"] if getattr(flow, "clock", None) == "schedule" else ["log_time", "tau"])
         for sliding in ([False, True] if flow.uses_sign or _has_planes(model, flow) else [False])]


def unsaturated_point(vf, K, d, flow, rng):
    """Z, theta, sigma where neither theta nor its evaluation point puts 99% of the softmax weight on one
    sample. Where one sample dominates, the weight covariance Z^T H Z cancels below the rounding of its
    terms, in the chain rule and in autodiff alike (both are then accurate only to eps times the terms,
    which is all a Newton iteration needs), so comparing them there would measure rounding, not formulas."""
    for _ in range(1000):
        Z = rng.normal(size=(4, d))
        theta = rng.uniform(0.2, 1.0, size=(K, d)) * rng.choice([-1, 1], size=(K, d))
        sigma = rng.choice([-1.0, 1.0], size=(K, d)) if flow.uses_sign else np.ones((K, d))
        theta_t, _ = vf.evaluation_point(theta, Z, flow.rho, sigma)
        if max(vf.weights(theta, Z)[3].max(), vf.weights(theta_t, Z)[3].max()) < 0.99:
            return Z, theta, sigma
    raise AssertionError("no unsaturated point in 1000 draws")


@pytest.mark.parametrize("model, loss, flow, clock, sliding", CASES, ids=lambda v: str(v))
def test_every_clock_and_the_sliding_field_equal_autodiff_of_the_compiled_field(model, loss, flow, clock, sliding):
    # a fixed seed per case: hash() of a string changes with PYTHONHASHSEED from run to run
    rng = np.random.default_rng(zlib.crc32(repr((str(model), loss, str(flow), clock, sliding)).encode()))
    K, d = model.n_layers, 3
    system = fs.derive(model, loss, flow)
    vf = numpy_field(system, K, d)
    Z, theta, sigma = unsaturated_point(vf, K, d, flow, rng)
    pinned = np.zeros((K, d), bool)
    pinned[0, 0] = sliding
    if sliding and not flow.uses_sign:
        theta[0, 0] = 0.0  # held where it landed, on its plane
    y = np.concatenate([theta.ravel(), [0.7]])
    args = SegmentArgs(Z, flow.rho, sigma, pinned)
    J = symbolic_jacobian(system, K, d, clock, sliding, 1.3, y, args)
    rhs = jax_field(system, K, d).rhs(clock_of(clock), sliding)
    ref = np.asarray(jax.jacfwd(rhs, argnums=1)(1.3, jnp.asarray(y), jax.tree.map(jnp.asarray, args)))
    # a held entry never moves, so its column is left out (0): the field may vanish on its plane like
    # |w|^(1/2), with an infinite derivative there (flowsim.integrate.arrival)
    free = np.append(~pinned.ravel(), True)
    np.testing.assert_allclose(J[:, free], ref[:, free], rtol=1e-10, atol=1e-12 * np.abs(ref).max())
    assert not J[:, ~free].any()


def test_bdf_with_the_symbolic_jacobian_reaches_log10_t_a_million_in_a_budget(one_sample):
    # work budget (scipy's test style): explicit steps grow like log t1; BDF's do not
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05, 2))
    sol = fs.solve(system, one_sample, 0.2, log10_t1=1e6, backend="scipy:BDF", saves=20)
    assert sol.status == "completed" and np.all(np.isfinite(sol.params))
    assert sol.stats["steps"] < 1500 and sol.stats["njev"] < 400, sol.stats
    # and the explicit reference at a horizon both reach agrees (the direction -> e_2 is slow: compare states)
    a = fs.solve(system, one_sample, 0.2, t1=1e100, backend="scipy:BDF", rtol=1e-10, atol=1e-12, saves=2)
    b = fs.solve(system, one_sample, 0.2, t1=1e100, backend="diffrax:Tsit5", rtol=1e-10, atol=1e-12, saves=2)
    np.testing.assert_allclose(a.params[-1], b.params[-1], rtol=1e-6)


def test_wide_data_beyond_float_range_never_silently_wrong():
    # n = d = 100, l2-SAM to log10 t = 1e6: backend "auto" runs BDF in the tau clock; in log-time the field's rate
    # e^{S~+s} overflows inside Newton iterates of BDF and LSODA on this problem. Whatever a method does, it either
    # completes on the same trajectory or ends with a failure status and a finite partial trajectory.
    from conftest import separable

    data = separable(100, 100, seed=1)
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.02, 2))
    ref = fs.solve(system, data, 0.1, log10_t1=1e6, saves=30)
    assert ref.config["clock"] == "tau" and ref.status == "completed" and ref.stats["steps"] < 3000
    u = ref.log10_t * np.log(10)
    gap = ref.margins.min(axis=1) - u  # log t + O(log log t): the margin tracks the clock
    assert np.all(np.isfinite(ref.params)) and 0 < gap[-1] < 100 and np.all(np.diff(gap[5:]) > 0)
    for backend, clock in [("scipy:LSODA", "auto"), ("scipy:BDF", "log_time"), ("scipy:LSODA", "log_time")]:
        sol = fs.solve(system, data, 0.1, log10_t1=1e6, saves=30, backend=backend, clock=clock, throw=False)
        assert np.all(np.isfinite(sol.params)), (backend, clock)
        if sol.status == "completed":
            np.testing.assert_allclose(sol.margins[-1], ref.margins[-1], rtol=1e-5, err_msg=f"{backend} {clock}")
        else:
            assert sol.status == "failed" and "scipy" in sol.message and sol.log10_t[-1] < 1e6, (backend, clock)


@pytest.mark.parametrize("model, flow", [(fs.DiagonalNet(2, "tied"), fs.GD()), (fs.DiagonalNet(2), fs.SAM(0.05, 2)),
                                         (fs.DiagonalNet(2, "difference"), fs.GD())], ids=str)
def test_decaying_coordinates_give_no_subnormal_entries_and_the_same_field(model, flow):
    # entries decaying to 0 (w ~ 1e-160, beta ~ 1e-320) made products of subnormals: each LU of BDF's Newton
    # matrix and each margin up to 30x slower. The Jacobian keeps its significant entries (against autodiff,
    # which XLA computes with subnormals flushed) and the NumPy field equals the JAX one.
    rng = np.random.default_rng(7)
    K, d, n = model.n_layers, 5, 8
    system = fs.derive(model, "logistic", flow)
    Z = rng.normal(size=(n, d))
    theta = rng.uniform(0.3, 1.0, size=(K, d))
    theta[:, :2] = [1e-160, 3e-161]
    sigma, pinned = np.ones((K, d)), np.zeros((K, d), bool)
    y = np.concatenate([theta.ravel(), [0.7]])
    args = SegmentArgs(Z, flow.rho, sigma, pinned)
    J = symbolic_jacobian(system, K, d, "tau", False, 0.0, y, args)
    tiny = np.finfo(np.float64).tiny
    assert np.all((J == 0) | (np.abs(J) >= tiny))
    rhs = jax_field(system, K, d).rhs(named("tau"), False)
    jargs = jax.tree.map(jnp.asarray, args)
    ref = np.asarray(jax.jacfwd(rhs, argnums=1)(0.0, jnp.asarray(y), jargs))
    np.testing.assert_allclose(J, ref, rtol=1e-10, atol=1e-14 * np.abs(ref).max())
    field = numpy_field(system, K, d).rhs(named("tau"), False)(0.0, y, args)
    np.testing.assert_array_equal(field == 0, np.asarray(rhs(0.0, jnp.asarray(y), jargs)) == 0)
    np.testing.assert_allclose(field, np.asarray(rhs(0.0, jnp.asarray(y), jargs)), rtol=1e-13, atol=0)
