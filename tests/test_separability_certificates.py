"""Separability decided by a certificate either way (flowsim.data.separable): a separating beta, or sample
weights whose combination cancels (Gordan's alternative), found without the LP; and the answer asked once per
Dataset. The independent reference is scipy's LP on the plain feasibility problem Z beta >= 1."""

import numpy as np
import pytest
import scipy.optimize
from scipy.optimize import linprog

import flowsim as fs
import flowsim.data as data_module

#: non-separable, and decided by the LP: z_1 + z_2 = 0 while beta = (0, 1) has margins (0, 0, 1), so no sample
#: weights cancel to within rounding (z_3's must vanish) and no beta has positive margins
LP_DECIDES = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])


def lp_separable(z, lower=None):
    """Whether Z beta >= 1 is feasible (beta >= lower where given): the textbook test, by HiGHS."""
    n, d = z.shape
    res = linprog(np.zeros(d), A_ub=-z, b_ub=-np.ones(n), bounds=(lower, None), method="highs")
    assert res.status in (0, 2)
    return res.status == 0


@pytest.fixture
def no_lp(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the LP was asked: no certificate was found")

    monkeypatch.setattr(scipy.optimize, "linprog", refuse)


def random_labels(n, d, seed):
    rng = np.random.default_rng(seed)
    return fs.Dataset(rng.normal(size=(n, d)), rng.choice([-1.0, 1.0], n))


@pytest.mark.parametrize("n, d, seed", [(60, 5, 0), (300, 20, 1), (1000, 100, 2)])
def test_non_separable_data_are_certified_without_the_lp(n, d, seed, no_lp):
    data = random_labels(n, d, seed)
    assert not lp_separable(data.z)
    assert not data_module.separable(data.z)


def test_a_sign_restriction_is_certified_both_ways_without_the_lp(no_lp):
    # labels from a direction of mixed signs: separable, but by no beta >= 0
    rng = np.random.default_rng(3)
    w = np.r_[np.ones(4), -np.ones(4)]
    X = rng.normal(size=(200, 8))
    y = np.sign(X @ w)
    data = fs.Dataset(X + 0.2 * y[:, None] * w, y)
    assert lp_separable(data.z) and not lp_separable(data.z, lower=0.0)
    assert data_module.separable(data.z)
    assert not data_module.separable(data.z, np.ones(8))
    assert not data.is_separable_by(fs.DiagonalNet(2), 0.5)
    assert data_module.separable(data.z, np.where(w > 0, 1.0, -1.0))  # the signs of w itself


def test_a_certificate_means_what_it_says(monkeypatch):
    # 2 z_1 + z_2 + z_3 = 0 with every weight positive: certified without the LP
    with monkeypatch.context() as m:
        m.setattr(scipy.optimize, "linprog", None)
        assert not data_module.separable(np.array([[1.0, 0.0], [-1.0, 1.0], [-1.0, -1.0]]))
    assert not lp_separable(LP_DECIDES) and not data_module.separable(LP_DECIDES)
    # z_2 tilted by 1e-6: beta = (5e-7, 1) separates, far above rounding
    assert data_module.separable(np.array([[1.0, 0.0], [-1.0, 1e-6], [0.0, 1.0]]))


def test_is_separable_is_decided_once_per_dataset(monkeypatch):
    """Counted by the LP's calls, on data only the LP decides."""
    data = fs.Dataset(LP_DECIDES, np.ones(3))
    calls = []
    real = scipy.optimize.linprog
    monkeypatch.setattr(scipy.optimize, "linprog", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert not data.is_separable
    assert not data.is_separable  # remembered
    # no beta separates them, so no beta >= 0 does: not asked again (solve asks it of a product net's start)
    assert not data.separable_with(np.ones(2))
    assert not data.is_separable_by(fs.DiagonalNet(2), 0.5)
    assert len(calls) == 1
    with pytest.raises(fs.NonSeparableError):
        fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), data, 0.1, t1=10)
    assert len(calls) == 1
