"""Closed forms of docs/theory.md 5 (one sample x > 0, y = +1, exponential loss), at
t = 1e3, 1e30, 1e100, on both backends, relative error <= 1e-7; mpmath quadrature where the
clock t(tau) has no closed form."""

import math
from functools import lru_cache

import mpmath as mp
import numpy as np
import pytest
from conftest import BACKENDS

import flowsim as fs

X = np.array([1.0, 2.0])
HORIZONS = [1e3, 1e30, 1e100]
TOL = dict(rtol=1e-11, atol=1e-13)
mp.mp.dps = 30


def final_beta(system, data, init, t1, backend, **kw):
    sol = fs.solve(system, data, init=init, t1=t1, backend=backend, saves=20, **TOL, **kw)
    assert sol.status == "completed", sol.message
    assert abs(sol.log10_t[-1] - math.log10(t1)) < 1e-12
    return sol


def linear_reference(m0, t1, rate, shift):
    """Margin of the L = 1 flows: m(t) = log(e^{m0 - shift} + |x|^2 e^{shift}... ) in the log domain."""
    return float(mp.log(mp.exp(m0 - shift) + rate * mp.mpf(t1))) + shift


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t1", HORIZONS)
@pytest.mark.parametrize(
    "flow, shift",
    [(fs.GD(), 0.0), (fs.SAM(0.3, 2), 0.3 * np.linalg.norm(X)), (fs.SAM(0.3, float("inf")), 0.3 * np.abs(X).sum())],
    ids=["gd", "l2_sam", "linf_sam"],
)
def test_linear_one_sample(one_sample, flow, shift, t1, backend):
    # perturbed margin m~ = m - shift, so dm/dt = |x|^2 e^{-(m - shift)}: m = shift + log(e^{m0-shift} + |x|^2 t)
    w0 = 0.1
    m0 = w0 * X.sum()
    sol = final_beta(fs.derive(fs.Linear(), "exponential", flow), one_sample, w0, t1, backend)
    m = linear_reference(m0, t1, X @ X, shift)
    w = w0 + X * (m - m0) / (X @ X)
    np.testing.assert_allclose(sol.beta[-1], w, rtol=1e-7)
    # the direction is the l2 max-margin x / |x| for one sample
    assert np.allclose(sol.direction[-1], X / np.linalg.norm(X), atol=0.1 if t1 < 1e10 else 0.02)


@lru_cache(maxsize=None)
def _tied_gd_reference(w0, t1, difference):
    """L = 2 tied GD: w_j = w_j(0) e^{2 x_j phi}, t(phi) = int_0^phi e^{m(s)} ds (mpmath)."""
    def m(s):
        if difference:
            return sum(2 * a**2 * x * mp.sinh(4 * x * s) for a, x in zip(w0, X))
        return sum(x * a**2 * mp.exp(4 * x * s) for a, x in zip(w0, X))

    def log_t(phi):
        return mp.log(mp.quad(lambda s: mp.exp(m(s)), [0, phi * 0.9, phi]))

    return invert(log_t, math.log(t1))


def tied_gd_reference(w0, t1, difference=False):
    return _tied_gd_reference(tuple(w0), t1, difference)


def invert(log_t, target):
    """tau with log t(tau) = target (log t is increasing): bracket, then Illinois."""
    lo, hi = mp.mpf("1e-6"), mp.mpf(1)
    while log_t(hi) < target:
        lo, hi = hi, 2 * hi
    return mp.findroot(lambda s: log_t(s) - target, (lo, hi), solver="illinois", tol=mp.mpf("1e-30"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t1", HORIZONS)
def test_tied_depth2_gd_against_mpmath(one_sample, t1, backend):
    w0 = np.array([0.3, 0.05])
    sol = final_beta(fs.derive(fs.DiagonalNet(2, "tied"), "exponential", fs.GD()), one_sample, w0, t1, backend)
    phi = tied_gd_reference(w0, t1)
    beta = [float(a**2 * mp.exp(4 * x * phi)) for a, x in zip(w0, X)]
    np.testing.assert_allclose(sol.beta[-1], beta, rtol=1e-7)
    np.testing.assert_allclose(sol.tau[-1], float(phi), rtol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t1", HORIZONS)
def test_difference_depth2_gd(one_sample, t1, backend):
    alpha = 0.2
    sol = final_beta(fs.derive(fs.DiagonalNet(2, "difference"), "exponential", fs.GD()), one_sample, alpha, t1, backend)
    phi = tied_gd_reference([alpha, alpha], t1, difference=True)
    beta = [float(2 * alpha**2 * mp.sinh(4 * x * phi)) for x in X]
    np.testing.assert_allclose(sol.beta[-1], beta, rtol=1e-7)


@lru_cache(maxsize=None)
def tied_linf_sam_reference(w0, rho, t1):
    """docs/theory.md 5 item 6: w_j = rho + (w_j(0) - rho) e^{2 x_j tau} until it reaches 0 (w_j(0) < rho), then it
    slides at 0 where the Filippov field averages w~_j = +-rho, so beta~_j = rho^2. dt/dtau = e^{m~}."""
    hit = [mp.log(rho / (rho - a)) / (2 * x) if a < rho else mp.inf for a, x in zip(w0, X)]

    def m_tilde(s):
        return sum(x * ((a - rho) ** 2 * mp.exp(4 * x * s) if s < h else rho**2) for a, x, h in zip(w0, X, hit))

    def log_t(tau):
        pts = sorted({mp.mpf(0), *[h for h in hit if h < tau], tau})
        return mp.log(mp.quad(lambda s: mp.exp(m_tilde(s)), pts))

    tau = invert(log_t, math.log(t1))
    w = [float(rho + (a - rho) * mp.exp(2 * x * tau)) if tau < h else 0.0 for a, x, h in zip(w0, X, hit)]
    return np.array(w), float(tau), hit


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t1", HORIZONS)
@pytest.mark.parametrize("w0", [[0.3, 0.05], [0.05, 0.3]], ids=["major_grows", "minor_grows"])
def test_tied_depth2_linf_sam_sliding(one_sample, w0, t1, backend):
    rho = 0.1
    sol = final_beta(fs.derive(fs.DiagonalNet(2, "tied"), "exponential", fs.SAM(rho, float("inf"))),
                     one_sample, w0, t1, backend)
    w, tau, hit = tied_linf_sam_reference(tuple(w0), rho, t1)
    np.testing.assert_allclose(sol.params[-1, 0], w, rtol=1e-7, atol=1e-300)
    np.testing.assert_allclose(sol.tau[-1], tau, rtol=1e-7)
    # the coordinate with w_j(0) < rho hit 0 at the predicted tau and stayed there (sliding)
    (ev,) = sol.events
    j = int(np.argmin(w0))
    assert [(e["layer_index"], e["index"], e["coordinate"]) for e in ev["pinned"]] == [(0, j, j + 1)]
    np.testing.assert_allclose(ev["tau"], float(hit[j]), rtol=1e-9)


def test_gd_from_zero_on_the_linear_model_tends_to_the_l2_max_margin():
    """beta = 0 is no equilibrium of the linear model (its gradient there is -Z^T q(0)), so the classic zero-init
    GD runs: it leaves 0 along Z^T 1 / (2n) (logistic q(0) = 1/2, mean loss) and its direction tends to the l2
    max-margin, the angle shrinking like 1/log t (Soudry et al. 2018). It was refused as an equilibrium."""
    data = fs.Dataset(np.array([[1.0, 0.3], [0.5, 1.0], [-0.2, 0.8]]), [1, 1, 1])
    at = np.array([-6.0, 4, 8, 16, 30])
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), data, 0.0, log10_t1=30, save_at_log10_t=at, **TOL)
    assert sol.status == "completed"
    np.testing.assert_allclose(sol.beta[0], 1e-6 * data.z.sum(axis=0) / (2 * data.n), rtol=1e-5)
    reference = fs.max_margin(data, 2).direction
    direction = sol.beta[1:] / np.linalg.norm(sol.beta[1:], axis=1, keepdims=True)
    angle = np.degrees(np.arccos(np.clip(direction @ reference, -1.0, 1.0)))
    assert np.all(np.diff(angle) < 0) and angle[-1] < 0.3
    assert np.all(angle * at[1:] < 10)  # ~ c / log t: 6.5 here
    run = fs.iterate(fs.optimizers.gd(0.5), fs.Linear(), "logistic", data, 1000, init=0.0)
    assert run.status == "completed" and np.all(run.margins[-1] > 0)
