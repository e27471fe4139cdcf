"""The schema of an experiment config (TOML, for ``flowsim run``): every key typed, unknown keys rejected
with the closest valid one named, so a typo (``rh0 = 0.1``) can never run silently as a default.

pydantic does the validation; this module only turns its first error into one readable line.
"""

from __future__ import annotations

import difflib
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

#: each flow a config or ``flowsim derive`` can name, with the keys it takes
FLOW_KEYS = {"gd": (), "sam": ("rho", "norm"), "usam": ("rho",), "asam": ("rho", "norm", "eta"),
             "steepest": ("norm",), "normalized_gd": ("lr", "decay"), "sign": ("lr", "decay"),
             "adam_proxy": ("lr", "decay", "batch")}
FLOW_NAMES = tuple(FLOW_KEYS)


def make_flow(name: str, **params):
    """The flow a config (or ``flowsim derive``) names, from the keys it takes (``FLOW_KEYS``)."""
    import flowsim as fs

    makers = {"gd": fs.GD, "sam": fs.SAM, "usam": fs.USAM, "asam": fs.ASAM, "steepest": fs.SteepestDescent,
              "normalized_gd": fs.NormalizedGD, "sign": fs.SignFlow, "adam_proxy": fs.AdamProxy}
    if name.lower() not in makers:
        raise ValueError(f"unknown flow {name!r}; choose one of {FLOW_NAMES}.")
    name = name.lower()
    unused = sorted(set(params) - set(FLOW_KEYS[name]))
    if unused:
        raise ValueError(f"flow {name!r} takes {list(FLOW_KEYS[name]) or 'no keys'}; drop {unused}.")
    return makers[name](**params)


def parse_expression(text: str, what: str):
    """A sympy expression from a config string, or a one-line ``ValueError`` naming ``what``."""
    import sympy as sp

    try:
        return sp.sympify(text, rational=True)
    except (sp.SympifyError, SyntaxError, TypeError):
        raise ValueError(f"{what} = {text!r} is not an expression sympy can read (write e.g. 'w1*w2**2', 'exp(-m)').") from None


def make_model(form="product", depth=2, beta=None, layers=None):
    """A DiagonalNet, or a Parametrization when ``beta`` (an expression string) is given."""
    import flowsim as fs

    if beta is None:
        return fs.DiagonalNet(depth, form)
    expr = parse_expression(beta, "beta")
    names = tuple(layers) if layers is not None else tuple(sorted(str(s) for s in expr.free_symbols))
    return fs.Parametrization(beta, names, expr)


def make_loss(loss):
    """A loss name, or a Loss from ``{"expr": ..., "name": ...}``."""
    import flowsim as fs

    if isinstance(loss, str):
        return loss
    return fs.Loss(loss.name, parse_expression(loss.expr, "loss.expr"))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Gaussian(_Strict):
    n: int = Field(ge=1)
    d: int = Field(ge=1)
    seed: int = 0


class Data(_Strict):
    X: list[list[float]] | None = None
    y: list[float] | None = None
    gaussian: Gaussian | None = None

    @model_validator(mode="after")
    def _one_source(self):
        if (self.X is None) == (self.gaussian is None):
            raise ValueError("give either X (and y) or gaussian = {n = ..., d = ..., seed = ...}")
        if self.gaussian is not None and self.y is not None:
            raise ValueError("y goes with X; gaussian = {...} draws its own labels")
        return self


class Model(_Strict):
    form: Literal["product", "tied", "difference"] = "product"
    depth: int = Field(2, ge=1)
    beta: str | None = None  # your own formula, e.g. "w1*w2**2" (then form and depth do not apply)
    layers: int | list[str] | None = None

    @model_validator(mode="after")
    def _one_kind(self):
        if self.beta is not None and {"form", "depth"} & self.model_fields_set:
            raise ValueError("beta defines the model; drop form and depth (they describe the built-in DiagonalNet)")
        if self.beta is None and self.layers is not None:
            raise ValueError("layers names the entries of beta = '...'; give beta too, or drop layers")
        return self


class LossExpression(_Strict):
    expr: str  # in the margin, e.g. "exp(-m) + exp(-2*m)"
    name: str = "custom"


class Flow(_Strict):
    name: Literal[FLOW_NAMES] = "gd"
    rho: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    norm: float = Field(2.0, gt=1.0)
    eta: float = Field(0.01, ge=0.0, allow_inf_nan=False)
    lr: float = Field(1.0, gt=0.0, allow_inf_nan=False)
    decay: float = Field(1.0, ge=0.0, le=1.0)
    batch: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _keys_are_used(self):
        unused = sorted(self.model_fields_set - {"name"} - set(FLOW_KEYS[self.name]))
        if unused:
            takes = ", ".join(FLOW_KEYS[self.name]) or "no other keys"
            raise ValueError(f"name = '{self.name}' takes {takes}; drop {', '.join(unused)}")
        return self

    def params(self) -> dict:
        return {k: getattr(self, k) for k in FLOW_KEYS[self.name]}


class Experiment(_Strict):
    data: Data
    model: Model = Model()
    loss: Literal["logistic", "exponential"] | LossExpression = "logistic"
    flow: Flow = Flow()
    init: float | list[float] | list[list[float]] = 0.1
    t1: float | None = Field(None, gt=0.0, allow_inf_nan=False)
    log10_t1: float | None = Field(None, allow_inf_nan=False)
    backend: str = "auto"
    clock: Literal["auto", "log_time", "tau"] = "auto"
    rtol: float = Field(1e-8, gt=0.0)
    atol: float = Field(1e-10, gt=0.0)
    saves: int = Field(400, ge=2, le=100_000)
    allow_nonseparable: bool = False

    @model_validator(mode="after")
    def log10_horizon(self):
        if (self.t1 is None) == (self.log10_t1 is None):
            raise ValueError("give one of t1 (e.g. t1 = 1e100) or log10_t1 (e.g. log10_t1 = 1e6)")
        return self


def _fields_at(loc) -> list[str]:
    model = Experiment
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = getattr(field, "annotation", None)
        for candidate in getattr(inner, "__args__", (inner,)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                model = candidate
                break
        else:
            return []
    return list(model.model_fields)


def _message(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = [p for p in e["loc"] if isinstance(p, str) and not p.startswith(("list[", "float", "int"))]
    key = ".".join(loc) or "(top level)"
    if e["type"] == "extra_forbidden":
        close = difflib.get_close_matches(loc[-1], _fields_at(loc), n=1)
        if not close and len(loc) == 1:  # a table's key written at the top level: rho = 0.1 for [flow] rho
            tables = {k: t for t in ("data", "model", "flow") for k in _fields_at([t, ""])}
            near = difflib.get_close_matches(loc[-1], list(tables), n=1)
            if near:
                return f"config: unknown key '{key}'; did you mean '{near[0]}' in the table [{tables[near[0]]}]?"
        hint = f"; did you mean '{'.'.join(loc[:-1] + close)}'?" if close else f"; valid keys here: {_fields_at(loc)}"
        return f"config: unknown key '{key}'{hint}"
    if e["type"] == "missing":
        hint = " (a table [data] with X = [[...]] and y = [...], or gaussian = {n, d, seed})" if key == "data" else ""
        return f"config: missing key '{key}'{hint}"
    got = e.get("input")
    shown = "" if isinstance(got, dict) else f"; got {got!r}"
    msg = e["msg"].removeprefix("Value error, ")
    return f"config: key '{key}': {msg}{shown}" if loc else f"config: {msg}"


def parse(cfg: dict) -> Experiment:
    """Validate a parsed TOML dict; ``ValueError`` with one line naming the key and the fix."""
    try:
        return Experiment.model_validate(cfg)
    except ValidationError as err:
        raise ValueError(_message(err)) from None


def build(exp: Experiment):
    """(system, data, init, solve keyword arguments) of a validated experiment."""
    import flowsim as fs

    if exp.data.X is not None:
        data = fs.Dataset(np.asarray(exp.data.X, float), exp.data.y)
    else:
        data = fs.datasets.iid_gaussian(exp.data.gaussian.n, exp.data.gaussian.d, exp.data.gaussian.seed)
    model = make_model(exp.model.form, exp.model.depth, exp.model.beta, exp.model.layers)
    system = fs.derive(model, make_loss(exp.loss), make_flow(exp.flow.name, **exp.flow.params()))
    kw = exp.model_dump(include={"t1", "log10_t1", "backend", "clock", "rtol", "atol", "saves", "allow_nonseparable"},
                        exclude_none=True)
    return system, data, np.asarray(exp.init, float), kw
