"""Saved runs: a solution as an xarray Dataset, written to netCDF atomically (a temporary file in
the same folder, then ``os.replace``) so an interrupted save never leaves a corrupt run."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path



def _versions() -> dict:
    out = {}
    for pkg in ("flowsim", "numpy", "scipy", "sympy", "jax", "diffrax", "xarray"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def _git_revision() -> str:
    try:
        here = Path(__file__).resolve().parent
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def to_xarray(sol):
    """The solution as an ``xarray.Dataset``: dims time, layer, coordinate, sample; variables beta,
    params, log_loss, margins, tau (log10_t is the time coordinate); attrs: config, versions, git
    revision, the derived equations in LaTeX, status, message, events and stats (JSON)."""
    import xarray as xr

    system = sol.system
    return xr.Dataset(
        {
            "beta": (("time", "coordinate"), sol.beta),
            "params": (("time", "layer", "coordinate"), sol.params),
            "log_loss": ("time", sol.log_loss),
            "margins": (("time", "sample"), sol.margins),
            "tau": ("time", sol.tau),
            "X": (("sample", "coordinate"), sol.data.X),
            "y": ("sample", sol.data.y),
        },
        coords={"log10_t": ("time", sol.log10_t), "layer": list(system.model.layer_names)},
        attrs={
            "model": str(system.model), "loss": system.loss.name, "flow": str(system.flow),
            "status": sol.status, "message": sol.message,
            "config": json.dumps(sol.config), "events": json.dumps(sol.events), "stats": json.dumps(sol.stats),
            "equations_latex": system.latex(), "versions": json.dumps(_versions()), "git_revision": _git_revision(),
        },
    )


def save(sol, path) -> Path:
    """Write ``sol`` (a Solution or an xarray Dataset) to ``path`` (netCDF) atomically."""
    ds = sol if not hasattr(sol, "system") else to_xarray(sol)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        ds.to_netcdf(tmp, engine="netcdf4")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def load(path):
    """Read a saved run back as an ``xarray.Dataset`` (arrays bit-identical to what was saved)."""
    import xarray as xr

    with xr.open_dataset(path, engine="netcdf4") as ds:
        return ds.load()
