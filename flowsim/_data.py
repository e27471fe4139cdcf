"""Binary classification data sets: validation and the LP separability check."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.optimize import linprog


@dataclass(frozen=True, eq=False)
class Dataset:
    r"""Samples ``X`` (n, d) with labels ``y`` in {+1, -1}.

    ``z = y[:, None] * X`` holds the signed samples :math:`z_i = y_i x_i`; margins are
    :math:`m = Z \beta`. ``is_separable`` solves the LP feasibility problem
    :math:`Z \beta \ge 1` (scipy HiGHS), which has a solution iff the data are linearly separable
    through the origin.
    """

    X: np.ndarray
    y: np.ndarray
    z: np.ndarray = field(init=False, repr=False)

    def __init__(self, X, y=None):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(
                f"X must be a non-empty 2-D array of shape (n_samples, n_features); got shape {X.shape}."
            )
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or inf; clean or drop those samples before building a Dataset.")
        y = np.ones(X.shape[0]) if y is None else np.asarray(y, dtype=np.float64).reshape(-1)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have one label per row of X: X has {X.shape[0]} rows, y has shape {y.shape}.")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or inf; labels must be +1 or -1.")
        if not np.all(np.isin(y, (-1.0, 1.0))):
            bad = np.unique(y[~np.isin(y, (-1.0, 1.0))])[:5]
            hint = " For 0/1 labels pass y = 2*y - 1." if set(np.unique(y)) <= {0.0, 1.0} else ""
            raise ValueError(f"y must contain only +1 and -1; found {bad.tolist()}.{hint}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "z", y[:, None] * X)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @cached_property
    def is_separable(self) -> bool:
        res = linprog(
            np.zeros(self.d), A_ub=-self.z, b_ub=-np.ones(self.n),
            bounds=[(None, None)] * self.d, method="highs",
        )
        return bool(res.status == 0)

    def __repr__(self) -> str:
        return f"Dataset(n={self.n}, d={self.d})"
