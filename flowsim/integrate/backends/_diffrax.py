"""diffrax backend: one jitted ``diffeqsolve`` per segment (kept on disk between processes: ``_stored``),
events root-found by bisection on the dense output; save targets saved as the solver passes them (log-time and schedule clocks) or found
on the dense output (tau clock, where the targets are values of the state u). Compiled once per (system structure,
solver, clock, step budget, save slots: ``target_slots``); data, rho, init, horizon, rtol and atol are
run-time arguments, so one compile serves every horizon, alpha, rho and tolerance."""

from __future__ import annotations

import collections
import dataclasses
import os
import threading

import diffrax
import numpy as np
import optimistix as optx

from flowsim._jax import jax, jnp
from flowsim.field.vector_field import jax_field
from flowsim.integrate.backends import _unrolled
from flowsim.integrate.backends._base import Backend, Ending, Segment
from flowsim.integrate.backends._events import event_functions, first_event
from flowsim.integrate.backends._stored import StoredKernel
from flowsim.integrate.segment_args import SegmentArgs

#: Tsit5 and Dopri5 are diffrax's, with the stages unrolled (see ``_unrolled``)
SOLVERS = {"Tsit5": _unrolled.Tsit5, "Dopri5": _unrolled.Dopri5, "Dopri8": diffrax.Dopri8, "Kvaerno5": diffrax.Kvaerno5}

#: compiled kernels kept in a process (the least recently used beyond it are released): each holds ~450 memory
#: mappings of its machine code, and a process past the kernel's limit (vm.max_map_count, 65,530 by default) crashes
#: in XLA at its next compile; FLOWSIM_KERNELS_KEPT sets another number
KERNELS_KEPT = int(os.environ.get("FLOWSIM_KERNELS_KEPT", "32"))
_CACHE: collections.OrderedDict = collections.OrderedDict()
_BUILDING = threading.Lock()
#: step-size controller gains: diffrax's default (integral) controller. Its PI suggestion for mildly stiff
#: problems (pcoeff 0.4, icoeff 0.3) rejects fewer steps where long horizons make explicit steps
#: stability-limited, but takes 20-25% more steps in all (GD and l2-SAM to 1e30-1e100, log10 t1 = 1e4,
#: sweeps) and was slower everywhere we measured, at errors well inside rtol either way (benchmarks/, README)
CONTROLLER: dict = {}
#: a sweep's kernel maps these segment arguments over its members and shares the rest
BATCHED = SegmentArgs(Z=None, rho=0, sigma=None, pinned=None, log_floor=0)


def error_norm(scaled):
    """A step's error, scaled by atol + rtol |y|: its RMS over the parameters, and the clock entry (the
    state's last) held to the tolerance on its own. diffrax's RMS over every entry let the clock, whose
    scaled error is ~0, loosen the parameters' tolerance by sqrt((n + 1) / n): 15% at d = 3, where the
    benchmark sweep's direction error at one point was 3x the hand-written peer's (benchmarks/, part c)."""
    return jnp.maximum(optx.rms_norm(scaled[:-1]), jnp.abs(scaled[-1]))


class _IntervalBisection(optx.Bisection):
    """Bisection that stops when the bracket is small. optimistix also asks |f| < atol, which an
    event with a steep or discontinuous slope (collapse onto the kink at 0) cannot meet."""

    def terminate(self, fn, y, args, options, state, tags):
        scale = self.atol + self.rtol * jnp.abs(y)
        return jnp.abs(state.lower - state.upper) < scale, optx.RESULTS.successful


def _build(vf, clock, uses_sign, sliding, solver_name, max_steps, n_targets, track):
    rhs = vf.rhs(clock, sliding.planes, sliding.surfaces, sliding.on_minima)
    events = event_functions(vf, clock, uses_sign, track, sliding.surfaces)
    solver = SOLVERS[solver_name]()
    bisect = _IntervalBisection(rtol=1e-14, atol=1e-14, flip=True)  # events fall through 0

    def run(y0, s0, s_max, args, u_targets, tol):
        # an event not positive at the segment's start stays disarmed (``_events``); a vmapped sweep's
        # members are armed each from its own start
        values = events.at(args)
        armed = values(s0, y0) > 0
        if clock.u_in_state:  # targets are values of u, a state: found on the dense output
            saveat = diffrax.SaveAt(t1=True, dense=True)
        else:  # targets are values of s itself: saved as the solver passes them (no dense buffer)
            saveat = diffrax.SaveAt(ts=jnp.clip(u_targets, s0, s_max), t1=True)
        first = first_event(values, armed, jnp)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs), solver, s0, s_max, None, y0, args,
            saveat=saveat,
            stepsize_controller=diffrax.PIDController(rtol=tol[0], atol=tol[1], norm=error_norm, **CONTROLLER),
            event=diffrax.Event(lambda t, y, args, **kw: first(t, y), root_finder=bisect,
                                direction=False),
            max_steps=max_steps, throw=False,
        )
        # an event ends the saves early: the end state follows the last target reached, inf after it
        last = jnp.sum(jnp.isfinite(sol.ts)) - 1
        s_end, y_end = sol.ts[last], sol.ys[last]
        if not clock.u_in_state:
            u_end = s_end
            s_t, y_t = jnp.clip(u_targets, s0, s_end), sol.ys[:-1]
        else:
            u_end = y_end[-1]

            def find(target):
                def body(_, lh):
                    lo, hi = lh
                    mid = 0.5 * (lo + hi)
                    below = sol.evaluate(mid)[-1] < target
                    return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

                return jax.lax.fori_loop(0, 64, body, (s0, s_end))[1]

            s_t = jax.vmap(find)(jnp.clip(u_targets, None, u_end))
            y_t = jax.vmap(sol.evaluate)(s_t)
        at_end = values(s_end, y_end)
        flags = (
            # the event that fired is the lowest of the armed ones (a disarmed one may be lower still)
            jnp.where(sol.result == diffrax.RESULTS.event_occurred, jnp.argmin(jnp.where(armed, at_end, jnp.inf)), -1),
            sol.result == diffrax.RESULTS.max_steps_reached,
            (sol.result != diffrax.RESULTS.successful) & (sol.result != diffrax.RESULTS.event_occurred),
        )
        stats = (sol.stats["num_steps"], sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"])
        return s_t, y_t, u_targets <= u_end, s_end, y_end, flags, stats

    return run, events.names


def _observing(run, vf):
    """``run`` returning, in place of the saved states, beta and the log-loss at them, and with the end
    state beta and the log-loss there (a sweep keeps only these): computed where the solve ran, in one
    fused pass; in NumPy afterwards they cost a fifth of a 1,024-point sweep."""

    def observe(y, Z):
        return vf.observe(jnp.reshape(y[..., :-1], (-1, vf.K, vf.d)), Z)

    def observing(y0, s0, s_max, args, u_targets, tol):
        s_t, y_t, ok, s_end, y_end, flags, stats = run(y0, s0, s_max, args, u_targets, tol)
        beta_t, _, loss_t = observe(y_t, args.Z)
        beta_end, _, loss_end = observe(y_end, args.Z)
        return s_t, (beta_t, loss_t), ok, s_end, (y_end, beta_end[0], loss_end[0]), flags, stats

    return observing


@dataclasses.dataclass(frozen=True)
class KernelOutput:
    """What a segment's compiled solve returns, by name (``_packed`` joins it in one vector; ``unpacked``)."""

    s_t: np.ndarray  # the clock's s at each save target (n_targets,)
    y_t: np.ndarray  # the state at each save target (n_targets, state)
    ok: np.ndarray  # the targets reached (n_targets,)
    s_end: float
    y_end: np.ndarray  # (state,)
    fired: int  # the event that ended the segment, -1 if none
    maxed: bool  # the step budget ran out
    failed: bool  # diffrax stopped otherwise
    steps: int
    accepted: int
    rejected: int
    reached: int  # the targets reached (``ok``'s count)
    #: log of the summed loss at the second-to-last target reached and at the end (``end_log_losses``)
    end_log_losses: tuple


def end_log_losses(vf):
    """``losses(y_t, ok, y_end, Z)``: the targets reached and the log of the summed loss at the second-to-last of them
    and at the end state: what the plateau check at the horizon asks (``handlers._on_plateau``), found where the
    solve ran. On the host these two losses were the largest item of a small solve's host work (0.1 ms at 20 x 10
    just after a kernel call)."""

    def losses(y_t, ok, y_end, Z):
        reached = jnp.sum(ok)
        two = jnp.stack([y_t[jnp.maximum(reached - 2, 0)], y_end])[:, :-1]
        log_l = vf.compiled.log_l(vf.margins(Z, vf.saved_beta(jnp.reshape(two, (2, vf.K, vf.d)))))
        return reached, jax.nn.logsumexp(log_l, axis=1)

    return losses


def _packed(run, losses):
    """``run`` returning its outputs, and ``losses`` of them (``end_log_losses``), joined in one float64 vector
    (integers and flags exact in it): the host reads one array, where reading the eleven one by one cost ~0.15 ms
    a segment."""

    def packed(y0, s0, s_max, args, u_targets, tol):
        s_t, y_t, ok, s_end, y_end, flags, stats = run(y0, s0, s_max, args, u_targets, tol)
        reached, ends = losses(y_t, ok, y_end, args.Z)
        return jnp.concatenate([jnp.ravel(x).astype(jnp.float64)
                                for x in (s_t, y_t, ok, s_end, y_end, *flags, *stats, reached, ends)])

    return packed


def unpacked(flat, n_targets, size) -> KernelOutput:
    """A ``_packed`` kernel's vector read back, for ``n_targets`` save slots and a state of ``size`` entries."""
    saves = n_targets * size
    y_t = flat[n_targets: n_targets + saves].reshape(n_targets, size)
    ok, rest = flat[n_targets + saves: 2 * n_targets + saves] > 0, flat[2 * n_targets + saves:]
    tail = rest[1 + size:].tolist()
    fired, maxed, failed, steps, accepted, rejected, reached = (int(x) for x in tail[:7])
    return KernelOutput(flat[:n_targets], y_t, ok, float(rest[0]), rest[1: 1 + size], fired, bool(maxed), bool(failed),
                        steps, accepted, rejected, reached, tuple(tail[7:9]))


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """What a segment solve is compiled for besides its field: the clock, whether the flow holds sign(G)
    (``uses_sign``), the surfaces it slides on, the diffrax solver's name, the step budget, the number of save
    slots, the tracked quantities and whether it is a sweep's vmapped kernel (see :func:`kernel`)."""

    clock: object
    uses_sign: bool
    sliding: object
    solver: str
    max_steps: int
    n_targets: int
    track: tuple = ()
    batched: bool = False


def kernel(vf, key, spec: KernelSpec):
    """The jitted segment solve ``run(y0, s0, s_max, args, u_targets)`` and its event names, compiled
    once per structure, returning its outputs in one vector (``unpacked`` reads it). ``spec.batched``: vmapped
    over y0, the per-member arguments ``rho`` and ``log_floor`` (``BATCHED``) and the tolerances (rtol, atol per
    member), the rest shared, and returning beta and the log-loss at the saves and at the end, not the states, as
    a tuple (``_observing``; for :func:`flowsim.sweep`)."""
    # a clock's compiled field depends on its name alone (a schedule's lr and decay only map its s to t)
    structure = (spec.clock.name, spec.uses_sign, spec.sliding, spec.solver, spec.max_steps, spec.n_targets, spec.track,
                 spec.batched)
    ck = (key, vf.K, vf.d, structure)
    with _BUILDING:  # a sweep's chunks ask for it together, from threads: one kernel (compiled once)
        if ck not in _CACHE:
            run, names = _build(vf, spec.clock, spec.uses_sign, spec.sliding, spec.solver, spec.max_steps,
                                spec.n_targets, spec.track)
            if spec.batched:
                run = jax.vmap(_observing(run, vf), in_axes=(0, None, None, BATCHED, None, 0))
            else:
                run = _packed(run, end_log_losses(vf))
            _CACHE[ck] = StoredKernel(jax.jit(run), vf, structure), names
            while len(_CACHE) > max(KERNELS_KEPT, 1):
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(ck)
        return _CACHE[ck]


def host_arguments(y0, s0, s_max, args, targets, tol):
    """A kernel's arguments as NumPy arrays (scalars 0-d float64, typed as before): jit moves them to the
    device in its C++ dispatch, where a ``jnp.asarray`` per argument cost ~15 us each (0.2 ms a solve)."""
    return (np.asarray(y0, np.float64), np.float64(s0), np.float64(s_max), args.on_host(),
            np.asarray(targets, np.float64), np.asarray(tol, np.float64))


def target_slots(n) -> int:
    """Save slots of a compiled solve for n save targets: n rounded up to a sixteenth of its octave (at least 16:
    400 stays 400, 401 takes 416, 1000 1024), the rest padded with inf, so a new number of saves
    (``Solution.evaluate``, another ``saves=``) seldom compiles. Not the next power of two: diffrax saves each
    padded slot at the last step (its save times must lie in [t0, t1]), ~1.7 us a slot at 20 x 10, and padding the
    default 400 saves to 512 took 0.19 ms of a 1.3 ms solve."""
    n = max(int(n), 1)
    step = 1 << max((n - 1).bit_length() - 5, 4)
    return -(-n // step) * step


def reason(names, fired, maxed, failed) -> str:
    """Why a segment ended: an event's name or an :class:`Ending`."""
    if int(fired) >= 0:
        return names[int(fired)]
    if bool(maxed):
        return Ending.MAX_STEPS
    return Ending.FAILED if bool(failed) else Ending.END


FAILED_MESSAGE = "diffrax stopped: step size fell below its limit or the state became non-finite"


class DiffraxBackend(Backend):
    """``backend="diffrax:<Solver>"`` with Solver in ``SOLVERS``."""

    def __init__(self, solver: str):
        if solver not in SOLVERS:
            raise ValueError(f"unknown diffrax solver {solver!r}; choose one of {sorted(SOLVERS)}.")
        self.solver = solver
        self.name = f"diffrax:{solver}"
        self.implicit = solver == "Kvaerno5"
        self.default_clock = "log_time"
        self.batches = True
        # its events are located on sign changes between steps: while an entry slides, Tsit5 in log-time stepped
        # over another entry's switch (a depth-4 tied l_inf-SAM case), which scipy's dense-output events caught
        self.slides_on_surfaces = False

    def field(self, system, K, d):
        return jax_field(system, K, d)

    def integrate(self, request):
        r = request  # its resume is not used: a new segment restarts the compiled solve (it picks its first step)
        # a fixed number of (inf-padded) targets, so later segments reuse the compiled solve
        u_targets = r.u_targets
        n_targets = target_slots(max(r.n_targets, len(u_targets), 1))
        spec = KernelSpec(r.clock, r.uses_sign, r.sliding, self.solver, r.max_steps, n_targets, r.track)
        run, names = kernel(r.vf, r.key, spec)
        targets = np.full(n_targets, np.inf)
        targets[: len(u_targets)] = u_targets
        flat = run(*host_arguments(r.y0, r.s0, r.s_max, r.args, targets, [r.rtol, r.atol]))
        out = unpacked(np.asarray(flat), n_targets, len(r.y0))  # every output in one transfer
        ok = out.ok & np.isfinite(targets)
        why = reason(names, out.fired, out.maxed, out.failed)
        s_saves = out.s_t[ok]
        return Segment(
            s_saves=s_saves, y_saves=out.y_t[ok], s_end=out.s_end, y_end=out.y_end, reason=why,
            message=FAILED_MESSAGE if why == Ending.FAILED else "",
            stats={"steps": out.steps, "accepted": out.accepted, "rejected": out.rejected},
            # (the kernel's count of targets reached is the host's where none is an inf pad)
            end_log_losses=out.end_log_losses if out.reached == len(s_saves) >= 2 else None,
        )
