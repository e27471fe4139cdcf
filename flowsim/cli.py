"""The ``flowsim`` command line (typer). Same code path as the Python API.

    flowsim reproduce all --out report        # every paper check -> report/ (md, json, html) + figures
    flowsim reproduce classics --out classics # the classic implicit-bias results as checks
    flowsim derive --model product --depth 2 --flow sam --rho 0.1 --latex
    flowsim run experiment.toml --out run.nc  # one flow from a config file
    flowsim sweep experiment.toml --out sweep.nc      # the same over a grid ([sweep] alpha/rho)
    flowsim iterate discrete.toml --out iterate.nc    # a discrete optimizer ([optimizer], steps)
    flowsim plot run.nc                               # -> run.png (or --out fig.svg)
    flowsim hunt 000-thm3.1 --budget 200 --out hunt   # search a claim for counterexamples -> hunt/hunt.json
"""

from __future__ import annotations

import os
import tomllib
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from flowsim.integrate.status import Status

app = typer.Typer(help="Simulate optimizer flows on diagonal linear networks and check implicit-bias theorems.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)

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


#: the suites of :mod:`flowsim.reproduce.report` (named here: importing it would slow every command's start)
SUITE_CHOICES = "sam|adam|classics|all|everything"


@app.command()
def reproduce(
    suite: str = typer.Argument(..., help="sam (seed 000), adam (seed 002), classics (Soudry, Gunasekar, Woodworth, "
                                          "Pesme-Flammarion), all (sam and adam) or everything", metavar=SUITE_CHOICES),
    out: Path = typer.Option(Path("report"), help="output folder for report.md and figures"),
    quick: bool = typer.Option(False, help="short horizons and small grids, every control kept (about 2 minutes)"),
    hunt_budget: Optional[int] = typer.Option(None, help="criterion calls of each claim's search for "
                                                         "counterexamples (default: sized to the suite's time)"),
):
    """Run every claim of a paper as a check, with negative controls: report.md, report.json, report.html, figures."""
    from flowsim._interrupts import exit_code, terminable
    from flowsim.reproduce.report import Interrupted, check_hunt_budget, check_suite, prepare_out
    from flowsim.reproduce.report import reproduce as run_suite

    try:
        check_suite(suite)  # checked first: an error inside a check is a bug, with its traceback
        check_hunt_budget(hunt_budget)
        prepare_out(out)
    except ValueError as err:
        _user_error(err)
    try:
        with terminable():  # SIGTERM as a Ctrl-C: the claims so far are written
            path = run_suite(suite, out, quick=quick, progress=typer.echo, hunt_budget=hunt_budget)
    except Interrupted as stop:
        typer.echo(f"flowsim: {stop}", err=True)
        raise typer.Exit(exit_code()) from None
    figures = len(list(path.parent.glob("*.png")))
    typer.echo(f"wrote {path} ({path.with_suffix('.html').name}, {path.with_suffix('.json').name} and {figures} "
               f"figures beside it)")


@app.command()
def hunt(
    claim: str = typer.Argument(..., help="the claim whose statement is searched (an unknown id lists the known ones)",
                                metavar="CLAIM-ID"),
    budget: Optional[int] = typer.Option(None, help="criterion calls, drawing and shrinking together (default: the "
                                                    "claim's budget in the full report)"),
    seed: int = typer.Option(0, help="seed of the random search"),
    out: Optional[Path] = typer.Option(None, help="folder for hunt.json (the search and every counterexample)"),
):
    """Search a claim's statement for counterexamples: random cases over data, init, rho and depth, each failing one
    shrunk to the simplest that still fails, printed with a one-line reproducer. Exit code 1 when a counterexample
    is found, 2 for bad input."""
    import json

    from flowsim._checks import is_whole
    from flowsim.reproduce.hunts import check_claim
    from flowsim.reproduce.report import prepare_out

    try:
        chosen = check_claim(claim)
        for name, value, least in (("--budget", budget, 1), ("--seed", seed, 0)):
            if value is not None and not is_whole(value, least):
                raise ValueError(f"{name} must be a whole number >= {least}; got {value!r}.")
        folder = None if out is None else prepare_out(out)
    except ValueError as err:
        _user_error(err)
    searched = chosen.run(budget, seed)
    typer.echo(searched.summary)
    for k in searched.result.counterexamples:
        typer.echo(f"counterexample: {k.shrunk} ({k.why})\n  rerun: {k.reproducer}")
    if folder is not None:
        path = folder / "hunt.json"
        path.write_text(json.dumps({"claim": claim, "searched": searched.as_dict(),
                                    "counterexamples": searched.counterexamples()}, indent=1) + "\n")
        typer.echo(f"wrote {path}")
    if searched.result.found:
        raise typer.Exit(1)


@app.command()
def derive(
    model: Optional[str] = typer.Option(None, help="product (default) | tied | difference"),
    depth: Optional[int] = typer.Option(None, help="network depth L (default 2; 1: the linear model)"),
    beta: Optional[str] = typer.Option(None, help="your own model, e.g. 'w1*w2**2' (instead of --model/--depth)"),
    loss: str = typer.Option("logistic", help="logistic | exponential, or an expression in m, e.g. 'exp(-m)+exp(-2*m)'"),
    flow: str = typer.Option("gd", help="gd | sam | usam | asam | steepest | normalized_gd | sign | adam_proxy"),
    rho: Optional[float] = typer.Option(None, help="perturbation radius (sam, usam, asam; the equations keep the symbol rho)"),
    norm: Optional[float] = typer.Option(None, help="ball norm p (> 1, or inf) of sam, asam, steepest"),
    eta: Optional[float] = typer.Option(None, help="asam's T = |w| + eta"),
    eps: Optional[float] = typer.Option(None, help="sam's smoothing: rho g / sqrt(||g||^2 + eps^2) (>= 0)"),
    lr: Optional[float] = typer.Option(None, help="schedule eta_t = lr (t+1)^-decay (normalized_gd, sign, adam_proxy)"),
    decay: Optional[float] = typer.Option(None, help="schedule decay in [0, 1]"),
    batch: Optional[int] = typer.Option(None, help="adam_proxy batch size"),
    latex: bool = typer.Option(False, help="print LaTeX instead of sympy expressions"),
):
    """Print the derived per-coordinate equations of a flow (built-in or from expressions)."""
    import flowsim as fs
    from flowsim.config import FLOW_KEYS, LossExpression, make_flow, make_loss, make_model

    given = {k: v for k, v in dict(rho=rho, norm=norm, eta=eta, eps=eps, lr=lr, decay=decay, batch=batch).items() if v is not None}
    symbolic_rho = rho is None and "rho" in FLOW_KEYS.get(flow.lower(), ())
    if symbolic_rho:  # the equations keep rho as a symbol: any radius derives them
        given["rho"] = 1.0
    try:
        if beta is not None and (model, depth) != (None, None):
            raise ValueError("--beta defines the model; drop --model and --depth (they describe the built-in network)")
        the_loss = loss if loss in ("logistic", "exponential") else make_loss(LossExpression(expr=loss, name=loss))
        the_model = make_model(model or "product", 2 if depth is None else depth, beta)
        system = fs.derive(the_model, the_loss, make_flow(flow, **given))
    except ValueError as err:
        _user_error(err)
    shown = system.latex() if latex else system.text()
    if symbolic_rho:  # the LaTeX header names the flow with its parameters: rho was not given, so none is shown
        header, _, rest = shown.partition("\n")
        shown = header.replace("rho=1,", "rho,").replace("rho=1)", "rho)") + "\n" + rest if latex else shown
    typer.echo(shown)


def _read_config(path: Path, schema):
    """A validated config (``flowsim.config``) from a TOML file; a bad one ends in ``_user_error``."""
    from flowsim import config

    if not path.is_file():  # here, not click's exists=True: its message spans several lines
        _user_error(ValueError(f"no config file at {path}" + (" (a folder)" if path.is_dir() else "")))
    try:
        return config.parse(tomllib.loads(path.read_text(encoding="utf-8-sig")), schema)  # (-sig: an editor's BOM)
    except UnicodeDecodeError as err:
        _user_error(ValueError(f"{path} is not UTF-8 text (byte {err.start}): save it as UTF-8"))
    except tomllib.TOMLDecodeError as err:
        _user_error(ValueError(f"{path} is not valid TOML: {err}"))
    except ValueError as err:
        _user_error(err)


def _solve_reporting(solve, *args, **kw):
    """Run ``solve``; bad input found on the way is a user error, warnings are one line each, once each."""
    import flowsim as fs

    said = set()

    def show(message, *_, **__):  # as it comes (not after the work), and once (a sweep warned once per point)
        if str(message) not in said:
            said.add(str(message))
            typer.echo(f"warning: {message}", err=True)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", fs.ReachabilityWarning)
            warnings.showwarning = show
            return solve(*args, **kw)
    except ValueError as err:  # bad input, found before or by the solve: one line, exit 2
        _user_error(err)


def _save(result, out: Path):
    """``io.save``; a Ctrl-C while the file is written lands once it is whole: exit code 130, the file kept."""
    from flowsim import io
    from flowsim._interrupts import after_block

    saved = None
    try:
        with after_block(patient=True):  # every Ctrl-C waits for the file (stopping netCDF midway deadlocked)
            saved = io.save(result, out)
        return saved
    except ValueError as err:
        _user_error(err)
    except (OSError, RuntimeError) as err:  # a full disk (netCDF says "HDF error"), a place that refuses files
        kept = _save_elsewhere(result, out)
        typer.echo(f"flowsim: error: could not write {out}: {_why_not_written(err, out)}; "
                   + (f"the result is saved at {kept} instead" if kept else "the result is not saved"), err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo(f"flowsim: interrupted; {out} " + ("saved" if saved is not None else "not written"), err=True)
        raise typer.Exit(_failure_code(Status.INTERRUPTED)) from None


def _why_not_written(err, out: Path) -> str:
    import shutil

    try:
        free = shutil.disk_usage(out.parent).free
    except OSError:
        free = None
    if free is not None and free < 1 << 20:
        return f"disk full ({free} bytes free)"
    return getattr(err, "strerror", None) or " ".join(str(err).split())


def _save_elsewhere(result, out: Path):
    """The result saved in the system's temporary folder when ``out`` cannot take it (None if that fails too):
    a run that took hours is not lost to a full disk."""
    import tempfile

    from flowsim import io

    spare = Path(tempfile.gettempdir()) / f"flowsim-unsaved-{os.getpid()}-{out.name}"
    if spare.parent.resolve() == out.parent.resolve():
        return None
    try:
        return io.save(result, spare)
    except (OSError, RuntimeError, ValueError):
        return None


CONFIG = typer.Argument(..., help="experiment TOML file", metavar="CONFIG.toml")


def _failure_code(status) -> int:
    """The exit code of a saved result that is not whole: 130 after a Ctrl-C, 143 after SIGTERM (as the shell's
    own), else 1."""
    from flowsim._interrupts import exit_code

    return exit_code() if status == Status.INTERRUPTED else 1


@app.command()
def run(config: Path = CONFIG,
        out: Path = typer.Option(Path("run.nc"), help="where to save the run (netCDF)")):
    """Run one flow from a TOML config and save it (netCDF, written atomically).

    Keys: [data] X/y, gaussian = {n, d, seed}, file = 'data.npz|.csv' or builtin = 'digits' (+ options = {...});
    [model] form, depth (or beta, layers); loss (or [loss] expr, name); [flow] name and its keys; init;
    t1 or log10_t1; backend; clock; rtol; atol; saves, save_at_t or save_at_log10_t; max_steps; allow_nonseparable;
    track. Unknown or mistyped keys are errors naming the closest valid key. Exit code 1 when the solve fails, 130
    after a Ctrl-C (the run is saved).
    """
    import flowsim as fs
    from flowsim import io
    from flowsim.config import Experiment, build

    exp = _read_config(config, Experiment)
    try:
        io.check_path(out)  # before the run: a bad name costs nothing
        system, data, init, kw = build(exp, config.parent)
    except ValueError as err:
        _user_error(err)
    sol = _solve_reporting(fs.solve, system, data, init, progress=True, throw=False, **kw)
    _save(sol, out)
    typer.echo(f"{sol.status}: {sol.message}; log10 t reached {sol.log10_t[-1]:.6g}; saved {out}")
    if not sol.ok:
        raise typer.Exit(_failure_code(sol.status))


@app.command()
def sweep(config: Path = CONFIG,
          out: Path = typer.Option(Path("sweep.nc"), help="where to save the sweep (netCDF)"),
          executor: str = typer.Option("local", help="local, dask (a LocalCluster) or a scheduler address")):
    """Solve a flow over a grid of inits and radii: a run config plus a table
    [sweep] with alpha = [...], rho = [...] and/or alpha_j = {1 = [...], 2 = [...]} (and chunk_size).
    Exit code 1 when a point failed, 130 after a Ctrl-C (the sweep is saved either way; a Ctrl-C leaves the
    points not done with status interrupted)."""
    import flowsim as fs
    from flowsim import io
    from flowsim.config import SweepExperiment, build

    exp = _read_config(config, SweepExperiment)
    try:
        io.check_path(out)
        system, data, init, kw = build(exp, config.parent)
        axes = exp.sweep.axes()
    except ValueError as err:
        _user_error(err)
    for note in exp.replaced():
        typer.echo(f"warning: {note}", err=True)
    ds = _solve_reporting(fs.sweep, system, data, axes, init=init, chunk_size=exp.sweep.chunk_size, progress=True,
                          executor=None if executor == "local" else executor, **kw)
    _save(ds, out)
    counts = {str(k): int(v) for k, v in zip(*np.unique(ds["status"].values, return_counts=True))}
    typer.echo(f"{ds['status'].size} points: {counts}; saved {out}")
    failed = {status: count for status, count in counts.items() if status in fs.FAILURES}
    if failed:  # saved, but a script must not take a partial grid for a whole one
        typer.echo(f"{sum(failed.values())} of {ds['status'].size} points did not reach an outcome ({failed}); "
                   "the status of each point is in the file", err=True)
        raise typer.Exit(_failure_code(fs.Status.INTERRUPTED if fs.Status.INTERRUPTED in failed else fs.Status.FAILED))


@app.command()
def iterate(config: Path = CONFIG,
            out: Path = typer.Option(Path("iterate.nc"), help="where to save the records (netCDF)")):
    """Run a discrete optimizer from a TOML config: [data], [model], loss and init as for run, a table
    [optimizer] with name = gd | sam | adam | signum and its keys (lr, rho, norm, decay, b1, b2, eps,
    bias_correction, beta, batch: full, cyclic, shuffle, replace, an int or ["shuffle", b]), steps, records, seed
    and allow_nonseparable. Exit code 1 when the run fails, 130 after a Ctrl-C (the records are saved)."""
    import flowsim as fs
    from flowsim import io
    from flowsim.config import IterateExperiment, problem

    exp = _read_config(config, IterateExperiment)
    try:
        io.check_path(out)
        model, loss, data, init = problem(exp, config.parent)
        optimizer = exp.optimizer.make()
    except ValueError as err:
        _user_error(err)
    res = _solve_reporting(fs.iterate, optimizer, model, loss, data, exp.steps, init, records=exp.records,
                           seed=exp.seed, allow_nonseparable=exp.allow_nonseparable, progress=True, throw=False)
    _save(res, out)
    typer.echo(f"{res.status}: {res.message or 'ran every step'}; {int(res.steps[-1])} steps; saved {out}")
    if res.status != fs.Status.COMPLETED:
        raise typer.Exit(_failure_code(res.status))


@app.command()
def plot(
    # io.load says what is wrong, in one line
    run_file: Path = typer.Argument(..., help="a saved run or sweep (netCDF)", metavar="RUN.nc"),
    out: Path = typer.Option(None, help="figure file: .png, .svg or .pdf (the format follows the extension); "
                                        "default: the run's name with .png (sweep.nc -> sweep.png)",
                             show_default=False),
):
    """Plot a saved run: |beta_j|, its direction beta/||beta||, the shares |beta_j|/||beta||_1 and the loss against
    log10 t (for a discrete run, t is the sum of the step sizes). A saved sweep over one grid key: the leading
    coordinate over (log10 t, key) with the switch times, and the direction each point reached; over two keys:
    the first switch time and the final leader over the grid."""
    from flowsim import io
    from flowsim import plot as plots

    out = run_file.with_suffix(".png") if out is None else out
    try:
        plots.check_format(out)  # before loading: a bad name costs nothing
        ds = io.load(run_file)
        kind = io.holds(ds)
        run = ds if kind == "a sweep" else io.discrete_of(ds) if kind == "a discrete run" else io.solution_of(
            ds, path=run_file)
    except KeyError as err:  # a netCDF file that is not (all of) a flowsim run
        _user_error(_incomplete(run_file, err))
    except ValueError as err:
        _user_error(err)
    try:
        fig = plots.sweep_summary(run) if kind == "a sweep" else plots.summary(run)
    except KeyError as err:  # a sweep's variables are read as it is drawn
        _user_error(_incomplete(run_file, err))
    except ValueError as err:  # a sweep the summary cannot draw (three grid keys)
        _user_error(err)
    plots.save(fig, out)
    typer.echo(f"wrote {out}")


def _incomplete(run_file, err: KeyError) -> ValueError:
    """xarray's KeyError ("No variable named 'tau'. Variables on the dataset include [...]") in one line."""
    missing = str(err.args[0] if err.args else err).split(". ")[0]
    return ValueError(f"{run_file} is not a whole flowsim run or sweep: {missing}.")


if __name__ == "__main__":
    app()
