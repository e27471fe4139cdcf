"""The result of :func:`flowsim.solve`."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from flowsim._blas import ONE_BLAS_THREAD
from flowsim.integrate.status import Status
from flowsim.integrate.timeline import (  # noqa: F401 (log10_t_from_u: a public name here)
    log10_t_from_u,
    margins_and_loss,
    save_points,
    saved_beta,
)


def unit_rows(a: np.ndarray) -> np.ndarray:
    """Each row divided by its l2 norm (rows of zeros stay zero)."""
    n = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, n, out=np.zeros_like(a), where=n > 0)


class SaveObservations:
    """The margins and log-losses of a solve's saves, found from their beta when first asked for (many runs never
    read them, and at n = d = 100 with 400 saves they were nearly half a solve's host work). ``beta`` (saves, d)
    is copied, so a Solution's arrays changed in place do not change them; or, given the ``states`` (saves, K, d)
    it was found from where nothing hands them out (a lifted run's tied states), found from them again when asked
    (``saved_beta``: the same beta, bit for bit) rather than copied now. ``known``: the log-losses of the first
    saves, found during the solve (``Records.losses``)."""

    def __init__(self, system, data, beta, known=(), states=None):
        self.system, self.data, self.known, self._states = system, data, list(known), states
        self._beta = None if states is not None else np.array(beta)

    @property
    def beta(self) -> np.ndarray:
        if self._beta is None:
            self._beta = saved_beta(self.system, self._states)
        return self._beta

    @functools.cached_property
    def found(self) -> tuple:
        """(margins, log_loss), found once. BLAS on one thread: read just after a compiled solve, the (saves, d) x
        (d, n) product's threads would wait for the cores XLA's still hold (at n = d = 100: up to twice the solve)."""
        with ONE_BLAS_THREAD:
            return margins_and_loss(self.system, self.data, self.beta, self.known)

    def deferred(self, name: str) -> Deferred:
        """The field ``name`` ("margins" or "log_loss") of a Solution, found on first read."""
        return Deferred(functools.partial(self.field, name))

    def field(self, name: str) -> np.ndarray:
        """The field ``name`` ("margins" or "log_loss"), found now if not yet."""
        return self.found[("margins", "log_loss").index(name)]


@dataclass(frozen=True)
class Deferred:
    """A :class:`Solution` field not found yet: ``find()`` finds it (once: ``FoundOnRead`` keeps it)."""

    find: Callable[[], np.ndarray]

    def __call__(self) -> np.ndarray:
        return self.find()


class FoundOnRead:
    """A :class:`Solution` field that may be given as a :class:`Deferred`: found on its first read and kept (the
    Solution stays immutable: the value is the one its saves determine)."""

    def __init__(self, name: str):
        self.name, self.slot = name, f"_{name}"

    def __get__(self, sol, owner=None):
        if sol is None:
            return self
        value = sol.__dict__[self.slot]
        if isinstance(value, Deferred):
            value = value()
            sol.__dict__[self.slot] = value
        return value

    def __set__(self, sol, value):
        sol.__dict__[self.slot] = value

    def held(self, sol):
        """The value as held: a :class:`Deferred` until read."""
        return sol.__dict__[self.slot]


def found_on_read(*names):
    """A class decorator, over ``@dataclass``: its fields ``names`` may be given as a :class:`Deferred`
    (``FoundOnRead``; set after the dataclass is made, so they stay required fields with no default)."""

    def decorate(cls):
        for name in names:
            setattr(cls, name, FoundOnRead(name))
        return cls

    return decorate


def replaced(sol, **changes):
    """``dataclasses.replace(sol, **changes)`` that leaves the fields not read yet unread (``FoundOnRead``)."""
    own = vars(type(sol))
    kept = {f.name: own[f.name].held(sol) if isinstance(own.get(f.name), FoundOnRead) else getattr(sol, f.name)
            for f in dataclasses.fields(sol) if f.init and f.name not in changes}
    return type(sol)(**kept, **changes)


@found_on_read("log_loss", "margins", "params")
@dataclass(frozen=True, eq=False)
class Solution:
    """Saved trajectory of a flow.

    Arrays are indexed by save point (first axis): ``log10_t``, ``tau`` (loss-normalised clock),
    ``params`` (saves, layers, d), ``beta`` (saves, d), ``log_loss`` (saves,), ``margins`` (saves, n)
    (``log_loss`` and ``margins`` of a fresh solve are found from ``beta`` when first read, then kept; so are the
    ``params`` of a balanced start, from the tied net's states).
    ``status`` is a :class:`flowsim.Status` (a string: one of ``flowsim.STATUSES``); ``message`` says why; ``stats`` counts work: on every
    backend ``accepted`` (steps taken), ``steps`` (what ``max_steps`` bounds: steps tried, accepted or
    rejected, on diffrax; accepted ones on scipy, which retries a rejected step within its step),
    ``segments`` (integrations between sign switches, hand-overs and restarts), ``switches`` (sign
    switches of a Filippov flow) and ``wall_s``; diffrax also ``rejected``; scipy also ``nfev`` and, for
    the implicit methods, ``njev`` and ``nlu`` (Jacobians and LU decompositions), as ``solve_ivp``;
    ``config`` how it ran (``config["backend"]`` and ``config["clock"]``: the backends and clocks that
    ran, e.g. ``"diffrax:Tsit5 -> scipy:BDF"`` and ``"log_time -> tau"`` after an ``"auto"`` hand-over;
    ``config["arguments"]``: what was asked, to solve again); ``events`` what happened on the way, in order
    (:class:`flowsim.LeaderSwitch`, :class:`flowsim.SignSwitch`, :class:`flowsim.Arrival`,
    :class:`flowsim.BackendChange`).
    """

    system: object
    data: object
    log10_t: np.ndarray
    tau: np.ndarray
    params: np.ndarray
    beta: np.ndarray
    log_loss: np.ndarray
    margins: np.ndarray
    status: str
    message: str
    stats: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    events: list = field(default_factory=list)
    #: solves again with other arguments (``solve`` with this system and data), for :meth:`evaluate`
    rerun: object = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True unless the integration failed (:attr:`flowsim.Status.is_failure`)."""
        return not Status(self.status).is_failure

    @property
    def t(self) -> np.ndarray:
        """Time t (inf where it exceeds float range; use ``log10_t`` there)."""
        with np.errstate(over="ignore"):
            return 10.0 ** self.log10_t

    @property
    def direction(self) -> np.ndarray:
        """beta / ||beta||_2 at each save point (0 where beta = 0)."""
        return unit_rows(self.beta)

    def evaluate(self, log10_t) -> Solution:
        """The trajectory at the times ``log10_t`` (a number or a list), exact to the solver tolerance:
        the solve is run again with these points added to its save points. Saves come from the
        solver's dense output and do not change its steps, so the rows at the original saves repeat
        them (to rounding) and the new rows lie on the same trajectory. Returns a Solution with one row
        per asked time, in the order asked (repeats repeated; its ``log10_t`` is then not sorted).
        Costs one solve.

        Raises:
            ValueError: a time past the horizon, or one the flow did not reach (it ended before it, e.g.
                "collapsed"), named with how the flow ended.
        """
        asked = np.atleast_1d(np.asarray(log10_t, dtype=np.float64))
        if asked.ndim != 1 or not asked.size or not np.all(np.isfinite(asked)):
            raise ValueError(f"log10_t must be finite numbers (a number or a 1-D list); got {log10_t!r}.")
        args = self.config.get("arguments")
        if args is None or self.rerun is None:
            raise ValueError("this Solution does not say how it was solved (config['arguments']); solve again.")
        L1 = args["log10_t1"]
        if asked.max() > L1 + 1e-12 * max(1.0, abs(L1)):  # (a run's end may sit a rounding past t1, at its own time)
            raise ValueError(f"log10_t = {asked.max():g} is beyond this solve's horizon log10 t1 = {L1:g}.")
        asked = np.minimum(asked, L1)
        saved = save_points(L1, args.get("saves"), args.get("save_at_log10_t"))
        points = np.union1d(saved, asked)
        rerun = {k: v for k, v in args.items() if k not in ("saves", "save_at_log10_t")}
        again = self.rerun(**rerun, save_at_log10_t=points, throw=False)
        # an early ending's last row is where it ended, not a save point
        reached = len(again.log10_t) - (0 if Status(again.status).reaches_t1 else 1)
        rows = np.searchsorted(points, asked)
        missed = asked[rows >= reached]
        if missed.size:
            raise ValueError(f"the flow did not reach log10 t = {', '.join(f'{x:g}' for x in missed)}: it ended at "
                             f"log10 t = {again.log10_t[-1]:.6g}, status {again.status!r} ({again.message}).")
        return dataclasses.replace(again, log10_t=asked, tau=again.tau[rows], params=again.params[rows],
                                   beta=again.beta[rows], log_loss=again.log_loss[rows], margins=again.margins[rows])

    def __repr__(self) -> str:
        end = self.log10_t[-1] if len(self.log10_t) else float("nan")
        return f"Solution({self.system}, status={self.status!r}, saves={len(self.log10_t)}, log10_t_end={end:.6g})"
