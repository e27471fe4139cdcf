"""Margin losses without an exponential tail (q ~ m^-(k+1)): built, integrated in both clocks against an independent
scipy solve, and their limit direction against the one the polynomial tail predicts (not the l2 max-margin)."""

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from scipy.optimize import minimize_scalar

import flowsim as fs
from flowsim.symbolic.loss import square_loss

m = sp.Symbol("m")
K = 2
#: l(m) = (sqrt(1 + m^2) + m)^-K: smooth, decreasing, ~ (2m)^-K as m -> oo; q = K l / sqrt(1 + m^2)
POLYNOMIAL = fs.Loss("polynomial", (sp.sqrt(1 + m**2) + m) ** -K)
X = np.array([[1.0, 0.2], [0.2, 1.0], [0.4, 1.0]])


def polynomial_q(margins):
    return K * (np.sqrt(1 + margins**2) + margins) ** -K / np.sqrt(1 + margins**2)


def test_a_polynomial_tail_is_measured_not_refused():
    assert np.isnan(POLYNOMIAL.tail_rate) and not POLYNOMIAL.exponential_tail
    assert fs.logistic_loss.exponential_tail and not square_loss.exponential_tail


@pytest.mark.parametrize("clock", ["log_time", "tau"])
@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:BDF"])
def test_gd_on_a_polynomial_tail_matches_an_independent_solve(clock, backend):
    data = fs.Dataset(X, np.ones(3))
    sol = fs.solve(fs.derive(fs.Linear(), POLYNOMIAL, fs.GD()), data, init=0.1, t1=1e6, clock=clock,
                   backend=backend, rtol=1e-10)
    assert sol.status == "completed"
    reference = solve_ivp(lambda t, beta: X.T @ polynomial_q(X @ beta) / len(X), (0.0, 1e6), np.full(2, 0.1),
                          method="DOP853", rtol=1e-12, atol=1e-12).y[:, -1]
    np.testing.assert_allclose(sol.beta[-1], reference, rtol=1e-7)


def test_its_direction_tends_to_the_polynomial_limit_not_the_l2_max_margin():
    """For q ~ c m^-(K+1), beta = t^(1/(K+2)) w solves GD's tail exactly when w is stationary for sum_i (x_i.w)^-K
    on the sphere: the limit direction minimises it, which weighs every sample, not the support vectors only."""
    data = fs.Dataset(X, np.ones(3))
    sol = fs.solve(fs.derive(fs.Linear(), POLYNOMIAL, fs.GD()), data, init=0.1, t1=1e30, rtol=1e-10)
    direction = sol.beta[-1] / np.linalg.norm(sol.beta[-1])
    angle = minimize_scalar(lambda a: np.sum((X @ [np.cos(a), np.sin(a)]) ** -K), bounds=(0.0, np.pi / 2),
                            method="bounded", options=dict(xatol=1e-12)).x
    predicted = np.array([np.cos(angle), np.sin(angle)])
    l2 = fs.max_margin(data, 2).direction
    l2 = l2 / np.linalg.norm(l2)
    assert np.degrees(np.arccos(min(1.0, direction @ predicted))) < 1e-4
    assert np.degrees(np.arccos(min(1.0, direction @ l2))) > 3.0


def test_a_tail_float64_cannot_evaluate_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"log q\(m\) = .* is not finite in float64 .*1/\(sqrt\(1 \+ m\^2\) \+ m\)"):
        fs.Loss("cancels", sp.sqrt(1 + m**2) - m)


def test_the_tail_power_is_read_off_the_loss():
    assert POLYNOMIAL.tail_power == pytest.approx(K, rel=1e-9)
    assert fs.Loss("cube", (sp.sqrt(1 + m**2) + m) ** -3).tail_power == pytest.approx(3, rel=1e-9)
    assert np.isnan(fs.logistic_loss.tail_power) and np.isnan(square_loss.tail_power)
    assert np.isnan(fs.Loss("cubic exponent", sp.exp(-m - m**3 / 3)).tail_power)


@pytest.mark.parametrize("power", [0.5, 1, 2, 4])
def test_the_polynomial_tail_limit_is_the_minimiser_on_the_circle(power):
    """Against a bounded scalar search over the angle of a unit w in the plane (independent of the Newton solve)."""
    angle = minimize_scalar(lambda a: np.sum((X @ [np.cos(a), np.sin(a)]) ** -float(power)), bounds=(0.0, np.pi / 2),
                            method="bounded", options=dict(xatol=1e-12)).x
    limit = fs.polynomial_tail_limit(fs.Dataset(X, np.ones(3)), power)
    np.testing.assert_allclose(limit.direction, [np.cos(angle), np.sin(angle)], atol=1e-9)
    assert limit.weights.min() > 0 and limit.weights.sum() == pytest.approx(1.0)


def test_the_polynomial_tail_limit_refuses_bad_input_by_name():
    with pytest.raises(ValueError, match="power must be a finite number k > 0"):
        fs.polynomial_tail_limit(fs.Dataset(X, np.ones(3)), -1)
    with pytest.raises(fs.NonSeparableError):
        fs.polynomial_tail_limit(fs.Dataset(np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([1.0, -1.0])), 2)


GAUSSIAN = fs.datasets.iid_gaussian(20, 5, seed=1)


@pytest.fixture(scope="module")
def heavy_run():
    return fs.solve(fs.derive(fs.Linear(), POLYNOMIAL, fs.GD()), GAUSSIAN, init=0.5, t1=1e20, rtol=1e-10)


def test_verdict_on_a_polynomial_tail_holds_for_its_limit_and_fails_for_the_max_margin(heavy_run):
    """The l2 max-margin is 6.3 deg from the polynomial-tail limit on these data: a verdict reading the 1/log t laws
    of exponential tails against it has nothing to say; the tail's own law (angle ~ t^-k) says where the run goes."""
    refs = {"tail": fs.polynomial_tail_limit(GAUSSIAN, K), "l2": fs.max_margin(GAUSSIAN, 2)}
    to_tail = fs.verdict(heavy_run, refs, "tail")
    assert to_tail.holds is True and "converges" in to_tail.why, to_tail.why
    assert to_tail.fits["tail"].rate == pytest.approx(0.5, rel=0.05) and to_tail.fits["tail"].steady
    to_l2 = fs.verdict(heavy_run, refs, "l2")
    assert to_l2.holds is False and "polynomial-tail limit, not to the claim" in to_l2.why, to_l2.why


def test_verdict_tells_the_limit_of_another_power_apart(heavy_run):
    """The minimiser for l ~ m^-4 is 2.2 deg from that for m^-2: a run of the m^-2 loss does not converge to it."""
    refs = {"power 4": fs.polynomial_tail_limit(GAUSSIAN, 4), "l2": fs.max_margin(GAUSSIAN, 2)}
    assert fs.verdict(heavy_run, refs, "power 4").holds is False


def test_verdict_on_a_transient_is_undecided():
    """At t = 10 the run is still degrees away and its angle not yet one power of t."""
    sol = fs.solve(fs.derive(fs.Linear(), POLYNOMIAL, fs.GD()), GAUSSIAN, init=0.5, t1=10.0, rtol=1e-10)
    refs = {"tail": fs.polynomial_tail_limit(GAUSSIAN, K), "l2": fs.max_margin(GAUSSIAN, 2)}
    assert fs.verdict(sol, refs, "tail").holds is None


def test_verdict_refuses_a_tail_with_no_decay_law_naming_why():
    loss = fs.Loss("cubic exponent", sp.exp(-m - m**3 / 3))  # lighter than every exponential
    sol = fs.solve(fs.derive(fs.Linear(), loss, fs.GD()), fs.Dataset(X, np.ones(3)), init=0.1, t1=10.0)
    with pytest.raises(ValueError, match="neither an exponential tail .* nor a polynomial one"):
        fs.verdict(sol, {"l2": fs.max_margin(fs.Dataset(X, np.ones(3)), 2)}, "l2")


def test_discrete_gd_heads_for_the_polynomial_tail_limit_not_the_max_margin():
    """GD itself (step 1, not the flow): after 1e5 steps 0.07 deg from the limit and 6.4 from the l2 max-margin, the
    angle to the limit falling like a power of the steps near t^-0.5, as the flow's."""
    run = fs.iterate(fs.optimizers.gd(1.0), fs.Linear(), POLYNOMIAL, GAUSSIAN, steps=10**5, init=0.5, records=11)
    l2 = fs.max_margin(GAUSSIAN, 2).direction
    to_limit = np.degrees(np.arccos(run.direction @ fs.polynomial_tail_limit(GAUSSIAN, K).direction))
    to_l2 = np.degrees(np.arccos(run.direction @ (l2 / np.linalg.norm(l2))))
    assert to_limit[-1] < 0.15 and to_l2[-1] > 6.0
    rate = -np.log(to_limit[-1] / to_limit[-3]) / np.log(run.steps[-1] / run.steps[-3])
    assert 0.4 < rate < 0.65
