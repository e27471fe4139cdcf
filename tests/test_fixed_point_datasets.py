"""The per-sample-Adam fixed point (seed 002, Thm 4.8) and the seeded data sets."""

import numpy as np
import pytest

import flowsim as fs

DS = fs.datasets


def test_fixed_point_is_l2_on_scaled_rademacher():
    data = DS.scaled_rademacher(10, 4, seed=0)
    fp = fs.adam_fixed_point(data)
    assert fp.residual < 1e-8 and fp.c.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(fp.direction, fs.max_margin(data, 2).direction, atol=1e-7)
    # M(c) is a multiple of I there (equal absolute coordinates in every sample)
    np.testing.assert_allclose(np.diag(fp.metric) / fp.metric[0, 0], 1.0, rtol=1e-12)


def test_fixed_point_is_linf_when_each_coordinate_is_carried_by_its_own_sample():
    # shifted diagonal: x_i ~ y_i (e_{i mod d} + 0.2 * 1); the l_inf optimum is unique there
    data = DS.shifted_diagonal(10, 5, seed=0)
    fp = fs.adam_fixed_point(data)
    li = fs.max_margin(data, float("inf"))
    assert li.unique
    np.testing.assert_allclose(fp.direction, li.direction / np.linalg.norm(li.direction), atol=1e-6)
    assert np.abs(fp.direction - fs.max_margin(data, 2).direction).max() > 0.01  # and it is not l2


def test_fixed_point_is_a_fixed_point():
    data = DS.gaussian_clusters(12, 4, seed=2)
    fp = fs.adam_fixed_point(data)
    sol = fs.max_margin(data, "mahalanobis", metric=fs.adam_metric(data, fp.c))
    np.testing.assert_allclose(sol.duals / sol.duals.sum(), fp.c, atol=1e-7)
    with pytest.raises(ValueError, match="damping"):
        fs.adam_fixed_point(data, damping=0)


def test_data_sets_are_seeded_separable_and_shaped():
    for make in (DS.scaled_rademacher, DS.gaussian_clusters, DS.shifted_diagonal):
        a, b = make(10, 5, seed=3), make(10, 5, seed=3)
        assert np.array_equal(a.X, b.X) and a.X.shape == (10, 5) and a.is_separable
    r = DS.scaled_rademacher(8, 6, seed=1)
    assert np.allclose(np.abs(r.X), np.abs(r.X[:, :1]))  # equal absolute coordinates per sample
    dg = DS.digits(0, 1)
    assert dg.d == 64 and dg.is_separable and set(np.unique(dg.y)) == {-1.0, 1.0} and dg.X.max() <= 1.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(c0=[1.0, 1.0]), "c0 must be 3 finite weights"),          # a numpy broadcast error
    (dict(c0=[0.0, 0.0, 0.0]), "c0 must be 3 finite weights"),     # "metric must be positive definite"
    (dict(c0=[1.0, -1.0, 1.0]), "c0 must be 3 finite weights"),    # accepted: c off the simplex
    (dict(tol=-1.0), "tol must be a finite number > 0"),           # 2000 iterations, then "residual 0"
])
def test_adam_fixed_point_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fs.adam_fixed_point(fs.Dataset([[1.0, 0.2], [0.3, 1.0], [1.0, 1.0]]), **kwargs)


def test_adam_fixed_point_where_none_exists_says_why():
    """c concentrates on sample 1, whose second coordinate is 0: M(c) singular. It said "metric must be positive
    definite" though no metric was passed."""
    with pytest.raises(RuntimeError, match=r"M\(c\) is singular at iteration \d+: coordinate\(s\) \[2\]"):
        fs.adam_fixed_point(fs.Dataset([[1.0, 0.0], [2.0, 1.0]]))
