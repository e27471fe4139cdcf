r"""Parametrisations theta -> beta whose coordinates never mix: one scalar formula per coordinate,
:math:`\beta_j = f(w_{1j}, \dots, w_{Kj})`, that sympy differentiates once.

:class:`Parametrization` takes the formula from the user; :class:`DiagonalNet` (and ``Linear()``) are
instances of it whose formulas flowsim knows more about (balanced starts, reachable signs:
docs/theory.md 9).
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

import numpy as np
import sympy as sp

from flowsim._checks import fits_float64, is_whole, refuse_masked
from flowsim.symbolic.expression import ExpressionError, parse

FORMS = ("product", "tied", "difference")
#: the most layers a model has: derive differentiates beta in each and expands the products of the others (24
#: layers of a product took 30 s, 60 did not finish)
MAX_LAYERS = 16
#: names the derivation gives its own symbols (a layer named like one would shadow it in generated code)
RESERVED = frozenset({"r", "N", "S", "n", "m", "beta", "sigma", "rho", "tau", "t"})


@dataclass(frozen=True, init=False)
class Parametrization:
    r"""A model :math:`\beta_j = f(w_{1j}, \dots, w_{Kj})` applied to every coordinate j.

    ``layers``: their number K (named ``w`` for one, ``w1..wK`` for more) or a tuple of names.
    ``beta``: a Python callable on the K sympy symbols, or a sympy expression in symbols with the layer
    names. Example, a second layer squared::

        fs.Parametrization("w1 w2^2", 2, lambda a, b: a * b**2)

    Initial parameters (``init`` of :func:`flowsim.solve`): a scalar alpha for every entry, a (d,)
    vector used in every layer, or a (layers, d) array. Reachable signs are derived from the formula
    (:func:`flowsim.reachable_signs`): beta >= 0 if the formula is non-negative for every real input,
    and under gradient-following flows an entry whose field vanishes on its zero plane keeps its sign.
    """

    name: str
    layers: tuple
    beta: sp.Expr

    def __init__(self, name, layers, beta):
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string; got {name!r}.")
        names = _layer_names(layers)
        symbols = tuple(sp.Symbol(n, real=True) for n in names)
        expr = _beta_expression(beta, names, symbols)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "layers", names)
        object.__setattr__(self, "beta", expr)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def layer_names(self) -> tuple[str, ...]:
        return self.layers

    @property
    def symbols(self) -> tuple[sp.Symbol, ...]:
        return tuple(sp.Symbol(n, real=True) for n in self.layers)

    def beta_expr(self, w: tuple[sp.Symbol, ...]) -> sp.Expr:
        """The scalar formula beta_j in terms of this coordinate's layer entries ``w``."""
        return self.beta.xreplace(dict(zip(self.symbols, w)))

    def init_params(self, init, d: int) -> np.ndarray:
        """Initial parameters of shape (n_layers, d) from a scalar alpha, a (d,) vector used in every
        layer, or a full (n_layers, d) array."""
        refuse_masked("init", init)
        try:
            a = np.asarray(init, dtype=np.float64)
        except OverflowError:
            raise ValueError("init holds a number beyond float64's range (about 1.8e308).") from None
        except (TypeError, ValueError):
            raise ValueError(f"init must be numbers (a scalar alpha, a (d,) vector or (n_layers, d) parameters); "
                             f"got {init!r}.") from None
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
        if not np.isfinite(a).all():
            raise ValueError("init contains NaN or inf.")
        return np.array(a)

    def __str__(self) -> str:
        return f"Parametrization({self.name!r}, beta = {self.beta})"


def _layer_names(layers) -> tuple[str, ...]:
    if isinstance(layers, (int, np.integer)) and not isinstance(layers, bool):
        if not 1 <= layers <= MAX_LAYERS:
            raise ValueError(f"layers must be a count in [1, {MAX_LAYERS}] (derive expands a formula per layer; more "
                             f"do not finish); got {layers}.")
        return ("w",) if layers == 1 else tuple(f"w{k + 1}" for k in range(int(layers)))
    if not isinstance(layers, (tuple, list)) or not 1 <= len(layers) <= MAX_LAYERS \
            or not all(isinstance(n, str) for n in layers):
        raise ValueError(f"layers must be a count in [1, {MAX_LAYERS}] or a tuple of at most {MAX_LAYERS} layer names; "
                         f"got {layers!r}.")
    bad = [n for n in layers if not n.isidentifier() or keyword.iskeyword(n) or n in RESERVED]
    if bad or len(set(layers)) != len(layers):
        raise ValueError(f"layer names must be distinct Python identifiers other than {sorted(RESERVED)}; "
                         f"got {tuple(layers)!r}.")
    # a layer named exp or sign shadowed that function in the generated code (a TypeError under USAM)
    shadowing = [n for n in layers if hasattr(np, n) or hasattr(sp, n)]
    if shadowing:
        raise ValueError(f"layer names {shadowing} are names of numpy or sympy (functions or constants the generated "
                         "code uses); rename them (e.g. w1, w2, u, v).")
    return tuple(layers)


def _beta_expression(beta, names, symbols) -> sp.Expr:
    if callable(beta) and not isinstance(beta, sp.Basic):
        try:
            expr = sp.sympify(beta(*symbols))
        except Exception as e:  # the user's callable: say which call failed and why
            raise ValueError(f"beta({', '.join(names)}) raised {type(e).__name__}: {e}. beta must take one "
                             "sympy symbol per layer and return a sympy expression.") from None
    else:
        by_name = dict(zip(names, symbols))
        try:
            expr = parse(beta, by_name) if isinstance(beta, str) else sp.sympify(beta, strict=True)
        except ExpressionError as e:
            raise ValueError(f"beta: {e}") from None
        except (sp.SympifyError, TypeError):
            raise ValueError(f"beta must be a callable, a sympy expression or a formula in {names}; got {beta!r}.") from None
        strangers = sorted(str(s) for s in expr.free_symbols if s.name not in by_name)
        if strangers:
            raise ValueError(f"beta uses {strangers}, which are not layer names {names}.")
        expr = expr.xreplace({s: by_name[s.name] for s in expr.free_symbols})
    if not isinstance(expr, sp.Expr) or expr.free_symbols - set(symbols):
        raise ValueError(f"beta must be an expression in the layer entries {names}; got {expr!r}.")
    if expr.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or not all(fits_float64(a) for a in expr.atoms(sp.Number)):
        raise ValueError(f"beta must be finite for finite layer entries, with constants float64 can hold; got {sp.N(expr, 4)}.")
    if expr.has(sp.I) or expr.is_real is False:  # (accepted, it failed in the solve as a ufunc TypeError)
        raise ValueError(f"beta must be real for real layer entries; got {expr}.")
    unused = [n for n, s in zip(names, symbols) if s not in expr.free_symbols]
    if unused:
        raise ValueError(f"beta does not depend on layer(s) {unused}: such a layer never moves; drop it.")
    return expr


class DiagonalNet(Parametrization):
    r"""Depth-L diagonal linear network, an instance of :class:`Parametrization`:

    - ``form="product"``:    :math:`\beta = w_1 \odot \cdots \odot w_L` (L layers),
    - ``form="tied"``:       :math:`\beta = w^{L}` (one shared vector),
    - ``form="difference"``: :math:`\beta = u^{L} - v^{L}` (two vectors; any sign pattern).

    ``DiagonalNet(depth=1)`` is the linear model (see :func:`Linear`).
    """

    def __init__(self, depth: int = 2, form: str = "product"):
        if not is_whole(depth):
            raise ValueError(f"depth must be an integer >= 1 (depth=1 is the linear model); got {depth!r}.")
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}; got {form!r}.")
        if form == "product" and depth > MAX_LAYERS:
            raise ValueError(f"depth must be at most {MAX_LAYERS} for form='product' (a layer per factor: derive "
                             f"expands a formula per layer, and more do not finish); got {depth}. From equal layers "
                             "(which stay equal) the product runs as form='tied', beta = w^depth in one layer.")
        depth = int(depth)
        if form == "difference":
            layers, beta = ("u", "v"), lambda u, v: u**depth - v**depth
        elif form == "tied" or depth == 1:
            layers, beta = ("w",), lambda w: w**depth
        else:
            layers, beta = depth, lambda *w: sp.Mul(*w)
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "form", form)
        super().__init__(f"{form} depth {depth}", layers, beta)

    def __reduce__(self):
        return (DiagonalNet, (self.depth, self.form))

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return "Linear()" if self.depth == 1 and self.form == "product" else f"DiagonalNet(depth={self.depth}, form={self.form!r})"


def Linear() -> DiagonalNet:
    """The linear model beta = w (a depth-1 diagonal network)."""
    return DiagonalNet(depth=1, form="product")
