"""``flowsim.solve``: the one entry point that integrates a derived system on a data set."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from flowsim.integrate.backends._diffrax import DiffraxBackend
from flowsim.integrate.balanced import lift, reduction
from flowsim.integrate.backends._events import SCORES, armed, event_functions, scores
from flowsim.integrate.backends._scipy import IMPLICIT, ScipyBackend
from flowsim.data import Dataset, separable
from flowsim.symbolic.derive import System
from flowsim.errors import IntegrationError, NonSeparableError, ReachabilityWarning
from flowsim.theory.reachable import kept_entry_signs, reachable_signs
from flowsim.integrate import critical as critical
from flowsim.integrate.critical import LOSS_STILL
from flowsim.integrate.filippov import classify
from flowsim.symbolic.flow import follows_gradient
from flowsim.integrate.solution import FAILURES, OUTCOMES, Solution, log10_t_from_u
from flowsim.integrate.vector_field import CLOCKS, SCHEDULE, jax_field, numpy_field

LN10 = math.log(10.0)
MAX_SEGMENTS = 10_000
#: statuses whose state is held constant from where the solve stopped up to t1
HELD = ("stalled", "converged")
#: Beyond this log10 t1 ``backend="auto"`` switches to an implicit method: in either clock the
#: relation between t and the loss relaxes at an O(1) rate, so explicit steps stay O(1) in log t.
AUTO_IMPLICIT_LOG10_T1 = 1000.0


def _backend(spec: str, log10_t1: float):
    if spec == "auto":
        spec = "diffrax:Tsit5" if log10_t1 <= AUTO_IMPLICIT_LOG10_T1 else "scipy:BDF"
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"backend must look like 'diffrax:Tsit5' or 'scipy:Radau'; got {spec!r}.")
    family, name = spec.split(":", 1)
    if family == "diffrax":
        return DiffraxBackend(name)
    if family == "scipy":
        return ScipyBackend(name)
    raise ValueError(f"unknown backend family {family!r} in {spec!r}; use 'diffrax:<Solver>' or 'scipy:<Method>'.")


def _positive(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number; got {value!r}.") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}.")
    return v


def _horizon(t1, log10_t1):
    if (t1 is None) == (log10_t1 is None):
        raise ValueError("give exactly one of t1 (e.g. t1=1e100) or log10_t1 (e.g. log10_t1=1e6, beyond float range).")
    if t1 is not None:
        if isinstance(t1, (int, float)) and math.isinf(t1) and t1 > 0:
            raise ValueError("t1 = inf cannot be reached; give a finite t1, or log10_t1 (e.g. 1e6) for horizons beyond float range.")
        t1 = _positive("t1", t1)
        return math.log10(t1), math.log1p(t1)
    x = float(log10_t1)
    if not math.isfinite(x):
        raise ValueError(f"log10_t1 must be finite; got {log10_t1!r}.")
    return x, float(_u_of(x))


def _save_grid(log10_t1, saves, shift=0.0):
    """u = log(1+t) at t = 0 and saves-1 points log-spaced in t up to t1, for a system ``10**shift``
    times faster (its times are the asked-for ones divided by that)."""
    lo = min(-3.0, log10_t1 - 3.0)
    grid = (np.linspace(lo, log10_t1, saves - 1) if saves > 2 else np.array([log10_t1])) - shift
    return np.concatenate([[0.0], _u_of(grid)])


def _u_of(log10_t):
    """u = log(1 + t) from log10 t, beyond float range of t."""
    return np.logaddexp(0.0, np.asarray(log10_t, float) * LN10)


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
    atol: float = 1e-10,
    saves: int = 400,
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
        t1 / log10_t1: the horizon, exactly one; ``log10_t1`` reaches beyond float range.
        backend: ``"diffrax:Tsit5|Dopri5|Dopri8|Kvaerno5"``, ``"scipy:RK45|DOP853|Radau|BDF|LSODA"``, or
            ``"auto"``: diffrax:Tsit5 up to log10 t1 = 1000, scipy:BDF beyond (explicit methods need
            O(log t1) steps there; BDF with the exact Jacobian reaches log10 t = 1e6 in a few
            hundred); with ``clock="auto"`` a Tsit5 run that spends 1,024 steps (stability-limited)
            continues on scipy:BDF in the tau clock.
        clock: ``"log_time"`` (s = log(1+t): save points fall on the clock itself and it took the
            fewest explicit steps at equal accuracy in ``benchmarks/``), ``"tau"`` (the
            loss-normalised clock, dt = dtau / q(theta~), the clock of arXiv 2603.08290), or
            ``"auto"`` (default): tau for the implicit scipy methods, log-time otherwise. In log-time
            the field carries the rate e^{S~+s}, exponentially sensitive to theta, and Newton
            iterates of BDF and LSODA overflow it on wide data at long horizons (n = d = 100:
            BDF fails near log10 t = 1.2e5, LSODA returns NaN), while in tau theta's field has no
            such factor (both complete to log10 t = 1e6, in fewer steps).
        rtol, atol: step-size control tolerances on the state.
        saves: number of save points: t = 0 and ``saves - 1`` log-spaced in t up to t1.
        max_steps: step budget per segment (a segment ends at a sign switch), spent in equal chunks of
            at most 1,024 steps; between chunks the state is checked for a converged critical point
            (status ``"converged"``, see ``flowsim.integrate.critical``).
        throw: raise :class:`flowsim.IntegrationError` (carrying the partial solution) if the
            status is a failure (``flowsim.FAILURES``); otherwise return it.
        collapse_tol: status "collapsed" when max|theta| falls below this fraction of its start
            (or below 1000 atol, whichever is larger: the solver cannot resolve a smaller state).
        blowup_size: status "blew_up" when max|theta| exceeds this.
        progress: show a progress bar measured in log10 t.
        track: leading-coordinate scores to locate switches of, by events: ``"magnitude"``
            (argmax |beta_j|) and/or ``"growth"`` (argmax d log|beta_j|/dt). Each switch is
            recorded in ``sol.events`` (see :func:`flowsim.switch_times`). Off by default: each
            switch restarts the solver, which costs time on wide data.

    Returns:
        A :class:`flowsim.Solution`.
    """
    L1, u1 = _horizon(t1, log10_t1)
    be = _backend(backend, L1)
    adaptive = backend == "auto" and clock == "auto"
    rtol, atol, collapse_tol, blowup_size, clock = _check_common(
        system, data, resolve_clock(clock, be), rtol, atol, saves, max_steps, allow_nonseparable, collapse_tol,
        blowup_size)
    track = tuple(track)
    if any(k not in SCORES for k in track):
        raise ValueError(f"track takes scores from {SCORES}; got {track!r}.")
    theta0 = initial_params(system, data, init)
    if not allow_nonseparable:
        _warn_if_unreachable(system, data, theta0)
    config = dict(init=np.asarray(init).tolist(), log10_t1=L1, backend=backend, clock=clock, rtol=rtol, atol=atol,
                  saves=int(saves), max_steps=int(max_steps), rho=float(system.flow.rho), track=track)
    floors = (_log_floor(theta0, collapse_tol, atol), math.log(blowup_size))
    # a balanced product network is integrated on its invariant manifold, as the tied net
    reduced = reduction(system, theta0)
    run_system, speedup = reduced or (system, 1.0)
    sol = _integrate(run_system, data, be, clock, theta0[: run_system.model.n_layers], L1, u1, saves, rtol, atol,
                     max_steps, floors, track, progress, config, speedup, adaptive)
    sol = lift(sol, system, speedup, config) if reduced else sol
    return _raise_failure(sol) if throw else sol


def _integrate(system, data, be, clock, theta0, L1, u1, saves, rtol, atol, max_steps, floors, track, progress, config,
               speedup=1.0, adaptive=False):
    """The segment loop: integrate, then hand each segment's ending to its handler (``HANDLERS``).
    ``speedup``: the system runs that many times faster than the one asked for (``_balanced``); the
    horizon and the save points are scaled to match. ``adaptive``: backend and clock were "auto", so
    an explicit method that spends a whole chunk of steps hands over to an implicit one."""
    u1 = u1 if speedup == 1.0 else float(_u_of(L1 - math.log10(speedup)))
    run = _Run(system, data, be, clock, theta0, L1, u1, saves, rtol, atol, int(max_steps), *floors, track, progress,
               speedup, adaptive and clock == "log_time" and not system.flow.uses_sign)
    try:
        while run.status is None and not run.settled():
            seg = run.integrate()
            HANDLERS.get(seg.reason, _on_failure)(run, seg)
    except KeyboardInterrupt:
        run.status, run.message = "interrupted", "interrupted by the user (KeyboardInterrupt); the trajectory so far is kept"
    finally:
        if run.bar:
            run.bar.close()
    return run.solution(dict(config, rho=run.rho))


#: a solve checks for a critical point (``_critical``) every this many steps; the step budget is
#: spent in equal chunks of at most this size (one compiled diffrax solve serves them all)
CHECK_EVERY = 1024


class _Run:
    """The mutable state of one solve between segments: the state, the Filippov signs, the records,
    the counters and, once decided, the status. Each segment ending has one handler (``HANDLERS``)."""

    def __init__(self, system, data, be, clock, theta0, L1, u1, saves, rtol, atol, max_steps, log_floor,
                 log_ceiling, track, progress, speedup, adaptive):
        self.system, self.data, self.be, self.clock = system, data, be, clock
        self.adaptive = adaptive  # may hand over to an implicit method (``_hand_over``)
        self.rtol, self.atol, self.max_steps = rtol, atol, max_steps
        self.chunk = -(-max_steps // -(-max_steps // CHECK_EVERY))  # equal chunks, none over CHECK_EVERY
        self.K, self.d = theta0.shape
        self.uses_sign = system.flow.uses_sign
        self.vf = numpy_field(system, self.K, self.d)
        self.vf_run = jax_field(system, self.K, self.d) if isinstance(be, DiffraxBackend) else self.vf
        shift = math.log10(speedup)
        self.Z, self.rho, self.u1 = data.z, float(system.flow.rho), u1
        _, self.to_u, self.targets, run_targets, self.s_max = _clock_plan(clock, system.flow, L1, u1, saves, shift)
        self.log_floor, self.log_ceiling = log_floor, log_ceiling
        # smooth flows: sigma holds the sign each entry keeps (the crossing event); sign flows: sign(G)
        self.sigma = kept_entry_signs(system.model, theta0, system.flow)
        self.pinned = np.zeros((self.K, self.d), bool)
        self.status, self.message, self.problem = None, "", None
        theta = theta0
        if self.uses_sign:
            self.sigma, self.pinned, theta, self.problem = classify(self.vf, theta, self.Z, self.rho,
                                                                    np.zeros((self.K, self.d)), self.pinned)
        self.track = () if self.d == 1 else track  # one coordinate always leads
        self.leaders = np.array([self.leader(kind, theta) for kind in self.track], dtype=np.int64)
        self.s, self.y = 0.0, np.concatenate([theta.ravel(), [0.0]])
        self.rec_s, self.rec_y = [self.s], [self.y]
        self.remaining = run_targets[1:]
        self.looked = 0  # saves up to here were tested for a rest point of the flow (``_earlier_rest_point``)
        self.stats = {"steps": 0, "segments": 0, "switches": 0}
        self.segment_steps = 0  # steps since the last sign switch, against max_steps
        self.restarts = 0  # segments ended by a switch event (not by a chunk of steps)
        self.resume = None  # a scipy solver that ran out of its chunk of steps continues
        self.events = []
        self.bar = _progress_bar(L1 - shift, self.targets) if progress else None
        self.t_start = time.perf_counter()

    @property
    def theta(self):
        return self.y[:-1].reshape(self.K, self.d)

    def leader(self, kind, theta, exclude=None):
        return _leader(self.vf, kind, theta, self.Z, self.rho, self.sigma, exclude)

    def settled(self) -> bool:
        """Before a segment: a Filippov problem, an exact equilibrium or Zeno switching ends the solve."""
        if self.problem is not None:
            self.status, self.message = "chattering", self.problem
        elif at_rest(self.vf, self.y, self.Z, self.rho, self.sigma, self.pinned):
            self.hold("stalled")
        elif self.restarts >= MAX_SEGMENTS:
            self.status, self.message = "chattering", f"more than {MAX_SEGMENTS} sign-switch segments (Zeno switching?)"
        return self.status is not None

    def hold(self, status, message=""):
        """The state is constant from here to t1: only the clocks move."""
        self.status, self.message = status, message
        if self.bar:
            self.bar.to_u(self.u1)  # the rest of the way is held
        _extend_constant(self.vf, self.clock, self.s, self.y, self.Z, self.rho, self.sigma, self.pinned,
                         self.remaining, self.rec_s, self.rec_y, self.to_u)
        self.remaining = self.remaining[:0]

    def integrate(self):
        """One backend call from the current state, at most ``chunk`` steps; its saves are recorded."""
        args = (self.Z, self.rho, self.sigma, self.pinned, self.u1, self.log_floor, self.log_ceiling,
                self.leaders.copy())
        args = args + (armed(event_functions(self.vf, self.clock, self.uses_sign, self.track), self.s, self.y, args),)
        if isinstance(self.be, ScipyBackend):
            extra = {"progress": self.bar.to_u if self.bar else None, "track": self.track}
        else:
            extra = {"n_targets": len(self.targets), "track": self.track}
        log_loss_before = self.log_loss()
        seg = self.be.integrate(self.vf_run, structure_key(self.system), self.clock, self.uses_sign,
                                bool(self.pinned.any()), self.y, self.s, self.s_max, args, self.remaining,
                                self.rtol, self.atol, self.chunk, resume=self.resume, **extra)
        self.resume = seg.resume
        self.stats["segments"] += 1
        for k, v in seg.stats.items():
            self.stats[k] = self.stats.get(k, 0) + v
        self.segment_steps += seg.stats.get("steps", 0)
        self.rec_s.extend(seg.s_saves.tolist())
        self.rec_y.extend(list(seg.y_saves))
        self.remaining = self.remaining[len(seg.s_saves):]
        self.s, self.y = seg.s_end, seg.y_end
        self.log_loss_change = abs(self.log_loss() - log_loss_before)
        if self.bar:
            self.bar.to_u(self.u_now)
        return seg

    def beta(self, theta=None):
        theta = self.theta if theta is None else np.reshape(theta, (self.K, self.d))
        return np.asarray(self.system.numpy.beta(theta), float).reshape(self.d)

    def log_loss(self, theta=None):
        with np.errstate(all="ignore"):
            return float(np.logaddexp.reduce(self.system.numpy.log_l(self.Z @ self.beta(theta)).reshape(-1)))

    @property
    def u_now(self):
        return self.y[-1] if self.clock == "tau" else float(self.to_u(self.s))

    def solution(self, config):
        close_records(self.status, self.clock, self.remaining, self.s, self.y, self.rec_s, self.rec_y)
        self.stats["wall_s"] = time.perf_counter() - self.t_start
        if self.status in ("max_steps", "failed") and self.clock == "log_time":
            with np.errstate(all="ignore"):
                _, S_end = self.vf.sliding_field_and_scale(self.theta, self.Z, self.rho, self.sigma, self.pinned)
            if S_end + self.s > 700:  # the rate e^{S~+s} overflows: no step size helps
                self.message = RATE_OVERFLOW.format(log10_t=float(log10_t_from_u(self.s)), rate=(S_end + self.s) / LN10)
        message = self.message or (OUTCOMES.get(self.status) or FAILURES.get(self.status, ""))
        return _assemble(self.system, self.data, self.clock, self.to_u, np.asarray(self.rec_s), np.asarray(self.rec_y),
                         self.K, self.d, self.status, message, self.stats, self.events, config)


def _on_end(run, seg):
    """The horizon, a collapse or a blow-up. A flow that reaches the horizon on a plateau (the loss
    unchanged between the last two saves) is reported "converged" if it has, as other backends would."""
    status, message = end_status(seg.reason, run.clock)
    plateau = status == "completed" and len(run.rec_y) > 1 and abs(
        run.log_loss(run.rec_y[-2][:-1]) - run.log_loss()) <= LOSS_STILL
    if not (plateau and _converged(run, loss_still=True)):
        run.status, run.message = status, message


def _on_switch(run, seg):
    """A sign switch or a change of a tracked leader. Events can coincide (a coordinate sliding to 0
    ties with another at 0): the signs and every tracked leader are re-examined whatever fired."""
    tau_now, lt_now = _tau(run.clock, run.s, run.y), float(log10_t_from_u(run.u_now))
    theta = run.theta
    if run.uses_sign:
        was = run.pinned.copy()
        run.sigma, run.pinned, theta, run.problem = classify(run.vf, theta, run.Z, run.rho, run.sigma, run.pinned)
        if seg.reason == "switch" or (run.pinned != was).any():
            run.stats["switches"] += 1
            run.events.append({"kind": "sign_switch", "log10_t": lt_now, "tau": tau_now,
                               "pinned": [tuple(int(i) for i in k) for k in zip(*np.nonzero(run.pinned & ~was))]})
        run.y = np.concatenate([theta.ravel(), [run.y[-1]]])
    run.segment_steps = 0
    run.restarts += 1
    for i, kind in enumerate(run.track):
        old = int(run.leaders[i])
        run.leaders[i] = run.leader(kind, theta, exclude=old if seg.reason == f"lead_{kind}" else None)
        if run.leaders[i] != old:
            run.events.append({"kind": f"lead_{kind}", "log10_t": lt_now, "tau": tau_now, "from": old,
                               "to": int(run.leaders[i]), "beta": run.beta(theta).tolist()})


def _on_chunk_end(run, seg):
    """A chunk of steps is spent: a converged critical point, the step budget, a hand-over to an implicit
    method (``backend="auto"``), or on with the next chunk."""
    if _converged(run):
        return
    if run.adaptive:
        _hand_over(run, IMPLICIT_FALLBACK)
    elif run.segment_steps >= run.max_steps:
        run.status = "max_steps"


#: where ``backend="auto"`` goes when an explicit method spends a whole chunk: the steps of an explicit
#: method are stability-limited there (a step count that grows like t on a plateau, or with n on wide
#: data), an implicit one's are not (n = 2000, d = 500 l2-SAM to 1e30: Tsit5 16,384 steps and short
#: of t1 after 83 s, BDF 393 steps in 10 s)
IMPLICIT_FALLBACK = "scipy:BDF"


def _hand_over(run, spec):
    """Continue with ``spec`` in the tau clock from the current state: under log-time the records are
    (s = u, y = [theta, tau]), under tau (s = tau, y = [theta, u]), so the clocks swap places."""
    swap = lambda s, y: (float(y[-1]), np.concatenate([y[:-1], [s]]))  # noqa: E731
    pairs = [swap(s, y) for s, y in zip(run.rec_s, run.rec_y)]
    run.rec_s, run.rec_y = [p[0] for p in pairs], [p[1] for p in pairs]
    run.s, run.y = swap(run.s, run.y)
    run.events.append({"kind": "backend", "log10_t": float(log10_t_from_u(run.y[-1])), "tau": run.s,
                       "from": run.be.name, "to": spec})
    run.be, run.clock, run.adaptive, run.resume = _backend(spec, 0.0), "tau", False, None
    run.vf_run, run.s_max, run.segment_steps = run.vf, 1e300, 0


def _on_crossing(run, seg):
    """A solver stepped across an invariant plane w = 0 (``kept_entry_signs``): a failure, said so."""
    k = np.unravel_index(int(np.argmin(np.where(run.sigma != 0, run.sigma * run.theta, np.inf))), run.sigma.shape)
    run.status, run.message = "failed", CROSSING.format(backend=run.be.name, entry=(int(k[0]), int(k[1]) + 1),
                                                        log10_t=float(log10_t_from_u(run.u_now)))


def _on_failure(run, seg):
    """A failed step: near a minimum the l2-SAM field -grad L(theta + rho g/|g|) is discontinuous, and an
    implicit method fails there, so a converged critical point is looked for first."""
    if not (seg.reason == "failed" and _converged(run, loss_still=True)):
        run.status, run.message = seg.reason, seg.message


#: at most this many saved states are tested per look back (each test is a few O((Kd)^3) Newton steps)
LOOK_BACK = 16


def _earlier_rest_point(run) -> bool:
    """A perturbed flow can come to rest where its evaluation point is a critical point, a rest point
    that may attract from one side only: a solver that steps across it goes on to a state the exact
    flow never reaches (and may report that as converged). So the saves since the last look, where the
    loss stood still, are tested for a rest point of the flow itself, and the earliest one found is
    held from that save on."""
    start, run.looked = run.looked, len(run.rec_y)
    if run.K * run.d > 4096:
        return False
    still = [i for i in range(max(start, 1), len(run.rec_y))
             if abs(run.log_loss(run.rec_y[i][:-1]) - run.log_loss(run.rec_y[i - 1][:-1])) <= LOSS_STILL]
    for i in still[::-(-len(still) // LOOK_BACK) or 1]:  # spread over the stretch: a rest lasts many saves
        theta = run.rec_y[i][:-1].reshape(run.K, run.d)
        cp = critical.rest_point(run.vf, theta, run.Z, run.rtol, run.atol, run.rho)
        if cp is not None:
            run.remaining = np.concatenate([np.asarray(run.rec_s[i + 1:], float), run.remaining])
            run.rec_s, run.rec_y = run.rec_s[:i + 1], run.rec_y[:i + 1]
            run.s, run.y, run.resume = run.rec_s[i], np.concatenate([cp.limit.ravel(), run.rec_y[i][-1:]]), None
            run.hold("converged", critical.describe(run.system, run.data, cp, float(log10_t_from_u(run.u_now))))
            return True
    return False


def _converged(run, loss_still=False) -> bool:
    """Hold the limit as "converged" if the state has converged to a critical point (``_critical``).
    Unless ``loss_still``, only where the loss has stopped decreasing (the test costs O((Kd)^3))."""
    if not follows_gradient(run.system.flow):
        return False
    if run.rho > 0 and _earlier_rest_point(run):
        return True
    if not (loss_still or run.log_loss_change <= LOSS_STILL):
        return False
    cp = critical.find(run.vf, run.theta, run.Z, run.rtol, run.atol,
                       critical.arrival_radius(run.system.flow, run.theta.size), rho=run.rho)
    if cp is None:
        return False
    message = critical.describe(run.system, run.data, cp, float(log10_t_from_u(run.u_now)))
    run.y = np.concatenate([cp.limit.ravel(), run.y[-1:]])
    run.hold("converged", message)
    return True


def _warn_if_unreachable(system, data, theta0):
    signs = reachable_signs(system.model, theta0, system.flow)
    if np.all(np.isnan(signs)) or separable(data.z, signs):
        return
    fixed = {1.0: ">= 0", -1.0: "<= 0", 0.0: "= 0"}
    kept = ", ".join(f"beta_{j + 1} {fixed[s]}" for j, s in enumerate(signs) if not np.isnan(s))
    mixed = " or an init whose signs match the data (a (layers, d) array)" if getattr(system.model, "form", None) == "product" else ""
    warnings.warn(
        f"{system.model} from this init keeps {kept} for ever, and no such beta separates these data: the flow "
        "will converge to a critical point with a positive loss (status 'converged'), not to a max-margin "
        f"direction. To separate them use DiagonalNet(depth, form='difference') (any sign){mixed}.",
        ReachabilityWarning, stacklevel=3)


def _raise_failure(sol):
    if sol.status in FAILURES:
        raise IntegrationError(f"{sol.system}: status {sol.status!r}: {sol.message}. The partial solution is in "
                               ".solution.", sol)
    return sol


#: segment endings (backend reasons) that end a solve normally, and the status each gives
ENDINGS = {"end": "completed", "horizon": "completed", "collapse": "collapsed", "blowup": "blew_up"}
RATE_OVERFLOW = ("at log10 t = {log10_t:.6g} the log-time rate t e^{{S~}} is 10^{rate:.4g}, beyond float range: the loss "
                 "no longer decreases (an equilibrium that is not exact: exact ones, where the field is 0, are held "
                 "constant as 'stalled'), and such a state cannot be followed past t ~ 1e308 in either clock")
#: the tau clock ends at the horizon event; running out of tau means t stopped growing with it
TAU_EXHAUSTED = ("tau reached 1e300 before t1: the loss no longer decreases (an equilibrium that is not exact: exact "
                 "ones, where the field is 0, are held constant as 'stalled'), so t = tau e^{-S} cannot reach t1 in "
                 "the tau clock; the log-time clock reaches t = 1e300 on it")


def end_status(reason, clock):
    """Status and message of a segment that ended with ``reason`` (a key of ``ENDINGS``): the tau clock
    ends at its horizon event, so running out of tau is a failure."""
    if reason == "end" and clock == "tau":
        return "failed", TAU_EXHAUSTED
    return ENDINGS[reason], ""


CROSSING = ("{backend} stepped across w[{entry[0]}, {entry[1]}] = 0 (layer, 1-based coordinate) at log10 t = "
            "{log10_t:.6g}. That plane is invariant: the entry's field carries the factor w^(L-1), so the exact flow "
            "does not reach it in finite time (normalised SAM only where the gradient vanishes with it, a point "
            "where its field is discontinuous and the continuation not unique). flowsim does not follow a solver "
            "across it; the trajectory up to it is kept")
HANDLERS = {**{reason: _on_end for reason in ENDINGS}, "switch": _on_switch, "max_steps": _on_chunk_end,
            "crossing": _on_crossing,
            **{f"lead_{kind}": _on_switch for kind in SCORES}}


def close_records(status, clock, remaining, s, y, rec_s, rec_y):
    """Finish the saved records of a solve that ended at (s, y) with ``remaining`` targets unreached."""
    if status == "completed" and len(remaining):
        # the horizon event is located to ~1e-13 in u; targets within that of the end are the end point
        end = y[-1] if clock == "tau" else s  # remaining targets are in the integration's own units
        close = remaining <= end + 1e-9 * (1.0 + abs(end))
        rec_s.extend([s] * int(close.sum()))
        rec_y.extend([y] * int(close.sum()))
    if status not in ("completed", *HELD) and rec_s[-1] != s:
        rec_s.append(s)  # keep the final state of an early ending
        rec_y.append(y)


def resolve_clock(clock, be):
    """``clock="auto"``: the tau clock for the implicit scipy methods, log-time for the rest."""
    if clock == "auto":
        return "tau" if isinstance(be, ScipyBackend) and be.method in IMPLICIT else "log_time"
    return clock


def _check_common(system, data, clock, rtol, atol, saves, max_steps, allow_nonseparable, collapse_tol, blowup_size):
    """Validate the arguments :func:`solve` and :func:`flowsim.sweep` share; returns the
    normalised tolerances and the clock the flow runs in."""
    if not isinstance(system, System):
        raise ValueError(f"system must come from flowsim.derive(model, loss, flow); got {type(system).__name__}.")
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset(X, y); got {type(data).__name__}.")
    if not allow_nonseparable and not data.is_separable:
        raise NonSeparableError(
            "data are not linearly separable (the LP Z beta >= 1 is infeasible), so there is no max-margin "
            "limit; pass allow_nonseparable=True to integrate anyway."
        )
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {(*CLOCKS, 'auto')}; got {clock!r}.")
    if getattr(system.flow.direction, "batch", 1) >= data.n > 1:
        raise ValueError(f"AdamProxy(batch={system.flow.direction.batch}) on n={data.n} samples: batch must be < n "
                         "(batch = n is the sign flow, a discontinuous field: use flowsim.SignFlow()).")
    if getattr(system.flow, "clock", None) == SCHEDULE:
        clock = SCHEDULE  # the learning-rate schedule is the clock of sign and Adam-proxy flows
    rtol, atol = _positive("rtol", rtol), _positive("atol", atol)
    collapse_tol, blowup_size = _positive("collapse_tol", collapse_tol), _positive("blowup_size", blowup_size)
    if isinstance(saves, bool) or not isinstance(saves, (int, np.integer)) or saves < 2:
        raise ValueError(f"saves must be an integer >= 2; got {saves!r}.")
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer; got {max_steps!r}.")
    return rtol, atol, collapse_tol, blowup_size, clock


def initial_params(system, data, init):
    theta0 = system.model.init_params(init, data.d)
    if not np.any(theta0):
        raise ValueError("init is all zeros: every flow here has beta = 0 as an equilibrium; start from alpha != 0.")
    return theta0


def structure_key(system):
    return (system.model, system.loss.name, system.flow.key)


def _log_floor(theta0, collapse_tol, atol):
    # below ~atol the solver no longer resolves the state, and the l2-SAM field is discontinuous at 0
    return math.log(max(collapse_tol * float(np.abs(theta0).max()), 1e3 * atol))


def _clock_plan(clock, flow, L1, u1, saves, shift=0.0):
    """Clock maps, the save grid (in u and in the integration variable) and the end of the clock u1, for
    a system ``10**shift`` times faster than the one asked for (horizon 10**L1)."""
    to_s, to_u = _clock_maps(clock, flow, u1)
    targets = _save_grid(L1, int(saves), shift)
    s_max = 1e300 if clock == "tau" else float(to_s(u1))
    return to_s, to_u, targets, (targets if clock == "tau" else to_s(targets)), s_max


def _leader(vf, kind, theta, Z, rho, sigma, exclude=None):
    """The coordinate that leads in ``kind`` just after this state (ties broken by a short probe
    along the field, so a tie at the start or at a switch picks the coordinate about to lead)."""
    sc = scores(vf, kind, theta, Z, rho, sigma)
    F, _ = vf.field_and_scale(theta, Z, rho, sigma)
    h = 1e-6 * (1.0 + np.abs(theta).max()) / max(np.abs(F).max(), 1e-300)
    ahead = scores(vf, kind, theta + h * F, Z, rho, sigma)
    best = np.max(sc)
    tied = np.abs(sc - best) <= 1e-9 * max(abs(best), 1e-300) if np.isfinite(best) else sc == best
    if exclude is not None:
        tied = np.ones_like(tied) if tied.sum() <= 1 else tied  # at a switch the overtaker is new
        ahead = np.where(np.arange(len(sc)) == exclude, -np.inf, ahead)
    return int(np.argmax(np.where(tied, ahead, -np.inf)))


def _tau(clock, s, y):
    return float(s if clock == "tau" else y[-1])


def _clock_maps(clock, flow, u1):
    """s(u) and u(s) for the integration variable s, u = log(1+t). Schedule clock ds = eta dt with
    eta = lr (t+1)^-a: s = lr expm1((1-a) u)/(1-a) (a < 1), lr u (a = 1)."""
    if clock != SCHEDULE:
        return (lambda u: np.asarray(u, float)), (lambda s: np.asarray(s, float))
    lr, a = flow.lr, flow.decay
    if a == 1.0:
        return (lambda u: lr * np.asarray(u, float)), (lambda s: np.asarray(s, float) / lr)
    if (1 - a) * u1 > 700:
        raise ValueError(f"with decay={a} the schedule clock s ~ t^(1-a) overflows before t1; use decay=1 "
                         "(s = lr log(1+t)) for horizons beyond t ~ 10^(300/(1-a)).")
    return (lambda u: lr * np.expm1((1 - a) * np.asarray(u, float)) / (1 - a),
            lambda s: np.log1p((1 - a) * np.asarray(s, float) / lr) / (1 - a))


def at_rest(vf, y, Z, rho, sigma, pinned) -> bool:
    """An exact equilibrium: the field vanishes (every entry sliding, l_inf-SAM with alpha_j = rho, a
    critical point), so the state stays put for ever. Integrating it instead would follow the clocks
    alone until they leave float range (t ~ 1e300), short of any longer horizon."""
    theta = y[:-1].reshape(vf.K, vf.d)
    with np.errstate(all="ignore"):
        F, _ = (vf.sliding_field_and_scale(theta, Z, rho, sigma, pinned) if pinned.any()
                else vf.field_and_scale(theta, Z, rho, sigma))
    return not np.any(F)


def _extend_constant(vf, clock, s, y, Z, rho, sigma, pinned, remaining, rec_s, rec_y, to_u):
    """At rest (see ``at_rest``) the state is constant; only the clocks move (dt/dtau = e^{-S})."""
    K, d = vf.K, vf.d
    if clock == SCHEDULE:  # remaining targets are values of s; the last entry counts s
        rec_s.extend(remaining.tolist())
        rec_y.extend(np.concatenate([y[:-1], [sk]]) for sk in remaining)
        return
    _, S = vf.sliding_field_and_scale(y[:-1].reshape(K, d), Z, rho, sigma, pinned)
    u_now = y[-1] if clock == "tau" else s
    tau_now = _tau(clock, s, y)
    with np.errstate(over="ignore"):
        for u in remaining:
            # t_k - t_now = e^u - e^{u_now}
            dtau = np.exp(S + u + np.log1p(-np.exp(min(u_now - u, 0.0)))) if u > u_now else 0.0
            tau = tau_now + dtau
            if clock == "tau":
                rec_s.append(tau)
                rec_y.append(np.concatenate([y[:-1], [u]]))
            else:
                rec_s.append(u)
                rec_y.append(np.concatenate([y[:-1], [tau]]))


def _assemble(system, data, clock, to_u, s, Y, K, d, status, message, stats, events, config):
    params = Y[:, :-1].reshape(-1, K, d)
    if clock == "tau":
        u, tau = Y[:, -1], s
    elif clock == SCHEDULE:  # tau holds the schedule clock s for these flows
        u, tau = to_u(s), s
    else:
        u, tau = s, Y[:, -1]
    c = system.numpy  # elementwise formulas: evaluate all save points at once
    beta = c.beta(np.moveaxis(params, 1, 0)).reshape(-1, d)
    margins = beta @ data.z.T
    ll = c.log_l(margins).reshape(-1, data.n)
    mx = ll.max(axis=1, keepdims=True)
    log_loss = (mx[:, 0] + np.log(np.exp(ll - mx).sum(axis=1))) - math.log(data.n)
    return Solution(system=system, data=data, log10_t=log10_t_from_u(u), tau=np.asarray(tau, float), params=params,
                    beta=beta, log_loss=log_loss, margins=margins, status=status, message=message, stats=stats,
                    config=config, events=events)


class _progress_bar:
    """tqdm bar in log10 t (linear t would sit at 0% for a horizon of 1e100)."""

    def __init__(self, L1, targets):
        from tqdm.auto import tqdm

        self.lo = float(log10_t_from_u(targets[1]))
        self.bar = tqdm(total=round(L1 - self.lo, 3), unit="log10 t", bar_format="{l_bar}{bar}| log10 t {postfix}")
        self.done = 0.0

    def to_u(self, u):
        x = float(log10_t_from_u(u))
        new = min(max(x - self.lo, 0.0), self.bar.total)
        if new > self.done:
            self.bar.update(round(new - self.done, 3))
            self.done = new
            self.bar.set_postfix_str(f"{x:.4g}")

    def close(self):
        self.bar.close()
