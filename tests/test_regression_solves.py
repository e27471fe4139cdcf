"""Regression solves (real targets, losses of the residual): flowsim.solve against the closed-form limits that do not
run a flow (Woodworth et al.'s Q_alpha interpolator, the minimum-norm and least-squares solutions), its Jacobian
against autodiff, its statuses and messages, and the refusals of input it cannot take."""

import warnings

import numpy as np
import pytest
import sympy as sp

import flowsim as fs
from flowsim.field.jacobian import FieldJacobian
from flowsim.field.vector_field import jax_field, numpy_field


def random_problem(seed=0, n=5, d=12):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


def solved(model, data, init, backend, loss="square", flow=None, t1=1e8):
    system = fs.derive(model, loss, fs.GD() if flow is None else flow)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from log l(0) = -inf or anywhere else
        return fs.solve(system, data, init=init, t1=t1, backend=backend, rtol=1e-10)


# the difference net u^D - v^D from u = v = alpha: every (alpha, depth) on a diffrax and a scipy method (diffrax's
# implicit Kvaerno5 runs out of 16,384 steps on the depth-3 plateau from alpha = 1e-2: there "auto" hands Tsit5 to BDF)
LIMIT_CASES = [(2, alpha, be) for alpha in (1e-3, 0.1, 1.0, 10.0) for be in ("diffrax:Kvaerno5", "scipy:BDF")] + \
              [(3, alpha, be) for alpha in (1e-3, 1e-2) for be in ("auto", "scipy:BDF")] + \
              [(3, alpha, be) for alpha in (0.1, 1.0, 10.0) for be in ("diffrax:Kvaerno5", "scipy:BDF")]


@pytest.mark.parametrize(("depth", "alpha", "backend"), LIMIT_CASES)
def test_difference_net_converges_to_the_q_alpha_interpolator(depth, alpha, backend):
    X, y = random_problem()
    sol = solved(fs.DiagonalNet(depth, "difference"), fs.Dataset(X, y), alpha, backend)
    assert sol.status == "converged"
    assert sol.message.startswith("converged to an interpolating global minimum"), sol.message
    np.testing.assert_allclose(sol.beta[-1], fs.implicit_regularizer_limit(X, y, alpha, depth), rtol=0, atol=1e-8)


def test_a_diffrax_and_a_scipy_method_end_at_one_point():
    """(An explicit method, at its stability bound near the limit, dithers there by about twice its tolerance, which
    the converged test does not accept: from alpha = 0.5 Tsit5 runs out of steps, saying why; "auto" hands over.)"""
    X, y = random_problem(3)
    data, model = fs.Dataset(X, y), fs.DiagonalNet(2, "difference")
    ends = [solved(model, data, 0.5, be).beta[-1] for be in ("diffrax:Kvaerno5", "auto", "scipy:BDF", "scipy:LSODA",
                                                              "scipy:Radau")]
    for end in ends[1:]:
        np.testing.assert_allclose(end, ends[0], rtol=0, atol=1e-8)


@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:BDF", "scipy:DOP853"])
def test_linear_gd_from_zero_ends_at_the_minimum_norm_interpolator(backend):
    X, y = random_problem(1)
    sol = solved(fs.Linear(), fs.Dataset(X, y), 0.0, backend)
    assert sol.status == "converged" and "interpolating global minimum" in sol.message
    np.testing.assert_allclose(sol.beta[-1], np.linalg.pinv(X) @ y, rtol=0, atol=1e-10)


def test_any_smooth_loss_of_the_residual_keeps_linear_gd_in_the_row_space():
    """From 0, GD on any loss of the residuals stays in range X^T, so an interpolating limit is pinv(X) y whatever
    the loss (here log cosh)."""
    X, y = random_problem(2)
    m = sp.Symbol("m")
    log_cosh = fs.Loss("log cosh", sp.log(sp.cosh(m)), task="regression")
    sol = solved(fs.Linear(), fs.Dataset(X, y), 0.0, "scipy:BDF", loss=log_cosh)
    assert sol.status == "converged" and "interpolating global minimum" in sol.message
    np.testing.assert_allclose(sol.beta[-1], np.linalg.pinv(X) @ y, rtol=0, atol=1e-10)


@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:BDF"])
def test_noisy_overdetermined_data_end_at_least_squares_not_interpolating(backend):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((20, 4))
    y = X @ rng.standard_normal(4) + 0.3 * rng.standard_normal(20)
    sol = solved(fs.Linear(), fs.Dataset(X, y), 0.0, backend)
    assert sol.status == "converged"
    assert sol.message.startswith("converged to a critical point that does not interpolate"), sol.message
    assert "no beta interpolates these data" in sol.message
    np.testing.assert_allclose(sol.beta[-1], np.linalg.lstsq(X, y, rcond=None)[0], rtol=0, atol=1e-10)
    residual = X @ sol.beta[-1] - y
    assert np.isclose(float(np.exp(sol.log_loss[-1])), residual @ residual / (2 * len(y)), rtol=1e-9)


def test_usam_ends_at_one_interpolator_on_every_backend():
    """USAM's perturbation rho g vanishes with the gradient: a smooth flow to an interpolating minimum, one point on
    a diffrax and a scipy method."""
    X, y = random_problem()
    data = fs.Dataset(X, y)
    ends = []
    for backend in ("diffrax:Kvaerno5", "scipy:BDF"):
        sol = solved(fs.DiagonalNet(2, "difference"), data, 0.1, backend, flow=fs.USAM(0.05), t1=1e6)
        assert sol.status == "converged" and "interpolating global minimum" in sol.message
        ends.append(sol.beta[-1])
    np.testing.assert_allclose(ends[0], ends[1], rtol=0, atol=1e-8)
    assert np.abs(ends[0] - fs.implicit_regularizer_limit(X, y, 0.1, 2)).max() > 1e-3  # not GD's limit


def test_a_start_that_cannot_reach_an_interpolator_says_so():
    """beta = w^2 >= 0 for ever: on targets that need a negative coefficient the flow stops at a non-negative
    least-squares fit, and the message says an interpolator exists that this start cannot reach."""
    X = np.eye(2)
    y = np.array([1.0, -1.0])
    sol = solved(fs.DiagonalNet(2, "tied"), fs.Dataset(X, y, task="regression"), 0.5, "scipy:BDF")
    assert sol.status == "converged"
    assert "does not interpolate" in sol.message and "stops short of it" in sol.message
    np.testing.assert_allclose(sol.beta[-1], [1.0, 0.0], atol=1e-8)


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.1, 2), fs.USAM(0.1)], ids=str)  # (l2-SAM: the field only)
@pytest.mark.parametrize("model", [fs.Linear(), fs.DiagonalNet(2, "difference"), fs.DiagonalNet(3, "product")],
                         ids=str)
def test_regression_jacobian_against_autodiff(model, flow):
    from flowsim._jax import jax, jnp

    X, y = random_problem(5, n=4, d=3)
    data = fs.Dataset(X, y)
    system = fs.derive(model, "square", flow)
    K, d = model.n_layers, data.d
    rng = np.random.default_rng(0)
    theta = rng.uniform(0.3, 1.0, size=(K, d)) * rng.choice([-1.0, 1.0], size=(K, d))
    sigma = np.ones((K, d))
    F, S, dF, dS = FieldJacobian(numpy_field(system, K, d)).field_and_scale(theta, data.z, flow.rho, sigma)
    vf = jax_field(system, K, d)
    Z = jnp.asarray(data.z)

    def real_time_field(flat):
        field, scale = vf.field_and_scale(flat.reshape(K, d), Z, flow.rho, jnp.asarray(sigma))
        return (field * jnp.exp(scale)).reshape(-1)

    expected = np.asarray(jax.jacfwd(real_time_field)(jnp.asarray(theta.reshape(-1))))
    assert S == 0.0 and not np.any(dS)  # the regression field carries no loss scale
    np.testing.assert_allclose(dF, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())
    # and the field is -grad L in real time, L = (1/2n) ||X beta - y||^2, at the evaluation point
    if flow.rho == 0:
        def loss(flat):
            beta = system.jax.beta(flat.reshape(K, d))
            return jnp.mean((jnp.asarray(X) @ beta - jnp.asarray(y)) ** 2) / 2

        np.testing.assert_allclose(F.reshape(-1), -np.asarray(jax.grad(loss)(jnp.asarray(theta.reshape(-1)))),
                                   rtol=1e-12, atol=1e-15)


def test_saves_resolve_the_fast_start_and_the_plateaus():
    """At small alpha the depth-2 flow sits on plateaus lasting ~ log(1/alpha) (Pesme and Flammarion's
    saddle-to-saddle path, fs.saddle_to_saddle): the default saves (log-spaced in t from 1e-6) fall before the
    first jump and on every plateau, where beta equals the plateau's value to the alpha -> 0 limit's accuracy."""
    X, y = random_problem()
    alpha = 1e-8
    path = fs.saddle_to_saddle(X, y)
    sol = solved(fs.DiagonalNet(2, "difference"), fs.Dataset(X, y), alpha, "auto", t1=1e5)
    assert sol.status == "converged"
    rescaled = 10.0 ** np.asarray(sol.log10_t) / np.log(1 / alpha)
    assert rescaled[0] < 1e-6 and np.all(np.abs(sol.beta[rescaled < 0.5 * path.jump_times[0]]) < 1e-3)
    jumps = list(path.jump_times) + [np.inf]
    for k, (start, end) in enumerate(zip(jumps[:-1], jumps[1:])):
        middle = start + 0.5 * (min(end, 2 * start + 1) - start)
        on = (rescaled > start + 0.3 * (middle - start)) & (rescaled < middle)
        assert on.sum() >= 3, f"plateau {k} has {on.sum()} saves"
        np.testing.assert_allclose(sol.beta[on], np.broadcast_to(path.beta(middle), sol.beta[on].shape), atol=0.05)


# --- what is refused, and how ---

def test_the_task_is_inferred_or_refused_as_ambiguous():
    X = np.ones((3, 2))
    assert fs.Dataset(X, [1, -1, 1]).task == "classification"
    assert fs.Dataset(X, [0.5, -1, 2]).task == "regression"
    assert fs.Dataset(X, [1, -1, 1], task="regression").task == "regression"
    with pytest.raises(ValueError, match=r"y = 2\*y - 1; for regression pass task='regression'"):
        fs.Dataset(X, [0, 1, 1])
    with pytest.raises(ValueError, match=r"\[1.0, 2.0\]: labels of two classes or regression targets"):
        fs.Dataset(X, [1, 2, 2])
    assert fs.Dataset(X, [1, 2, 2], task="regression").task == "regression"
    with pytest.raises(ValueError, match="task must be one of"):
        fs.Dataset(X, [0.5, 1, 2], task="regresion")
    with pytest.raises(ValueError, match="only \\+1 and -1.*task='regression'"):
        fs.Dataset(X, [0.5, 1, 2], task="classification")


@pytest.mark.parametrize(("y", "match"), [([np.nan, 1.0, 2.0], "y contains NaN"), ([1.0, 2.0], "one label per row"),
                                          (None, "needs the targets y")])
def test_bad_targets_are_refused(y, match):
    with pytest.raises(ValueError, match=match):
        fs.Dataset(np.ones((3, 2)), y, task="regression")


def test_a_loss_and_data_of_different_tasks_are_refused():
    X = np.array([[1.0, 0.5], [0.2, 1.0]])
    square = fs.derive(fs.Linear(), "square", fs.GD())
    with pytest.raises(ValueError, match="task='regression'"):  # +-1 targets: inferred as labels
        fs.solve(square, fs.Dataset(X, [1.0, -1.0]), init=0.0, t1=10)
    with pytest.raises(ValueError, match="use the loss 'square'"):
        fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset(X, [0.3, 2.0], task="regression"), init=0.0, t1=10)
    for flow in (fs.SignFlow(), fs.NormalizedGD(1.0, 1.0)):
        with pytest.raises(ValueError, match="on a regression: flowsim integrates GD, USAM, SAM and ASAM"):
            fs.solve(fs.derive(fs.Linear(), "square", flow), fs.Dataset(X, [0.3, 2.0], task="regression"), init=0.0,
                     t1=10)
    with pytest.raises(ValueError, match="flowsim.solve, one point at a time"):
        fs.sweep(square, fs.Dataset(X, [0.3, 2.0], task="regression"), grid={"init": [0.1, 0.2]}, t1=10)


def test_regression_losses_are_checked():
    m = sp.Symbol("m")
    with pytest.raises(ValueError, match=r"l\(0\) = 1"):
        fs.Loss("shifted", m**2 / 2 + 1, task="regression")
    with pytest.raises(ValueError, match="increasing in \\|m\\|"):
        fs.Loss("one-sided", sp.exp(m) - 1 - m + m**3, task="regression")
    with pytest.raises(ValueError, match="log_expr is for margin losses"):
        fs.Loss("square", m**2 / 2, log_expr=2 * sp.log(m), task="regression")
    with pytest.raises(ValueError, match="task must be"):
        fs.Loss("square", m**2 / 2, task="fit")
    assert np.isnan(fs.Loss("square", m**2 / 2, task="regression").tail_rate)


def test_a_saved_regression_reads_back(tmp_path):
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    data = fs.Dataset(X, [1.0, -1.0], task="regression")  # targets that would read back as labels if inferred
    sol = fs.solve(fs.derive(fs.Linear(), "square", fs.GD()), data, init=0.0, t1=100, backend="scipy:BDF")
    fs.io.save(sol, tmp_path / "run.nc")
    back = fs.io.load(tmp_path / "run.nc", as_solution=True)
    assert back.data.task == "regression" and back.system.loss.is_regression
    np.testing.assert_array_equal(back.beta, sol.beta)


def _zero_targets(seed=0, n=5, d=3):
    return fs.Dataset(np.random.default_rng(seed).standard_normal((n, d)), np.zeros(n), task="regression")


@pytest.mark.parametrize("backend", ["auto", "scipy:BDF"])
def test_targets_zero_from_a_nonzero_start_converge_to_beta_zero_not_collapse(backend):
    """y = 0 with d < n: beta = 0 is the only interpolator, reached by the linear model's GD from 0.5 in finite
    log-time (and by the depth-2 product net like 1/t); the collapse floor of classification is no end here."""
    for model, t1 in ((fs.Linear(), 1e8), (fs.DiagonalNet(2), 1e40)):
        sol = solved(model, _zero_targets(), 0.5, backend, t1=t1)
        assert sol.status == "converged", (model, sol.message)
        assert sol.message.startswith("converged to an interpolating global minimum"), sol.message
        assert not np.any(sol.beta[-1])


def test_targets_zero_reached_with_the_layers_nonzero_interpolate():
    """u - v from u != v: beta -> 0 while u, v stay apart from 0; the residuals, at the solver's resolution, are 0."""
    init = np.array([[0.6, 0.2, 0.3], [0.1, 0.4, 0.3]])
    sol = solved(fs.DiagonalNet(2, "difference"), _zero_targets(), init, "scipy:BDF")
    assert sol.status == "converged" and "interpolating global minimum" in sol.message, sol.message
    np.testing.assert_allclose(sol.beta[-1], 0.0, atol=1e-12)


def test_a_model_that_cannot_reach_the_targets_stops_at_beta_zero_saying_so():
    """beta = w^2 >= 0 on X = I, y = (-1, -2): the best beta it reaches is 0 (loss 5/4), a critical point that does
    not interpolate although beta = y does."""
    sol = solved(fs.DiagonalNet(2, "tied"), fs.Dataset(np.eye(2), [-1.0, -2.0], task="regression"), 0.5, "auto")
    assert sol.status == "converged", sol.message
    assert "does not interpolate" in sol.message and "an interpolator exists" in sol.message, sol.message
    assert "limit loss 1.25" in sol.message and not np.any(sol.beta[-1])
