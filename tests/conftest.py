import hashlib
import os
import sys
import tempfile

import numpy as np
import pytest

# the test processes (xdist workers) share one JAX cache, kept between runs, apart from the user's
# (~/.cache/flowsim/jax) and from other environments' test runs (named after this venv): a kernel one worker
# compiled the other loads. flowsim bounds the compile cache so that JAX reads and writes it under the folder's
# file lock (tests/test_jax_setup.py); exported kernels are written whole and renamed. An explicit
# FLOWSIM_JAX_CACHE is kept.
os.environ.setdefault("FLOWSIM_JAX_CACHE", os.path.join(tempfile.gettempdir(), "flowsim-test-jax-cache-{}".format(
    hashlib.sha256(sys.prefix.encode()).hexdigest()[:12])))

import flowsim as fs  # noqa: E402 (after the cache folder is chosen)

BACKENDS = ["diffrax:Tsit5", "scipy:DOP853"]


@pytest.fixture(scope="session")
def one_sample():
    """The running example of arXiv 2603.08290: one sample mu = (1, 2), label +1."""
    return fs.Dataset(np.array([[1.0, 2.0]]), [1.0])


def separable(n, d, seed=0, positive=True):
    """Random data separable by a positive (positive=True) or arbitrary direction, with a margin."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 1.5, d) if positive else rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = np.sign(X @ w)
    X = X + 0.3 * y[:, None] * w / np.linalg.norm(w)  # push away from the boundary
    return fs.Dataset(X, y)


def separated_draw(r, n, d, gap=0.05):
    """Labels from a random direction w, the data redrawn until every |x . w| > gap: the random cases of
    issue 12 (seeded reproducers draw from ``r`` in this order)."""
    while True:
        w, X = r.normal(size=d), r.normal(size=(n, d))
        if np.min(np.abs(X @ w)) > gap:
            return fs.Dataset(X, np.sign(X @ w))
