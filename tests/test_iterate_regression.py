"""The discrete optimizers on a regression (square loss, real targets): each step against a hand-written NumPy loop
of the same update, GD's small-step limit against the flow's solve, and the refusals where the data, loss or
optimizer do not fit."""

import numpy as np
import pytest

import flowsim as fs

RNG = np.random.default_rng(3)
X = RNG.normal(size=(4, 6))  # overparametrised: 4 samples, 6 features, a set of interpolators
Y = RNG.normal(size=4)
DATA = fs.Dataset(X, Y, task="regression")
ALPHA = 0.3


def mean_square_gradient(beta, rows=slice(None)):
    """grad_beta of (1/2|rows|) sum_i (x_i.beta - y_i)^2 over ``rows``."""
    x, y = X[rows], Y[rows]
    return x.T @ (x @ beta - y) / len(y)


def full_batch(beta, k):
    return mean_square_gradient(beta)


def difference_net_loop(step, steps, grad=full_batch):
    """``steps`` updates theta <- step(theta, g_theta, k) of u^2 - v^2 from u = v = ALPHA; g_theta by the chain rule
    from ``grad(beta, k)``."""
    u, v = np.full(6, ALPHA), np.full(6, ALPHA)
    for k in range(steps):
        g = grad(u**2 - v**2, k)
        u, v = step(np.stack([u, v]), np.stack([2 * u * g, -2 * v * g]), k)
    return u**2 - v**2


def test_gd_on_a_linear_model_is_the_least_squares_iteration():
    eta, steps = 0.1, 300
    beta = np.zeros(6)
    for _ in range(steps):
        beta = beta - eta * mean_square_gradient(beta)
    run = fs.iterate(fs.optimizers.gd(eta), fs.Linear(), "square", DATA, steps=steps, init=0.0, records=3)
    np.testing.assert_allclose(run.beta[-1], beta, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(run.margins[-1], X @ beta - Y, rtol=1e-12, atol=1e-14)
    assert run.log_loss[-1] == pytest.approx(np.log(np.mean((X @ beta - Y) ** 2 / 2)), rel=1e-12)


@pytest.mark.parametrize("name, optimizer, batch_rows", [
    ("gd", fs.optimizers.gd(0.05), None),
    ("sgd cyclic", fs.optimizers.gd(0.05, batch="cyclic"), lambda k: [k % 4]),
    ("sgd blocks of 3", fs.optimizers.gd(0.05, batch=3), lambda k: [(3 * k + i) % 4 for i in range(3)]),
])
def test_gd_and_sgd_on_a_difference_net_match_the_hand_loop(name, optimizer, batch_rows):
    steps = 400
    grad = full_batch if batch_rows is None else (lambda beta, k: mean_square_gradient(beta, batch_rows(k)))
    expected = difference_net_loop(lambda th, g, k: th - 0.05 * g, steps, grad)
    run = fs.iterate(optimizer, fs.DiagonalNet(2, "difference"), "square", DATA, steps=steps, init=ALPHA, records=3)
    np.testing.assert_allclose(run.beta[-1], expected, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("batch, rows", [("full", lambda k: slice(None)), ("cyclic", lambda k: [k % 4])])
def test_sam_ascends_along_the_normalised_gradient_then_descends(batch, rows):
    """Full-batch SAM and 1-SAM (one sample a step, its own gradient ascended and descended), before the residuals
    are small beside rho (near the minima the normalised perturbation amplifies rounding: by step 300 two float64
    orders of the same sums part by 3e-4)."""
    eta, rho, steps = 0.02, 0.05, 150

    def sam_step(th, g, k):
        ascended = th + rho * g / np.linalg.norm(g)
        u, v = ascended
        gb = mean_square_gradient(u**2 - v**2, rows(k))
        return th - eta * np.stack([2 * u * gb, -2 * v * gb])

    expected = difference_net_loop(sam_step, steps, lambda beta, k: mean_square_gradient(beta, rows(k)))
    run = fs.iterate(fs.optimizers.sam(eta, rho, batch=batch), fs.DiagonalNet(2, "difference"), "square", DATA,
                     steps=steps, init=ALPHA, records=3)
    np.testing.assert_allclose(run.beta[-1], expected, rtol=1e-11, atol=1e-13)


def test_adam_matches_its_update_written_out():
    eta, b1, b2, steps = 0.01, 0.9, 0.99, 300
    state = {"m": np.zeros((2, 6)), "v": np.zeros((2, 6))}

    def adam_step(th, g, k):
        state["m"] = b1 * state["m"] + (1 - b1) * g
        state["v"] = b2 * state["v"] + (1 - b2) * g**2
        return th - eta * (k + 1.0) ** -0.5 * state["m"] / np.sqrt(state["v"])

    expected = difference_net_loop(adam_step, steps)
    run = fs.iterate(fs.optimizers.adam(eta, b1, b2), fs.DiagonalNet(2, "difference"), "square", DATA, steps=steps,
                     init=ALPHA, records=3)
    np.testing.assert_allclose(run.beta[-1], expected, rtol=1e-10, atol=1e-12)


def test_gd_tends_to_the_gradient_flow_as_the_step_shrinks():
    """At order 1 in eta (Euler's method), to the flow's solve, which converges to the interpolator; an independent
    numerical limit of the discrete runs, not the code's own output."""
    errors, order = fs.flow_distance(lambda eta: fs.optimizers.gd(eta), fs.GD(), fs.DiagonalNet(2, "difference"),
                                     "square", DATA, ALPHA, 5.0, [0.02, 0.01, 0.005])
    assert np.all(np.diff(errors) < 0) and order == pytest.approx(1.0, abs=0.1)
    assert errors[-1] < 5e-3


def test_gd_to_convergence_reaches_the_flow_limit_at_small_steps():
    """Long discrete GD on u^2 - v^2 ends at an interpolator within O(eta) of the flow's limit (1.1e-3 at eta = 0.01,
    the limit's largest coordinate 1.35)."""
    flow = fs.solve(fs.derive(fs.DiagonalNet(2, "difference"), "square", fs.GD()), DATA, init=ALPHA, t1=1e6,
                    rtol=1e-10)
    assert flow.status == "converged"
    run = fs.iterate(fs.optimizers.gd(0.01), fs.DiagonalNet(2, "difference"), "square", DATA, steps=100_000,
                     init=ALPHA, records=3)
    assert np.abs(run.margins[-1]).max() < 1e-8
    assert np.abs(run.beta[-1] - flow.beta[-1]).max() < 3e-3


def test_the_epoch_map_on_a_regression_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"adam_epoch_map on a regression: .*signed.*batch='cyclic'"):
        fs.iterate(fs.optimizers.adam_epoch_map(0.01, n=4), fs.Linear(), "square", DATA, steps=3)


@pytest.mark.parametrize("loss, data, message", [
    ("logistic", DATA, "the data are a regression"),
    ("square", fs.Dataset(X, np.sign(Y)), "'square' is a regression loss"),
])
def test_a_loss_of_the_other_task_is_refused_as_solve_refuses_it(loss, data, message):
    with pytest.raises(ValueError, match=message):
        fs.iterate(fs.optimizers.gd(0.1), fs.Linear(), loss, data, steps=3)
