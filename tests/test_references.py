"""Max-margin references against hand-solvable cases, each other, and their own optimality."""

import numpy as np
import pytest
from conftest import separable

import flowsim as fs

INF = float("inf")


def test_one_sample_closed_forms():
    x = np.array([1.0, -2.0, 0.5])
    data = fs.Dataset(x[None], [1])
    l2, l1, li = fs.max_margin(data, 2), fs.max_margin(data, 1), fs.max_margin(data, INF)
    np.testing.assert_allclose(l2.direction, x / np.linalg.norm(x), atol=1e-9)
    np.testing.assert_allclose(l1.direction, [0, -1, 0], atol=1e-9)
    np.testing.assert_allclose(li.direction, np.sign(x), atol=1e-9)
    np.testing.assert_allclose([l2.margin, l1.margin, li.margin], [np.linalg.norm(x), 2.0, np.abs(x).sum()], rtol=1e-9)
    assert l2.unique and l1.unique and li.unique


def test_non_unique_l1_optimum_is_flagged():
    data = fs.Dataset(np.array([[1.0, 1.0]]), [1])  # every w >= 0 with w1 + w2 = 1 is optimal
    l1 = fs.max_margin(data, 1)
    assert not l1.unique and l1.margin == pytest.approx(1.0)
    assert fs.max_margin(data, 2).unique and fs.max_margin(data, INF).unique


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_reference_is_optimal_for_its_norm_and_norms_order(seed):
    data = separable(15, 4, seed=seed, positive=False)
    refs = {p: fs.max_margin(data, p) for p in (1, 2, INF)}
    for p, r in refs.items():
        for q, other in refs.items():
            # r maximises the p-margin: no other direction does better
            assert fs.normalised_margin(data, other.direction, p) <= r.margin * (1 + 1e-7)
    # ||w||_inf <= ||w||_2 <= ||w||_1, so gamma_1 <= gamma_2 <= gamma_inf
    assert refs[1].margin <= refs[2].margin * (1 + 1e-9) <= refs[INF].margin * (1 + 1e-9)
    # l2 KKT: duals on the support only, and support samples attain the minimum margin
    l2 = refs[2]
    m = data.z @ l2.direction
    assert np.allclose(m[l2.support], m.min(), rtol=1e-6)
    np.testing.assert_allclose(data.z.T @ l2.duals / np.linalg.norm(data.z.T @ l2.duals), l2.direction, atol=1e-6)


def test_mahalanobis_is_l2_after_rescaling():
    data = separable(12, 3, seed=5, positive=False)
    D = np.diag([1.0, 4.0, 9.0])
    mah = fs.max_margin(data, "mahalanobis", metric=D)
    # w^T D w with w = D^{-1/2} v: the l2 problem on X D^{-1/2}
    scaled = fs.max_margin(fs.Dataset(data.X / np.sqrt(np.diag(D)), data.y), 2)
    v = mah.direction * np.sqrt(np.diag(D))
    np.testing.assert_allclose(v / np.linalg.norm(v), scaled.direction, atol=1e-6)
    np.testing.assert_allclose(fs.max_margin(data, "mahalanobis", metric=np.eye(3)).direction,
                               fs.max_margin(data, 2).direction, atol=1e-7)
    with pytest.raises(ValueError, match="positive definite"):
        fs.max_margin(data, "mahalanobis", metric=-np.eye(3))


def test_kkt_points_for_deep_networks():
    x = np.array([1.0, 2.0, 1.5])
    one = fs.Dataset(x[None], [1])
    k3 = fs.kkt_max_margin(one, 3)
    np.testing.assert_allclose(np.abs(k3.direction), [0, 1, 0], atol=1e-6)
    data = separable(10, 4, seed=7)
    k = fs.kkt_max_margin(data, 3, start=fs.max_margin(data, 1).direction)
    assert k.kkt_residual < 1e-5 and k.norm == pytest.approx(2 / 3)
    assert np.min(data.z @ k.direction) > 0
    assert fs.kkt_max_margin(data, 2).direction == pytest.approx(fs.max_margin(data, 1).direction)


def test_errors():
    xor = fs.Dataset(np.array([[1.0, 1.0], [1.0, 1.0]]), [1, -1])
    with pytest.raises(fs.NonSeparableError):
        fs.max_margin(xor, 2)
    with pytest.raises(ValueError, match="norm must be"):
        fs.max_margin(fs.Dataset([[1.0, 2.0]], [1]), 0.9)  # p < 1 is not a norm
    with pytest.raises(ValueError, match="depth must be"):
        fs.kkt_max_margin(fs.Dataset([[1.0, 2.0]], [1]), 0)


@pytest.mark.parametrize("scale", [1e-8, 1.0, 1e8])
def test_l2_is_the_exact_optimum_at_any_scale(scale):
    """Against the closed form of two orthogonal samples and SLSQP on random data: L-BFGS-B on the dual stopped
    after one step at scale 1e7 (a direction 20 degrees off) and 1e-8, without a word."""
    from scipy.optimize import minimize

    two = fs.max_margin(fs.Dataset(scale * np.array([[3.0, 0.0], [0.0, 10.0]])), 2).direction
    np.testing.assert_allclose(two, np.array([1 / 3, 1 / 10]) / np.hypot(1 / 3, 1 / 10), rtol=1e-12)
    rng = np.random.default_rng(1)
    for _ in range(20):
        X = rng.normal(size=(rng.integers(2, 10), rng.integers(2, 6)))
        data = fs.Dataset(scale * X, np.sign(X @ rng.normal(size=X.shape[1])))
        ref = fs.max_margin(data, 2)
        Z = data.z / scale
        res = minimize(lambda w: (w @ w, 2 * w), 1.1 * ref.direction / (ref.margin / scale), jac=True, method="SLSQP",
                       constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1, "jac": lambda w: Z}],
                       options=dict(ftol=1e-16, maxiter=1000))
        assert ref.margin >= fs.normalised_margin(data, res.x, 2) * (1 - 1e-12)
    # a tiny margin: 1 - 1.u lost every digit below ~3e-7 and the data were called non-separable
    for e in (3e-7, 1e-8):
        tiny = fs.max_margin(fs.Dataset([[1.0, e], [-1.0, e], [0.5, e]]), 2)
        np.testing.assert_allclose(tiny.direction, [0.0, 1.0], atol=1e-12)
        assert tiny.margin == pytest.approx(e, rel=1e-6)
    metric = fs.max_margin(fs.Dataset([[1.0, 0.0], [1.0, 1.0], [1.0, -0.5]]), "mahalanobis", metric=1e16 * np.eye(2))
    np.testing.assert_allclose(metric.direction * 1e8, [1.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("X, norm, unique", [
    ([[1e7, 0.0]], np.inf, False),       # w_2 free in [-1, 1]: a face of small entries, called a point
    ([[1.0, 1 - 1e-4]], 1, True),        # (1, 0) unique: a thin band of near-optimal points was called a face
    ([[1.0, 1.0]], 1, False),
    ([[1.0, 2.0]], 1, True),
    ([[1.0, 0.0]], np.inf, False),
    ([[1e8, 1.0], [1.0, 1e8]], np.inf, True),  # the LP said "infeasible" at this scale
])
def test_uniqueness_of_lp_optima(X, norm, unique):
    assert fs.max_margin(fs.Dataset(X), norm).unique is unique


def test_kkt_from_a_start_that_does_not_separate():
    """SLSQP from a non-separating start failed and its end (margin -2) came back as the KKT point."""
    data = fs.Dataset([[1.0, -1.0], [1.0, -2.0]])
    k = fs.kkt_max_margin(data, 3, start=np.array([1.0, 1.0]))
    assert np.min(data.z @ k.direction) > 0 and k.kkt_residual < 1e-8
    np.testing.assert_allclose(k.direction / np.abs(k.direction).max(), [1.0, 0.0], atol=1e-8)
    with pytest.raises(ValueError, match=r"start: no beta with its signs \[-1, 1\] separates"):
        fs.kkt_max_margin(data, 3, start=np.array([-1.0, 1.0]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(norm="mahalanobis", metric=1e-9 * np.array([[1.0, 5.0], [0.0, 1.0]])), "symmetric"),
    (dict(norm="mahalanobis", metric=[[1.0, np.inf], [np.inf, 1.0]]), "finite"),
    (dict(norm=2, metric=np.eye(2)), "metric is for norm='mahalanobis' only"),
    (dict(norm=True), "norm must be 2, 1"),
    (dict(norm=2 + 0j), "norm must be 2, 1"),                                   # taken as 2
    (dict(norm="l2"), "norm must be 2, 1"),
    (dict(norm="mahalanobis", metric=[[1.0, 2.0], [3.0]]), "symmetric positive-definite"),  # numpy's error
])
def test_bad_reference_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fs.max_margin(fs.Dataset([[1.0, 1.0]]), **kwargs)


@pytest.mark.parametrize("args, match", [
    (([1.0, 1.0], "mahalanobis", np.diag([1.0, -4.0])), "positive definite"),  # -inf
    (([1.0, -1.0], "mahalanobis", [[1.0, 10.0], [0.0, 1.0]]), "symmetric"),     # NaN (eigvalsh read one triangle)
    (([1.0, 1.0], 0), "norm must be a number p > 0"),                          # 1.25
    (([1.0, 1.0], -1), "norm must be a number p > 0"),                         # 5.0
    (([1.0, 1.0, 1.0], 2), r"w must have shape \(d,\) or \(k, d\) with d = 2"),  # a matmul error
    (([1.0, 1.0], "mahalanobis"), "metric must be"),                           # a matmul error
])
def test_normalised_margin_checks_its_input(args, match):
    data = fs.Dataset([[1.0, 2.0], [2.0, 0.5]])
    with pytest.raises(ValueError, match=match):
        fs.normalised_margin(data, *args)


def test_normalised_margin_of_non_finite_w_is_nan_and_inf_is_a_norm():
    """A NaN w gave -inf (a margin, the worst one) without a word."""
    data = fs.Dataset([[1.0, 2.0], [2.0, 0.5]])
    out = fs.normalised_margin(data, [[np.nan, 1.0], [1.0, 1.0]], "inf")
    assert np.isnan(out[0]) and out[1] == pytest.approx(2.5)
    assert fs.normalised_margin(data, [0.0, 0.0], 2) == -np.inf
    with pytest.raises(ValueError, match="start must be finite"):
        fs.kkt_max_margin(data, 3, start=[np.nan, 1.0])


@pytest.mark.parametrize("norm", [1, float("inf"), 3.0])
def test_a_margin_below_the_solvers_resolution_says_so(norm):
    """Separable by 1e-12 of the scale: 'LP failed: The problem is infeasible' did not say why; l2 solves it
    exactly (below), the LPs and the power-cone problem refuse with their certificate."""
    data = fs.Dataset([[1.0, 1e-12], [-1.0, 1e-12], [0.5, 1e-12]])
    assert data.is_separable
    with pytest.raises(fs.UncertifiedError, match="margin.*(near what|feasibility tolerance)"):
        fs.max_margin(data, norm)


@pytest.mark.parametrize("e", [1e-12, 1e-10, 3.2e-8, 1e-6, 1e-5, 1e-3, 1.0])
@pytest.mark.parametrize("scale", [1e-30, 1.0, 1e30])
def test_near_degenerate_data_get_the_exact_answer_or_an_uncertified_error(e, scale):
    """The samples (1, e), (-1, e), (0.5, e): the max-margin direction is e_2 with margin e for every norm.
    NNLS gave up for e in [3.2e-8, 1e-5] with 'the l2 max-margin QP did not solve' (on scipy 1.17)."""
    data = fs.Dataset(scale * np.array([[1.0, e], [-1.0, e], [0.5, e]]))
    for norm in (2, 1, INF, 1.5, 4.0):
        try:
            ref = fs.max_margin(data, norm)
        except fs.UncertifiedError as err:
            # l2 always; the LPs from 1e-8 of the scale, the power cones from 1e-3
            assert norm != 2 and e < (1e-8 if norm in (1, INF) else 1e-3), (norm, e)
            assert err.certificate is None or err.certificate.gap > 1e-8
            continue
        np.testing.assert_allclose(ref.direction, [0.0, 1.0], atol=1e-12 if norm == 2 else 1e-7)
        assert ref.margin == pytest.approx(scale * e, rel=1e-9 if norm == 2 else 1e-6)
        assert ref.certificate.gap <= 1e-8 and ref.certificate.lower <= ref.certificate.upper * (1 + 1e-12)


@pytest.mark.parametrize("p", [1.25, 1.5, 3.0, 7.0])
def test_lp_references_agree_with_slsqp_and_bracket_their_neighbours(p):
    """Any p >= 1 by power cones, against SLSQP on min |w|_p^p s.t. Zw >= 1 (an independent method), and
    the margins ordered as the norms are: gamma_1 <= gamma_p <= gamma_inf."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(int(10 * p))
    for _ in range(5):
        X = rng.normal(size=(rng.integers(3, 12), rng.integers(2, 6)))
        data = fs.Dataset(X, np.sign(X @ rng.normal(size=X.shape[1])))
        ref = fs.max_margin(data, p)
        start = fs.max_margin(data, 2).direction / fs.max_margin(data, 2).margin
        res = minimize(lambda w: np.sum(np.abs(w) ** p), start, method="SLSQP", tol=1e-15,
                       constraints=[{"type": "ineq", "fun": lambda w: data.z @ w - 1.0}], options={"maxiter": 1000})
        assert ref.margin >= fs.normalised_margin(data, res.x, p) * (1 - 1e-9)
        np.testing.assert_allclose(ref.direction, res.x / np.linalg.norm(res.x, ord=p), atol=2e-5)
        assert fs.max_margin(data, 1).margin <= ref.margin * (1 + 1e-9) <= fs.max_margin(data, INF).margin * (1 + 1e-8)


def test_a_certificate_can_fail():
    """The bounds are real: a direction or weights that are not optimal open the gap."""
    from flowsim.theory.conic import certify

    data = separable(10, 3, seed=2, positive=False)
    Z = data.z
    ref = fs.max_margin(data, 2)
    good = certify(Z, ref.direction, ref.duals, 2)
    assert good.gap <= 1e-8
    assert certify(Z, ref.direction + 0.01, ref.duals, 2).gap > 1e-4           # a worse direction
    assert certify(Z, ref.direction, np.ones(data.n) / data.n, 2).gap > 1e-4    # weights off the support
    with pytest.raises(ValueError, match="any p >= 1"):
        fs.max_margin(data, 0.5)
