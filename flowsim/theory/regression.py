r"""Regression references for the difference net beta = u^D - v^D (entrywise) under gradient flow on the
square loss L(beta) = (1/2n) ||X beta - y||^2 from u = v = alpha, docs/theory.md 11.

- :func:`implicit_regularizer_limit`: where the flow converges, argmin Q_alpha(beta) s.t. X beta = y
  (Woodworth et al., COLT 2020), from the smooth convex dual of that problem;
- :func:`saddle_to_saddle`: the alpha -> 0 limit of the depth-2 flow in rescaled time
  t~ = t / log(1/alpha) (Pesme and Flammarion, NeurIPS 2023), a piecewise-constant path of sign-constrained
  least-squares solutions, by their algorithm.

Both are pure numerical functions of (X, y): they never run a flow, so flows can be checked against them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from flowsim._checks import is_real_number, is_whole

#: ||X beta - y|| / (||X|| ||beta|| + ||y||) the limit must reach (the scale of float64's rounding in X beta - y), and
#: the relative distance of y from range(X) accepted as 0
INTERPOLATION_TOLERANCE = 1e-11
#: |s_i| where a coordinate of the saddle-to-saddle path may leave 0 (the flow's beta_i = 2 alpha^2 sinh(4 q_i))
THRESHOLD = 0.5


def regression_data(X, y) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (n, d) and ``y`` (n,) as finite float64 arrays with y in the range of X, or a ValueError naming the
    argument: the flow converges to an interpolator X beta = y only when one exists."""
    try:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("X and y must be real numbers: X of shape (n, d), y of shape (n,).") from None
    if X.ndim != 2 or 0 in X.shape:
        raise ValueError(f"X must be a non-empty 2-D array of shape (n, d) (samples in rows); got shape {X.shape}.")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (n,) = ({X.shape[0]},), one target per row of X; got shape {y.shape}.")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite (no NaN or inf entries).")
    U, S, _ = np.linalg.svd(X, full_matrices=False)
    span = U[:, :_rank(S, X.shape)]  # projected with orthonormal columns, the gap is rounding-free of cond(X)
    gap = np.linalg.norm(y - span @ (span.T @ y))
    if gap > INTERPOLATION_TOLERANCE * max(np.linalg.norm(y), 1e-300):
        raise ValueError(f"y must lie in the range of X (some beta with X beta = y): it is {gap:.3g} away "
                         f"({gap / np.linalg.norm(y):.3g} of ||y||). These references describe interpolating limits; "
                         "use d >= n features with X of full row rank, or pass y projected onto range(X) "
                         "(X @ lstsq(X, y)) if that is the problem you mean.")
    return X, y


def _rank(singular_values, shape) -> int:
    """The numerical rank: singular values above max(n, d) eps times the largest (numpy's matrix_rank rule)."""
    if singular_values[0] == 0:
        return 0
    return int(np.sum(singular_values > singular_values[0] * max(shape) * np.finfo(float).eps))


def _positive_alpha(alpha) -> float:
    if not is_real_number(alpha) or not np.isfinite(alpha) or not alpha > 0:
        raise ValueError(f"alpha must be a finite number > 0 (the init u = v = alpha); got {alpha!r}.")
    return float(alpha)


def _depth(depth) -> int:
    if not is_whole(depth, least=2):
        raise ValueError(f"depth must be an integer >= 2 (beta = u^depth - v^depth); got {depth!r}.")
    return int(depth)


@dataclass(frozen=True)
class _LinkFunction:
    r"""beta = F(w) on the flow's path, w = X^T nu for some nu, and Phi with Phi' = F (convex).

    From u' = -D u^(D-1) g, v' = D v^(D-1) g and q = -int g dt:
    D = 2: u^2 = alpha^2 e^(4q), v^2 = alpha^2 e^(-4q), so with w = 4q, F(w) = 2 alpha^2 sinh(w) and
    Phi(w) = 2 alpha^2 cosh(w);
    D >= 3: u^(2-D) = alpha^(2-D) - D(D-2) q, so with w = D(D-2) alpha^(D-2) q in (-1, 1),
    F(w) = alpha^D ((1-w)^(-k) - (1+w)^(-k)), k = D/(D-2), and Phi(w) = alpha^D (D-2)/2 ((1-w)^(2-k) + (1+w)^(2-k))
    (Phi is +inf outside (-1, 1), where the flow would have blown up).
    """

    alpha: float
    depth: int

    def phi(self, w):
        """Phi(w) - Phi(0), in forms that neither overflow nor cancel (for large alpha, w is tiny)."""
        if self.depth == 2:  # 2 alpha^2 (cosh w - 1) = 4 alpha^2 sinh(w/2)^2
            half = np.abs(w) / 2
            log_sinh = half + np.log1p(-np.exp(-2 * half)) - np.log(2)
            return np.exp(np.log(4) + 2 * np.log(self.alpha) + 2 * log_sinh)
        if np.any(np.abs(w) >= 1):
            return np.full_like(w, np.inf)
        m = 2 - self.depth / (self.depth - 2)
        return self.alpha**self.depth * (self.depth - 2) / 2 * (np.expm1(m * np.log1p(-w)) + np.expm1(m * np.log1p(w)))

    def beta(self, w):
        if self.depth == 2:  # 2 alpha^2 sinh(w)
            return np.sign(w) * np.exp(np.abs(w) + 2 * np.log(self.alpha)) * -np.expm1(-2 * np.abs(w))
        k = self.depth / (self.depth - 2)  # (1-w)^-k - (1+w)^-k = (1+w)^-k (e^(2k artanh w) - 1)
        return self.alpha**self.depth * (1 + w) ** -k * np.expm1(2 * k * np.arctanh(w))

    def slope(self, w):
        """F'(w) > 0."""
        if self.depth == 2:  # 2 alpha^2 cosh(w)
            return np.exp(np.logaddexp(w, -w) + 2 * np.log(self.alpha))
        k = self.depth / (self.depth - 2)
        return self.alpha**self.depth * k * ((1 - w) ** (-k - 1) + (1 + w) ** (-k - 1))


def implicit_regularizer_limit(X, y, alpha, depth=2) -> np.ndarray:
    r"""The limit of gradient flow on (1/2n) ||X beta - y||^2 for beta = u^depth - v^depth from u = v = alpha.

    It is the interpolator minimising Woodworth et al.'s (COLT 2020) Q_alpha: at depth 2,
    Q_alpha(beta) = alpha^2 sum_i q(beta_i / alpha^2), q(z) = 2 - sqrt(4 + z^2) + z arcsinh(z / 2); at
    depth D >= 3, Q = alpha^D sum_i q_D(beta_i / alpha^D) with q_D' the inverse of
    h_D(w) = (1 - w)^(-D/(D-2)) - (1 + w)^(-D/(D-2)). Large alpha gives the minimum-l2 interpolator, small alpha the
    minimum-l1 one. Solved through the dual: beta = F(X^T nu) (the flow's closed form, docs/theory.md 11) with nu
    minimising sum_i Phi((X^T nu)_i) - y . nu, Phi' = F, by Newton steps with backtracking on range(X) (at small
    alpha through a ladder of larger ones, each solve starting from the last). Float64 reaches every alpha down to
    1e-300 at depth 2; at depth D >= 3 only down to where 1 - |w| on the support, of the order of alpha^(D-2), is
    resolved (about 1e-4 at depth 3): below, a ValueError says so rather than return a worse answer.

    X need not be underdetermined: only y in the range of X is required. When X has full column rank the
    interpolator is unique and every alpha gives it.

    Args:
        X: (n, d) samples in rows.
        y: (n,) real targets, in the range of X.
        alpha: the init scale, u = v = alpha in every coordinate (> 0).
        depth: D >= 2.

    Returns:
        beta (d,), with ||X beta - y|| <= 1e-11 (||X||_2 ||beta|| + ||y||).

    Raises:
        ValueError: for a bad argument (named), and when float64 cannot reach that interpolation accuracy (a
            tiny alpha at depth >= 3).
    """
    X, y = regression_data(X, y)
    link = _LinkFunction(_positive_alpha(alpha), _depth(depth))
    if link.depth * np.log10(link.alpha) > 150:  # alpha^D scales the dual's Hessian, which must fit float64
        raise ValueError(f"alpha must have alpha^depth <= 1e150; got alpha = {alpha:g} at depth {depth}. The limit "
                         "there is the minimum-l2 interpolator, np.linalg.pinv(X) @ y, to float64 precision.")
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    rank = _rank(S, X.shape)
    if rank == 0 or not np.any(y):
        return np.zeros(X.shape[1])
    A = Vt[:rank].T * S[:rank]  # w = X^T nu = A c for nu = U_r c
    b = U[:, :rank].T @ y
    c = np.zeros(rank)
    for stage in _alpha_ladder(link.alpha):  # from 0, Newton loses its way below alpha ~ 1e-20 at depth 2
        stage_link = _LinkFunction(stage, link.depth)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # overshooting trials: inf, rejected
            c, message = _newton(lambda c, f=stage_link: f.phi(A @ c).sum() - b @ c,
                                 lambda c, f=stage_link: A.T @ f.beta(A @ c) - b,
                                 lambda c, f=stage_link: (A.T * f.slope(A @ c)) @ A, c,
                                 0.1 * INTERPOLATION_TOLERANCE * np.linalg.norm(y))
    beta = link.beta(A @ c)
    miss = _relative_miss(X, y, beta)
    if not miss <= INTERPOLATION_TOLERANCE:
        direction = "larger" if alpha < 1 else "smaller"
        raise ValueError(f"alpha = {alpha:g} at depth {depth} is out of float64's reach for these data: the dual solve "
                         f"ended with ||X beta - y|| = {miss:.2g} (||X|| ||beta|| + ||y||) ({message}). A tiny alpha at "
                         f"depth >= 3 or an ill-conditioned X (here cond(X) = {S[0] / S[rank - 1]:.2g}) does this; use "
                         f"a {direction} alpha or better-conditioned data.")
    return beta


def _alpha_ladder(alpha) -> list[float]:
    """alpha itself if >= 1e-2, else 1e-2, 1e-4, 1e-8, ... (log(1/alpha) doubling) down to alpha: each solve starts
    from the last one's answer."""
    ladder, stage = [], 1e-2
    while stage > alpha:
        ladder.append(stage)
        stage *= stage
    return [*ladder, alpha]


def _newton(objective, gradient, hessian, start, gtol, max_steps=200) -> tuple[np.ndarray, str]:
    """Minimise a smooth, strictly convex ``objective`` from ``start`` by Newton steps with backtracking: a step
    is taken when the objective drops enough (Armijo) or, near the optimum where the objective's rounding hides
    the drop, when the gradient's norm drops. Returns the point and how the search ended."""
    x, grad = start, gradient(start)
    for _ in range(max_steps):
        if np.linalg.norm(grad) <= gtol:
            return x, "converged"
        step = np.linalg.lstsq(hessian(x), -grad, rcond=None)[0]  # the Hessian can be ill-conditioned, not singular
        value, length = objective(x), 1.0
        while True:
            trial = x + length * step
            if np.array_equal(trial, x):
                return x, "stalled at float64 resolution"
            trial_value = objective(trial)
            if np.isfinite(trial_value):
                trial_grad = gradient(trial)
                if trial_value <= value + 1e-4 * length * grad @ step or np.linalg.norm(trial_grad) < np.linalg.norm(grad):
                    break
            length /= 2
        x, grad = trial, trial_grad
    return x, f"no convergence in {max_steps} Newton steps"


@dataclass(frozen=True, eq=False, repr=False)
class SaddleToSaddle:
    """The alpha -> 0 limit of the depth-2 flow in rescaled time t~ = t / log(1/alpha) (:func:`saddle_to_saddle`).

    beta is ``plateaus[k]`` for t~ in [``jump_times[k-1]``, ``jump_times[k]``) (``plateaus[0]`` = 0, from t~ = 0;
    the last plateau for ever after the last jump); s, the flow's -int grad L dt / log(1/alpha), moves linearly
    with slope ``s_slopes[k]`` = -grad L(``plateaus[k]``) from ``s_at_jumps[k]``, its value at the start of the
    plateau. A coordinate is nonzero only where |s_i| = ``threshold``.
    """

    jump_times: np.ndarray
    plateaus: np.ndarray
    s_at_jumps: np.ndarray
    s_slopes: np.ndarray
    threshold: float

    def _plateau_index(self, rescaled_time) -> np.ndarray:
        rescaled_time = np.asarray(rescaled_time, dtype=np.float64)
        if np.any(rescaled_time < 0) or not np.all(np.isfinite(rescaled_time)):
            raise ValueError("rescaled_time must be finite and >= 0 (t~ = t / log(1/alpha)).")
        return np.searchsorted(self.jump_times, rescaled_time, side="right")

    def beta(self, rescaled_time) -> np.ndarray:
        """beta at the rescaled time(s) t~ (shape (d,), or (k, d) for k times)."""
        return self.plateaus[self._plateau_index(rescaled_time)]

    def s(self, rescaled_time) -> np.ndarray:
        """s at the rescaled time(s) t~ (shape (d,), or (k, d) for k times)."""
        index = self._plateau_index(rescaled_time)
        start = np.concatenate([[0.0], self.jump_times])[index]
        elapsed = np.asarray(rescaled_time, dtype=np.float64) - start
        return self.s_at_jumps[index] + elapsed[..., None] * self.s_slopes[index]

    def __repr__(self):
        starts = np.concatenate([[0.0], self.jump_times])
        lines = [f"SaddleToSaddle(d={self.plateaus.shape[1]}, {len(self.jump_times)} jumps, threshold {self.threshold:g})"]
        for start, plateau in zip(starts, self.plateaus, strict=True):
            support = np.flatnonzero(plateau)
            values = ", ".join(f"beta_{j + 1} = {plateau[j]:.6g}" for j in support) or "beta = 0"
            lines.append(f"  t~ >= {start:.6g}: {values}")
        return "\n".join(lines)


def saddle_to_saddle(X, y, max_jumps=1000) -> SaddleToSaddle:
    r"""Pesme and Flammarion's (NeurIPS 2023) saddle-to-saddle path: the alpha -> 0 limit of gradient flow on
    (1/2n) ||X beta - y||^2 for beta = u^2 - v^2 from u = v = alpha, in rescaled time t~ = t / log(1/alpha).

    The flow's closed form beta_i = 2 alpha^2 sinh(4 q_i), q = -int grad L dt, reads with s = q / log(1/alpha):
    ds/dt~ = -grad L(beta), and beta_i = sign(s_i) alpha^(2 - 4|s_i|) (1 + o(1)), which vanishes with alpha while
    |s_i| < 1/2 and cannot pass |s_i| = 1/2 while L stays bounded (docs/theory.md 11). Their algorithm: between
    jumps beta minimises L with beta_i >= 0 where s_i = 1/2, beta_i <= 0 where s_i = -1/2 and beta_i = 0 elsewhere
    (non-negative least squares), and s moves linearly; the next jump is the first time another |s_i| reaches
    1/2. A coordinate whose constrained solution is 0 while its gradient points back inside leaves the threshold
    there. The last plateau is the minimum-l1 interpolator (when that is unique), with s / (1/2) its dual
    certificate.

    Args:
        X: (n, d) samples in rows, in general position (every constrained least-squares problem on the way has
            one solution).
        y: (n,) real targets, in the range of X.
        max_jumps: how many jumps to follow before giving up.

    Returns:
        The path: jump times, plateaus, and s.

    Raises:
        ValueError: for a bad argument (named), data not in general position, or a path longer than
            ``max_jumps``.
    """
    X, y = regression_data(X, y)
    if not is_whole(max_jumps):
        raise ValueError(f"max_jumps must be an integer >= 1; got {max_jumps!r}.")
    n, d = X.shape
    zero_gradient = 1e-10 * max(np.abs(X.T @ y).max() / n, 1e-300)  # below it a gradient entry is rounding
    signs, s, t = np.zeros(d), np.zeros(d), 0.0
    times, plateaus, s_starts, slopes = [], [np.zeros(d)], [s], []
    for _ in range(max_jumps + 1):
        slope = -X.T @ (X @ plateaus[-1] - y) / n
        slope[np.abs(slope) <= zero_gradient] = 0.0
        slopes.append(slope)
        moving = (slope != 0) & (signs != np.sign(slope))  # at the threshold, only inward motion is possible
        if not moving.any():
            _check_interpolates(X, y, plateaus[-1])
            return SaddleToSaddle(np.array(times), np.array(plateaus), np.array(s_starts), np.array(slopes), THRESHOLD)
        reach = np.full(d, np.inf)
        reach[moving] = (THRESHOLD - np.sign(slope[moving]) * s[moving]) / np.abs(slope[moving])
        step = reach.min()
        hitting = reach <= step * (1 + 1e-12)
        t += step
        signs = np.where(hitting, np.sign(slope), np.where(moving, 0.0, signs))
        s = np.where(signs != 0, THRESHOLD * signs, np.clip(s + step * slope, -THRESHOLD, THRESHOLD))
        times.append(t)
        plateaus.append(_sign_constrained_least_squares(X, y, signs))
        s_starts.append(s)
    raise ValueError(f"the path has more than max_jumps = {max_jumps} jumps; pass a larger max_jumps.")


def _relative_miss(X, y, beta) -> float:
    """||X beta - y|| on the scale of its rounding, ||X||_2 ||beta|| + ||y||."""
    return float(np.linalg.norm(X @ beta - y) / (np.linalg.norm(X, 2) * np.linalg.norm(beta) + np.linalg.norm(y)))


def _check_interpolates(X, y, beta):
    """The path ends where grad L is 0 to rounding, which for y in range(X) is an interpolator: a ValueError if the
    gradient's rounding threshold hid a residual (X so ill-conditioned that a small gradient is a large miss)."""
    miss = _relative_miss(X, y, beta)
    if miss > 1e-8:
        raise ValueError(f"the path stopped where the gradient is below rounding but ||X beta - y|| = {miss:.2g} "
                         "(||X|| ||beta|| + ||y||): X is too ill-conditioned (condition number "
                         f"{np.linalg.cond(X):.2g}) for this reference; rescale or drop nearly dependent rows.")


def _sign_constrained_least_squares(X, y, signs) -> np.ndarray:
    """argmin ||X beta - y|| over beta with sign(beta_i) in {0, signs_i} (beta_i = 0 where signs_i = 0)."""
    free = np.flatnonzero(signs)
    columns = X[:, free] * signs[free]
    if np.linalg.matrix_rank(columns) < len(free):
        raise ValueError(f"X and y are not in general position: coordinates {(free + 1).tolist()} reach the "
                         "threshold together with linearly dependent columns, so the constrained least-squares "
                         "plateau is not unique. Perturb X slightly.")
    magnitudes, _ = nnls(columns, y)
    beta = np.zeros(X.shape[1])
    beta[free] = signs[free] * magnitudes
    return beta
