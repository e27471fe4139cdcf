r"""Diagonal linear networks: the map from parameters theta (layers x coordinates) to beta.

Coordinates never mix inside the model, so each form is one scalar formula
:math:`\beta_j = f(w_{1j}, \dots, w_{Kj})` that sympy differentiates once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

FORMS = ("product", "tied", "difference")


@dataclass(frozen=True)
class DiagonalNet:
    r"""Depth-L diagonal linear network.

    - ``form="product"``:    :math:`\beta = w_1 \odot \cdots \odot w_L` (L layers),
    - ``form="tied"``:       :math:`\beta = w^{L}` (one shared vector),
    - ``form="difference"``: :math:`\beta = u^{L} - v^{L}` (two vectors; any sign pattern).

    ``DiagonalNet(depth=1)`` is the linear model (see :func:`Linear`).
    """

    depth: int = 2
    form: str = "product"

    def __post_init__(self):
        if isinstance(self.depth, bool) or not isinstance(self.depth, (int, np.integer)) or self.depth < 1:
            raise ValueError(f"depth must be an integer >= 1 (depth=1 is the linear model); got {self.depth!r}.")
        if self.form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}; got {self.form!r}.")
        object.__setattr__(self, "depth", int(self.depth))

    @property
    def n_layers(self) -> int:
        return {"product": self.depth, "tied": 1, "difference": 2}[self.form]

    @property
    def layer_names(self) -> tuple[str, ...]:
        if self.form == "difference":
            return ("u", "v")
        if self.form == "tied" or self.depth == 1:
            return ("w",)
        return tuple(f"w{k + 1}" for k in range(self.depth))

    def beta_expr(self, w: tuple[sp.Symbol, ...]) -> sp.Expr:
        """The scalar formula beta_j in terms of this coordinate's layer entries ``w``."""
        L = self.depth
        if self.form == "product":
            return sp.Mul(*w)
        if self.form == "tied":
            return w[0] ** L
        return w[0] ** L - w[1] ** L

    def init_params(self, init, d: int) -> np.ndarray:
        """Initial parameters of shape (n_layers, d) from a scalar alpha, a (d,) vector used in every
        layer, or a full (n_layers, d) array."""
        a = np.asarray(init, dtype=np.float64)
        K = self.n_layers
        if a.ndim == 0:
            a = np.full((K, d), float(a))
        elif a.shape == (d,):
            a = np.tile(a, (K, 1))
        elif a.shape != (K, d):
            raise ValueError(
                f"init must be a scalar alpha, an array of shape (d,) = ({d},), or one of shape "
                f"(n_layers, d) = ({K}, {d}) for {self}; got shape {a.shape}."
            )
        if not np.all(np.isfinite(a)):
            raise ValueError("init contains NaN or inf.")
        return np.array(a)

    def __str__(self) -> str:
        return "Linear()" if self.depth == 1 and self.form == "product" else f"DiagonalNet(depth={self.depth}, form={self.form!r})"


def Linear() -> DiagonalNet:
    """The linear model beta = w (a depth-1 diagonal network)."""
    return DiagonalNet(depth=1, form="product")
