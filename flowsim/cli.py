"""The ``flowsim`` command line (typer). Same code path as the Python API.

    flowsim reproduce all --out report        # every paper check -> report/ (md, json, html) + figures
    flowsim derive --model product --depth 2 --flow sam --rho 0.1 --latex
    flowsim run experiment.toml --out run.nc  # one experiment from a config file
    flowsim plot run.nc --out run.png
"""

from __future__ import annotations

import math
import tomllib
import warnings
from typing import Optional
from pathlib import Path

import numpy as np
import typer

app = typer.Typer(help="Simulate optimizer flows on diagonal linear networks and check implicit-bias theorems.",
                  no_args_is_help=True, add_completion=False)

def _version(value: bool):
    if value:
        import flowsim

        typer.echo(f"flowsim {flowsim.__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the version and exit")):
    """Simulate optimizer flows on diagonal linear networks and check implicit-bias theorems."""


def _user_error(err):
    """Bad input: one line on stderr and exit code 2, never a traceback."""
    typer.echo(f"flowsim: error: {' '.join(str(err).split())}", err=True)
    raise typer.Exit(2)


@app.command()
def reproduce(
    suite: str = typer.Argument(..., help="sam (seed 000), adam (seed 002) or all"),
    out: Path = typer.Option(Path("report"), help="output folder for report.md and figures"),
    quick: bool = typer.Option(False, help="short horizons and small grids, every control kept (about 2 minutes)"),
):
    """Run every claim of a paper as a check, with negative controls: report.md, report.json, report.html, figures."""
    from analysis.report import check_suite
    from analysis.report import reproduce as run_suite

    try:
        check_suite(suite)  # checked first: an error inside a check is a bug, with its traceback
    except ValueError as err:
        _user_error(err)
    path = run_suite(suite, out, quick=quick, progress=typer.echo)
    typer.echo(f"wrote {path}")


@app.command()
def derive(
    model: str = typer.Option("product", help="product | tied | difference"),
    depth: int = typer.Option(2, help="network depth L (1: the linear model)"),
    beta: Optional[str] = typer.Option(None, help="your own model, e.g. 'w1*w2**2' (instead of --model/--depth)"),
    loss: str = typer.Option("logistic", help="logistic | exponential, or an expression in m, e.g. 'exp(-m)+exp(-2*m)'"),
    flow: str = typer.Option("gd", help="gd | sam | usam | asam | steepest | normalized_gd | sign | adam_proxy"),
    rho: Optional[float] = typer.Option(None, help="perturbation radius (sam, usam, asam)"),
    norm: Optional[float] = typer.Option(None, help="ball norm p (> 1, or inf) of sam, asam, steepest"),
    eta: Optional[float] = typer.Option(None, help="asam's T = |w| + eta"),
    lr: Optional[float] = typer.Option(None, help="schedule eta_t = lr (t+1)^-decay (normalized_gd, sign, adam_proxy)"),
    decay: Optional[float] = typer.Option(None, help="schedule decay in [0, 1]"),
    batch: Optional[int] = typer.Option(None, help="adam_proxy batch size"),
    latex: bool = typer.Option(False, help="print LaTeX instead of sympy expressions"),
):
    """Print the derived per-coordinate equations of a flow (built-in or from expressions)."""
    import flowsim as fs
    from flowsim.config import LossExpression, make_flow, make_loss, make_model

    given = {k: v for k, v in dict(rho=rho, norm=norm, eta=eta, lr=lr, decay=decay, batch=batch).items() if v is not None}
    try:
        the_loss = loss if loss in ("logistic", "exponential") else make_loss(LossExpression(expr=loss, name=loss))
        system = fs.derive(make_model(model, depth, beta), the_loss, make_flow(flow, **given))
    except ValueError as err:
        _user_error(err)
    if latex:
        typer.echo(system.latex())
    else:
        for name, eq in system.equations.items():
            typer.echo(f"{name}: {eq.lhs} = {eq.rhs}")


def experiment_from_config(cfg: dict):
    """(system, data, init, solve keyword arguments) from a parsed TOML config (``flowsim.config``)."""
    from flowsim import config

    return config.build(config.parse(cfg))


@app.command()
def run(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment TOML file"),
    out: Path = typer.Option(Path("run.nc"), help="where to save the run (netCDF)"),
):
    """Run one experiment from a TOML config and save it (netCDF, written atomically).

    Keys: [data] X/y or gaussian={n,d,seed}; [model] form, depth; loss; [flow] name, rho, norm;
    init; t1 or log10_t1; backend; clock; rtol; atol; saves; allow_nonseparable. Unknown or mistyped keys
    are errors naming the closest valid key.
    """
    import flowsim as fs
    from flowsim import io

    try:
        system, data, init, kw = experiment_from_config(tomllib.loads(config.read_text()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", fs.ReachabilityWarning)
            sol = fs.solve(system, data, init, progress=True, throw=False, **kw)
    except (ValueError, tomllib.TOMLDecodeError) as err:  # bad input, found before or by solve: one line, exit 2
        _user_error(err)
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)
    io.save(sol, out)
    typer.echo(f"{sol.status}: {sol.message}; log10 t reached {sol.log10_t[-1]:.6g}; saved {out}")
    if not sol.ok:
        raise typer.Exit(1)


@app.command()
def plot(
    run_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="a saved run (netCDF)"),
    out: Path = typer.Option(Path("run.png"), help="figure file"),
):
    """Plot |beta_j| and the loss against log10 t for a saved run."""
    from matplotlib.figure import Figure

    from flowsim import io

    ds = io.load(run_file)
    lt = ds["log10_t"].values
    keep = np.isfinite(lt)
    fig = Figure(figsize=(10, 4), constrained_layout=True)
    a, b = fig.subplots(1, 2)
    for j in range(ds.sizes["coordinate"]):
        a.plot(lt[keep], np.abs(ds["beta"].values[keep, j]), label=f"beta_{j + 1}")
    a.set_yscale("log")
    a.set_xlabel("log10 t")
    a.legend(fontsize=7)
    a.set_title(f"{ds.attrs['flow']} on {ds.attrs['model']} [{ds.attrs['status']}]", fontsize=9)
    b.plot(lt[keep], ds["log_loss"].values[keep] / math.log(10))
    b.set_xlabel("log10 t")
    b.set_ylabel("log10 L")
    fig.savefig(out, dpi=110)
    typer.echo(f"wrote {out}")


if __name__ == "__main__":
    app()
