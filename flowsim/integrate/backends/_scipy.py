"""scipy backend: ``scipy.integrate`` OdeSolver classes stepped one at a time (so max_steps,
progress and Ctrl-C are honoured), the NumPy-compiled field as right-hand side, and for the
implicit methods (Radau, BDF, LSODA) the exact Jacobian of that same field, assembled from sympy's
partial derivatives by the chain rule (:mod:`flowsim.field.jacobian`). Events are root-found with
``brentq`` on each step's dense output; save targets of the tau clock in batches (``_tau_saves``)."""

from __future__ import annotations

import bisect
from typing import NamedTuple

import numpy as np
from scipy import integrate, optimize

from flowsim import testing
from flowsim._blas import ONE_BLAS_THREAD
from flowsim._interrupts import stopped_by
from flowsim._jax import jax
from flowsim.field import surfaces
from flowsim.field.jacobian import FieldJacobian
from flowsim.field.vector_field import numpy_field
from flowsim.integrate.backends._base import Backend, Ending, Segment
from flowsim.integrate.backends._events import event_functions
from flowsim.integrate.backends._tau_saves import MAX_BYTES, TauSaves

METHODS = {"RK45": integrate.RK45, "DOP853": integrate.DOP853, "Radau": integrate.Radau, "BDF": integrate.BDF, "LSODA": integrate.LSODA}
IMPLICIT = {"Radau", "BDF", "LSODA"}
#: in log-time the clock rate t e^{S~} stays O(1) along every flow here (the loss falls no faster than
#: ~1/t), so a rate below this means a step (an implicit method's iterate) jumped to an unreachable state,
#: where the rate underflows, the field is exactly 0 and the solver would coast on to t1 "completed"
RATE_FLOOR = 1e-300
RATE_UNDERFLOW = ("scipy {method}: the step from s = {s_old:.6g} to {s:.6g} reached a state whose log-time rate "
                  "t e^{{S~}} underflows (a loss no flow reaches by that time); nothing after it is kept. "
                  "clock='tau' (the default for implicit methods) has no such factor")
NOT_FINITE = (" (a non-finite Jacobian or Newton iterate: the field is not differentiable there, e.g. lp-SAM with "
              "p > 2 where a g_k is 0; an explicit method, scipy:DOP853 or diffrax:Tsit5, needs no Jacobian)")


def segment_jacobian(vf, clock, sliding):
    """d(rhs)/dy of a segment: assembled from the derived partials (``FieldJacobian``), or, while entries slide
    on their switching surfaces (a field with a Newton solve inside) or along a regression's minima (two sides'
    fields combined), by forward-mode autodiff of the JAX twin."""
    if not (sliding.surfaces or sliding.on_minima):
        return FieldJacobian(vf).rhs_jacobian(clock, sliding.planes)
    twin = vf.twin()
    jac = surfaces.compiled(twin, ("jacobian", clock.name, sliding),
                            lambda: jax.jacfwd(twin.rhs(clock, sliding.planes, sliding.surfaces, sliding.on_minima), argnums=1))

    def on_host(s, y, args):
        return np.asarray(jac(np.float64(s), np.asarray(y, np.float64), args.on_host()))

    return on_host


def _root(f, lo, hi):
    """A root of f in the bracket [lo, hi]: brentq, and bisection where brentq does not converge (an
    event function with a kink or rounding noise near its root, e.g. a sign switch of a tiny G_k).
    Where the dense output does not bracket the change that the step ends showed (LSODA's
    interpolant at the step's start can differ from the state there in the last digits), the end of
    the step nearer to zero is the root."""
    f_lo, f_hi = f(lo), f(hi)
    if not np.sign(f_lo) * np.sign(f_hi) < 0:
        return lo if abs(f_lo) <= abs(f_hi) else hi
    try:
        return optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-15)
    except RuntimeError:
        # 2000 halvings reach any float bracket's resolution; bisection cannot fail to converge
        return optimize.bisect(f, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=2000)




class ScipyBackend(Backend):
    """``backend="scipy:<Method>"`` with Method in ``METHODS``."""

    def __init__(self, method: str):
        if method not in METHODS:
            raise ValueError(f"unknown scipy method {method!r}; choose one of {sorted(METHODS)}.")
        self.method = method
        self.name = f"scipy:{method}"
        self.implicit = method in IMPLICIT
        # the tau clock: in log-time Newton iterates overflow the rate e^{S~+s} at long horizons (``flowsim.solve``)
        self.default_clock = "tau" if self.implicit else "log_time"

    def field(self, system, K, d):
        return numpy_field(system, K, d)

    def integrate(self, request):
        r = request
        # an implicit method's trial point can overflow the clock rate; the step is then rejected, or the
        # state is non-finite and the segment fails (checked after every step). Set once here: per field
        # evaluation the context manager cost a tenth of a NumPy field
        with np.errstate(over="ignore", invalid="ignore"):
            return self._run(r.resume if r.resume is not None else self._start(r), r)

    def _start(self, r):
        """A solver at (s0, y0) for this segment, with its events (armed in ``_run``)."""
        rhs = r.vf.rhs(r.clock, r.sliding.planes, r.sliding.surfaces, r.sliding.on_minima)
        kwargs = {}
        if self.implicit:
            jac = segment_jacobian(r.vf, r.clock, r.sliding)
            kwargs["jac"] = lambda s, y: jac(s, y, r.args)
        solver = METHODS[self.method](lambda s, y: rhs(s, y, r.args), r.s0, np.asarray(r.y0, float), r.s_max,
                                      rtol=r.rtol, atol=r.atol, **kwargs)
        return _Live(solver, event_functions(r.vf, r.clock, r.uses_sign, r.track, r.sliding.surfaces), None)

    def _run(self, live, r):
        """Step ``live.solver`` (already at (s0, y0)) for at most ``max_steps`` steps. ``live.armed``: the indices of
        the events armed in the last segment, which this one resumes; None: the solver was made for this
        segment (its start-up evaluations count here, and its events are armed here)."""
        solver, events = live.solver, live.events
        values = events.at(r.args)
        saves = _Saves(r.u_targets, r.clock)
        steps, reason, message = 0, Ending.END, ""
        s_end, y_end = r.s0, np.asarray(r.y0, float)
        counted = (0, 0, 0) if live.armed is None else (solver.nfev, solver.njev, solver.nlu)  # scipy's counts
        # an event not positive at the segment's start stays disarmed (``_events``)
        armed = np.flatnonzero(values(r.s0, solver.y) > 0).tolist() if live.armed is None else live.armed
        # a leader can change and change back within one long step, positive at both its ends (DOP853 missed
        # three of four switches its saves showed): those events are probed inside each step too
        probed = [k for k in armed if events.names[k].startswith("lead_")]
        ONE_BLAS_THREAD.enter()
        try:
            while solver.status != "finished":
                if steps >= r.max_steps:
                    reason, message = Ending.MAX_STEPS, f"max_steps={r.max_steps} reached"
                    break
                s_old = solver.t
                stepped, failure = self._step(solver, r.clock)
                steps += stepped
                if failure:
                    reason, message = Ending.FAILED, failure
                    break
                hit, s_stop, dense = _first_event(events.names, values, armed, s_old, solver, probed)
                y_stop = solver.y if hit is None else dense(s_stop)
                u_stop = r.clock.reading(s_stop, y_stop[-1])
                # the end state first: a Ctrl-C while this step's saves are taken may drop some, never
                # leave saves past the state the segment reports it ended at
                s_end, y_end = s_stop, y_stop.copy()
                saves.through(u_stop, s_old, s_stop, dense, solver)
                if r.progress is not None:
                    r.progress(u_stop)
                testing.reached("scipy step")
                if hit is not None:
                    reason = hit
                    break
        except KeyboardInterrupt as err:
            reason, message = Ending.INTERRUPTED, stopped_by(err)
        finally:
            ONE_BLAS_THREAD.leave()
        if saves.finish():
            reason, message = Ending.INTERRUPTED, saves.interrupted
        # scipy steps until a step is accepted: what it calls a step, the only kind it counts
        stats = {"steps": steps, "accepted": steps, "nfev": int(solver.nfev - counted[0])}
        if self.implicit:
            stats.update(njev=int(solver.njev - counted[1]), nlu=int(solver.nlu - counted[2]))
        s_saves, y_saves = saves.arrays(len(r.y0))
        return Segment(s_saves=s_saves, y_saves=y_saves, s_end=float(s_end), y_end=np.asarray(y_end), reason=reason,
                       message=message, stats=stats,
                       resume=_Live(solver, events, armed) if reason == Ending.MAX_STEPS else None)

    def _step(self, solver, clock) -> tuple[bool, str]:
        """One step of ``solver``: whether it returned (a step to count), and a message if it failed
        (nothing of that step is kept), else ''."""
        s_old = solver.t
        try:
            msg = solver.step()
        except (ValueError, np.linalg.LinAlgError) as err:  # a non-finite Jacobian or iterate inside the step
            return False, f"scipy {self.method} at s = {s_old:.6g}: {err}" + (NOT_FINITE if "inf" in str(err) else "")
        if solver.status == "failed":
            return True, f"scipy {self.method}: {msg}"
        if not np.isfinite(solver.y).all():  # LSODA can accept such a step
            return True, (f"scipy {self.method}: the state became non-finite in the step from s = {s_old:.6g} to "
                          f"{solver.t:.6g}")
        if clock.carries_rate:
            # the rate is the field's last entry; RK45, DOP853 and Radau keep the field at the new point
            f_new = solver.f if hasattr(solver, "f") else solver.fun(solver.t, solver.y)
            if not f_new[-1] > RATE_FLOOR:
                return True, RATE_UNDERFLOW.format(method=self.method, s_old=s_old, s=solver.t)
        return True, ""


#: where inside a step the events in ``probed`` are looked at too (fractions of the step)
PROBES = (0.25, 0.5, 0.75)


def _first_event(names, values, armed, s_old, solver, probed=()):
    """(event, where it fires, the step's dense output) for the earliest of the ``armed`` events (their
    indices) in the step from ``s_old`` to ``solver.t``, root-found on the dense output, which is made
    only then (None, solver.t, None if no event fires). An armed event is positive up to the step that
    ends the segment, so one that is not positive at the step's end fires in it (a NaN does not); those in
    ``probed`` are also looked at inside the step (PROBES), where they may have fired and come back."""
    at_end = values(solver.t, solver.y).tolist()  # Python floats: cheaper to scan than NumPy's
    hit, hit_s, dense = None, solver.t, None
    for k in armed:
        if at_end[k] <= 0:
            dense = dense if dense is not None else solver.dense_output()
            root = _root(lambda s, k=k: values(s, dense(s))[k], s_old, solver.t)
            if hit is None or root < hit_s:
                hit, hit_s = names[k], root
    lo = s_old
    for p in (s_old + f * (solver.t - s_old) for f in PROBES) if probed else ():
        if p >= hit_s:
            break
        dense = dense if dense is not None else solver.dense_output()
        inside = values(p, dense(p)).tolist()
        fired = {k: _root(lambda s, k=k: values(s, dense(s))[k], lo, p) for k in probed if inside[k] <= 0}
        if fired:
            k = min(fired, key=fired.get)
            return names[k], fired[k], dense
        lo = p
    return hit, hit_s, dense


class _Live(NamedTuple):
    """A segment's solver, its events and those armed: what a segment that ran out of steps hands the next."""

    solver: object
    events: object
    armed: list | None


class _Saves:
    """The saves of one segment: its targets (values of u) as the steps pass them, from each step's dense output
    (under the tau clock, batched: ``TauSaves``)."""

    def __init__(self, u_targets, clock):
        self.targets = np.asarray(u_targets, float)
        self.ordered = self.targets.tolist()  # for bisect: a third of np.searchsorted's cost a step
        self.done = 0
        self.s, self.y = [], []
        self.tau_saves = TauSaves() if clock.u_in_state else None
        self.interrupted = ""

    def through(self, u_stop, s_old, s_stop, dense, solver):
        """Save the targets up to ``u_stop``, reached by the step from ``s_old`` to ``s_stop``."""
        k = bisect.bisect_right(self.ordered, u_stop, self.done)
        if k <= self.done:  # earlier targets were saved in earlier steps, so u(s_old) < target <= u(s_stop)
            return
        # dense output only where a step holds an event or a save (DOP853's costs 3 field evaluations)
        dense = dense if dense is not None else solver.dense_output()
        if self.tau_saves is None:
            self.s.extend(self.targets[self.done:k].tolist())
            self.y.extend(np.atleast_2d(dense(self.targets[self.done:k]).T))
        else:
            self.tau_saves.add(dense, self.targets[self.done:k], s_old, s_stop)
            if self.tau_saves.nbytes > MAX_BYTES:
                self._take()
        self.done = k

    def finish(self) -> bool:
        """Take the batched saves (also those of an interrupted segment); True if a Ctrl-C came meanwhile."""
        while self.tau_saves is not None and self.tau_saves.nbytes:
            try:
                self._take()
            except KeyboardInterrupt as err:  # a second Ctrl-C: the batch is still whole, take it again
                self.interrupted = stopped_by(err)
        return bool(self.interrupted)

    def _take(self):
        s, y = self.tau_saves.take()
        self.s.extend(s.tolist())
        self.y.extend(list(y))

    def arrays(self, size):
        return np.asarray(self.s), np.asarray(self.y).reshape(len(self.s), size)
