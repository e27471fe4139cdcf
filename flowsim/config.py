"""The schema of an experiment config (TOML, for ``flowsim run``): every key typed, unknown keys rejected
with the closest valid one named, so a typo (``rh0 = 0.1``) can never run silently as a default.

pydantic does the validation; this module only turns its first error into one readable line.
"""

from __future__ import annotations

import difflib
import inspect
import re
import warnings
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

#: each flow a config or ``flowsim derive`` can name, with the keys it takes
FLOW_KEYS = {"gd": (), "sam": ("rho", "norm", "eps"), "usam": ("rho",), "asam": ("rho", "norm", "eta"),
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
    missing = [p.name for p in inspect.signature(makers[name]).parameters.values()
               if p.default is p.empty and p.name not in params]
    if missing:  # (the constructor's TypeError reached the command line as a traceback)
        raise ValueError(f"flow {name!r} needs {', '.join(missing)} (rho: the perturbation radius, e.g. 0.05).")
    return makers[name](**params)


def parse_expression(text: str, what: str, example: str):
    """A sympy expression from a config string, parsed by the whitelist of :mod:`flowsim.symbolic.expression`
    (never evaluated), or a one-line ``ValueError`` naming ``what`` with an ``example`` of what it takes."""
    import sympy as sp

    from flowsim.symbolic.expression import ExpressionError, parse

    try:
        expr = parse(text, rational=True)
    except ExpressionError as e:
        raise ValueError(f"{what} = {text!r} is refused: {str(e).rstrip('.')}; write e.g. {example!r}.") from None
    if not isinstance(expr, sp.Expr):
        raise ValueError(f"{what} = {text!r} is a condition, not a formula; write e.g. {example!r}.")
    return expr


def make_model(form="product", depth=2, beta=None, layers=None):
    """A DiagonalNet, or a Parametrization when ``beta`` (an expression string) is given."""
    import flowsim as fs

    if beta is None:
        return fs.DiagonalNet(depth, form)
    expr = parse_expression(beta, "beta", "w1*w2**2")
    if not expr.free_symbols:
        raise ValueError(f"beta = {beta!r} reads as the constant {expr}: write it in layer entries, e.g. 'w1*w2**2'.")
    # in natural order (w2 before w10: sorted as strings, an init's row 2 went to w10 at 10 or more layers)
    if layers is None:
        layers = tuple(sorted((str(s) for s in expr.free_symbols), key=_natural))
    names = layers if isinstance(layers, int) else tuple(layers)  # a count: w1..wK (an int was iterated)
    return fs.Parametrization(beta, names, expr)


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def make_loss(loss, task="classification"):
    """A loss name, or a Loss from ``{"expr": ..., "name": ..., "task": ...}``; a loss table without ``task``
    is one of ``task``, the data's."""
    import flowsim as fs

    if isinstance(loss, str):
        return loss
    task = loss.task or task
    example = "m**2/2" if task == "regression" else "log(1 + exp(-m))"
    expr = parse_expression(loss.expr, "loss.expr", example)
    try:
        return fs.Loss(loss.name, expr, task=task)
    except ValueError as err:
        raise ValueError(f"loss.expr: {err}") from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Gaussian(_Strict):
    n: int = Field(ge=1)
    d: int = Field(ge=1)
    seed: int = 0


#: the data sets of :mod:`flowsim.datasets` a config can name (``builtin = "digits"``)
BUILTIN_DATA = ("scaled_rademacher", "gaussian_clusters", "shifted_diagonal", "iid_gaussian", "digits")


class Data(_Strict):
    X: list[list[float]] | None = None
    y: list[float] | None = None
    gaussian: Gaussian | None = None
    file: str | None = None  # .npz with arrays X and y, or .csv: features, then the label (+-1) last
    builtin: Literal[BUILTIN_DATA] | None = None
    options: dict[str, int | float] | None = None  # keyword arguments of the built-in data set
    task: Literal["classification", "regression"] | None = None  # of X/y or a file; left out, read from y

    @model_validator(mode="after")
    def _one_source(self):
        sources = [k for k in ("X", "gaussian", "file", "builtin") if getattr(self, k) is not None]
        if len(sources) != 1:
            raise ValueError("give one source of data: X (and y), gaussian = {n = ..., d = ..., seed = ...}, "
                             f"file = 'data.npz' or builtin = one of {list(BUILTIN_DATA)}; got {sources or 'none'}")
        if self.X is None and self.y is not None:
            raise ValueError("y goes with X; other sources carry their own labels")
        if self.options is not None and self.builtin is None:
            raise ValueError("options are the keyword arguments of builtin = '...'; give builtin too, or drop options")
        if self.task is not None and self.X is None and self.file is None:
            raise ValueError("task says what the y of X = [...] or of a file are; gaussian and builtin data are "
                             "classification sets: drop task")
        return self

    def load(self, base: Path):
        """The Dataset, files read relative to ``base`` (the config's folder)."""
        import flowsim as fs

        if self.X is not None:
            try:
                return fs.Dataset(self.X, self.y, task=self.task)  # (Dataset names a ragged X)
            except ValueError as err:
                raise ValueError(f"data: {_config_spelling(err)}") from None
        if self.gaussian is not None:
            try:
                return fs.datasets.iid_gaussian(self.gaussian.n, self.gaussian.d, self.gaussian.seed)
            except ValueError as err:
                raise ValueError(f"data.gaussian: {err}") from None
        if self.builtin is not None:
            try:
                return getattr(fs.datasets, self.builtin)(**(self.options or {}))
            except (TypeError, ValueError) as err:
                raise ValueError(f"data.options: {err} (see flowsim.datasets.{self.builtin})") from None
        return read_data_file(base / self.file, self.task)


def _config_spelling(err) -> str:
    """A Dataset's message with its keyword written as a config's key."""
    return str(err).replace("pass task='regression'", "add task = 'regression' to [data]")


def read_data_file(path: Path, task=None):
    """A Dataset from ``.npz`` (arrays ``X`` and ``y``) or ``.csv`` (one row a sample, the label or target last;
    a header row is skipped), of ``task`` (left out, read from y as :class:`flowsim.Dataset` does)."""

    if not path.is_file():
        raise ValueError(f"data.file: no file {path}")
    if path.suffix == ".npz":
        try:
            f = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError):  # (numpy read a non-zip as a pickle and advised allow_pickle=True)
            raise ValueError(f"data.file: {path} is not a NumPy .npz archive (np.savez(path, X=X, y=y) writes one)") \
                from None
        if not hasattr(f, "files"):  # a single .npy array under an .npz name
            raise ValueError(f"data.file: {path} holds one array, not an .npz archive with X and y")
        with f:
            missing = {"X", "y"} - set(f.files)
            if missing:
                raise ValueError(f"data.file: {path} has arrays {f.files}; it needs X and y (missing {sorted(missing)})")
            return _file_dataset(path, f["X"], f["y"], task)
    if path.suffix == ".csv":
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # (numpy's "Empty input file": said below)
                table = np.genfromtxt(path, delimiter=",", ndmin=2, invalid_raise=True)
        except ValueError as err:
            raise ValueError(f"data.file: {path}: {err}") from None
        if table.size == 0:  # (table[0] was an IndexError traceback)
            raise ValueError(f"data.file: {path} is empty; it needs one sample a row, the label (+-1) last")
        table = table[1:] if np.isnan(table[0]).all() else table  # a header row
        if table.shape[1] < 2 or np.isnan(table).any():
            raise ValueError(f"data.file: {path} must hold numbers only, one sample a row, the label (+-1) last")
        return _file_dataset(path, table[:, :-1], table[:, -1], task)
    raise ValueError(f"data.file: {path} is neither .npz (arrays X, y) nor .csv (features, then the label)")


def _file_dataset(path, X, y, task):
    import flowsim as fs

    try:
        return fs.Dataset(X, y, task=task)
    except ValueError as err:
        raise ValueError(f"data.file: {path}: {_config_spelling(err)}") from None


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
    expr: str  # in the margin (or the residual), e.g. "exp(-m) + exp(-2*m)"
    name: str = "custom"
    task: Literal["classification", "regression"] | None = None  # left out: the data's


class Flow(_Strict):
    name: Literal[FLOW_NAMES] = "gd"
    rho: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    norm: float = Field(2.0, gt=1.0)
    eta: float = Field(0.01, ge=0.0, allow_inf_nan=False)
    eps: float = Field(0.0, ge=0.0, allow_inf_nan=False)
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

    def params(self, **fallback) -> dict:
        """The keys the config gives, over ``fallback`` (a sweep's first rho): a key given nowhere is left to
        the constructor, so SAM without rho is an error, not gradient flow run as SAM with rho = 0."""
        return {k: getattr(self, k) if k in self.model_fields_set else fallback[k]
                for k in FLOW_KEYS[self.name] if k in self.model_fields_set | set(fallback)}


class _Problem(_Strict):
    """What every command's config has: the data, the model, the loss and the init."""

    data: Data
    model: Model = Model()
    loss: Literal["logistic", "exponential", "square"] | LossExpression = "logistic"
    init: float | list[float] | list[list[float]] = 0.1

    @field_validator("init")
    @classmethod
    def _rows_alike(cls, init):
        lengths = [len(row) for row in init] if isinstance(init, list) and init and isinstance(init[0], list) else []
        if len(set(lengths)) > 1:
            raise ValueError(f"init's rows must have the same length (one row per layer, one entry per coordinate); "
                             f"got rows of lengths {lengths}")
        return init


class Experiment(_Problem):
    """``flowsim run``: one flow to a horizon."""

    flow: Flow = Flow()
    # the ranges of these are checked by flowsim.integrate.options.Options, as for solve and sweep
    t1: float | None = Field(None, allow_inf_nan=False)
    log10_t1: float | None = Field(None, allow_inf_nan=False)
    backend: str = "auto"
    clock: Literal["auto", "log_time", "tau"] = "auto"
    rtol: float = 1e-8
    atol: float | None = None  # None: solve's default (1e-10, smaller for a small init)
    saves: int | None = None
    save_at_log10_t: list[float] | None = None  # log10 t of each save, instead of saves
    save_at_t: list[float] | None = None  # the time t of each save, instead of saves
    max_steps: int | None = None  # None: solve's budget per segment (a failure message says raise it)
    allow_nonseparable: bool = False
    # leader switches located by events (fs.switch_times of the saved run; flowsim plot marks them)
    track: list[Literal["magnitude", "growth"]] = []

    @model_validator(mode="before")
    @classmethod
    def _save_at_says_its_unit(cls, given):
        if isinstance(given, dict) and "save_at" in given:  # (the closest key, save_at_t, may not be what was meant)
            raise ValueError("save_at does not say its unit: give save_at_t (the times t of the saves, e.g. "
                             "[0.5, 1, 2, 5]) or save_at_log10_t (their log10 t, e.g. [-0.3, 0, 0.3, 0.7])")
        return given

    @model_validator(mode="after")
    def _options(self):
        """The horizon, saves, tolerances and budget, checked as solve and sweep check them."""
        from flowsim.integrate.options import Options

        given = self.solve_options()
        Options.checked(**{k: v for k, v in given.items() if k not in ("track", "allow_nonseparable")})
        return self

    def flow_params(self) -> dict:
        return self.flow.params()

    def solve_options(self) -> dict:
        options = self.model_dump(include={"t1", "log10_t1", "backend", "clock", "rtol", "atol", "saves",
                                           "save_at_log10_t", "save_at_t", "max_steps", "allow_nonseparable"},
                                  exclude_none=True)
        return {**options, "track": tuple(self.track)} if self.track else options


class Grid(_Strict):
    """``[sweep]``: the axes of the grid (each a list) and the chunk size."""

    # (finite here: an inf was refused only by the sweep, after the warnings that it replaces init or rho)
    alpha: list[Annotated[float, Field(allow_inf_nan=False)]] | None = Field(None, min_length=1)
    rho: list[Annotated[float, Field(ge=0.0, allow_inf_nan=False)]] | None = Field(None, min_length=1)
    alpha_j: dict[str, list[Annotated[float, Field(allow_inf_nan=False)]]] | None = None  # {1 = [...]}: alpha_<j>
    chunk_size: int = Field(256, ge=1)

    def axes(self) -> dict:
        out = {k: v for k, v in (("alpha", self.alpha), ("rho", self.rho)) if v is not None}
        out.update({f"alpha_{j}": v for j, v in (self.alpha_j or {}).items()})
        if not out:
            raise ValueError("config: [sweep] needs at least one axis: alpha = [...], rho = [...] or alpha_j = {1 = [...]}")
        return out


class SweepExperiment(Experiment):
    """``flowsim sweep``: an experiment over a grid of inits and radii."""

    sweep: Grid

    @model_validator(mode="after")
    def _no_track(self):
        if self.track:  # a sweep's leader is read off its saves (fs.switch_log10_t)
            raise ValueError("track is for flowsim run; a sweep records the leader at every save (drop track)")
        return self

    def flow_params(self) -> dict:
        # every point of a rho axis replaces the flow's rho: the axis alone is enough
        return self.flow.params(**({"rho": self.sweep.rho[0]} if self.sweep.rho else {}))

    def replaced(self) -> list[str]:
        """What the grid replaces at every point, where the config gives both (a warning each)."""
        notes = []
        if self.sweep.rho and "rho" in self.flow.model_fields_set:
            notes.append(f"[sweep] rho replaces [flow] rho = {self.flow.rho:g} at every point")
        if self.sweep.alpha and "init" in self.model_fields_set:
            notes.append("[sweep] alpha replaces init at every point (alpha_j = {...} writes coordinates into init)")
        return notes


#: each discrete optimizer a config can name, with the keys it takes (``flowsim.optimizers``)
OPTIMIZER_KEYS = {"gd": ("lr", "decay", "batch"), "sam": ("lr", "rho", "norm", "decay", "batch"),
                  "adam": ("lr", "b1", "b2", "decay", "eps", "bias_correction", "batch"),
                  "signum": ("lr", "beta", "decay", "batch")}


class Optimizer(_Strict):
    name: Literal[tuple(OPTIMIZER_KEYS)]
    lr: float = Field(gt=0.0, allow_inf_nan=False)
    rho: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    norm: float = Field(2.0, ge=1.0)
    decay: float = Field(0.0, ge=0.0, le=1.0)
    b1: float = Field(0.9, ge=0.0, lt=1.0)
    b2: float = Field(0.999, ge=0.0, lt=1.0)
    eps: float = Field(0.0, ge=0.0)
    beta: float = Field(0.9, ge=0.0, lt=1.0)
    bias_correction: bool = False
    # ["shuffle", b]: random mini-batches of b, what AdamProxy(batch=b) idealises (TOML has no tuples)
    batch: Literal["full", "cyclic", "shuffle", "replace"] | int | tuple[Literal["shuffle"], int] = "full"

    @field_validator("batch", mode="before")
    @classmethod
    def _pair_from_list(cls, value):
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _keys_are_used(self):
        unused = sorted(self.model_fields_set - {"name"} - set(OPTIMIZER_KEYS[self.name]))
        if unused:
            raise ValueError(f"name = '{self.name}' takes {', '.join(OPTIMIZER_KEYS[self.name])}; drop {', '.join(unused)}")
        if self.name == "sam" and "rho" not in self.model_fields_set:
            raise ValueError("name = 'sam' needs rho (the perturbation radius)")
        return self

    def make(self):
        import flowsim as fs

        given = {k: getattr(self, k) for k in OPTIMIZER_KEYS[self.name] if k in self.model_fields_set | {"lr"}}
        return getattr(fs.optimizers, self.name)(**given)


class IterateExperiment(_Problem):
    """``flowsim iterate``: a discrete optimizer for a number of steps."""

    optimizer: Optimizer
    steps: int = Field(ge=1, le=10**12)
    records: int = Field(200, ge=2, le=100_000)
    seed: int = Field(0, ge=0, lt=2**63)
    allow_nonseparable: bool = False


def _fields_at(loc, root) -> list[str]:
    model = root
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


#: how pydantic names the members of a union in an error's path (``float``, ``list[float]``,
#: ``function-after[...]``, ``constrained-float``): not keys of the config
_TYPE_TAG = re.compile(r"^(float|int|str|bool|none)$|[\[\-]")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (difflib has none: its ratio ranked 'rtol' above 't1' for the typo 'tl')."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _closest(name: str, choices) -> list:
    """The likeliest meant key: difflib's close matches and keys one edit away, fewest edits first."""
    choices = list(choices)
    near = set(difflib.get_close_matches(name, choices, n=3)) | {c for c in choices if _edits(name, c) <= 1}
    return sorted(near, key=lambda c: (_edits(name, c), -difflib.SequenceMatcher(None, name, c).ratio()))[:1]


def _reported(err: ValidationError) -> dict:
    """The error to report: pydantic tries a union's branches in order, so a [loss] table with a stray key
    failed the name branch first ("should be 'logistic' or 'exponential'"); the table branch, deeper, says why."""
    first, *rest = err.errors()
    deeper = [e for e in rest if isinstance(first.get("input"), dict) and len(e["loc"]) > len(first["loc"])
              and e["loc"][0] == first["loc"][0]]  # (the same key's other branch, not another key's error)
    # a misspelt table ([dta]) is both a missing key and an unknown one: the unknown one can say what was meant
    misspelt = [e for e in rest if first["type"] == "missing" and e["type"] == "extra_forbidden"]
    return (deeper or misspelt or [first])[0]


def _is_branch_tag(part: str) -> bool:
    """A union branch's name in an error's location (float, literal[...], LossExpression), not a key."""
    named = globals().get(part)
    return bool(_TYPE_TAG.search(part)) or (isinstance(named, type) and issubclass(named, BaseModel))


def _message(err: ValidationError, root) -> str:
    e = _reported(err)
    path = [p for p in e["loc"] if isinstance(p, str)]
    # the last part of an unknown or missing key is the key itself, whatever it is called (a prefix test
    # had dropped 'intial' and 'floatx', and crashed)
    named = e["type"] in ("extra_forbidden", "missing") and path
    loc = [p for p in (path[:-1] if named else path) if not _is_branch_tag(p)] + (path[-1:] if named else [])
    key = ".".join(loc) or "(top level)"
    if e["type"] == "extra_forbidden":
        if len(loc) == 2 and loc[-1] in root.model_fields:  # TOML puts a key written after [table] in it
            return (f"config: unknown key '{key}': '{loc[-1]}' is a top-level key; in TOML it must come before the "
                    "first [table] (after it, it belongs to that table)")
        others = [c for c, schema in _COMMANDS.items() if loc[-1] in schema.model_fields]
        if len(loc) == 1 and others and root in _COMMANDS.values():  # t1 in an iterate config: not 'b1'
            this = next(c for c, schema in _COMMANDS.items() if schema is root)
            return (f"config: unknown key '{key}': it is a key of `flowsim {others[0]}` configs; this one is read by "
                    f"`flowsim {this}` (valid keys: {_fields_at(loc, root)})")
        close = _closest(loc[-1], _fields_at(loc, root))
        if not close and len(loc) == 1:  # a table's key written at the top level: rho = 0.1 for [flow] rho
            tables = {k: t for t in root.model_fields for k in _fields_at([t, ""], root)}
            near = _closest(loc[-1], list(tables))
            if near:
                return f"config: unknown key '{key}'; did you mean '{near[0]}' in the table [{tables[near[0]]}]?"
        hint = f"; did you mean '{'.'.join(loc[:-1] + close)}'?" if close else f"; valid keys here: {_fields_at(loc, root)}"
        return f"config: unknown key '{key}'{hint}"
    if e["type"] == "missing":
        hint = {"data": " (a table [data] with X = [[...]] and y = [...], gaussian = {n, d, seed}, file = '...' or "
                        "builtin = '...')",
                "sweep": " (a table [sweep] with alpha = [...], rho = [...] and/or alpha_j = {1 = [...]})",
                "optimizer": " (a table [optimizer] with name = 'gd' | 'sam' | 'adam' | 'signum', lr = ... and its "
                             "keys)",
                "loss.expr": " (a [loss] table is a loss of your own, expr = 'log(1 + exp(-m))'; a built-in one is named "
                             "at the top level, before any table: loss = 'logistic' | 'exponential' | 'square')"}.get(key, "")
        return f"config: missing key '{key}'{hint}"
    got = e.get("input")
    shown = "" if isinstance(got, dict) else f"; got {got!r}"
    if isinstance(got, str) and e["type"] in ("float_type", "int_type") and _number(got):
        shown += f" (a string: write it without quotes, {loc[-1]} = {got})"  # TOML's inf, nan, 1e-3 are numbers
    msg = e["msg"].removeprefix("Value error, ")
    return f"config: key '{key}': {msg}{shown}" if loc else f"config: {msg}"


#: the command that reads each kind of config (a key of another kind is named as such)
_COMMANDS = {"run": Experiment, "sweep": SweepExperiment, "iterate": IterateExperiment}


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def parse(cfg: dict, schema=Experiment):
    """Validate a parsed TOML dict against ``schema`` (``Experiment``, ``SweepExperiment`` or
    ``IterateExperiment``); ``ValueError`` with one line naming the key and the fix."""
    try:
        return schema.model_validate(cfg)
    except ValidationError as err:
        raise ValueError(_message(err, schema)) from None


def problem(exp: _Problem, base: Path = Path(".")):
    """(model, loss, data, init) of a validated config; files are read relative to ``base``."""
    model = make_model(exp.model.form, exp.model.depth, exp.model.beta, exp.model.layers)
    data = exp.data.load(base)
    return model, make_loss(exp.loss, data.task), data, np.asarray(exp.init, float)


def build(exp: Experiment, base: Path = Path(".")):
    """(system, data, init, solve keyword arguments) of a validated experiment."""
    import flowsim as fs

    model, loss, data, init = problem(exp, base)
    system = fs.derive(model, loss, make_flow(exp.flow.name, **exp.flow_params()))
    return system, data, init, exp.solve_options()
