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
    (dict(damping="0.5"), "damping must be a number in"),          # a TypeError
])
def test_adam_fixed_point_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fs.adam_fixed_point(fs.Dataset([[1.0, 0.2], [0.3, 1.0], [1.0, 1.0]]), **kwargs)


def test_adam_fixed_point_where_none_exists_says_why():
    """c concentrates on sample 1, whose second coordinate is 0: M(c) singular. It said "metric must be positive
    definite" though no metric was passed."""
    with pytest.raises(RuntimeError, match=r"M\(c\) is singular at iteration \d+: coordinate\(s\) \[2\]"):
        fs.adam_fixed_point(fs.Dataset([[1.0, 0.0], [2.0, 1.0]]))


def test_equal_samples_share_their_weight_as_under_the_flow():
    """A support sample given twice: the QP's duals put all its weight on one copy (0.213 and 0), a fixed
    point 8.1 degrees from the one the flow reaches (equal samples keep equal margins, so equal weights), and
    the verdict for Thm 4.8 said False where the flow does what the theorem says."""
    r = np.random.default_rng(6)
    X = r.normal(size=(8, 6))
    y = np.sign(X @ r.normal(size=6))
    k = int(np.nonzero(fs.adam_fixed_point(fs.Dataset(X, y)).c > 1e-6)[0][0])
    data = fs.Dataset(np.r_[X, X[k:k + 1]], np.r_[y, y[k:k + 1]])
    fp = fs.adam_fixed_point(data)
    assert fp.c[k] == fp.c[-1] > 0.05 and fp.residual < 1e-9
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy(batch=1)), data, 1e-3, t1=1e100)
    limit = fs.limit_direction(sol).direction
    assert np.degrees(np.arccos(min(limit @ fp.direction, 1.0))) < 0.05
    refs = {"fp": fp.solution, "l2": fs.max_margin(data, 2), "linf": fs.max_margin(data, float("inf"))}
    assert fs.verdict(sol, refs, "fp").holds is True


def test_a_feature_no_sample_has_carries_no_weight_and_other_input_is_checked():
    """A column of zeros made M(c) singular at the first iteration (the AdamProxy flow runs on such data,
    holding that entry): its entry of the direction is 0, the rest as without it. Non-separable data said
    "M(c) is singular"; adam_metric took NaN and wrongly shaped weights."""
    data = DS.gaussian_clusters(12, 4, seed=2)
    fp = fs.adam_fixed_point(data)
    padded = fs.adam_fixed_point(fs.Dataset(np.c_[data.X, np.zeros(12)], data.y))
    assert padded.direction[-1] == 0.0 and padded.metric[-1, -1] == 1.0
    np.testing.assert_allclose(padded.direction[:-1], fp.direction, atol=1e-10)
    with pytest.raises(fs.NonSeparableError):
        fs.adam_fixed_point(fs.Dataset([[1.0], [1.0]], [1, -1]))
    for c in ([np.nan] * 12, [1.0, 2.0], "a"):
        with pytest.raises(ValueError, match="c must be 12"):
            fs.adam_metric(data, c)


def _is_fixed_point(data, fp):
    """T(c) = c checked independently: the normalised duals of the Mahalanobis max-margin under M(c), summed over
    each group of equal samples (their split within a group is not determined), against c summed the same way."""
    sol = fs.max_margin(data, "mahalanobis", metric=fs.adam_metric(data, fp.c))
    groups = np.unique(data.z, axis=0, return_inverse=True)[1].ravel()
    duals = np.bincount(groups, sol.duals / sol.duals.sum())
    np.testing.assert_allclose(duals, np.bincount(groups, fp.c), atol=1e-7)
    np.testing.assert_allclose(sol.direction / np.linalg.norm(sol.direction), fp.direction, atol=1e-6)


def test_the_shifted_diagonal_has_several_fixed_points_and_the_search_finds_them():
    """shifted_diagonal(10, 5): uniform weights reach the l_inf-like fixed point (1, ..., 1)/sqrt 5, weights
    concentrated on one sample reach others: at least three distinct ones, each T(c) = c by its own QP."""
    data = DS.shifted_diagonal(10, 5)
    found = fs.adam_fixed_points(data)
    assert len(found.points) >= 3 and found.starts == 21 and sum(found.reached) + len(found.failed) == 21
    for fp in found.points:
        assert fp.residual <= 1e-9
        _is_fixed_point(data, fp)
    apart = [np.linalg.norm(a.direction - b.direction) for i, a in enumerate(found.points) for b in found.points[i + 1:]]
    assert min(apart) > 1e-3
    # the single-start API still gives the one from uniform weights, among those found
    one = fs.adam_fixed_point(data)
    assert min(np.linalg.norm(one.direction - fp.direction) for fp in found.points) < 1e-6
    np.testing.assert_allclose(one.direction, np.full(5, 5**-0.5), atol=1e-6)


def test_a_data_set_with_one_fixed_point_gives_one():
    """On scaled-Rademacher data M(c) is a multiple of I for every c, so T(c) is the l2 problem's duals whatever c:
    one fixed point, reached from every start."""
    data = DS.scaled_rademacher(10, 4, seed=0)
    found = fs.adam_fixed_points(data, random_starts=4, seed=1)
    assert len(found.points) == 1 and found.reached == (found.starts,) and not found.failed
    _is_fixed_point(data, found.points[0])
    np.testing.assert_allclose(found.points[0].direction, fs.max_margin(data, 2).direction, atol=1e-7)
    with pytest.raises(ValueError, match="random_starts must be an integer >= 0"):
        fs.adam_fixed_points(data, random_starts=-1)
