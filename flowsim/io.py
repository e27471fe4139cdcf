"""Saved runs: a solve or a sweep as an xarray Dataset in netCDF, read back as a Dataset or (a solve) as
a :class:`flowsim.Solution` that every analysis function takes.

One layout for both: ``log10_t`` is the time index (finite everywhere: t = 0 cannot be one), coordinates
and samples are labelled 1..d and 1..n as in the papers, every variable has a ``long_name`` and ``units``.
A solve also holds its state at t = 0, the init, in variables of their own: ``params_init``,
``beta_init``, ``log_loss_init`` and ``margins_init`` (tau = 0 there). Files are written atomically (a
temporary file in the same folder, then ``os.replace``), with the usual permissions (0666 less the umask),
and the temporary file is removed on every exit Python sees, SIGTERM included.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from flowsim._files import FIGURE_FORMATS, writable_place
from flowsim._interrupts import received_after
from flowsim._variables import annotate
from flowsim.integrate.events import event_of
from flowsim.integrate.solution import Solution
from flowsim.integrate.status import OUTCOMES, STATUSES, Status
from flowsim.integrate.timeline import beta_margins_loss


def to_xarray(sol):
    """The solution as an ``xarray.Dataset`` (the layout in the module docstring); attrs: the system
    and its spec (to read it back as a Solution), config, status, message, events and stats (JSON),
    the derived equations in LaTeX, package versions and, for a checkout of flowsim, its revision."""
    import xarray as xr

    from flowsim.symbolic.spec import spec

    system, d, n = sol.system, sol.beta.shape[1], sol.margins.shape[1]
    init = initial_state(sol)
    ds = xr.Dataset(
        {
            "params_init": (("layer", "coordinate"), init.params[0]),
            "beta_init": ("coordinate", init.beta[0]),
            "log_loss_init": ((), init.log_loss[0]),
            "margins_init": ("sample", init.margins[0]),
            "beta": (("log10_t", "coordinate"), sol.beta),
            "params": (("log10_t", "layer", "coordinate"), sol.params),
            "log_loss": ("log10_t", sol.log_loss),
            "margins": (("log10_t", "sample"), sol.margins),
            "tau": ("log10_t", sol.tau),
            "X": (("sample", "coordinate"), sol.data.X),
            "y": ("sample", sol.data.y),
        },
        coords={"log10_t": sol.log10_t, "layer": list(system.model.layer_names), "coordinate": np.arange(1, d + 1),
                "sample": np.arange(1, n + 1)},
        attrs={
            "title": f"{system.flow} on {system.model}, {system.loss.name} loss",
            "model": str(system.model), "loss": system.loss.name, "flow": str(system.flow), "task": sol.data.task,
            "system_spec": json.dumps(spec(system)), "status": sol.status, "message": sol.message,
            "config": json.dumps(sol.config), "events": json.dumps([dict(e) for e in sol.events]), "stats": json.dumps(sol.stats),
            "equations_latex": system.latex(), "versions": json.dumps(_versions()), "git_revision": _git_revision(),
        },
    )
    return annotate(ds)


@dataclass(frozen=True)
class InitialState:
    """A solve's state at t = 0, as one row: params (1, layers, d), beta (1, d), log_loss (1,), margins (1, n)."""

    params: np.ndarray
    beta: np.ndarray
    log_loss: np.ndarray
    margins: np.ndarray


def initial_state(sol) -> InitialState:
    """The state at t = 0 of the solve ``sol``, from the init it was asked for (``sol.config["init"]``)."""
    if "init" not in sol.config:
        raise ValueError("sol.config has no 'init': only a Solution from flowsim.solve can be saved (its state at "
                         "t = 0 is saved with it).")
    params = sol.system.model.init_params(sol.config["init"], sol.beta.shape[1])[None]
    beta, margins, log_loss = beta_margins_loss(sol.system, sol.data, params)
    return InitialState(params, beta, log_loss, margins)


def discrete_to_xarray(run):
    """A discrete run (:func:`flowsim.iterate`) as a Dataset indexed by ``step``, with the flow's time
    ``t`` (the sum of the step sizes) and ``log10_t`` as variables."""
    import xarray as xr

    d, n = run.beta.shape[1], run.margins.shape[1]
    ds = xr.Dataset(
        {"t": ("step", run.t), "log10_t": ("step", run.log10_t), "beta": (("step", "coordinate"), run.beta),
         "params": (("step", "layer", "coordinate"), run.params), "log_loss": ("step", run.log_loss),
         "margins": (("step", "sample"), run.margins)},
        coords={"step": np.asarray(run.steps, np.int64), "coordinate": np.arange(1, d + 1), "sample": np.arange(1, n + 1)},
        attrs={"title": f"{run.optimizer}, discrete", "optimizer": run.optimizer, "problem": run.problem,
               "status": run.status,
               "message": run.message, "versions": json.dumps(_versions()), "git_revision": _git_revision()})
    ds["step"].attrs.update(long_name="step number k", units="1")
    ds["t"].attrs.update(long_name="the flow's time t = sum of the step sizes so far", units="1")
    return ds


#: file extensions of netCDF, the format runs are saved in
NETCDF = (".nc", ".nc4", ".cdf", ".netcdf")


def check_path(path) -> Path:
    """``path`` as a place to save a run: a file (not a folder) named as netCDF (``.nc``, ``.nc4``, ``.cdf``,
    ``.netcdf``); ValueError otherwise (the command line checks before it runs, so a bad name costs no run)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a file name for the run, e.g. {path / 'run.nc'}.")
    suffix = path.suffix.lower()
    if suffix in NETCDF:
        return writable_place(path)
    if suffix in FIGURE_FORMATS:  # a figure's extension is replaced (x.nc.png -> x.nc)
        named = path.with_suffix("") if Path(path.stem).suffix.lower() in NETCDF else path.with_suffix(".nc")
        figure = f" (a figure of a saved run: flowsim plot {named.name} --out {path.name})"
    else:  # any other name is kept whole (run_rho0.1 -> run_rho0.1.nc, not run_rho0.nc)
        named, figure = path.with_name(path.name + ".nc"), ""
    raise ValueError(f"runs and sweeps are saved as netCDF: name the file with .nc, e.g. {named}; got "
                     f"{f'the extension {suffix!r}' if suffix else 'no extension'} in {str(path)!r}{figure}.")


def save(sol, path) -> Path:
    """Write ``sol`` (a Solution, a DiscreteRun, or the Dataset of a sweep) to ``path`` (netCDF, named .nc)
    atomically; missing parent folders are made. A Ctrl-C or SIGTERM during the write waits for the file to
    be in place, then has its usual effect."""
    import xarray as xr

    from flowsim.discrete.iterate import DiscreteRun

    if not isinstance(sol, (Solution, DiscreteRun, xr.Dataset)):
        raise TypeError(f"sol must be a flowsim.Solution (flowsim.solve), a DiscreteRun (flowsim.iterate) or the "
                        f"xarray.Dataset of a sweep (flowsim.sweep); got {type(sol).__name__}.")
    path = check_path(path)
    ds = annotate(to_xarray(sol) if isinstance(sol, Solution) else discrete_to_xarray(sol)
                  if isinstance(sol, DiscreteRun) else sol)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    with received_after():  # from before the temporary exists: a signal in between would leave it behind
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            ds.to_netcdf(tmp, engine="netcdf4")
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a run is shared like any file
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return path


def _remove_stale_temporaries(path: Path) -> None:
    """The temporaries of saves to ``path`` whose process is gone (killed by SIGKILL mid-write, where nothing
    could clean up): ``.<name>.<pid>.<random>.tmp``, removed when no process ``pid`` runs."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def load(path, as_solution: bool = False, system=None):
    """Read a saved run back: an ``xarray.Dataset`` (arrays bit-identical to what was saved), or with
    ``as_solution=True`` (a solve, not a sweep) a :class:`flowsim.Solution` with its system, data,
    config, events and stats, on which ``verdict``, ``limit_direction``, ``switch_times`` and
    ``Solution.evaluate`` work. The system is rebuilt from the run's spec; a run of a flow with parts
    of your own has none: pass ``system=flowsim.derive(...)``. The spec's formulas are read by a
    whitelist parser that never runs code (:mod:`flowsim.symbolic.expression`): a run from anyone is safe
    to open. A Solution is read only from a whole, consistent file: a ValueError naming the file says what
    is missing or corrupt (a variable, a JSON attribute, the spec), a status flowsim does not have, a state
    that is not finite in a run whose status says it ended normally, or a ``system`` of another model,
    loss or flow than the run's."""
    import xarray as xr

    path = Path(path)
    if not path.exists():
        raise ValueError(f"no saved run at {path}.")
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give the run's file (e.g. {path / 'run.nc'}).")
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read {path} as a saved run (netCDF): {err}") from None
    # netCDF hands numbers back as numpy scalars: the attrs read back as the Python numbers that were saved
    ds.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in ds.attrs.items()}
    return solution_of(ds, system, path) if as_solution else ds


def holds(ds) -> str:
    """What a loaded Dataset holds: "one solve", "a sweep" or "a discrete run"."""
    return "a discrete run" if "step" in ds.dims else "one solve" if "params" in ds else "a sweep"


def discrete_of(ds):
    """The :class:`flowsim.DiscreteRun` a loaded Dataset of a discrete run holds (for its figures)."""
    from flowsim.discrete.iterate import DiscreteRun

    if holds(ds) != "a discrete run":
        raise ValueError(f"this Dataset holds {holds(ds)}, not a discrete run (flowsim.iterate).")
    return DiscreteRun(ds.attrs["optimizer"], ds["step"].values, ds["t"].values, ds["params"].values, ds["beta"].values,
                       ds["margins"].values, ds["log_loss"].values, ds.attrs["status"], ds.attrs["message"],
                       ds.attrs.get("problem", ""))


#: the variables of a saved solve that its Solution is made of
SOLVE_VARIABLES = ("log10_t", "tau", "params", "beta", "log_loss", "margins", "X", "y")
#: its attributes that hold JSON (with the type each holds), and those that hold text
JSON_ATTRS = {"config": dict, "events": list, "stats": dict}
TEXT_ATTRS = ("status", "message", "model", "loss", "flow")


def solution_of(ds, system=None, path="the run"):
    """The :class:`flowsim.Solution` a loaded Dataset of one solve holds (``load(path, as_solution=True)``),
    checked against its own status and system; a ValueError naming ``path`` and what is wrong otherwise."""
    from flowsim.data import Dataset

    kind = holds(ds)
    if kind != "one solve":
        raise ValueError(f"{path} holds {kind}, not one solve; read it with flowsim.io.load(path) (a Dataset)"
                         + (" and draw it with flowsim.plot.sweep_summary." if kind == "a sweep" else "."))
    missing = ([f"variable {k!r}" for k in SOLVE_VARIABLES if k not in ds.variables]
               + [f"attribute {k!r}" for k in (*TEXT_ATTRS, *JSON_ATTRS) if k not in ds.attrs])
    if missing:
        raise ValueError(f"{path} is not a whole saved run: it has no {', '.join(missing)}.")
    attrs = {name: _json_attr(ds, name, path, (held,)) for name, held in JSON_ATTRS.items()}
    attrs["events"] = [event_of(e) if isinstance(e, dict) else e for e in attrs["events"]]
    system = _system_of(ds, system, path)
    _check_contents(ds, path)
    try:
        data = Dataset(ds["X"].values, ds["y"].values, ds.attrs.get("task"))  # (files before tasks: inferred)
    except ValueError as err:
        raise ValueError(f"{path}: its training data (X, y) are not a data set: {err}") from None
    return Solution(
        system=system, data=data, log10_t=ds["log10_t"].values, tau=ds["tau"].values, params=ds["params"].values,
        beta=ds["beta"].values, log_loss=ds["log_loss"].values, margins=ds["margins"].values,
        status=ds.attrs["status"], message=ds.attrs["message"], **attrs,
        rerun=functools.partial(_solve_again, system, data))



def _solve_again(system, data, **arguments):
    """:func:`flowsim.solve`, imported when a loaded run is solved again (it loads JAX; reading a run does not)."""
    from flowsim.integrate.solve import solve

    return solve(system, data, **arguments)


def _json_attr(ds, name, path, types):
    """The attribute ``name`` read as JSON, of one of ``types``."""
    try:
        value = json.loads(ds.attrs.get(name, "null"))
    except (json.JSONDecodeError, TypeError) as err:
        raise ValueError(f"{path}: its attribute {name!r} is not valid JSON ({err}).") from None
    if not isinstance(value, types):
        raise ValueError(f"{path}: its attribute {name!r} holds {type(value).__name__}, not "
                         f"{' or '.join(t.__name__ for t in types if t is not type(None))}.")
    return value


def _system_of(ds, system, path):
    """``system`` (or, where None, the one the run's spec rebuilds), checked to be the one the run names."""
    from flowsim.symbolic.derive import System
    from flowsim.symbolic.spec import system_from_spec

    given = system is not None
    if not given:
        spec = _json_attr(ds, "system_spec", path, (dict, type(None)))
        if spec is None:
            raise ValueError(f"{path} ({ds.attrs['flow']}) was saved without a spec (a part of your own); pass "
                             "system=flowsim.derive(model, loss, flow).")
        try:
            system = system_from_spec(spec)
        except ValueError as err:
            raise ValueError(f"{path}: its system_spec does not rebuild a system: {err}") from None
    elif not isinstance(system, System):
        raise ValueError(f"system must come from flowsim.derive(model, loss, flow); got {type(system).__name__}.")
    named = {"model": str(system.model), "loss": system.loss.name, "flow": str(system.flow)}
    other = [f"{part} {named[part]} (the run's: {ds.attrs[part]})" for part in named if named[part] != ds.attrs[part]]
    if other:
        raise ValueError(f"{path} is a run of another system: {'system= has' if given else 'its spec has'} "
                         f"{'; '.join(other)}. Pass the system it was run with (or none: its own spec).")
    if system.model.n_layers != ds.sizes["layer"]:
        raise ValueError(f"{path}: system {system} has {system.model.n_layers} layers; the run has "
                         f"{ds.sizes['layer']}.")
    return system


def _check_contents(ds, path):
    """The run's status is one flowsim has, and a run that ended normally has finite times and states."""
    status = ds.attrs["status"]
    if status not in STATUSES:
        raise ValueError(f"{path}: its status {status!r} is none of flowsim's ({', '.join(STATUSES)}).")
    if status not in OUTCOMES:  # a failed solve may end on a non-finite state
        return
    # (the beta of a blown-up state may overflow: w^4 at |w| = blowup_size = 1e100)
    for name in ("log10_t", "params") if status == Status.BLEW_UP else ("log10_t", "params", "beta"):
        bad = ~np.isfinite(ds[name].values)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise ValueError(f"{path}: its {name} is not finite (row {row}) although its status {status!r} says the "
                             "solve ended normally; the file is damaged or was not written by flowsim.")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _versions() -> dict:
    out = {}
    for pkg in ("flowsim", "numpy", "scipy", "sympy", "jax", "diffrax", "xarray"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def _git_revision() -> str:
    """The commit of flowsim's own checkout ("+dirty" with uncommitted changes), or "unknown" when the
    package is not run from one (an installed copy inside another repository is not ours)."""
    here = Path(__file__).resolve().parent
    try:
        top = _git(here, "rev-parse", "--show-toplevel")
        if not top or Path(top) / "flowsim" != here or 'name = "flowsim"' not in (Path(top) / "pyproject.toml").read_text():
            return "unknown"
        rev = _git(here, "rev-parse", "HEAD")
        return rev + ("+dirty" if _git(here, "status", "--porcelain", "--untracked-files=no") else "") if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _git(where, *args) -> str:
    return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=5, check=False).stdout.strip()
