"""``flowsim.sweep``: one system solved over a grid of initialisations and radii.

Smooth flows (GD, lp-SAM with p < inf, USAM, the Adam proxy) on diffrax run as one ``jax.vmap`` of
the same compiled segment solve that :func:`flowsim.solve` uses: alpha and rho are run-time
arguments, so one compile serves the grid. vmap runs in lockstep (a chunk costs as many steps as its
slowest member), so the grid is cut into chunks of ``chunk_size`` points, ordered by rho then alpha
so that neighbours of similar cost share a chunk; the chunks run on a thread per core. Sign flows
(l_inf-SAM, the sign flow) restart at every sign switch, at different times for different members,
so they are solved point by point.

With ``executor=`` (a ``dask.distributed`` Client, an address, or ``"dask"`` for a LocalCluster) the
chunks become Dask tasks, each a vmapped solve on a worker; the worker derives the system itself
(derivations are cached per process) and sends back plain arrays.
"""

from __future__ import annotations

import difflib
import os
import re
import time
import warnings
from itertools import product

import numpy as np

from flowsim import testing
from flowsim._checks import is_whole
from flowsim._interrupts import absorbed, held, terminable
from flowsim._variables import annotate
from flowsim.integrate.backends import backend_for
from flowsim.integrate.clock import clock_for
from flowsim.integrate.critical import LOSS_STILL
from flowsim.integrate.handlers import ENDINGS, end_status
from flowsim.integrate.options import Options
from flowsim.integrate.run import chunk_of, structure_key
from flowsim.integrate.segment_args import SegmentArgs, Sliding
from flowsim.integrate.solve import check_problem, excluded_signs, initial_params, set_up, solve
from flowsim.integrate.status import FAILURES, Status
from flowsim.integrate.timeline import log10_t_from_u
from flowsim.symbolic.derive import System, derive
from flowsim.symbolic.model import DiagonalNet
from flowsim.symbolic.reachable import reachable_signs

#: grid keys: "alpha" (every entry), "alpha_<j>" (coordinate j, 1-based as in the papers), "rho"
ALPHA, RHO = "alpha", "rho"


def _check_grid(system, data, grid):
    if not isinstance(grid, dict) or not grid:
        raise ValueError('grid must be a non-empty dict such as {"alpha": [0.01, 0.1], "rho": [0.05, 0.1]}.')
    axes = {}
    for key, values in grid.items():
        if key == RHO:
            if not system.flow.point.uses_rho:
                raise ValueError(f"grid key 'rho' needs a flow with a radius (SAM, USAM, ASAM); {system.flow} has none.")
        elif key != ALPHA:
            j = key[len("alpha_"):] if isinstance(key, str) and key.startswith("alpha_") else ""
            # (alpha_01 was taken as coordinate 1 beside alpha_1: two axes writing one entry, one of them a lie)
            if not (j.isdigit() and j == str(int(j)) and 1 <= int(j) <= data.d):
                near = [] if j.isdigit() else difflib.get_close_matches(str(key), [ALPHA, RHO], n=1)
                # alpha_3 at d = 2: its coordinate is what is wrong, not a near name
                hint = (f"did you mean {near[0]!r}? " if near else f"write it 'alpha_{int(j)}'; " if j.isdigit()
                        and j != str(int(j)) else f"the data have no coordinate {j}; " if j else "")
                raise ValueError(f"unknown grid key {key!r}: {hint}use 'alpha', 'rho', or 'alpha_<j>' with j in "
                                 f"1..{data.d} (coordinate j of the initialisation, 1-based as in the papers).")
        try:
            v = np.atleast_1d(np.asarray(values, dtype=np.float64))
        except (TypeError, ValueError):
            raise ValueError(f"grid[{key!r}] must be a non-empty 1-D list of finite numbers; got {values!r}.") from None
        if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
            raise ValueError(f"grid[{key!r}] must be a non-empty 1-D list of finite numbers; got {values!r}.")
        if len(np.unique(v)) < len(v):  # (an xarray coordinate with repeats selects several points by one value)
            raise ValueError(f"grid[{key!r}] repeats values ({v.tolist()[:6]}...): give each point once.")
        if key == RHO and np.any(v < 0):
            raise ValueError(f"grid['rho'] must be >= 0 (a perturbation radius); got {v[v < 0][:3].tolist()}.")
        axes[key] = v
    if ALPHA in axes and any(k.startswith("alpha_") for k in axes):
        raise ValueError("grid: give either 'alpha' (every entry) or per-coordinate 'alpha_<j>' keys, not both.")
    return axes


def _point_init(base, point, d):
    """The init of one grid point: ``base`` with the grid's alpha or alpha_j written in."""
    if ALPHA in point:
        return point[ALPHA]
    init = np.array(np.broadcast_to(np.asarray(base, np.float64), np.shape(base) or (d,)), dtype=np.float64)
    if init.ndim == 1 and init.shape != (d,):
        raise ValueError(f"init must be a scalar or shape (d,) = ({d},) when the grid sets alpha_<j>; got {init.shape}.")
    for key, v in point.items():
        if key.startswith("alpha_"):
            init[..., int(key[len("alpha_"):]) - 1] = v
    return init


def sweep(
    system: System,
    data,
    grid: dict,
    *,
    init=0.1,
    t1: float | None = None,
    log10_t1: float | None = None,
    backend: str = "auto",
    clock: str = "auto",
    rtol: float = 1e-8,
    atol: float | None = None,
    saves: int | None = None,
    save_at_log10_t=None,
    save_at_t=None,
    save_at=None,
    max_steps: int = 16_384,
    allow_nonseparable: bool = False,
    collapse_tol: float = 1e-10,
    blowup_size: float = 1e100,
    chunk_size: int = 256,
    executor=None,
    workers: int | None = None,
    progress: bool = False,
):
    """Solve ``system`` on ``data`` at every point of ``grid`` (the Cartesian product of its axes).

    Every argument not listed here is as in :func:`flowsim.solve` (``throw`` is always False here:
    failed points have a failure status and NaN past their end).

    Args:
        grid: ``{"alpha": [...]}`` (scalar init), ``{"alpha_1": [...], "alpha_2": [...]}``
            (coordinates of the init, 1-based; the others come from ``init``), and/or ``{"rho": [...]}``.
        init: the base initialisation that ``alpha_<j>`` keys write into.
        chunk_size: at most this many grid points per vmapped solve (and per Dask task); the chunks are
            as few as that allows and of equal size (a smaller chunk_size spreads a small sweep over the cores
            and its progress, at the cost of more lockstep solves). Sign flows solved here run point by point,
            and their progress counts points.
        workers: the threads that run vmapped chunks in this process (default: one per core this process may
            use); not taken with ``executor``, whose cluster has its own workers.
        executor: None (this process: vmapped chunks on a thread per core), a
            ``dask.distributed.Client``, a scheduler address (``"tcp://host:8786"``), or ``"dask"`` for a
            ``LocalCluster`` started and closed here.
        saves: the number of default save points shared by every point (200 when neither this nor
            ``save_at_log10_t`` or ``save_at_t`` is given), as in :func:`flowsim.solve`.
        save_at_log10_t: the log10 t of each save instead, as in :func:`flowsim.solve`.
        save_at_t: the time t of each save instead, as in :func:`flowsim.solve`.
        save_at: not taken, as in :func:`flowsim.solve`.
        atol: as in :func:`flowsim.solve` (by default each point's own, from its init's size).

    Returns:
        An ``xarray.Dataset`` with one dimension per grid key plus ``log10_t`` (the save grid,
        shared) and ``coordinate`` (labelled 1..d): ``beta``, ``log_loss``, ``leader`` (the label of
        argmax |beta_j|; 0: none, past the end or at beta = 0),
        per point ``status``, ``steps``, ``log10_t_end``, ``beta_end`` and ``solver``
        (the backend it ended on: "diffrax:Tsit5 (vmap)" for the lockstep solve, else solve's); ``attrs`` say
        how it was run (``method``: "vmap" or "solve per point", ``chunks`` and ``chunk_points`` (the points each
        solves, the last padded to that), wall time, ``device``: the JAX device
        the chunks ran on, "default" unless a ``with jax.default_device(...)`` around the sweep chose one; ``system`` and ``init``
        say "rho swept", "alpha swept" where the grid sets them) and ``interrupted``, the number of points a
        Ctrl-C stopped (0 when the sweep ran to its end; a RuntimeWarning says so when it is not).
    """
    opts = Options.checked(t1=t1, log10_t1=log10_t1, backend=backend, clock=clock, rtol=rtol, atol=atol, saves=saves,
                           save_at_log10_t=save_at_log10_t, save_at_t=save_at_t, save_at=save_at, max_steps=max_steps,
                           collapse_tol=collapse_tol, blowup_size=blowup_size, default_saves=200)
    L1, grid_t = opts.log10_t1, opts.save_at_log10_t
    be = backend_for(backend, L1)
    run_clock = check_problem(system, data, clock, be, allow_nonseparable)
    if data.is_regression:
        raise ValueError("flowsim.sweep runs classification data (labels +-1); a regression is integrated by "
                         "flowsim.solve, one point at a time.")
    axes = _check_grid(system, data, grid)
    if not is_whole(chunk_size):
        raise ValueError(f"chunk_size must be a positive integer; got {chunk_size!r}.")
    if workers is not None and (not is_whole(workers) or executor is not None):
        raise ValueError(f"workers must be a positive integer, and only without executor= (a cluster has its own "
                         f"workers); got workers={workers!r}, executor={executor!r}.")
    keys = list(axes)
    points = [dict(zip(keys, combo)) for combo in product(*axes.values())]
    base_rho = float(system.flow.rho)
    rhos = np.array([p.get(RHO, base_rho) for p in points])
    inits = _grid_inits(system, data, init, points, opts, be, run_clock)
    # neighbours of similar cost share a chunk: order by rho, then by the size of the init
    order = np.lexsort((np.array([np.abs(th).max() for th in inits]), rhos))
    vmapped = be.batches and not any(_with_rho(system.flow, r).uses_sign
                                                                     for r in np.unique(rhos))
    # as few chunks as chunk_size allows, as equal as can be (1,024 points in chunks of at most 1,000: two of
    # 512, not 1,000 and 24 padded to 1,000), whatever the machine: a chunk's points share its reductions (the
    # tied net, the crossing event), so chunks by core count gave results that depended on it; solved point by
    # point here, a chunk is a point (progress by point)
    unit = "chunks" if vmapped or executor is not None else "points"
    size = -(-len(order) // -(-len(order) // chunk_size)) if unit == "chunks" else 1
    chunks = [order[i:i + size] for i in range(0, len(order), size)]
    # every chunk the same size (the last padded with copies of its last point): one compile per sweep
    padded = [np.concatenate([c, np.repeat(c[-1:], len(chunks[0]) - len(c))]) for c in chunks]
    spec = (system.model, system.loss, system.flow)
    tasks = [(spec, data, [inits[i] for i in c], rhos[c], opts, vmapped, allow_nonseparable) for c in padded]
    t0 = time.perf_counter()
    with terminable():  # SIGTERM as a Ctrl-C: the chunks finished are kept
        results, where = _execute(tasks, executor, progress and unit, (workers or _cores()) if vmapped else 1)
    wall = time.perf_counter() - t0
    with held():  # every point is done: a Ctrl-C now must not drop them
        out = _gathered(results, chunks, padded, len(points), len(grid_t), data.d)
        stopped = int(np.sum(out["status"] == Status.INTERRUPTED))
        if stopped:
            absorbed()
            warnings.warn(f"sweep interrupted (KeyboardInterrupt): {stopped} of {len(points)} points did not finish "
                          "(status 'interrupted', NaN past where they stopped); the others are kept", RuntimeWarning,
                          stacklevel=2)
        # points the lockstep solve handed to solve (plateaus, failures) say so in their ``solver``; counted here
        again = int(sum(not str(s).endswith("(vmap)") and s != "" for s in out["solver"])) if vmapped else 0
        how = {"interrupted": stopped, "solved_again": again, "chunk_size": int(chunk_size),
               "chunk_points": len(padded[0]),
               "method": ("vmap" + (f" ({again} points solved again one by one: 'solver')" if again else ""))
               if vmapped else "solve per point", "chunks": len(chunks), "executor": where, "wall_s": wall,
               "device": ", ".join(sorted({str(d) for d in out["device"] if d})),
               "clock": run_clock.name, "backend": be.name if vmapped else backend}
        testing.reached("sweep assembly")
        return _dataset(system, data, axes, out, grid_t, attrs={**how, **_asked(system, init, axes, opts)})


def _grid_inits(system, data, init, points, opts, be, run_clock):
    """The parameters each point starts from, (layers, d) each, all checked as solve checks them (``set_up``)
    before anything runs: made once per distinct init (a rho axis repeats each)."""
    made, inits = {}, []
    for p in points:
        a = _point_init(init, p, data.d)
        key = (np.asarray(a, np.float64).tobytes(), np.shape(a))
        if key not in made:
            made[key] = initial_params(system, data, a)
            set_up(system, data, made[key], opts, be, run_clock)
        inits.append(made[key])
    return inits


def _gathered(results, chunks, padded, n, saves, d):
    """The chunks' results in grid order (a chunk a Ctrl-C stopped: its points "interrupted", NaN)."""
    results = [r if r is not None else _interrupted(len(c), saves, d) for c, r in zip(padded, results)]
    out = {k: np.empty((n,) + results[0][k].shape[1:], results[0][k].dtype) for k in results[0]}
    for c, r in zip(chunks, results):
        for k in out:
            out[k][c] = r[k][: len(c)]
    return out


def _asked(system, init, axes, opts):
    """What a sweep was asked, for its attributes: what the grid sets is said so, not the base flow's rho or the
    init it replaced."""
    swept = [k for k in axes if k.startswith("alpha_")]
    return {"system": re.sub(r"rho=[^,)]+", "rho swept", str(system)) if RHO in axes else str(system),
            "rtol": opts.rtol, "log10_t1": opts.log10_t1,
            "atol": "per point (1e-10, or rtol x the init's size where smaller)" if opts.atol is None else opts.atol,
            "init": "alpha swept" if ALPHA in axes else f"{', '.join(swept)} swept, the others from "
                    f"{np.asarray(init).tolist()}" if swept else str(np.asarray(init).tolist())}


def _execute(tasks, executor, unit, workers):
    """Each task's ``_chunk``, in order: on Dask (``executor``), or here, on ``workers`` threads (vmapped chunks:
    each is one XLA computation, which runs on one core and releases the GIL, so two chunks at a time took half the
    time on two cores; a chunk solved point by point runs one after another). After a Ctrl-C the chunks not
    finished are None. ``unit``: what the progress bar counts ("chunks" or "points"), None for no bar."""
    from flowsim.progress import progress_bar

    bar = progress_bar(len(tasks), unit, "sweep") if unit else None
    try:
        if executor is not None:
            return _on_dask(tasks, executor, bar)
        workers = min(len(tasks), workers)
        return (_in_threads(tasks, workers, bar) if workers > 1 else _in_turn(tasks, bar)), "local"
    finally:
        if bar:
            bar.close()


def _in_turn(tasks, bar):
    """One chunk after another, here: a Ctrl-C, or a point it interrupted, ends the sweep there."""
    out = [None] * len(tasks)
    try:
        for i, task in enumerate(tasks):
            out[i] = _chunk(*task)
            if bar:
                bar.update(1)
            if Status.INTERRUPTED in out[i]["status"]:
                break
    except KeyboardInterrupt:
        pass
    return out


def _in_threads(tasks, workers, bar):
    """The chunks on ``workers`` threads, on the caller's default JAX device. A Ctrl-C ends the sweep with the
    chunks finished; those running finish in the background (a compiled solve cannot be stopped midway)."""
    from concurrent.futures import ThreadPoolExecutor

    from flowsim._jax import jax

    device = jax.config.jax_default_device  # the caller's ``with jax.default_device(...)``: thread-local, passed on

    def on_device(task):
        with jax.default_device(device):
            return _chunk(*task)

    pool = ThreadPoolExecutor(workers)
    futures = [pool.submit(on_device, task) for task in tasks]
    try:
        for f in futures:  # (in order: a bar that counts chunks done in order is honest, if late)
            f.result()
            if bar:
                bar.update(1)
    except KeyboardInterrupt:
        pass
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [_finished(f) for f in futures]


def _finished(future):
    """A chunk's result, None if it did not finish (not started, running, or stopped by a Ctrl-C); a
    chunk's error goes on up."""
    if not future.done() or future.cancelled() or isinstance(future.exception(), KeyboardInterrupt):
        return None
    return future.result()


def _interrupted(m, saves, d):
    """The result of a chunk a Ctrl-C stopped before it finished: its points are "interrupted", NaN."""
    return {"beta": np.full((m, saves, d), np.nan), "log_loss": np.full((m, saves), np.nan),
            "status": np.full(m, str(Status.INTERRUPTED), dtype=object), "steps": np.zeros(m, np.int64),
            "log10_t_end": np.full(m, np.nan), "beta_end": np.full((m, d), np.nan), "solver": np.full(m, "", object),
            "device": np.full(m, "", object)}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _on_dask(tasks, executor, bar):
    """The chunks on a Dask cluster, counted on flowsim's own bar as they finish (dask's progress wrote
    carriage returns into log files). A Ctrl-C ends the sweep with the chunks finished; the others are
    cancelled."""
    from dask.distributed import as_completed

    client, owned = _client(executor)
    try:
        futures = client.map(_chunk, *zip(*tasks), pure=False)
        try:
            for _ in as_completed(futures):
                if bar:
                    bar.update(1)
        except KeyboardInterrupt:
            client.cancel([f for f in futures if not f.done()])
        for f in futures:
            if f.status == "error":  # a chunk's error goes on up
                f.result()
        done = [f.status == "finished" for f in futures]
        results = iter(client.gather([f for f, ok in zip(futures, done) if ok]))
        return [next(results) if ok else None for ok in done], f"dask {client.scheduler.address}"
    finally:
        if owned:
            cluster = client.cluster
            client.close()
            if cluster is not None:
                cluster.close()


def _client(executor):
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:  # pragma: no cover - dask[distributed] is a dependency
        raise ValueError("executor= needs dask.distributed: pip install 'dask[distributed]'.") from e
    if isinstance(executor, Client):
        return executor, False
    if executor == "dask":
        return Client(LocalCluster(threads_per_worker=1, processes=True, dashboard_address=None)), True
    if isinstance(executor, str) and "://" in executor:
        return Client(executor), True
    raise ValueError(f"executor must be None, a dask.distributed.Client, a scheduler address such as "
                     f"'tcp://127.0.0.1:8786', or 'dask' (a LocalCluster); got {executor!r}.")


def _chunk(spec, data, inits, rhos, opts, vmapped, allow_nonseparable):
    """Solve one chunk of grid points (together in one vmapped solve where ``vmapped``); returns plain arrays
    (what a Dask worker sends back), with the JAX device asked for where it ran."""
    from flowsim._jax import jax

    testing.reached("sweep chunk")
    device = str(jax.config.jax_default_device or "default")
    return dict(_solved(spec, data, inits, rhos, opts, vmapped, allow_nonseparable),
                device=np.full(len(inits), device, dtype=object))


def _solved(spec, data, inits, rhos, opts, vmapped, allow_nonseparable):
    """The points of one chunk solved, as :func:`_chunk` returns them."""
    model, loss, flow = spec
    arguments = dict(opts.solve_arguments(), allow_nonseparable=allow_nonseparable)
    derived = {r: derive(model, loss, _with_rho(flow, r)) for r in np.unique(rhos)}
    systems = [derived[r] for r in rhos]

    def one_by_one(idx):
        sols = []
        for i in idx:
            sols.append(solve(systems[i], data, inits[i], throw=False, **arguments))
            if sols[-1].status == Status.INTERRUPTED:  # a Ctrl-C: the rest of the chunk is not run
                break
        grid_t = opts.save_at_log10_t
        out, rest = _on_grid(sols, grid_t, data.d), len(idx) - len(sols)
        if not rest:
            return out
        return {k: np.concatenate([v, _interrupted(rest, len(grid_t), data.d)[k]]) for k, v in out.items()}

    if not vmapped:
        return one_by_one(range(len(inits)))
    be = backend_for(opts.backend, opts.log10_t1)
    run_clock = clock_for(flow, opts.clock, be.default_clock)
    problems = [set_up(s, data, th, opts, be, run_clock) for s, th in zip(systems, inits)]
    if not _in_lockstep(problems):
        return one_by_one(range(len(inits)))
    out = _vmapped(problems)
    # the lockstep solve is one segment with no critical-point check: points that end on a plateau or
    # fail are solved again by solve, which recognises a converged critical point (and hands over)
    redo = np.nonzero(np.isin(out["status"], list(FAILURES)) | _plateau_at_end(out["log_loss"])
                      | _handed_over_by_solve(out["steps"], problems) | _signs_left(problems, out))[0]
    if redo.size:
        again, out = one_by_one(redo), {k: np.array(v) for k, v in out.items()}  # (JAX's arrays are read-only)
        for k in out:
            out[k][redo] = again[k]
    return out


def _in_lockstep(problems) -> bool:
    """The points can share one vmapped solve: each integrates the same system shape (all reduced to the tied net or
    none) on the same data (a reduction with sign flips runs on flipped data of its own)."""
    first = problems[0]
    return all(p.reduced == first.reduced and p.data is first.data for p in problems)


def _signs_left(problems, out):
    """Points whose lockstep solve ended with a beta_j of a sign their start excludes (``reachable_signs``), beyond
    what the solver resolves: solve says why (a balanced start of a model of your own integrated in full, which
    rounding took off its set). flowsim's own networks need no check here: balanced products run as the tied net
    and the kept entry signs of the others are the lockstep solve's crossing event (13 us a point saved)."""
    model = problems[0].system.model
    if isinstance(model, DiagonalNet):
        return np.zeros(len(problems), bool)
    kept = np.stack([reachable_signs(p.system.model, p.theta0, p.system.flow) for p in problems])
    atol = np.array([[p.atol] for p in problems])
    return excluded_signs(kept, out["beta_end"], atol, model.n_layers).any(axis=1)


def _handed_over_by_solve(steps, problems):
    """Points whose lockstep solve spent a chunk of steps, where solve hands over to an implicit method
    (``Problem.adaptive``; so it ends elsewhere within rtol: 5e-8 apart at a point of 11,953 Tsit5 steps)."""
    return np.array([s >= chunk_of(p.max_steps) and p.adaptive for s, p in zip(np.asarray(steps), problems)])


def _plateau_at_end(log_loss):
    """Per point: the loss stood still over its last two finite saves (``critical.LOSS_STILL``)."""
    at = np.where(np.isfinite(log_loss), np.arange(log_loss.shape[1]), -1)
    last = at.max(axis=1)
    before = np.where(at == last[:, None], -1, at).max(axis=1)
    rows = np.arange(len(log_loss))
    with np.errstate(invalid="ignore"):  # (rows with fewer than two are not plateaus whatever the difference)
        still = np.abs(log_loss[rows, last] - log_loss[rows, before]) <= LOSS_STILL
    return (before >= 0) & still


def _with_rho(flow, rho):
    from dataclasses import replace

    return replace(flow, rho=float(rho)) if flow.point.uses_rho else flow


def _vmapped(problems):
    """The per-point solves of :func:`flowsim.solve` for a smooth flow (one segment each, each point set up as solve
    sets it up: ``set_up``), as one vmap."""
    from flowsim._jax import jax
    from flowsim.field.vector_field import jax_field
    from flowsim.integrate.backends._diffrax import KernelSpec, host_arguments, kernel

    first = problems[0]
    system, clock, be, m = first.system, first.clock, first.backend, len(problems)
    theta0 = np.stack([p.theta0 for p in problems])
    _, K, d = theta0.shape
    targets, run_targets, s_max = first.plan()
    atol = np.array([p.atol for p in problems])
    y0 = np.concatenate([theta0.reshape(m, -1), np.zeros((m, 1))], axis=1)
    # the crossing event, shared by all members: the signs each keeps depend on the signs of its init only
    signs = [p.kept_signs() for p in problems]
    sigma = signs[0] if all(np.array_equal(s, signs[0]) for s in signs) else np.zeros((K, d))
    pinned, leaders = np.zeros((K, d), bool), np.zeros(0, np.int64)
    spec = KernelSpec(clock, False, Sliding(), be.solver, first.max_steps, len(targets), batched=True)
    run, names = kernel(jax_field(system, K, d), structure_key(system), spec)
    rhos = np.array([p.system.flow.rho for p in problems], dtype=np.float64)
    args = SegmentArgs(first.data.z, rhos, sigma, pinned, u_end=first.u1,
                       log_floor=np.array([p.log_floor for p in problems]), log_ceiling=first.log_ceiling,
                       leaders=leaders)
    tol = np.stack([np.full(m, first.rtol), atol], axis=1)  # per point, as each point's solve would have it
    s_t, (beta, log_loss), ok, s_end, (y_end, beta_end, loss_end), (fired, maxed, failed), stats = jax.tree.map(
        np.asarray, run(*host_arguments(y0, 0.0, s_max, args, run_targets, tol)))
    ends = {e: _status(names, *e, clock) for e in set(zip(fired.tolist(), maxed.tolist(), failed.tolist()))}
    status = np.array([ends[e] for e in zip(fired.tolist(), maxed.tolist(), failed.tolist())], dtype=object)
    # a completed point saves its end at the targets within the horizon event's precision of it (close_records)
    end = clock.reading(s_end, y_end[:, -1])
    at_end = ~ok & (status == Status.COMPLETED)[:, None] & (run_targets[None, :] <= (end + 1e-9 * (1.0 + np.abs(end)))[:, None])
    saved = ok | at_end
    u_end = clock.u(s_end, y_end[:, -1])
    return {
        "beta": np.where(at_end[..., None], beta_end[:, None, :], np.where(saved[..., None], beta, np.nan)),
        "log_loss": np.where(at_end, loss_end[:, None], np.where(saved, log_loss, np.nan)),
        "status": status, "steps": np.asarray(stats[0], np.int64),
        "log10_t_end": log10_t_from_u(u_end) + first.shift, "beta_end": beta_end,
        "solver": np.full(m, f"diffrax:{be.solver} (vmap)", dtype=object),
    }


def _status(names, fired, maxed, failed, clock):
    from flowsim.integrate.backends._diffrax import reason

    why = reason(names, fired, maxed, failed)
    return end_status(why, clock)[0] if why in ENDINGS else Status(why)


def _on_grid(sols, grid, d):
    """Each solution's saves on the shared save grid (NaN past its end), plus its end state."""
    saves = len(grid)
    m = len(sols)
    beta = np.full((m, saves, d), np.nan)
    log_loss = np.full((m, saves), np.nan)
    for i, sol in enumerate(sols):
        k = min(len(sol.log10_t), saves)
        same = np.isclose(sol.log10_t[:k], grid[:k], rtol=1e-10, atol=1e-12)
        k = int(np.argmin(same)) if not same.all() else k  # saves of the grid (an early end appends its end)
        beta[i, :k], log_loss[i, :k] = sol.beta[:k], sol.log_loss[:k]
    return {
        "beta": beta, "log_loss": log_loss,
        "status": np.array([s.status for s in sols], dtype=object),
        "steps": np.array([s.stats.get("steps", 0) for s in sols], dtype=np.int64),
        "log10_t_end": np.array([s.log10_t[-1] for s in sols]),
        "beta_end": np.stack([s.beta[-1] for s in sols]),
        # the backend each ended on, the last of solve's "Tsit5 -> BDF" chain
        "solver": np.array([s.config["backend"].split(" -> ")[-1] for s in sols], dtype=object),
    }


def _dataset(system, data, axes, out, grid_t, attrs):
    import xarray as xr

    saves = len(grid_t)
    shape = tuple(len(v) for v in axes.values())
    dims = list(axes)
    beta = out["beta"].reshape(shape + (saves, data.d))
    # a label; saves not reached (NaN, where argmax is meaningless) are 0. argmax takes the first NaN or
    # inf of a row, so the row is finite where the entry it points at is (half the cost of isfinite.all)
    size = np.abs(beta)
    top = size.argmax(axis=-1)
    largest = np.take_along_axis(size, top[..., None], axis=-1)[..., 0]
    leader = np.where(np.isfinite(largest) & (largest > 0), top + 1, 0)  # (beta = 0 has no leader: it read beta_1)
    ds = xr.Dataset(
        {
            "beta": (dims + ["log10_t", "coordinate"], beta),
            "log_loss": (dims + ["log10_t"], out["log_loss"].reshape(shape + (saves,))),
            "leader": (dims + ["log10_t"], leader),
            "status": (dims, out["status"].reshape(shape).astype(str)),
            "steps": (dims, out["steps"].reshape(shape)),
            "log10_t_end": (dims, out["log10_t_end"].reshape(shape)),
            "beta_end": (dims + ["coordinate"], out["beta_end"].reshape(shape + (data.d,))),
            "solver": (dims, out["solver"].reshape(shape).astype(str)),
        },
        coords={**{k: v for k, v in axes.items()}, "log10_t": grid_t, "coordinate": np.arange(1, data.d + 1)},
        attrs=attrs,
    )
    return annotate(ds)
