r"""Symbolic derivation of a flow's vector field (model x loss x flow) with sympy.

Coordinates of a diagonal network interact only through the margins :math:`m = Z\beta` and through
the norm of the gradient, so the field is derived once per coordinate, in terms of that coordinate's
layer entries :math:`w_1..w_K` and a few *coupling* scalars that the solver computes from the data at
run time (the data are an argument, never baked into the compiled code):

- :math:`r_j = \sum_i z_{ij}\,\mathrm{softmax}(\log q(m))_i` at theta, :math:`\tilde r_j` at the
  evaluation point,
- :math:`N = \|G\|_q` (dual norm of the gradient direction over all parameters),
- :math:`S = \log \frac1n\sum_i q(m_i)`, the log gradient scale: :math:`\nabla L = e^S G`.

With these, per entry k of coordinate j,

.. math::  G_k = -\partial_{w_k}\beta\; r,\qquad \tilde w_k = w_k + \rho P_k,\qquad
           \frac{dw_k}{d\tau} = \partial_{w_k}\beta(\tilde w)\;\tilde r,\qquad
           \frac{dt}{d\tau} = e^{-\tilde S}.

The expressions are compiled with ``lambdify`` (``cse=True``) to NumPy and to JAX from the same
sympy objects; ``System.source(...)`` shows the generated code.
"""

from __future__ import annotations

import inspect
import math
import operator
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import sympy as sp

from flowsim.data import Dataset
from flowsim.symbolic.check import check
from flowsim.symbolic.contract import CoordinateSymbols, check_direction, check_point
from flowsim.symbolic.directions import DirectionSymbols
from flowsim.symbolic.flow import Flow, check_rho
from flowsim.symbolic.functions import jax_functions, numpy_functions
from flowsim.symbolic.loss import Loss, M, get_loss
from flowsim.symbolic.model import Parametrization
from flowsim.symbolic.points import PointSymbols, dual_exponent


@dataclass(frozen=True)
class Compiled:
    """The lambdified pieces of a system for one array namespace (NumPy or JAX).

    Each function takes stacked layers, arrays of shape (K, d), and returns the same shape
    (``beta``: shape (d,); ``log_q``/``log_l``: the shape of the margins)."""

    beta: object
    direction: object
    perturbed: object
    field: object
    normed: object
    log_q: object
    log_l: object
    raw: dict
    #: symbolic partial derivatives for the Jacobian (see :mod:`flowsim.field.jacobian`): name -> function
    partials: dict = field(default_factory=dict)
    #: a regression loss's signed sample weight q(m) = -l'(m) of the residual m (None for a margin loss)
    q: object = None


class _Meaning(NamedTuple):
    """What a symbol of the derived equations stands for, in LaTeX and in plain text."""

    latex: str
    text: str


@dataclass(frozen=True, eq=False)
class System:
    """A derived flow: sympy expressions, their LaTeX, and compiled NumPy/JAX functions.

    Build with :func:`derive`; pass to :func:`flowsim.solve`.
    """

    model: Parametrization
    loss: Loss
    flow: object
    w: tuple
    w_tilde: tuple
    sigma: tuple
    r: sp.Symbol
    r_tilde: sp.Symbol
    N: sp.Symbol
    S: sp.Symbol
    rho: sp.Symbol
    beta: sp.Expr
    direction: tuple
    perturbed: tuple
    field_at_perturbed: tuple
    field: tuple
    numpy: Compiled = field(repr=False)
    jax: Compiled = field(repr=False)

    @property
    def n_layers(self) -> int:
        return self.model.n_layers

    @property
    def equations(self) -> dict:
        """Per-coordinate equations as ``sympy.Eq``: beta, log q, the gradient direction G, the
        evaluation point, and the field dw/dtau (with the evaluation point substituted)."""
        tau = sp.Symbol("tau")
        weight = sp.Eq(sp.Symbol("q"), self.loss.q) if self.loss.is_regression else \
            sp.Eq(sp.Symbol(r"\log q"), self.loss.log_q)
        eqs = {"beta": sp.Eq(sp.Symbol("beta"), self.beta), "q" if self.loss.is_regression else "log_q": weight}
        for k, name in enumerate(self.model.layer_names):
            eqs[f"G_{name}"] = sp.Eq(sp.Symbol(f"G_{{{name}}}"), self.direction[k])  # braces: G_{w_1}, not G_{w 1}
            eqs[f"{name}_tilde"] = sp.Eq(self.w_tilde[k], self.perturbed[k])
            eqs[f"d{name}/dtau"] = sp.Eq(sp.Derivative(self.w[k], tau), self.field[k])
        eqs["dt/dtau"] = sp.Eq(sp.Derivative(sp.Symbol("t"), tau), sp.exp(-sp.Symbol(r"\tilde{S}")))
        return eqs

    def latex(self) -> str:
        """The derivation as a LaTeX ``align*`` block, one aligned line per equation, then what its
        symbols stand for (the couplings the solver computes from the data, and this flow's norm N)."""
        legend = [entry.latex for entry in self._legend()]
        lines = [f"{sp.latex(e.lhs)} &= {sp.latex(e.rhs)}" for e in self.equations.values()]
        lead = [r"&\text{where } "] + [r"&\phantom{\text{where }} "] * len(legend)
        body = " \\\\\n".join(lines + [a + part for a, part in zip(lead, legend)])
        return (f"% {self.model} x {self.loss} loss x {self.flow}; per coordinate j: w_k is w_{{k,j}}, r is r_j\n"
                f"\\begin{{align*}}\n{body}\n\\end{{align*}}")

    def text(self) -> str:
        """The equations in plain text, one per line (sympy's syntax; decorated names as ``w1~``, ``rho``),
        then what their symbols stand for."""
        plain = {x: sp.Symbol(_plain_name(x.name), **x.assumptions0)
                 for e in self.equations.values() for x in e.free_symbols if "\\" in x.name or "{" in x.name}
        lines = [f"{name}: {e.lhs.xreplace(plain)} = {e.rhs.xreplace(plain)}" for name, e in self.equations.items()]
        legend = [entry.text for entry in self._legend()]
        return "\n".join(lines + ["where " + legend[0]] + ["      " + line for line in legend[1:]])

    def _legend(self) -> list:
        """What the equations' symbols stand for (:class:`_Meaning`, in LaTeX and in plain text): the data
        couplings at theta and at the evaluation point theta~, the log gradient scale, this flow's N (what it
        is the norm of, in which norm), the second moment P~ and sign(G) where the flow uses them, the clock."""
        legend = [_Meaning(r"m = X\beta - y,\ r_j = \tfrac1n\textstyle\sum_i x_{ij}\,q(m_i),\ S = 0",
                           "m = X beta - y (the residuals), r_j = (1/n) sum_i x_ij q(m_i), S = 0, for coordinate j "
                           "(w1, w2, ... are its layers' entries)") if self.loss.is_regression else
                  _Meaning(r"m = Z\beta,\ r_j = \textstyle\sum_i z_{ij}\,\mathrm{softmax}(\log q(m))_i,\ "
                           r"S = \log\tfrac1n\textstyle\sum_i q(m_i)",
                           "m = Z beta (the margins), r_j = sum_i z_ij softmax(log q(m))_i, "
                           "S = log (1/n) sum_i q(m_i), for coordinate j (w1, w2, ... are its layers' entries)"),
                  _Meaning(r"\tilde r_j,\ \tilde S:\ r_j,\ S \text{ at } \tilde m = Z\tilde\beta,\ "
                           r"\tilde\beta = \beta(\tilde w)",
                           "r~, S~: r_j, S at m~ = Z beta(w~), the evaluation point")]
        used = set().union(*(e.rhs.free_symbols for e in self.equations.values()))
        if self.N in used:
            p = self.flow.norm
            q = "1" if math.isinf(p) else f"{dual_exponent(p):g}"
            w, G = sp.Symbol("w", real=True), sp.Symbol("G", real=True)
            held = PointSymbols(w, G, self.N, self.S, self.rho, sp.Symbol(r"\sigma", real=True))
            normed = self.flow.point.normed(held) if self.flow.point.norm is not None else G
            ball = r"\infty" if math.isinf(p) else f"{p:g}"
            legend.append(_Meaning(rf"N = \|{sp.latex(normed)}\|_{{{q}}} \text{{ over every entry }} w_{{k,j}} "
                                   rf"\text{{ (the dual norm of }} \ell_{{{ball}}} \text{{)}}",
                                   f"N = ||{normed}||_{q} over every entry w_kj (the dual norm of "
                                   f"l_{'inf' if math.isinf(p) else ball})"))
        if self.rho in used:
            legend.append(_Meaning(r"\rho:\ \text{the perturbation radius}", "rho: the perturbation radius"))
        if any(x.name == r"\tilde{P}" for x in used):
            legend.append(_Meaning(r"\tilde P_j = \textstyle\sum_i \tilde p_i^2 z_{ij}^2,\ "
                                   r"\tilde p = \mathrm{softmax}(\log q(\tilde m)),\ n \text{ samples}",
                                   "P~_j = sum_i p~_i^2 z_ij^2 with p~ = softmax(log q(m~)) (the per-sample second "
                                   "moment), n the number of samples"))
        if self.flow.uses_sign:
            legend.append(_Meaning(r"\sigma_{w} = \mathrm{sign}(G_{w}) \text{ held piecewise constant (Filippov)}",
                                   "sigma_w = sign(G_w), held piecewise constant (Filippov)"))
        legend.append(_Meaning(r"\tau:\ \text{the solver's clock},\ t \text{ the flow's time}",
                               "tau: the solver's clock, t the flow's time (dt/dtau above)"))
        return legend

    def source(self, part: str = "field", backend: str = "numpy") -> str:
        """Generated source code of one compiled piece (``beta``, ``direction``, ``perturbed``,
        ``field``, ``log_q``, ``log_l``), for debugging."""
        compiled = {"numpy": self.numpy, "jax": self.jax}[backend]
        return inspect.getsource(compiled.raw[part])

    def check(self, data=None, *, points: int = 3, seed: int = 0, rtol: float = 1e-8) -> float:
        """Compare the compiled gradient, field and Jacobian with autodiff of an independently built loss
        at random states; raises :class:`flowsim.DerivationError` naming the component that disagrees
        (:mod:`flowsim.symbolic.check`). Returns the largest relative error."""
        return check(self, data, points=points, seed=seed, rtol=rtol)

    def vector_field(self, params, data):
        """The rescaled field F = dtheta/dtau (O(1) at any t) at ``params`` (an init-like scalar,
        (d,) or (layers, d) array) on ``data``, and log s with dtheta/dt = s F (s = e^{S~}, the loss
        scale at the evaluation point). Sign flows use sign(G) at ``params`` (one side of a switch
        surface; solve handles sliding). For phase portraits and checks, not for integration."""
        import numpy as np

        from flowsim.field.vector_field import numpy_field

        theta = self.model.init_params(params, data.d)
        K, d = theta.shape
        vf = numpy_field(self, K, d)
        sigma = np.sign(vf.direction(theta, data.z)[0]) if self.flow.uses_sign else np.ones((K, d))
        return vf.field_and_scale(theta, data.z, float(self.flow.rho), sigma)

    def field_on(self, data):
        """``vector_field``'s F at many points in one call, for phase portraits on grids: a compiled function
        (params (M, layers, d), rho=None) -> F (M, layers, d) on ``data`` (JAX, vmapped; compiled once per
        number of points, and rho, the flow's by default, is an argument: a new radius does not recompile).
        Sign flows use sign(G) at each point, as ``vector_field`` does."""
        from flowsim._jax import jax, jnp
        from flowsim.field.vector_field import jax_field

        if not isinstance(data, Dataset):
            raise ValueError(f"data must be a flowsim.Dataset; got {type(data).__name__} (field_on(data) makes the "
                             "function; call it with the points).")
        K, Z = self.n_layers, jnp.asarray(data.z)
        vf = jax_field(self, K, data.d)

        def one(theta, rho):
            sigma = jnp.sign(vf.direction(theta, Z)[0]) if self.flow.uses_sign else jnp.ones((K, data.d))
            return vf.field_and_scale(theta, Z, rho, sigma)[0]

        batched = jax.jit(jax.vmap(one, in_axes=(0, None)))

        def evaluate(params, rho=None):
            params = np.asarray(params)
            if np.iscomplexobj(params) or params.ndim != 3 or params.shape[1:] != (K, data.d):
                raise ValueError(f"params: {params.dtype} of shape {params.shape}; expected real numbers of shape "
                                 f"(points, {K}, {data.d}) for this system and data (one row of layers per point)")
            rho = float(self.flow.rho) if rho is None else check_rho(rho)  # (-0.3 was a descent-side point)
            return np.asarray(batched(jnp.asarray(params, dtype=jnp.float64), rho))

        return evaluate

    def __repr__(self) -> str:
        return f"System({self.model}, {self.loss.name}, {self.flow})"


def _fit(xp, o, shape):
    """``o`` as a float64 array of ``shape`` (a constant output, or one of scalar arguments only)."""
    return xp.broadcast_to(xp.asarray(o, dtype=xp.float64), shape)


#: how each compiled signature unpacks its stacked (K, d) arguments into the lambdified rows (``rows``)
_UNPACK = {
    "beta": lambda fn, rows: lambda W: fn(*rows(W)),
    "direction": lambda fn, rows: lambda W, r_: fn(*rows(W), r_),
    "perturbed": lambda fn, rows: lambda W, r_, N_, S_, rho_, Sig: fn(*rows(W), r_, N_, S_, rho_, *rows(Sig)),
    "field": lambda fn, rows: lambda Wt, rt_, Pt_, n_, N_, Sig: fn(*rows(Wt), rt_, Pt_, n_, N_, *rows(Sig)),
    "margin": lambda fn, rows: fn,
}


def _rows(K):
    """W -> (W[0], ..., W[K-1]): indexing, not ``*W``, which iterates a NumPy array at 6x the cost
    (0.45 against 0.08 us; three unpacks a field evaluation)."""
    get = operator.itemgetter(*range(K))
    return (lambda W: (get(W),)) if K == 1 else get


def _shaped(xp, fn, of, n_out, arrays, K, fresh=False):
    """The lambdified ``fn`` with the signature ``of`` and outputs of the input's shape. Which outputs
    need broadcasting is decided here, once: an expression of an array argument already has its shape,
    only constants and expressions of scalars (N, S, rho, n) do not. Per-call shape checks had cost
    more than the formulas on the small arrays of a NumPy solve. ``fresh``: every output is a new array
    (no argument passed through as it is), so one row may be returned as a view of it."""
    call = _UNPACK[of](fn, _rows(K))
    # np.array of same-shape arrays: np.stack at a third of its cost; one new row (one layer): a view
    stack = (lambda rows: rows[0][None]) if n_out == 1 and fresh else np.array if xp is np else xp.stack
    if n_out is None:
        return call if arrays else lambda *a: _fit(xp, call(*a), a[0].shape[1:] if of != "margin" else a[0].shape)
    if all(arrays):
        return lambda *a: stack(call(*a))
    return lambda *a: stack([o if arr else _fit(xp, o, a[0].shape[1:]) for o, arr in zip(call(*a), arrays)])


def _no_delta(e):
    """d sign(x)/dx = 2 delta(x): zero off the switching surface, which events and the Filippov logic
    handle; the Jacobian is that of the smooth field on one side of it."""
    return e.replace(sp.DiracDelta, lambda *a: sp.Integer(0))


class _Derivation(NamedTuple):
    """One coordinate's derived expressions (per layer, but ``beta``) in its ``symbols``: what is compiled."""

    symbols: CoordinateSymbols
    beta: sp.Expr
    direction: tuple
    normed: tuple
    perturbed: tuple
    field_wt: tuple
    loss: Loss


def _partials(derived: _Derivation):
    """Per-coordinate partial derivatives of the field's building blocks, with the argument lists
    their compiled functions take. Matrices over layers (d a_k / d b_l) are flattened row-major."""
    s, loss = derived.symbols, derived.loss
    w, wt, r, rt, N, S, Pt = s.w, s.w_tilde, s.r, s.r_tilde, s.N, s.S, s.P_tilde
    direction, normed, perturbed, field_wt = derived.direction, derived.normed, derived.perturbed, derived.field_wt
    K = len(w)

    def d(exprs, wrt):
        return [_no_delta(sp.diff(e, x)) for e in exprs for x in wrt] if isinstance(wrt, tuple) else \
               [_no_delta(sp.diff(e, wrt)) for e in exprs]

    return {
        # G itself, whatever the flow: d/dw (K x K); its d/dr is -dbeta/dw (G is linear in r)
        "G_w": (d(direction, w), "direction", K * K),
        # H, whose dual norm is N (G for most points): d/dw (K x K) and d/dr
        "H_w": (d(normed, w), "direction", K * K), "H_r": (d(normed, r), "direction", K),
        # the evaluation point w~(w, r, N, S)
        "P_w": (d(perturbed, w), "perturbed", K * K), "P_r": (d(perturbed, r), "perturbed", K),
        "P_N": (d(perturbed, N), "perturbed", K), "P_S": (d(perturbed, S), "perturbed", K),
        # the field at the evaluation point, F(w~, r~, P~)
        "F_w": (d(field_wt, wt), "field", K * K), "F_r": (d(field_wt, rt), "field", K),
        "F_P": (d(field_wt, Pt), "field", K), "F_N": (d(field_wt, N), "field", K),
        # how the sample weights move with the margins: d log q / dm, or dq/dm for a regression loss's signed q
        **({"q_m": (loss.dq, "margin", None)} if loss.is_regression else
           {"log_q_m": (_no_delta(sp.diff(loss.log_q, M)), "margin", None)}),
    }


def _compile(derived: _Derivation, modules, xp) -> Compiled:
    s, loss = derived.symbols, derived.loss
    w, wt, sig, r, rt, Pt, n = s.w, s.w_tilde, s.sigma, s.r, s.r_tilde, s.P_tilde, s.n
    N, S, rho = s.N, s.S, s.rho
    K = len(w)
    # every compiled function (and each partial derivative, which takes the arguments of the function
    # it differentiates) is one of these signatures
    signatures = {"beta": list(w), "direction": [*w, r], "perturbed": [*w, r, N, S, rho, *sig],
                  "field": [*wt, rt, Pt, n, N, *sig], "margin": [M]}
    # the arguments that are arrays of the state's shape (the rest are scalars)
    arrays = {"beta": set(w), "direction": {*w, r}, "perturbed": {*w, r, *sig}, "field": {*wt, rt, Pt, *sig}, "margin": {M}}
    exprs = {
        "beta": (derived.beta, "beta", None), "direction": (list(derived.direction), "direction", K),
        "normed": (list(derived.normed), "direction", K),
        "perturbed": (list(derived.perturbed), "perturbed", K), "field": (list(derived.field_wt), "field", K),
        "log_q": (_log_weight(loss), "margin", None), "log_l": (loss.log_expr, "margin", None),
        **({"q": (loss.q, "margin", None)} if loss.is_regression else {}),
        **_partials(derived),
    }
    raw, fns = {}, {}
    for name, (e, of, n_out) in exprs.items():
        raw[name] = fn = sp.lambdify(signatures[of], e, modules=modules, cse=True)
        outs = [sp.sympify(o) for o in (e if n_out else [e])]
        of_array = [bool(o.free_symbols & arrays[of]) for o in outs]
        fresh = all(of_array) and not any(o.is_Symbol for o in outs)
        fns[name] = _shaped(xp, fn, of, n_out, of_array if n_out else of_array[0], K, fresh)
    main = {k: fns.pop(k) for k in ("beta", "direction", "perturbed", "field", "normed", "log_q", "log_l", "q")
            if k in fns}
    return Compiled(**main, raw=raw, partials=fns)


def _log_weight(loss):
    """log q(m) of a margin loss; log |q| of a regression loss, whose q is signed (its solves use q itself)."""
    return sp.log(sp.Abs(loss.q)) if loss.is_regression else loss.log_q


def derive(model, loss, flow) -> System:
    """Derive the vector field of ``flow`` on ``model`` under ``loss`` (``"logistic"``,
    ``"exponential"`` or a :class:`flowsim.Loss`). Cached on the structure, so a new ``rho`` costs
    nothing: rho is a run-time argument of the compiled code.

    Returns a :class:`System` with ``.equations`` (sympy), ``.latex()`` and compiled functions.
    """
    if not isinstance(model, Parametrization):
        raise ValueError(f"model must be a flowsim.Parametrization (DiagonalNet, Linear() or your own); got {model!r}.")
    if not isinstance(flow, Flow):
        raise ValueError(f"flow must be a flowsim.Flow (GD(), SAM(rho, norm), SignFlow(), ... or your own "
                         f"Flow(point, direction)); got {flow!r}.")
    loss = get_loss(loss)
    return System(model, loss, flow, **_derive_parts(model, loss, _structure(flow)))


def _structure(flow):
    """The flow with its run-time numbers normalised away: what the symbolic derivation depends on."""
    return replace(flow, rho=1.0 if flow.point.uses_rho else 0.0, lr=1.0, decay=1.0)


def _plain_name(name: str) -> str:
    """A LaTeX symbol name in plain text: ``\\tilde{w}_{1}`` -> ``w1~``, ``\\sigma_{w1}`` -> ``sigma_w1``,
    ``\\rho`` -> ``rho``."""
    tilde = name.startswith("\\tilde")
    core = re.sub(r"^\\tilde\{(\w+)\}", r"\1", name)
    core = re.sub(r"_\{(\w+)\}", r"_\1", core).replace("\\", "").replace(" ", "_")
    core = re.sub(r"^(\w+)_(\d+)$", r"\1\2", core) if tilde else core
    return core + ("~" if tilde else "")


def _decorated(accent: str, name: str) -> str:
    """``w1`` -> ``\tilde{w}_{1}``; ``u`` -> ``\tilde{u}`` (LaTeX that reads like the paper)."""
    base = name.rstrip("0123456789")
    index = name[len(base):]
    base = base[:-1] if index and base.endswith("_") else base  # w_1 as w1: \tilde{w_}_{1} did not compile
    return f"{accent}{{{base}}}" + (f"_{{{index}}}" if index else "")


def _tidy(e):
    """sympy's simplify, kept only where it agrees with the expression at random points: with |x|^a
    and sign(x) it can rewrite through square roots of negative numbers."""
    s = sp.simplify(e)
    args = sorted(e.free_symbols | s.free_symbols, key=str)
    rng = np.random.default_rng(0)
    f, g = (sp.lambdify(args, x, modules=[numpy_functions(), "numpy"]) for x in (e, s))
    with np.errstate(all="ignore"):
        for _ in range(5):
            point = rng.normal(size=len(args)) * 2
            a, b = complex(f(*point)), complex(g(*point))
            if not (a == b or abs(a - b) <= 1e-9 * (1 + abs(a))):
                return e
    return s


def _rule(part, name, symbols, rule, K):
    """A part's rule for each of the K layers as sympy expressions; a rule that reads a symbol its
    ``s`` does not have, or returns something that is not an expression, is a ValueError naming it."""
    try:
        out = tuple(sp.sympify(rule(k)) for k in range(K))
    except AttributeError as err:
        raise ValueError(f"{type(part).__name__}.{name}: {err}; its s has the fields "
                         f"{', '.join(_FIELDS[symbols])}.") from None
    except (sp.SympifyError, TypeError) as err:
        raise ValueError(f"{type(part).__name__}.{name} must return a sympy expression of its s; "
                         f"got an error: {err}") from None
    return out


_FIELDS = {"PointSymbols": PointSymbols._fields, "DirectionSymbols": DirectionSymbols._fields}


@lru_cache(maxsize=None)
def _derive_parts(model: Parametrization, loss: Loss, flow) -> dict:
    """A :class:`System`'s fields besides model, loss and flow, by name, derived once per structure."""
    from flowsim._jax import jnp

    K = model.n_layers
    names = model.layer_names
    w = tuple(sp.Symbol(n, real=True) for n in names)
    wt = tuple(sp.Symbol(_decorated(r"\tilde", n), real=True) for n in names)
    sig = tuple(sp.Symbol(rf"\sigma_{{{n}}}", real=True) for n in names)
    r, rt = sp.Symbol("r", real=True), sp.Symbol(r"\tilde{r}", real=True)
    N, S = sp.Symbol("N", positive=True), sp.Symbol("S", real=True)
    rho = sp.Symbol(r"\rho", nonnegative=True)
    Pt, n = sp.Symbol(r"\tilde{P}", positive=True), sp.Symbol("n", positive=True)
    symbols = CoordinateSymbols(w, wt, sig, r, rt, N, S, rho, Pt, n)

    beta = model.beta_expr(w)
    grad_beta = [sp.diff(beta, w[k]) for k in range(K)]
    direction = tuple(sp.simplify(-grad_beta[k] * r) for k in range(K))
    # no simplify here: for general p it rewrites |G|^(q-1) through sqrt of possibly negative terms
    P = _rule(flow.point, "perturbation", "PointSymbols",
              lambda k: flow.perturbation(w[k], direction[k], N, S, rho, sig[k]), K)
    normed = _rule(flow.point, "normed", "PointSymbols",
                   lambda k: flow.normed(w[k], direction[k], N, S, rho, sig[k]), K)
    check_point(flow.point, symbols, P, normed)
    perturbed = tuple(w[k] + rho * P[k] for k in range(K))
    at_tilde = dict(zip(w, wt))
    # gradient flows: dtheta/dtau = -G(theta~) = +dbeta/dw(theta~) * r~; others: their own rule
    field_wt = _rule(flow.direction, "field", "DirectionSymbols",
                     lambda k: flow.field(wt[k], grad_beta[k].xreplace(at_tilde), rt, Pt, n, N, sig[k]), K)
    D = sp.Symbol("D", real=True)  # dbeta/dw as a free symbol: a field that carries the gradient's factor is 0 at D = 0
    free_dbeta = _rule(flow.direction, "field", "DirectionSymbols",
                       lambda k: flow.field(wt[0], D, rt, Pt, n, N, sig[0]), 1)
    check_direction(flow.direction, symbols, field_wt, (free_dbeta[0], D))
    field_wt = tuple(_tidy(f) for f in field_wt)
    field_w = tuple(f.xreplace(dict(zip(wt, perturbed))) for f in field_wt)

    derived = _Derivation(symbols, beta, direction, normed, perturbed, field_wt, loss)
    np_c = _compile(derived, [numpy_functions(), "numpy"], np)
    jax_c = _compile(derived, [jax_functions(), "jax"], jnp)
    return dict(w=w, w_tilde=wt, sigma=sig, r=r, r_tilde=rt, N=N, S=S, rho=rho, beta=beta, direction=direction,
                perturbed=perturbed, field_at_perturbed=field_wt, field=field_w, numpy=np_c, jax=jax_c)
