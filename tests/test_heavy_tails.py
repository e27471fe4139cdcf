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
