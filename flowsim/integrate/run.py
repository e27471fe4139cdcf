"""The state of one solve between backend calls (:class:`Run`): the current point, the records, the
sign pattern of a Filippov flow, the tracked leaders, the counters and, once decided, the status."""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from flowsim import testing
from flowsim._blas import ONE_BLAS_THREAD
from flowsim._interrupts import after_block
from flowsim.field.surfaces import spread_of
from flowsim.field.vector_field import numpy_field
from flowsim.integrate.arrival import REST_PLANE_REACH, rest_planes
from flowsim.integrate.backends import SURFACE_BACKEND, SegmentRequest
from flowsim.integrate.backends._events import Watch, resolved_signs, scores, sides, watch_at
from flowsim.integrate.events import BackendChange
from flowsim.integrate.records import Records
from flowsim.integrate.segment_args import SegmentArgs, Sliding
from flowsim.integrate.sliding import SignState, switched
from flowsim.integrate.solution import SaveObservations
from flowsim.integrate.status import Status
from flowsim.integrate.timeline import (
    LN10,
    at_rest,
    beta_margins_loss,
    close_records,
    log10_t_from_u,
    saved_beta,
)
from flowsim.symbolic.reachable import invariant_planes

MAX_SEGMENTS = 10_000
#: log-losses a Run keeps, of the last states asked (``Run.log_loss``)
LOG_LOSSES_KEPT = 4

RATE_OVERFLOW = ("at log10 t = {log10_t:.6g} the log-time rate t e^{{S~}} is 10^{rate:.4g}, beyond float range: the loss "
                 "no longer decreases (an equilibrium that is not exact: exact ones, where the field is 0, are held "
                 "constant as 'stalled'), and such a state cannot be followed past t ~ 1e308 in either clock")


#: a solve checks for a critical point (``_critical``) every this many steps; the step budget is
#: spent in equal chunks of at most this size (one compiled diffrax solve serves them all)
CHECK_EVERY = 1024


def chunk_of(max_steps: int) -> int:
    """The steps of a chunk: ``max_steps`` in equal chunks, none over CHECK_EVERY."""
    return -(-max_steps // -(-max_steps // CHECK_EVERY))


class Run:
    """The mutable state of one solve between segments: the state, the Filippov signs, the records,
    the counters and, once decided, the status. Each segment ending has one handler (``HANDLERS``)."""

    def __init__(self, problem, progress=False):
        system, data, theta0 = problem.system, problem.data, problem.theta0
        self.system, self.data, self.be, self.clock = system, data, problem.backend, problem.clock
        self.adaptive = problem.adaptive  # may hand over to an implicit method (``hand_over``)
        self.rtol, self.atol, self.max_steps = problem.rtol, problem.atol, int(problem.max_steps)
        self.chunk = chunk_of(self.max_steps)
        self.K, self.d = theta0.shape
        self.uses_sign = system.flow.uses_sign
        self.vf = numpy_field(system, self.K, self.d)
        self.vf_run = self.be.field(system, self.K, self.d)
        self.shift = problem.shift
        self.Z, self.rho, self.u1 = data.z, float(system.flow.rho), problem.u1
        self.targets, run_targets, self.s_max = problem.plan()
        self.log_floor, self.log_ceiling = problem.log_floor, problem.log_ceiling
        # smooth flows: sigma holds the sign each entry keeps (the crossing event); sign flows: sign(G)
        self.sigma = problem.kept_signs()
        self.pinned = np.zeros((self.K, self.d), bool)
        # per layer: w = 0 is invariant, and may be reached in finite time (``handlers._put_on_planes``)
        # (the part-level promise, in any clock: a normalised flow's field carries the factor too)
        self.planes = invariant_planes(system.model) if system.flow.follows_gradient else ()
        self.status, self.message, self.problem = None, "", None
        self._log_losses = {}  # (``log_loss``)
        self.surfaces = np.zeros((self.K, self.d), bool)  # entries sliding on their switching surfaces G_k = 0
        self.on_minima_since = None  # log10 t where the state began sliding along a regression's minima
        self.s, self.y = 0.0, np.concatenate([theta0.ravel(), [0.0]])
        if self.uses_sign:
            self.sigma = np.zeros((self.K, self.d))
            self.move_to(self.switch_signs().theta)
        self.track = () if self.d == 1 else problem.track  # one coordinate always leads
        self.leaders = np.array([self.leader(kind, self.theta) for kind in self.track], dtype=np.int64)
        self.first_leaders = dict(zip(self.track, self.leaders.tolist()))  # who leads before any switch
        self.theta_start = self.theta  # (``log_loss_start``)
        # the init is not a save: the first save is just after it
        self.records = Records(lambda states: self.saves_observed(states)[2].tolist(), self.K, self.d)
        self.remaining = run_targets
        self.sliding = None  # entries found sliding at the last chunk's end (``handlers._sliding``)
        self.looked = 0  # saves up to here were tested for a rest point of the flow (``_earlier_rest_point``)
        if self.uses_sign:  # the signs each save was made under (``_earlier_rest_point``)
            self.records.signs_from_here(self.sigma, self.slides)
        self.stats = {"steps": 0, "segments": 0, "switches": 0}
        self.segment_steps = 0  # steps since the last sign switch, against max_steps
        self.restarts = 0  # segments ended by a switch event (not by a chunk of steps)
        self.resume = None  # a scipy solver that ran out of its chunk of steps continues
        self.events = []
        self.bar = ProgressBar(problem.log10_t1, self.targets, shift=self.shift) if progress else None
        self.t_start = time.perf_counter()

    @property
    def theta(self):
        return self.y[:-1].reshape(self.K, self.d)

    @property
    def slides(self) -> bool:
        """Some entries slide, on their planes or on their switching surfaces: the field is a Filippov one."""
        return bool(self.pinned.any() or self.surfaces.any())

    @property
    def on_minima(self) -> bool:
        """The state slides along a regression's interpolating minima (``VectorField.minima_field_and_scale``)."""
        return self.on_minima_since is not None

    def field_and_scale(self, theta=None):
        """The field and its log scale at theta (default: now), with whatever slides."""
        theta = self.theta if theta is None else theta
        return self.vf.any_field_and_scale(theta, self.Z, self.rho, self.sigma, self.pinned, self.spread(theta),
                                           self.on_minima)

    def spread(self, theta=None):
        """The switching surfaces slid on (``flowsim.field.surfaces.spread_of``), None if none."""
        if not self.surfaces.any():
            return None
        return spread_of(self.vf, self.theta if theta is None else theta, self.surfaces)

    def leader(self, kind, theta, exclude=None):
        return leader_of(self.vf, kind, theta, self.Z, self.rho, self.sigma, exclude)

    def settled(self) -> bool:
        """Before a segment: a Filippov problem, an exact equilibrium or Zeno switching ends the solve."""
        if self.problem is not None:
            self.end(Status.CHATTERING, self.problem)
        elif at_rest(self.field_and_scale):
            self.hold(Status.STALLED)
        elif self.restarts >= MAX_SEGMENTS:
            self.end(Status.CHATTERING, f"more than {MAX_SEGMENTS} sign-switch segments (Zeno switching?)")
        return self.status is not None

    def end(self, status, message=""):
        """The solve ends here with ``status`` (the state as it is: a handler that holds it calls ``hold``)."""
        self.status, self.message = status, message

    def move_to(self, theta):
        """The parameters set to ``theta`` (a limit found, entries set on their planes), the clock entry kept."""
        self.y = np.concatenate([np.asarray(theta, float).ravel(), self.y[-1:]])

    def restart(self):
        """The next segment starts afresh (after a switch or an arrival): the step budget counts from here."""
        self.segment_steps, self.resume = 0, None
        self.restarts += 1

    def pin(self, on):
        """Entries ``on`` set on their invariant planes w = 0, where they stay."""
        self.move_to(np.where(on, 0.0, self.theta))
        self.pinned = self.pinned | on
        self.restart()

    def switch_signs(self) -> SignState:
        """A sign flow's signs, pinned entries and surfaces re-examined at the current state (``sliding.switched``);
        a Filippov problem found is kept in ``problem``. Returns the new state, whose ``theta`` (on the surfaces now
        slid on) the run moves to once the switch is settled (``move_to``)."""
        state = switched(self.vf, self.theta, self.Z, self.rho, self.sigma, self.pinned, self.surfaces)
        self.sigma, self.pinned, self.surfaces, self.problem = state.sigma, state.pinned, state.surfaces, state.problem
        return state

    def resolve_signs(self, theta, leaving):
        """Entries ``leaving`` their surfaces take the side their G_k is resolved on at ``theta``
        (``_events.resolved_signs``)."""
        self.sigma = resolved_signs(self.vf, theta, self.Z, self.sigma, ~leaving)

    def slide_along_minima(self):
        """From here the state slides along the regression's interpolating minima it has reached (a new field:
        the next segment starts afresh)."""
        self.on_minima_since = self.log10_t_asked
        self.restart()

    def slide_on(self, surfaces):
        """The state slides on ``surfaces`` (a rest point found on them)."""
        self.surfaces = np.asarray(surfaces, bool)

    def drop_problem(self):
        """A Filippov problem found at a switch is no end: the state is a rest point the flow ends at instead."""
        self.problem = None

    def add_event(self, event, switch=False):
        """An event of the trajectory; ``switch``: one that changed the signs (counted in ``stats``)."""
        self.events.append(event)
        if switch:
            self.stats["switches"] += 1

    def follow_leaders(self, theta, fired=None):
        """Every tracked leader re-examined at ``theta``; ``fired``: the kind whose leader-switch event ended the
        segment, whose old leader is passed over unless still clearly ahead. Returns (kind, old, new) of each
        change."""
        changes = []
        for i, kind in enumerate(self.track):
            old = int(self.leaders[i])
            self.leaders[i] = self.leader(kind, theta, exclude=old if fired == kind else None)
            if self.leaders[i] != old:
                changes.append((kind, old, int(self.leaders[i])))
        return changes

    def sliding_again(self, on) -> bool:
        """Whether entries ``on`` (None: none looked at) were found sliding at the last chunk's end too."""
        before, self.sliding = self.sliding, on
        return on is not None and on.any() and before is not None and bool((on == before).all())

    def saves_to_look_at(self) -> int:
        """The first save not yet tested for a rest point of the flow; from now on every save has been."""
        start, self.looked = self.looked, len(self.records)
        return start

    def rewind_to(self, i, theta):
        """Back to save ``i``, at ``theta`` (a rest point found there): the saves after it are dropped and their
        targets come back."""
        # (values of u: under the tau clock u is the state's last entry)
        dropped = [self.clock.reading(s, y[-1]) for s, y in self.records.rewind(i + 1)]
        # (a horizon that a solver's dense output did not bracket was taken at a step end past t1)
        self.remaining = np.unique(np.minimum(np.concatenate([np.asarray(dropped, float), self.remaining]), self.u1))
        self.s, self.y, self.resume = self.records.s_at(i), self.records.y_at(i), None
        self.move_to(theta)

    def hand_over(self, backend):
        """Continue on ``backend`` from the current state, in the clock an implicit method takes
        (``Clock.implicit_clock``: tau for a log-time run, whose records then swap their clock entries)."""
        implicit = self.clock.implicit_clock()
        self.records.hand_over(self.clock)
        self.s, self.y = self.clock.for_implicit(self.s, self.y)
        self.add_event(BackendChange(float(log10_t_from_u(implicit.u(self.s, self.y[-1]))),
                                     float(implicit.tau(self.s, self.y[-1])), from_backend=self.be.name, to_backend=backend.name))
        self.be, self.clock, self.adaptive, self.resume = backend, implicit, False, None
        self.vf_run, self.s_max, self.segment_steps = backend.field(self.system, self.K, self.d), implicit.end(self.u1), 0

    def hold(self, status, message=""):
        """The state is constant from here to t1: only the clocks move."""
        self.end(status, message)
        if self.bar:
            self.bar.to_u(self.u1)  # the rest of the way is held
        _, S = self.field_and_scale()
        for s, y in self.clock.held(self.theta, self.s, self.y[-1], S, self.remaining):
            self.records.add(s, y)
        self.remaining = self.remaining[:0]

    @property
    def sliding_shape(self) -> Sliding:
        return Sliding(bool(self.pinned.any()), int(self.surfaces.any(axis=0).sum()), self.on_minima)

    def segment_args(self) -> SegmentArgs:
        """The arguments of a segment from the current state."""
        held = self.pinned | self.surfaces
        watch = watch_at(self.vf, self.y, self.Z, self.sigma, held) if self.uses_sign else Watch(~self.pinned, None)
        return SegmentArgs(self.Z, self.rho, self.sigma, self.pinned, u_end=self.u1, log_floor=self.log_floor,
                           log_ceiling=self.log_ceiling, leaders=self.leaders.copy(), watched=watch.watched,
                           settle=watch.settle, sides=sides(self.y, self.K, self.d, self.atol), surfaces=self.spread(),
                           rest=self.rest_watch() if self.uses_sign and self.rho > 0 else None,
                           held_couplings=self.held_watch() if self.uses_sign and self.rho == 0 else None)

    def resting(self) -> np.ndarray:
        """The free entries moving toward their rest planes theta_k = -rho sigma_k (``arrival.rest_planes``)."""
        return rest_planes(self.vf, self.theta, self.Z, self.rho, self.sigma, ~(self.pinned | self.surfaces),
                           self.field_and_scale()[0])

    def rest_gap(self) -> tuple[np.ndarray, float]:
        """Each entry's signed distance theta_k + rho sigma_k from its rest plane, and the reach (REST_PLANE_REACH
        atol) within which it is set on it."""
        return self.theta + self.rho * self.sigma, REST_PLANE_REACH * self.atol

    def rest_watch(self) -> np.ndarray:
        """``SegmentArgs.rest``: the entries moving toward their rest planes from beyond the reach."""
        gap, reach = self.rest_gap()
        return np.where(self.resting() & (np.abs(gap) > reach), np.sign(gap) / reach, 0.0)

    def held_watch(self) -> np.ndarray:
        """``SegmentArgs.held_couplings``: sign(r_j) of the coordinates with entries held on their planes and none
        sliding on its surface r_j = 0 (0 elsewhere)."""
        held = self.pinned.any(axis=0) & ~self.surfaces.any(axis=0)
        if not held.any():
            return np.zeros(self.d)
        return np.where(held, np.sign(np.asarray(self.vf.couplings(self.theta, self.Z)[3])), 0.0)

    def integrate(self):
        """One backend call from the current state, at most ``chunk`` steps; its saves are recorded."""
        be, vf = self.be, self.vf_run
        if self.surfaces.any() and not be.slides_on_surfaces:
            be, vf = SURFACE_BACKEND, self.vf
        request = SegmentRequest(
            vf, structure_key(self.system), self.clock, self.uses_sign, self.sliding_shape, self.y,
            self.s, self.s_max, self.segment_args(), self.remaining, self.rtol, self.atol, self.chunk, n_targets=len(self.targets),
            track=self.track, resume=self.resume if be is self.be else None,
            progress=self.bar.to_u if self.bar else None)
        theta_before = self.theta.copy()  # (a scipy solver resumed may write its state in place)
        testing.reached("segment")
        with after_block():  # a compiled solve cannot be stopped midway: the interrupt lands once the saves are in
            seg = be.integrate(request)
            self.record(seg, theta_before)
        return seg

    def record(self, seg, theta_before):
        self.resume = seg.resume
        self.mean_step = (seg.s_end - self.s) / max(seg.stats.get("steps", 0), 1)  # of this call
        self.stats["segments"] += 1
        for k, v in seg.stats.items():
            self.stats[k] = self.stats.get(k, 0) + v
        self.segment_steps += seg.stats.get("steps", 0)
        self.records.extend(seg.s_saves.tolist(), seg.y_saves)
        self.remaining = self.remaining[len(seg.s_saves):]
        self.s, self.y = seg.s_end, seg.y_end
        self.moved_from, self.moved_to, self._log_loss_change = theta_before, self.theta.copy(), None
        if self.bar:
            self.bar.to_u(self.u_now)

    def saves_observed(self, params, known=()):
        """beta, margins and log-loss of saved states (``timeline.beta_margins_loss``), with BLAS on one thread:
        their margins are a (saves, d) x (d, n) product just after a compiled solve, whose threads still hold the
        cores, and BLAS threads woken then waited for them (at n = d = 100, 400 saves: up to twice the solve)."""
        with ONE_BLAS_THREAD:
            return beta_margins_loss(self.system, self.data, params, known)

    def beta(self, theta=None):
        theta = self.theta if theta is None else np.reshape(theta, (self.K, self.d))
        return np.asarray(self.system.numpy.beta(theta), float).reshape(self.d)

    def log_loss(self, theta=None):
        """log of the summed loss at theta (default: now) (``log_losses``)."""
        return self.log_losses(self.theta if theta is None else theta)[0]

    def log_losses(self, *thetas) -> list:
        """log of the summed loss at each of ``thetas``, those not kept found in one pass (the derived formulas are
        elementwise; each margin is its own product, as for one state). The last few are kept by the state's bytes:
        a segment's loss before it is the one after the last, and a handler asks again for the one at its end."""
        keys = [np.asarray(theta, dtype=np.float64).tobytes() for theta in thetas]
        new = {key: theta for key, theta in zip(keys, thetas) if key not in self._log_losses}
        if new:
            if len(self._log_losses) + len(new) > LOG_LOSSES_KEPT:  # keep only those asked now
                self._log_losses = {key: self._log_losses[key] for key in keys if key in self._log_losses}
            states = np.reshape(np.asarray(list(new.values()), dtype=np.float64), (len(new), self.K, self.d))
            with np.errstate(all="ignore"):
                beta = self.vf.saved_beta(states)
                margins = np.empty((len(new), self.Z.shape[0]))
                for row, b in zip(margins, beta):
                    row[:] = self.vf.margins(self.Z, b)
                ll = np.logaddexp.reduce(self.system.numpy.log_l(margins), axis=1)
            self._log_losses.update(zip(new, ll.tolist()))
        return [self._log_losses[key] for key in keys]

    @functools.cached_property
    def log_loss_start(self) -> float:
        """The log-loss at the start (a regression's ``loss_change`` measures against it)."""
        return self.log_loss(self.theta_start)

    @property
    def log_loss_change(self) -> float:
        """How much the loss moved over the last backend call (``loss_change``), found when first asked: most
        solves end at the horizon, whose handler does not ask."""
        if self._log_loss_change is None:
            self._log_loss_change = self.loss_change(*self.log_losses(self.moved_from, self.moved_to))
        return self._log_loss_change

    def loss_change(self, log_before, log_after) -> float:
        """How much the loss moved, compared with ``critical.LOSS_STILL``: in log L (a margin loss, falling for
        ever while the flow separates), or in L over the loss at the start (a regression, whose loss tends to a
        limit, 0 at an interpolator, where its log falls for ever too)."""
        if not self.data.is_regression:
            return abs(log_after - log_before)
        with np.errstate(all="ignore"):
            start = self.log_loss_start if np.isfinite(self.log_loss_start) else 0.0
            return float(abs(np.exp(log_after - start) - np.exp(log_before - start)))

    @property
    def log10_t_asked(self):
        """log10 t now in the asked-for system's time (a reduced system runs 10**shift times faster)."""
        return float(log10_t_from_u(self.u_now)) + self.shift

    @property
    def tau_now(self):
        return float(self.clock.tau(self.s, self.y[-1]))

    @property
    def u_now(self):
        return float(self.clock.u(self.s, self.y[-1]))

    def log_rate(self):
        """log of the rate the clock's field carries (-inf where none): past 700 it leaves float range."""
        if not self.clock.carries_rate:
            return -math.inf
        with np.errstate(all="ignore"):
            _, S_end = self.field_and_scale()
        return self.clock.log_rate(S_end, self.s)

    def solution(self, config, lifted=False) -> dict:
        """The fields of the run's :class:`Solution` (``solve`` makes it, once, after any lift to the asked-for system;
        ``lifted``: it will be, and its layers are written out afresh, so the states here are handed out nowhere)."""
        close_records(self.status, self.clock, self.remaining, self.s, self.y, self.records)
        self.stats["wall_s"] = time.perf_counter() - self.t_start
        rate = self.log_rate() if self.status in (Status.MAX_STEPS, Status.FAILED) else -math.inf
        if rate > 700:  # e^rate overflows: no step size helps
            self.message = RATE_OVERFLOW.format(log10_t=self.log10_t_asked, rate=rate / LN10)
        message = self.message or self.status.meaning
        s, y = self.records.arrays()
        params = y[:, :-1].reshape(-1, self.K, self.d)
        u, tau = self.clock.u(s, y[:, -1]), self.clock.tau(s, y[:, -1])
        beta = saved_beta(self.system, params)
        observed = SaveObservations(self.system, self.data, beta, self.records.known_losses(), params if lifted else None)
        return dict(system=self.system, data=self.data, log10_t=log10_t_from_u(u), tau=np.asarray(tau, float),
                    params=params, beta=beta, log_loss=observed.deferred("log_loss"),
                    margins=observed.deferred("margins"), status=self.status, message=message, stats=self.stats,
                    events=self.events, config=dict(config, first_leaders=self.first_leaders))


def leader_of(vf, kind, theta, Z, rho, sigma, exclude=None):
    """The coordinate that leads in ``kind`` just after this state (ties broken by a short probe
    along the field, so a tie at the start or at a switch picks the coordinate about to lead). ``exclude``:
    the leader whose event just fired, passed over unless it is still clearly ahead (a root of rounding
    noise: at a collapse, a "switch" from beta_1 = 1e-14 to beta_2 = 2e-22)."""
    sc = scores(vf, kind, theta, Z, rho, sigma)
    if exclude is not None:
        rest = np.max(np.delete(sc, exclude), initial=-np.inf)
        if sc[exclude] > rest and (np.isinf(rest) or sc[exclude] - rest > 1e-6 * max(abs(sc[exclude]), abs(rest))):
            return int(exclude)
    F, _ = vf.field_and_scale(theta, Z, rho, sigma)
    h = 1e-6 * (1.0 + np.abs(theta).max()) / max(np.abs(F).max(), 1e-300)
    ahead = scores(vf, kind, theta + h * F, Z, rho, sigma)
    best = np.max(sc)
    tied = np.abs(sc - best) <= 1e-9 * max(abs(best), 1e-300) if np.isfinite(best) else sc == best
    if exclude is not None:
        tied = np.ones_like(tied) if tied.sum() <= 1 else tied  # at a switch the overtaker is new
        ahead = np.where(np.arange(len(sc)) == exclude, -np.inf, ahead)
    return int(np.argmax(np.where(tied, ahead, -np.inf)))


class ProgressBar:
    """Progress in log10 t (linear t would sit at 0% for a horizon of 1e100). ``shift``: log10 of the
    speedup of a reduced system, whose u counts its own time: shown in the asked-for one (a balanced
    depth-2 solve to 1e100 ended at 'log10 t = 99.699')."""

    def __init__(self, L1, targets, file=None, shift=0.0):
        from flowsim.progress import progress_bar

        self.shift = shift
        self.lo = float(log10_t_from_u(targets[min(1, len(targets) - 1)])) + shift
        self.total, self.done = round(max(L1 - self.lo, 1e-3), 3), 0.0
        self.bar = progress_bar(self.total, "decades", "log10 t", file=file)

    def to_u(self, u):
        x = float(log10_t_from_u(u)) + self.shift
        new = min(max(x - self.lo, 0.0), self.total)
        if new > self.done:
            self.bar.set_postfix_str(f"log10 t = {x:.5g}")
            self.bar.update(round(new - self.done, 3))
            self.done = new

    def close(self):
        self.bar.close()


def structure_key(system):
    """What a compiled solve depends on: the model, the loss and the flow's structure (not rho, lr, data)."""
    return (system.model, system.loss, system.flow.key)
