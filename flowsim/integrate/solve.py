"""``flowsim.solve``: the one entry point that integrates a derived system on a data set."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from flowsim._interrupts import absorbed, stopped_by, terminable
from flowsim.data import Dataset, require_separable
from flowsim.errors import IntegrationError, ReachabilityWarning
from flowsim.integrate.backends import ATOL_MIN_IMPLICIT, backend_for
from flowsim.integrate.backends._events import SCORES
from flowsim.integrate.balanced import lift, reduction
from flowsim.integrate.clock import clock_for
from flowsim.integrate.events import BackendChange
from flowsim.integrate.handlers import HANDLERS
from flowsim.integrate.options import Options
from flowsim.integrate.problem import Problem
from flowsim.integrate.run import Run
from flowsim.integrate.solution import Solution, replaced
from flowsim.integrate.status import Status
from flowsim.integrate.timeline import (
    RESOLVED,
    atol_for,
    log_floor_of,
)
from flowsim.symbolic.derive import System
from flowsim.symbolic.directions import AdamProxyDirection
from flowsim.symbolic.reachable import reachable_signs, underflowing

#: upper bound on the initial entries
MAX_INIT = 1e30


def solve(
    system: System,
    data: Dataset,
    init=0.1,
    *,
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
    throw: bool = True,
    allow_nonseparable: bool = False,
    collapse_tol: float = 1e-10,
    blowup_size: float = 1e100,
    progress: bool = False,
    track=(),
) -> Solution:
    r"""Integrate ``system`` (from :func:`flowsim.derive`) on ``data`` from ``init`` to ``t1``.

    Args:
        system: the derived flow.
        data: a :class:`flowsim.Dataset` (must be separable unless ``allow_nonseparable=True``).
        init: scalar alpha (every entry), an array (d,) (every layer), or (layers, d).
        t1: the horizon (give this or ``log10_t1``).
        log10_t1: the horizon as log10 t1, which reaches beyond float range (e.g. 1e6).
        backend: ``"diffrax:Tsit5|Dopri5|Dopri8|Kvaerno5"``, ``"scipy:RK45|DOP853|Radau|BDF|LSODA"``, or
            ``"auto"``: diffrax:Tsit5 up to log10 t1 = 1000, scipy:BDF beyond (explicit methods need
            O(log t1) steps there; BDF with the exact Jacobian reaches log10 t = 1e6 in a few
            hundred); with ``clock="auto"`` a Tsit5 run that spends 1,024 steps (stability-limited)
            continues on scipy:BDF in the tau clock.
        clock: ``"log_time"`` (s = log(1+t): save points fall on the clock itself and it took the
            fewest explicit steps at equal accuracy in ``benchmarks/``), ``"tau"`` (the
            loss-normalised clock, dt = e^(-S~) dtau with S~ = log mean_i q_i at theta~: for one sample the
            clock of arXiv 2603.08290, dt = dtau / q), or
            ``"auto"`` (default): tau for the implicit scipy methods, log-time otherwise. In log-time
            the field carries the rate e^{S~+s}, exponentially sensitive to theta, and Newton
            iterates of BDF and LSODA overflow it on wide data at long horizons (n = d = 100:
            BDF fails near log10 t = 1.2e5, LSODA returns NaN), while in tau theta's field has no
            such factor (both complete to log10 t = 1e6, in fewer steps).
        rtol: relative step-size control tolerance on the state.
        atol: absolute step-size control tolerance on the state; by default 1e-10, or rtol x the init's
            size (max |theta0|) where that is smaller (an atol near the state's size resolves it only to
            atol/size). The value used is in ``sol.config["atol"]``. A given atol must be below 1e-2 x the
            init's size (1e-2 for a zero init), and the scipy implicit methods need atol >= 1e-150 (so a
            tiny init runs on diffrax; ``"auto"`` then does not hand over to scipy:BDF).
        saves: number of default save points (400 if neither this nor ``save_at_log10_t`` or ``save_at_t``
            is given): one just after t = 0 (t = 1e-6), then dense in log10 t over the first decades (from
            t = 1e-3) and in log10 log10 t far out, so early switches are resolved at any horizon.
        save_at_log10_t: the log10 t of each save instead (a list or array, strictly increasing, up to
            log10 t1; t1 is appended when it stops short). Saves come from the solver's dense output
            (they do not change its steps), so :meth:`Solution.evaluate` can add points later.
        save_at_t: the time t of each save instead (t > 0, strictly increasing, up to t1), as
            ``save_at_log10_t``.
        save_at: not taken (it does not say whether it holds t or log10 t): a ValueError names
            ``save_at_t`` and ``save_at_log10_t``.
        max_steps: step budget per segment (a segment ends at a sign switch), spent in equal chunks of
            at most 1,024 steps; between chunks the state is checked for a converged critical point
            (status ``"converged"``, see ``flowsim.integrate.critical``).
        throw: raise :class:`flowsim.IntegrationError` (carrying the partial solution) if the
            status is a failure (``flowsim.FAILURES``); otherwise return it.
        collapse_tol: status "collapsed" when max|theta| falls below this fraction of its start
            (or below 1000 atol, whichever is larger: the solver cannot resolve a smaller state).
        blowup_size: status "blew_up" when max|theta| rises past this; it must be above the init's size
            (max |theta0|), which a run starts from. A value below the default stops a run early, where
            its parameters first reach that size.
        progress: show a progress bar measured in log10 t.
        track: leading-coordinate scores to locate switches of, by events: ``"magnitude"``
            (argmax |beta_j|) and/or ``"growth"`` (argmax d log|beta_j|/dt). Each switch is
            recorded in ``sol.events`` (see :func:`flowsim.switch_times`). Off by default: each
            switch restarts the solver, which costs time on wide data.

    Returns:
        A :class:`flowsim.Solution`.
    """
    opts = Options.checked(t1=t1, log10_t1=log10_t1, backend=backend, clock=clock, rtol=rtol, atol=atol, saves=saves,
                           save_at_log10_t=save_at_log10_t, save_at_t=save_at_t, save_at=save_at, max_steps=max_steps,
                           collapse_tol=collapse_tol, blowup_size=blowup_size)
    be = backend_for(backend, opts.log10_t1)
    run_clock = check_problem(system, data, clock, be, allow_nonseparable)
    track = (track,) if isinstance(track, str) else tuple(track)  # track="magnitude" was read letter by letter
    if any(k not in SCORES for k in track):
        raise ValueError(f"track takes scores from {SCORES}; got {track!r}.")
    theta0 = initial_params(system, data, init)
    problem = set_up(system, data, theta0, opts, be, run_clock, track)
    atol = problem.atol
    kept = reachable_signs(system.model, theta0, system.flow)
    if not (allow_nonseparable or data.is_regression):
        _warn_if_unreachable(system, data, kept)
    # ``arguments`` re-runs this solve (``Solution.evaluate``, saved runs); the rest says how it ran
    arguments = dict(init=np.asarray(init).tolist(), log10_t1=opts.log10_t1, backend=backend, clock=clock,
                     rtol=opts.rtol, atol=atol, max_steps=opts.max_steps, track=list(track),
                     collapse_tol=opts.collapse_tol, blowup_size=opts.blowup_size,
                     allow_nonseparable=bool(allow_nonseparable))
    # (JSON's types throughout: a saved run reads back equal, so no tuple here)
    points = opts.save_at_log10_t
    config = dict(arguments, clock=run_clock.name, saves=len(points), rho=float(system.flow.rho), track=list(track),
                  arguments=dict(arguments, **opts.asked_saves))
    fields = _integrate(problem, progress, config)
    fields = lift(fields, system, problem.speedup, data, problem.flips) if problem.reduced else fields
    sol = Solution(**dict(fields, log10_t=_on_asked_points(fields["log10_t"], points),
                          rerun=functools.partial(solve, system, data)))
    sol = _signs_kept(sol, kept)
    return _raise_failure(sol) if throw else sol


def set_up(system, data, theta0, opts, be, run_clock, track=()) -> Problem:
    """The :class:`Problem` one solve from ``theta0`` integrates, its scales checked (``check_scales``): a balanced
    product network (up to signs) runs on its invariant manifold, as the tied net, and the clock takes the flow's
    form. :func:`flowsim.sweep`'s lockstep solve sets its points up here too."""
    atol = check_scales(theta0, atol_for(theta0, opts.rtol, opts.atol), opts.atol, opts.blowup_size, be)
    reduced = reduction(system, theta0, data)
    run_system, speedup, run_data, flips = reduced or (system, 1.0, data, None)
    flow_clock = run_clock.for_flow(run_system.flow)
    adaptive = opts.auto and atol >= ATOL_MIN_IMPLICIT and flow_clock.hands_over
    return Problem(run_system, run_data, theta0[: run_system.model.n_layers], be, flow_clock, opts.log10_t1,
                   opts.save_at_log10_t, opts.rtol, atol, opts.max_steps,
                   float(log_floor_of(theta0, opts.collapse_tol, atol)), math.log(opts.blowup_size), track, speedup,
                   adaptive, flips)


def _on_asked_points(log10_t, points):
    """The saves' ``log10_t`` with those at asked points reading those points exactly: the clock's conversions
    (and a reduced solve's time shift) left t = 1 at log10 t = -5.6e-17, which ``ds.sel(log10_t=0)`` did not find."""
    log10_t = np.array(log10_t, dtype=np.float64)
    above = points.searchsorted(log10_t)
    for candidate in (points.take(above, mode="clip"), points.take(above - 1, mode="clip")):
        on = abs(log10_t - candidate) <= 1e-12 + 1e-12 * abs(candidate)  # np.isclose(rtol=atol=1e-12), bare
        np.copyto(log10_t, candidate, where=on)
    return log10_t


def _integrate(problem, progress, config):
    """The segment loop: integrate, then hand each segment's ending to its handler (``HANDLERS``). Returns the
    fields of the run's Solution (``Run.solution``)."""
    run = Run(problem, progress)
    try:
        with terminable():  # SIGTERM as a Ctrl-C: the trajectory so far is kept
            while run.status is None and not run.settled():
                seg = run.integrate()
                HANDLERS[seg.reason](run, seg)
    except KeyboardInterrupt as err:
        run.end(Status.INTERRUPTED, f"{stopped_by(err)}; the trajectory so far is kept")
    finally:
        if run.bar:
            run.bar.close()
    if run.status is Status.INTERRUPTED:
        absorbed()
    # the backends and clocks that ran (an "auto" solve may hand over); ``arguments`` keeps what was asked
    ran = " -> ".join([problem.backend.name] + [e.to_backend for e in run.events if isinstance(e, BackendChange)])
    clocks = " -> ".join(dict.fromkeys([problem.clock.name, run.clock.name]))
    return run.solution(dict(config, rho=run.rho, backend=ran, clock=clocks), lifted=problem.reduced)


#: a saved beta_j against the sign its start keeps for ever fails the solve past this fraction of max_j |beta_j|
#: (an entry decaying to 0 from its side may round across it by far less)
SIGN_SLACK = 1e-6


def excluded_signs(kept, beta, atol, layers):
    """Where rows of ``beta`` have the sign ``kept`` excludes, by more than SIGN_SLACK of the row's largest entry and
    than a beta of ``layers`` entries at what the solver resolves (RESOLVED atol: a collapsing depth-3 tied net
    rounded to beta_1 = 3e-24 of either sign). ``atol``: a number, or one per row (a column)."""
    scale = np.abs(beta).max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return (kept * beta < -np.maximum(SIGN_SLACK * scale, (RESOLVED * atol) ** layers)) & np.isfinite(kept)


def _may_exclude(kept, beta) -> bool:
    """False where no saved beta_j (rows of ``beta``) can have the sign ``kept[j]`` excludes: no coordinate keeps
    beta_j >= 0 or every beta is >= 0, and likewise for <= 0 (NaN: maybe). Two reductions over the whole array,
    where ``excluded_signs``' row-wise ones cost 0.1 ms at 400 saves x 100."""
    return bool((kept > 0).any() and not beta.min(initial=np.inf) >= 0) or \
        bool((kept < 0).any() and not beta.max(initial=-np.inf) <= 0)


def _signs_kept(sol, kept):
    """``sol``, or ``sol`` failed where a saved beta_j has the sign its start excludes (``reachable_signs``): the
    solver left a set the exact flow keeps (a balanced start of a model or flow flowsim cannot reduce to the tied
    net: BDF broke the layers' symmetry by rounding and ended "completed" at beta_j = -127 where beta_j = w^2)."""
    if Status(sol.status).is_failure or not _may_exclude(kept, sol.beta):
        return sol
    wrong = excluded_signs(kept, sol.beta, sol.config["atol"], sol.params.shape[1])
    if not wrong.any():
        return sol
    i, j = (int(k[0]) for k in np.nonzero(wrong))
    message = (f"beta_{j + 1} = {sol.beta[i, j]:.4g} at log10 t = {sol.log10_t[i]:.6g}, a sign its start excludes for "
               "ever (fs.reachable_signs): the solver left a set the exact flow keeps (layers that start equal stay "
               "equal; rounding broke that symmetry). flowsim integrates such starts on the set only for "
               "DiagonalNet(L, 'product') with flow parts that declare their tied forms (tied_rho, tied_speedup); "
               "otherwise start off it (layers not all equal) or use a tighter rtol")
    return replaced(sol, status=Status.FAILED, message=message)


def _warn_if_unreachable(system, data, signs):
    if np.isnan(signs).all() or data.separable_with(signs):
        return
    fixed = {1.0: ">= 0", -1.0: "<= 0", 0.0: "= 0"}
    kept = ", ".join(f"beta_{j + 1} {fixed[s]}" for j, s in enumerate(signs) if not np.isnan(s))
    mixed = " or an init whose signs match the data (a (layers, d) array)" if getattr(system.model, "form", None) == "product" else ""
    warnings.warn(
        f"{system.model} from this init keeps {kept} for ever, and no such beta separates these data: the flow "
        "will come to rest at a point with a positive loss (status 'converged' at a critical point; 'stalled' at an "
        "exact equilibrium of a perturbed flow; 'collapsed' where that point is beta = 0, approached until the "
        "parameters fall below the collapse floor; 'completed' if t1 comes first; a failure status where the solver "
        "cannot follow it there, with the reason), not to a max-margin direction. To separate them use "
        "DiagonalNet(depth, form='difference') (in a config file: [model] form = \"difference\"; any sign)"
        f"{mixed}.", ReachabilityWarning, stacklevel=3)


def _raise_failure(sol):
    if Status(sol.status).is_failure:
        raise IntegrationError(f"{sol.system}: status {sol.status!r}: {sol.message}. The partial solution is in "
                               ".solution.", sol)
    return sol


def check_problem(system, data, clock, be, allow_nonseparable):
    """Validate what :func:`solve` and :func:`flowsim.sweep` share beyond their :class:`Options`: the system,
    the data and whether the flow can run on them; returns the clock the flow runs in (``clock`` as asked)."""
    if not isinstance(system, System):
        raise ValueError(f"system must come from flowsim.derive(model, loss, flow); got {type(system).__name__}.")
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset(X, y); got {type(data).__name__}.")
    if not isinstance(allow_nonseparable, (bool, np.bool_)):  # "no" is truthy
        raise ValueError(f"allow_nonseparable must be True or False; got {allow_nonseparable!r}.")
    require_separable(data, allow_nonseparable)
    check_task(system, data)
    if isinstance(system.flow.direction, AdamProxyDirection) and system.flow.direction.batch >= data.n:
        raise ValueError(f"AdamProxy(batch={system.flow.direction.batch}) on n={data.n} sample(s): batch must be < n "
                         "(batch = n is the sign flow, a discontinuous field: use flowsim.SignFlow(); past n the "
                         "proxy's field is 0/0).")
    return clock_for(system.flow, clock, be.default_clock)


def check_task(system, data):
    """The loss and the data are of one task (a margin loss on labels +-1, a regression loss on real targets), and a
    regression runs a flow flowsim integrates on it: a smooth one (GD, USAM, SAM with eps > 0, steepest descent with
    p finite) or a normalised perturbation (SAM, ASAM with eps = 0), which reaches the interpolating minima in
    finite time and slides on along them (``handlers._at_regression_critical_point``, docs/theory.md 12). The sign
    flows' switch surfaces and the Adam proxy's per-sample moments are written for margin losses; a normalised
    direction (a schedule's clock) is not integrated there."""
    if system.loss.is_regression != data.is_regression:
        if system.loss.is_regression:
            raise ValueError(f"the loss {system.loss.name!r} is a regression loss (of the residual x.beta - y), but the "
                             f"data are {data.task} (labels +-1{', inferred from y' if data.task else ''}); for real "
                             "targets that happen to be +-1 build Dataset(X, y, task='regression'), for classification "
                             "use a margin loss ('logistic', 'exponential').")
        raise ValueError(f"the loss {system.loss.name!r} is a margin loss (of y x.beta, labels +-1), but the data are a "
                         "regression (real targets); use the loss 'square' (or a flowsim.Loss(..., task='regression')), "
                         "or labels +1/-1 for classification.")
    flow = system.flow
    if data.is_regression and (flow.uses_sign or flow.needs_P or flow.clock is not None):
        raise ValueError(f"{flow} on a regression: flowsim integrates GD, USAM, SAM and ASAM (eps = 0: the exact "
                         "flow, sliding along the minima it reaches; eps > 0: the smoothed one, resting at the first), "
                         "and steepest descent with p finite there. sign(g) and the Adam proxy's moments are written "
                         "for margin losses, and a normalised direction (normalised GD, a schedule's clock) is not "
                         "integrated on a regression (docs/theory.md 12).")


#: a given atol must be below this fraction of the init's size (max |theta0|; 1 for a zero init)
ATOL_FRACTION = 1e-2


def check_scales(theta0, atol, given, blowup_size, be):
    """``atol`` (the one a run uses; ``given``: the caller's, None for the default) if ``be`` can work with it, and
    ``blowup_size`` if a run from ``theta0`` can reach it."""
    largest = float(np.abs(theta0).max())
    size = largest or 1.0
    if not blowup_size > largest:
        raise ValueError(f"blowup_size={blowup_size!r} is not above the init's size {largest:.3g} (max "
                         "|theta0|): the run starts past it, so it could never end 'blew_up' there and the setting "
                         "would be ignored. Give a blowup_size above the init's size (1e100 by default).")
    if given is not None and not atol < ATOL_FRACTION * size:
        raise ValueError(f"atol={given!r} is not small against the init's size {size:.3g} (max |theta0|): the solver "
                         "would resolve the state only to atol and return a run the flow does not follow. Give atol "
                         f"below {ATOL_FRACTION:g} x that size, or leave atol=None (1e-10, or rtol x the size where "
                         "smaller).")
    if be.implicit and be.name.startswith("scipy:") and atol < ATOL_MIN_IMPLICIT:
        raise ValueError(f"atol = {atol:.3g} (from an init of size {size:.3g}) is below {ATOL_MIN_IMPLICIT:g}, where "
                         f"{be.name} fails (its error norm squares error / atol, which overflows); use "
                         "backend='diffrax:Tsit5' or 'diffrax:Kvaerno5', or a larger init.")
    return atol


def initial_params(system, data, init):
    theta0 = system.model.init_params(init, data.d)
    refuse_still_start(system, data, theta0)
    if np.abs(theta0).max() > MAX_INIT:
        raise ValueError(f"init has entries up to {np.abs(theta0).max():.3g}; beyond {MAX_INIT:g} the margins at t = 0 "
                         "leave float range at depth >= 2 (and the problem is a rescaling of a smaller one).")
    _check_defined_at(system, data, theta0)
    return theta0


def refuse_still_start(system, data, theta0):
    """An init where the run could not move is refused: all zeros where that is an equilibrium of the flow (its
    field is 0 there: beta = 0 of every network of depth >= 2, each layer's gradient carrying the other layers;
    the linear model leaves 0 along -Z^T q(0) and runs), and entries so small that float64 rounds the field of a
    coordinate to 0 where the exact flow moves it."""
    if not theta0.any():
        with np.errstate(all="ignore"):
            field, _ = system.vector_field(theta0, data)
        if not np.any(field):
            raise ValueError(f"init is all zeros, an equilibrium of {system} (its field is 0 there, so the run would "
                             "never move); start from alpha != 0.")
    stuck = np.flatnonzero(underflowing(system.model, theta0))
    if stuck.size:
        j = int(stuck[0])
        raise ValueError(f"init: the entries of coordinate {j + 1}, {theta0[:, j].tolist()}, are so small that every "
                         f"derivative of beta = {system.model.beta} in them underflows float64 (below 1e-308): the run "
                         "would hold the coordinate still where the exact flow moves it. Start from a larger init "
                         "(a depth-L network needs |w|^(L-1) above 1e-300).")


def _check_defined_at(system, data, theta0):
    """A start where the model or the loss is undefined fails here, naming which (a solver said only "array must
    not contain infs or NaNs"): sqrt(w) at w < 0, or a loss with q <= 0 beyond the margins Loss checks."""
    with np.errstate(all="ignore"):
        beta = system.numpy.beta(theta0)
        if not np.isfinite(beta).all():
            j = int(np.flatnonzero(~np.isfinite(beta))[0])
            raise ValueError(f"init: beta_{j + 1} = {system.model.beta} is not a real number at this init (layers "
                             f"{theta0[:, j].tolist()}); start where the model is defined.")
        if data.is_regression:  # a residual loss's q itself (``VectorField._residual_weights``)
            m = data.X @ beta - data.y
            finite = np.isfinite(system.numpy.q(m))
        else:
            m = data.z @ beta
            finite = np.isfinite(system.numpy.log_q(m))
    if not finite.all():
        i = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"init: the loss {system.loss.name!r} has no finite log q at sample {i + 1}'s margin m = "
                         f"{m[i]:.6g} (q = -l'(m) must be > 0 at every margin a run meets; Loss checks [-30, 30]); "
                         "start elsewhere or use a loss that decreases everywhere.")
