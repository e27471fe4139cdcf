r"""Which sign patterns of beta a model can reach from its initialisation (docs/theory.md 9).

Derived from the model's formula :math:`\beta_j = f(w_{1j}, \dots, w_{Kj})`:

- f >= 0 for every real input (tied :math:`w^L` at even L): :math:`\beta \ge 0` always; likewise <= 0.
- Under flows that follow the gradient (``Flow.follows_gradient``: GD, USAM, lp-SAM and steepest descent with
  p finite, ASAM, and NormalizedGD, whose schedule clock only scales the field), an entry's field carries
  :math:`\partial f/\partial w_k` at the evaluation point, whose perturbation vanishes with the gradient.
  Where :math:`\partial f/\partial w_k = 0` on the plane :math:`w_k = 0` (tied and difference nets at depth >=
  2), that plane is invariant: the entry keeps its initial sign for ever (and stays 0 if it starts there). If
  every entry of a coordinate keeps its sign, beta_j keeps the sign f has on that orthant, when f has one
  there.
- Product networks :math:`w_1 \cdots w_L`, coordinate j whose layers start equal: the layers stay equal
  under every flow here (layer symmetry), so at even L :math:`\beta_j \ge 0`. Under the gradient-
  following flows, layers of equal magnitude keep equal magnitudes (flip the sign of a layer and of
  :math:`z_{:j}` together: a symmetry of these flows), so :math:`\beta_j` keeps its initial sign.
  This rule is the product form's own; it is not derived for other formulas.

- A coordinate whose every df/dw_k is 0 at the start (two zero layers of a depth-3 product) has a zero
  gradient under the gradient-following flows, its perturbation too: it never moves.

Where none applies the coordinate is free. Sign and Adam-proxy flows can leave :math:`w = 0` through a
sliding mode, so only the formula's own sign and the layer-symmetry rule are used for them.
"""

from __future__ import annotations

from functools import lru_cache

import mpmath
import numpy as np
import sympy as sp

from flowsim.symbolic.flow import Flow, commutes_with_sign_flips
from flowsim.symbolic.model import DiagonalNet, Parametrization


@lru_cache(maxsize=None)
def invariant_planes(model) -> tuple[bool, ...]:
    """Per layer: is the plane w_k = 0 invariant under gradient-following flows (df/dw_k = 0 there)?"""
    w = model.symbols
    return tuple(sp.simplify(sp.diff(model.beta, x).xreplace({x: 0})) == 0 for x in w)


@lru_cache(maxsize=None)
def _even_in(model) -> tuple[bool, ...]:
    w = model.symbols
    return tuple(sp.simplify(model.beta.xreplace({x: -x}) - model.beta) == 0 for x in w)


@lru_cache(maxsize=None)
def _sign_on(model, signs: tuple) -> float:
    """The sign f has wherever each entry has the sign in ``signs`` (0: the entry is 0), nan if none."""
    xs = sp.symbols(f"x0:{len(signs)}", real=True)
    e = model.beta.xreplace({w: s * sp.exp(x) for w, s, x in zip(model.symbols, signs, xs)})
    if e == 0:
        return 0.0
    return 1.0 if e.is_positive else -1.0 if e.is_negative else float("nan")


def reachable_signs(model, theta0, flow) -> np.ndarray:
    """Per coordinate: +1 (beta_j >= 0 for ever), -1 (<= 0), 0 (= 0) or nan (either sign). ``theta0``: the
    parameters, (layers, d) (``model.init_params(alpha, d)`` makes them from a scalar or a (d,) init)."""
    if not isinstance(model, Parametrization):
        raise ValueError(f"model must be a flowsim model (fs.DiagonalNet(...), fs.Linear(), ...); got {model!r}.")
    if not isinstance(flow, Flow):
        raise ValueError(f"flow must be a flowsim flow (fs.GD(), fs.SAM(rho), ...); got {flow!r}.")
    theta0 = np.asarray(theta0, float)
    if theta0.ndim != 2 or theta0.shape[0] != model.n_layers or not np.isfinite(theta0).all():
        raise ValueError(f"theta0 must be finite parameters of shape (layers, d) = ({model.n_layers}, d) for {model}; "
                         f"got shape {theta0.shape} (model.init_params(alpha, d) makes them from an init).")
    return _reachable_signs(model, flow, *start_key(theta0)).copy()


#: starts whose answers are kept (per model and flow): a solve asks them of its start on every call
STARTS_KEPT = 64


def start_key(theta0) -> tuple:
    """A start (layers, d) as a hashable key of its exact values: its shape and its float64 bytes."""
    theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
    return theta0.shape, theta0.tobytes()


def start_of(shape, raw) -> np.ndarray:
    """The start a ``start_key`` holds (read-only)."""
    return np.frombuffer(raw, dtype=np.float64).reshape(shape)


@lru_cache(maxsize=STARTS_KEPT)
def _reachable_signs(model, flow, shape, raw) -> np.ndarray:
    theta0 = start_of(shape, raw)
    K, d = theta0.shape
    if model.beta.is_nonnegative or model.beta.is_nonpositive:
        return np.full(d, 1.0 if model.beta.is_nonnegative else -1.0)
    signs = np.full(d, np.nan)
    if flow.follows_gradient and all(invariant_planes(model)):  # every entry keeps its sign
        for j in range(d):
            signs[j] = _sign_on(model, tuple(int(s) for s in np.sign(theta0[:, j])))
    if isinstance(model, DiagonalNet) and model.form == "product" and model.depth >= 2:
        signs = _layer_symmetry(theta0, flow, model.depth, signs)
    elif K >= 2 and _symmetric_in_layers(model):  # a model of your own, symmetric in its layers (w1 * w2)
        equal = np.all(theta0 == theta0[:1], axis=0) & np.isnan(signs)
        signs[equal] = _sign_with_layers_equal(model)
    if flow.follows_gradient:
        # every df/dw_k = 0 at the start (two zero layers of a depth-3 product): the coordinate's gradient is 0
        # at any data, its entries' perturbation too, so it never moves (its beta_j is free by the rules above)
        for j in np.flatnonzero(_rounded_frozen(model, theta0)):
            if not any(_partials_mp(model)(*_exact(theta0[:, j]))):  # not ``underflowing``: frozen exactly
                signs[j] = float(mpmath.sign(_value_mp(model)(*_exact(theta0[:, j]))))
    return signs


def underflowing(model, theta0) -> np.ndarray:
    """Per coordinate of ``theta0`` (layers, d): every df/dw_k rounds to 0 in float64 while its exact value does
    not (a depth-3 product from 1e-250: w^2 = 1e-500), so a float64 field holds the coordinate still where the
    exact flow moves it."""
    return _underflowing(model, *start_key(theta0)).copy()


@lru_cache(maxsize=STARTS_KEPT)
def _underflowing(model, shape, raw) -> np.ndarray:
    theta0 = start_of(shape, raw)
    out = _rounded_frozen(model, theta0)
    for j in np.flatnonzero(out):
        out[j] = any(_partials_mp(model)(*_exact(theta0[:, j])))
    return out


def _exact(entries) -> list:
    """A coordinate's layer entries as mpmath numbers, whose products do not underflow."""
    return [mpmath.mpf(float(x)) for x in entries]


def _rounded_frozen(model, theta0) -> np.ndarray:
    """Per coordinate: every df/dw_k evaluates to 0 in float64 (exactly 0, or underflowed)."""
    with np.errstate(under="ignore"):
        partials = [np.broadcast_to(np.asarray(p, float), theta0.shape[1:]) for p in _partials(model)(*theta0)]
    return np.all(np.array(partials) == 0, axis=0)


@lru_cache(maxsize=None)
def _partials(model):
    """NumPy function of the layers' entries: df/dw_k for every k."""
    return sp.lambdify(model.symbols, [sp.diff(model.beta, x) for x in model.symbols], "numpy")


@lru_cache(maxsize=None)
def _partials_mp(model):
    """mpmath function of the layers' entries: df/dw_k for every k (an exponent range float64 lacks)."""
    return sp.lambdify(model.symbols, [sp.diff(model.beta, x) for x in model.symbols], "mpmath")


@lru_cache(maxsize=None)
def _value_mp(model):
    return sp.lambdify(model.symbols, model.beta, "mpmath")


@lru_cache(maxsize=None)
def _symmetric_in_layers(model) -> bool:
    """beta unchanged by swapping any two layers: every flow here acts entry by entry with the same rule in
    each layer, so layers that start equal stay equal."""
    w = model.symbols
    return all(sp.simplify(model.beta.xreplace({a: b, b: a}) - model.beta) == 0 for a, b in zip(w, w[1:]))


@lru_cache(maxsize=None)
def _sign_with_layers_equal(model) -> float:
    """The sign beta keeps on the set where every layer is equal (beta(w, ..., w)), nan if it has none."""
    w = model.symbols
    x = sp.Symbol("x", real=True)
    tied = model.beta.xreplace({v: x for v in w})
    return 1.0 if tied.is_nonnegative else -1.0 if tied.is_nonpositive else float("nan")


def _layer_symmetry(theta0, flow, L, signs):
    """Layers that start equal stay equal (the field is symmetric in them): beta_j = w^L >= 0 at even L.
    Equal up to signs, they stay so under flows that commute with sign flips (``balanced.reduction``):
    beta_j keeps the sign of the product at even L (at odd L only gradient-following flows, which never
    cross w = 0, keep it)."""
    equal = np.all(theta0 == theta0[:1], axis=0)
    same_size = np.all(np.abs(theta0) == np.abs(theta0[:1]), axis=0)
    signs = signs.copy()
    if flow.follows_gradient:
        signs[same_size] = np.prod(np.sign(theta0), axis=0)[same_size]  # (the product of 1e-170's underflows to 0)
    elif L % 2 == 0 and commutes_with_sign_flips(flow):  # (an entry at 0 need not stay there: l_inf-SAM)
        flips = np.where(np.sign(theta0) == np.sign(theta0[:1]), 1.0, -1.0)
        signs[same_size] = np.prod(flips, axis=0)[same_size]
    if L % 2 == 0:
        signs[equal & np.isnan(signs)] = 1.0
    return signs


def kept_entry_signs(model, theta0, flow) -> np.ndarray:
    """(layers, d): the sign each parameter entry keeps for ever, 0 where it may change or where a
    crossing would not matter.

    Under gradient-following flows an invariant plane w_k = 0 (see :func:`invariant_planes`) is never
    crossed (reached in finite time only where the entry's field vanishes sub-linearly, lp-SAM with
    p > 2, and then held there: ``flowsim.integrate.arrival``). Where f is odd-like in w_k (not even), a step across the
    plane (an implicit method's overshoot) leads to a trajectory the exact flow cannot produce, and
    flowsim stops there (``crossing`` event). Where f is even in w_k the field is odd in the entry, so
    an overshoot lands on the mirror trajectory with the same beta, and is not flagged."""
    theta0 = np.asarray(theta0, float)
    if not flow.follows_gradient:
        return np.zeros_like(theta0)
    return np.where(_crossing_flagged(model)[:, None], np.sign(theta0), 0.0)


@lru_cache(maxsize=None)
def _crossing_flagged(model) -> np.ndarray:
    """Per layer (read-only): an invariant plane in which f is not even, so a step across it is flagged."""
    flagged = np.array(invariant_planes(model)) & ~np.array(_even_in(model))
    flagged.flags.writeable = False
    return flagged
