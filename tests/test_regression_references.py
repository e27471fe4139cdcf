"""The regression references (flowsim/theory/regression.py) against the gradient flow they describe, integrated
here by scipy on its own (u, v in logs), against the minimum-l2 and minimum-l1 interpolators (pinv, an LP),
against Woodworth et al.'s Q_alpha as printed, and against hand-solved cases."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq, linprog

import flowsim as fs


def random_problem(seed=0, n=5, d=12):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


def min_l1_interpolator(X, y):
    """Basis pursuit as an LP in (beta+, beta-) >= 0."""
    d = X.shape[1]
    result = linprog(np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None), method="highs")
    assert result.status == 0
    return result.x[:d] - result.x[d:]


def difference_net_flow(X, y, alpha, depth, times, time_scale=1.0, max_step=np.inf):
    """Gradient flow on (1/2n)||X beta - y||^2, beta = u^D - v^D, from u = v = alpha, at ``times`` (in units of
    ``time_scale``), integrated as log u, log v: (log u)' = -D u^(D-2) g, (log v)' = D v^(D-2) g."""
    n, d = X.shape

    def field(_, z):
        u, v = np.exp(z[:d]), np.exp(z[d:])
        g = X.T @ (X @ (u**depth - v**depth) - y) / n
        return time_scale * np.concatenate([-depth * u ** (depth - 2) * g, depth * v ** (depth - 2) * g])

    sol = solve_ivp(field, (0, times[-1]), np.full(2 * d, np.log(alpha)), method="LSODA", rtol=1e-12, atol=1e-13,
                    t_eval=times, max_step=max_step)
    assert sol.success, sol.message
    return np.exp(depth * sol.y[:d].T) - np.exp(depth * sol.y[d:].T)


# --- implicit_regularizer_limit ---

@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("alpha", [1e-3, 0.1, 1.0, 10.0])
def test_limit_is_where_the_flow_converges(alpha, depth):
    X, y = random_problem()
    flow_end = difference_net_flow(X, y, alpha, depth, [1e6])[-1]
    assert np.linalg.norm(X @ flow_end - y) < 1e-10  # the flow has converged
    np.testing.assert_allclose(fs.implicit_regularizer_limit(X, y, alpha, depth), flow_end, rtol=0, atol=1e-8)


@pytest.mark.parametrize("depth", [2, 3])
def test_large_alpha_gives_the_min_l2_interpolator(depth):
    X, y = random_problem(1)
    min_l2 = np.linalg.pinv(X) @ y
    gaps = [np.abs(fs.implicit_regularizer_limit(X, y, alpha, depth) - min_l2).max() for alpha in (1.0, 10.0, 1e4)]
    assert gaps[0] > 1e-4 and gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-10


def test_small_alpha_gives_the_min_l1_interpolator():
    X, y = random_problem(1)
    min_l1 = min_l1_interpolator(X, y)
    alphas = (1e-2, 1e-4, 1e-10, 1e-30, 1e-300)
    gaps = [np.abs(fs.implicit_regularizer_limit(X, y, alpha, 2) - min_l1).max() for alpha in alphas]
    assert np.all(np.diff(gaps) < 0) and gaps[-2] < 5e-3 and gaps[-1] < 1e-12  # depth 2: slowly, then exactly
    assert np.abs(fs.implicit_regularizer_limit(X, y, 1e-4, 3) - min_l1).max() < 1e-6  # depth 3: like alpha


def woodworth_q(z):
    """Woodworth et al. (COLT 2020), depth 2: q(z) = 2 - sqrt(4 + z^2) + z arcsinh(z / 2)."""
    return 2 - np.sqrt(4 + z**2) + z * np.arcsinh(z / 2)


@pytest.mark.parametrize("alpha", [0.05, 0.5, 3.0])
def test_depth2_limit_minimises_woodworths_q_alpha(alpha):
    X, y = random_problem(2)
    beta = fs.implicit_regularizer_limit(X, y, alpha)
    assert np.linalg.norm(X @ beta - y) <= 1e-11 * np.linalg.norm(y)
    null_space = np.linalg.svd(X)[2][X.shape[0]:].T
    # KKT: grad Q_alpha(beta) = q'(beta / alpha^2) = arcsinh(beta / (2 alpha^2)) is orthogonal to null(X)
    gradient = np.arcsinh(beta / (2 * alpha**2))
    assert np.linalg.norm(null_space.T @ gradient) < 1e-9 * np.linalg.norm(gradient)
    # and every other interpolator has a larger Q_alpha (the paper's q evaluated as printed)
    q_alpha = lambda b: alpha**2 * woodworth_q(b / alpha**2).sum()  # noqa: E731
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert q_alpha(beta + null_space @ rng.normal(scale=0.05, size=null_space.shape[1])) > q_alpha(beta)
    # the derivative of q as printed is the arcsinh(z/2) used above
    z = np.linspace(-30, 30, 7)
    np.testing.assert_allclose((woodworth_q(z + 1e-6) - woodworth_q(z - 1e-6)) / 2e-6, np.arcsinh(z / 2), atol=1e-7)


def test_depth3_limit_meets_the_papers_kkt_conditions():
    X, y = random_problem(3)
    alpha, depth = 0.3, 3
    beta = fs.implicit_regularizer_limit(X, y, alpha, depth)
    power = depth / (depth - 2)
    h = lambda w: (1 - w) ** -power - (1 + w) ** -power  # noqa: E731  Woodworth's h_D; q_D' is its inverse
    gradient = np.array([brentq(lambda w, b=b: h(w) - b / alpha**depth, -1 + 1e-15, 1 - 1e-15, xtol=1e-15)
                         for b in beta])
    null_space = np.linalg.svd(X)[2][X.shape[0]:].T
    assert np.linalg.norm(X @ beta - y) <= 1e-11 * np.linalg.norm(y)
    assert np.linalg.norm(null_space.T @ gradient) < 1e-9 * np.linalg.norm(gradient)


def test_full_column_rank_gives_the_unique_interpolator():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((8, 3))
    y = X @ np.array([1.0, -2.0, 0.5])
    for alpha in (0.01, 1.0):
        np.testing.assert_allclose(fs.implicit_regularizer_limit(X, y, alpha), [1.0, -2.0, 0.5], atol=1e-10)
    assert np.all(fs.implicit_regularizer_limit(X, np.zeros(8), 0.1) == 0)


@pytest.mark.parametrize(("arguments", "match"), [
    ((np.ones(3), np.ones(3), 0.1), "X must be a non-empty 2-D"),
    ((np.ones((2, 3)), np.ones(3), 0.1), r"y must have shape \(n,\) = \(2,\)"),
    ((np.array([[1.0, np.nan]]), np.ones(1), 0.1), "finite"),
    ((np.ones((2, 3)), np.array([1.0, 2.0]), 0.1), "y must lie in the range of X"),
    ((np.eye(2), np.ones(2), 0.0), "alpha must be a finite number > 0"),
    ((np.eye(2), np.ones(2), -1.0), "alpha must be"),
    ((np.eye(2), np.ones(2), np.inf), "alpha must be"),
    ((np.eye(2), np.ones(2), 1e76, 2), r"alpha must have alpha\^depth <= 1e150"),
    ((np.eye(2), np.ones(2), 0.1, 1), "depth must be an integer >= 2"),
    ((np.eye(2), np.ones(2), 0.1, True), "depth must be"),
    ((np.eye(2), np.ones(2), 0.1, 2.5), "depth must be"),
])
def test_bad_input_is_refused_by_name(arguments, match):
    with pytest.raises(ValueError, match=match):
        fs.implicit_regularizer_limit(*arguments)


def test_alpha_beyond_float64_is_refused_not_approximated():
    X, y = random_problem()
    with pytest.raises(ValueError, match="out of float64's reach"):
        fs.implicit_regularizer_limit(X, y, 1e-10, depth=3)  # 1 - |w| ~ alpha on the support


# --- saddle_to_saddle ---

def test_orthogonal_design_by_hand():
    # X = I (n = d = 3): s_i = t~ y_i / n, each coordinate jumps to y_i when |s_i| = 1/2, at t~ = n / (2 |y_i|)
    path = fs.saddle_to_saddle(np.eye(3), [3.0, -2.0, 1.0])
    np.testing.assert_allclose(path.jump_times, [0.5, 0.75, 1.5], rtol=1e-14)
    np.testing.assert_allclose(path.plateaus, [[0, 0, 0], [3, 0, 0], [3, -2, 0], [3, -2, 1]], atol=1e-14)
    np.testing.assert_allclose(path.s(1.0), [0.5, -0.5, 1 / 3], rtol=1e-14)
    assert "t~ >= 0.75: beta_1 = 3, beta_2 = -2" in repr(path)


def test_one_sample_jumps_once_to_the_largest_feature():
    x, target = np.array([0.5, -2.0, 1.0]), 3.0
    path = fs.saddle_to_saddle(x[None], [target])
    # s = t~ x target; |s_2| reaches 1/2 first, at t~ = 1 / (2 * 2 * 3), and beta_2 alone interpolates
    np.testing.assert_allclose(path.jump_times, [1 / 12], rtol=1e-14)
    np.testing.assert_allclose(path.plateaus[-1], [0, -1.5, 0], atol=1e-14)
    np.testing.assert_allclose(path.beta([0.0, 0.08, 0.09, 100.0]), [[0, 0, 0], [0, 0, 0], [0, -1.5, 0], [0, -1.5, 0]])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_last_plateau_is_the_min_l1_interpolator_with_s_its_certificate(seed):
    X, y = random_problem(seed)
    path = fs.saddle_to_saddle(X, y)
    final, s = path.plateaus[-1], path.s_at_jumps[-1]
    np.testing.assert_allclose(final, min_l1_interpolator(X, y), atol=1e-10)
    # s / (1/2) is a subgradient of ||.||_1 at beta and lies in range(X^T): the l1 optimality conditions
    support = final != 0
    assert np.all(np.abs(s) <= 0.5 + 1e-14)
    np.testing.assert_allclose(s[support], 0.5 * np.sign(final[support]), rtol=1e-14)
    np.testing.assert_allclose(X.T @ np.linalg.lstsq(X.T, s, rcond=None)[0], s, atol=1e-12)


def test_a_dropped_coordinate_leaves_the_threshold_inward():
    # the case the flow comparison below covers: beta_7 enters at the second jump and is dropped at the fourth,
    # where its constrained least-squares value is 0 and its gradient turns s_7 back inside (-1/2, 1/2)
    path = fs.saddle_to_saddle(*random_problem(0))
    assert path.plateaus[3][6] < 0 and path.plateaus[4][6] == 0
    assert path.s_at_jumps[4][6] == -0.5 and path.s_slopes[4][6] > 0
    assert np.all(path.s_slopes[-1] == 0)


def flow_jump_errors(X, y, path, alpha):
    """Largest gaps between the flow's jumps / plateaus and the path's, in rescaled time: a flow jump is the first
    time beta is nearer the next plateau than the current one; a plateau is read halfway between jumps."""
    end = 1.5 * path.jump_times[-1]
    grid = np.linspace(0, end, 20001)
    beta = difference_net_flow(X, y, alpha, 2, grid, time_scale=np.log(1 / alpha), max_step=0.02)
    flow_jumps, start = [], 0
    for before, after in zip(path.plateaus[:-1], path.plateaus[1:], strict=True):
        nearer = np.linalg.norm(beta[start:] - after, axis=1) < np.linalg.norm(beta[start:] - before, axis=1)
        start += int(np.argmax(nearer))
        flow_jumps.append(grid[start])
    edges = np.concatenate([[0.0], path.jump_times, [end]])
    readings = np.searchsorted(grid, np.append((edges[1:-2] + edges[2:-1]) / 2, end))
    plateau_gap = np.abs(beta[readings] - path.plateaus[1:]).max()
    return np.abs(np.array(flow_jumps) - path.jump_times).max(), plateau_gap


def test_the_flow_converges_to_the_path_as_alpha_shrinks():
    X, y = random_problem(0)  # 6 jumps, one of which drops a coordinate
    path = fs.saddle_to_saddle(X, y)
    gaps = np.array([flow_jump_errors(X, y, path, alpha) for alpha in (1e-2, 1e-4, 1e-8, 1e-16, 1e-32)])
    jump_gaps, plateau_gaps = gaps.T
    assert np.all(np.diff(jump_gaps) < 0) and np.all(np.diff(plateau_gaps) < 0)
    assert jump_gaps[-1] < 0.1 * jump_gaps[0]  # about 1 / log(1/alpha): 6.1 -> 0.32
    assert plateau_gaps[-1] < 2e-3


@pytest.mark.parametrize(("arguments", "match"), [
    ((np.ones((2, 3)), np.ones(2), 0), "max_jumps must be an integer >= 1"),
    ((np.ones((2, 3)), np.array([1.0, 2.0])), "y must lie in the range of X"),
    ((np.hstack([np.eye(2), np.eye(2)[:, :1]]), np.ones(2)), "not in general position"),
])
def test_saddle_to_saddle_refuses_bad_input(arguments, match):
    with pytest.raises(ValueError, match=match):
        fs.saddle_to_saddle(*arguments)


def ill_conditioned_problem(smallest_singular_value):
    rng = np.random.default_rng(0)
    left, right = np.linalg.qr(rng.standard_normal((4, 4)))[0], np.linalg.qr(rng.standard_normal((8, 4)))[0]
    return left @ np.diag([1, 1, 1, smallest_singular_value]) @ right.T, rng.standard_normal(4)


def test_ill_conditioned_data_are_solved_to_rounding_or_refused():
    X, y = ill_conditioned_problem(1e-6)  # y is in range(X) for any X of full row rank: no false refusal
    for beta in (fs.implicit_regularizer_limit(X, y, 0.1), fs.saddle_to_saddle(X, y).plateaus[-1]):
        assert np.linalg.norm(X @ beta - y) < 1e-9 * np.linalg.norm(beta)
    X, y = ill_conditioned_problem(1e-10)
    with pytest.raises(ValueError, match=r"out of float64's reach for these data.*cond\(X\) = 1e\+10"):
        fs.implicit_regularizer_limit(X, y, 0.1)
    with pytest.raises(ValueError, match="X is too ill-conditioned"):
        fs.saddle_to_saddle(X, y)


def test_a_path_longer_than_max_jumps_is_refused():
    with pytest.raises(ValueError, match="more than max_jumps = 5 jumps"):
        fs.saddle_to_saddle(*random_problem(0), max_jumps=5)  # it has 6
    assert len(fs.saddle_to_saddle(*random_problem(0), max_jumps=6).jump_times) == 6


def test_path_evaluation_refuses_negative_times():
    with pytest.raises(ValueError, match="rescaled_time must be finite and >= 0"):
        fs.saddle_to_saddle(np.eye(2), [1.0, 2.0]).beta(-1.0)


def test_figure_draws_the_path_and_the_flow_readably():
    from figure_layout import layout_problems

    X, y = random_problem(0)
    path = fs.saddle_to_saddle(X, y)
    grid = np.linspace(0, 1.25 * path.jump_times[-1], 400)
    flow = difference_net_flow(X, y, 1e-8, 2, grid, time_scale=np.log(1e8), max_step=0.05)
    ax = fs.plot_saddle_to_saddle(path, flow_times=grid, flow_beta=flow, flow_label="flow, alpha = 1e-8")
    steps = {line.get_label(): line for line in ax.get_lines() if line.get_label().startswith("beta_")}
    assert sorted(steps) == sorted(f"beta_{j + 1}" for j in np.flatnonzero(np.any(path.plateaus, axis=0)))
    np.testing.assert_array_equal(steps["beta_7"].get_ydata()[:-1], path.plateaus[:, 6])
    assert layout_problems(ax.figure) == []
    with pytest.raises(ValueError, match="flow_times and flow_beta go together"):
        fs.plot_saddle_to_saddle(path, flow_times=grid)
