"""The schema of an experiment config (TOML, for ``flowsim run``): every key typed, unknown keys rejected
with the closest valid one named, so a typo (``rh0 = 0.1``) can never run silently as a default.

pydantic does the validation; this module only turns its first error into one readable line.
"""

from __future__ import annotations

import difflib
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

FLOW_NAMES = ("gd", "sam", "usam")


def make_flow(name: str, rho: float = 0.0, norm: float = 2.0):
    """The flow a config (or ``flowsim derive``) names: gd, sam (rho, norm) or usam (rho)."""
    import flowsim as fs

    makers = {"gd": lambda: fs.GD(), "sam": lambda: fs.SAM(rho, norm), "usam": lambda: fs.USAM(rho)}
    if name.lower() not in makers:
        raise ValueError(f"unknown flow {name!r}; choose one of {FLOW_NAMES}.")
    return makers[name.lower()]()


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


class Flow(_Strict):
    name: Literal[FLOW_NAMES] = "gd"
    rho: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    norm: float = Field(2.0, gt=1.0)

    @model_validator(mode="after")
    def _rho_is_used(self):
        if self.name == "gd" and "rho" in self.model_fields_set:
            raise ValueError("rho is ignored by name = 'gd'; use name = 'sam' or 'usam', or drop rho")
        return self


class Experiment(_Strict):
    data: Data
    model: Model = Model()
    loss: Literal["logistic", "exponential"] = "logistic"
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
    def _horizon(self):
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
    flow = make_flow(exp.flow.name, exp.flow.rho, exp.flow.norm)
    system = fs.derive(fs.DiagonalNet(exp.model.depth, exp.model.form), exp.loss, flow)
    kw = exp.model_dump(include={"t1", "log10_t1", "backend", "clock", "rtol", "atol", "saves", "allow_nonseparable"},
                        exclude_none=True)
    return system, data, np.asarray(exp.init, float), kw
