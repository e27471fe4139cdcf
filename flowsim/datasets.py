"""Seeded data sets of seed 002 (arXiv 2510.26303) and one bundled real set.

- ``scaled_rademacher(n, d)``: x_i = a_i (+-1, ..., +-1): every sample has equal absolute coordinates,
  so the per-sample Adam metric is a multiple of I and its limit is the l2 max-margin (Thm 3.3);
- ``gaussian_clusters(n, d)``: two Gaussian clusters at +-mean, labels by cluster;
- ``shifted_diagonal(n, d)``: x_i = y_i (s e_{i mod d} + shift 1) with small noise, a set on which the
  l2, l_inf and per-sample-Adam limits differ;
- ``iid_gaussian(n, d)``: x_i ~ N(0, I_d), labels from a random direction; at n = 10, d = 20 the l2,
  l_inf and per-sample-Adam limits are pairwise far apart (cosines <= 0.95), so it tells them apart
  where the three sets above each coincide with one of them;
- ``digits(a, b)``: two classes of sklearn's bundled 8x8 digits (no download), pixels in [0, 1].
"""

from __future__ import annotations

import numpy as np

from flowsim._checks import is_whole
from flowsim.data import Dataset

#: the most entries (n x d) a generated set may have: 8e8 bytes (a bigger one was a MemoryError traceback)
MAX_ENTRIES = 10**8


def _rng(n, d, seed):
    """The generator of a set of n samples in d dimensions, after checking the three."""
    for name, v in (("n", n), ("d", d)):
        if not is_whole(v):
            raise ValueError(f"{name} must be an integer >= 1; got {v!r}.")
    if n * d > MAX_ENTRIES:
        raise ValueError(f"n x d = {n} x {d} = {n * d:.3g} entries; at most {MAX_ENTRIES:.0e} (8 bytes each) "
                         "are drawn.")
    if not (seed is None or is_whole(seed, least=0)):
        raise ValueError(f"seed must be an integer >= 0 (or None: fresh entropy); got {seed!r}.")
    return np.random.default_rng(seed)


def _labels(rng, n):
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    rng.shuffle(y)
    return y


def scaled_rademacher(n: int = 10, d: int = 5, seed: int = 0, scale=(0.5, 2.0)) -> Dataset:
    """n samples x_i = a_i s_i, s_i in {-1, +1}^d uniform, a_i ~ U(scale); labels from a random
    direction (so the set is separable)."""
    rng = _rng(n, d, seed)
    X = rng.uniform(*scale, size=n)[:, None] * rng.choice([-1.0, 1.0], size=(n, d))
    y = np.sign(X @ rng.normal(size=d))
    y[y == 0] = 1.0
    return Dataset(X, y)


def gaussian_clusters(n: int = 10, d: int = 5, seed: int = 0, separation: float = 2.0) -> Dataset:
    """Two clusters N(+-separation * u, I) with a random unit u; label = cluster; resampled until
    separable through the origin."""
    rng = _rng(n, d, seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    for _ in range(100):
        y = _labels(rng, n)
        X = y[:, None] * separation * u + rng.normal(size=(n, d))
        data = Dataset(X, y)
        if data.is_separable:
            return data
    raise RuntimeError("could not draw a separable Gaussian set; raise separation.")


def shifted_diagonal(n: int = 10, d: int = 5, seed: int = 0, scale: float = 1.0, shift: float = 0.2,
                     noise: float = 0.05) -> Dataset:
    """x_i = y_i (scale e_{i mod d} + shift 1) + noise: each coordinate carried mostly by its own
    samples, shifted off the axes."""
    rng = _rng(n, d, seed)
    y = _labels(rng, n)
    E = np.eye(d)[np.arange(n) % d]
    X = y[:, None] * (scale * E + shift) + noise * rng.normal(size=(n, d))
    return Dataset(X, y)


def iid_gaussian(n: int = 10, d: int = 20, seed: int = 0) -> Dataset:
    """n samples x_i ~ N(0, I_d), y_i = sign(<w, x_i>) for a random w (separable through the origin)."""
    rng = _rng(n, d, seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = np.sign(X @ w)
    y[y == 0] = 1.0
    return Dataset(X, y)


def digits(a: int = 0, b: int = 1) -> Dataset:
    """sklearn's bundled 8x8 digits, classes ``a`` (+1) and ``b`` (-1), pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    if not all(is_whole(c, least=0) and c <= 9 for c in (a, b)) or a == b:  # (a == b: one class against itself)
        raise ValueError(f"a and b must be two different digits 0..9; got a={a!r}, b={b!r}.")

    X, t = load_digits(return_X_y=True)
    keep = (t == a) | (t == b)
    return Dataset(X[keep] / 16.0, np.where(t[keep] == a, 1.0, -1.0))
