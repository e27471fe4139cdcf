r"""The clocks a solve integrates in (docs/theory.md 4). A solve's state is ``y = [theta.ravel(), last]`` and
its integration variable is ``s``; the clock says what ``s`` and ``last`` count, how both map to
``u = log(1 + t)`` and to the loss-normalised clock tau, and what the clock adds to the field:

- :data:`LOG_TIME`: ``s = u``, ``last = tau``. The field carries the rate ``dt/du e^{S~} = e^{S~ + s}``.
- :data:`TAU`: ``s = tau``, ``last = u`` (``du/dtau = e^{-S~ - u}``). Save targets and the horizon are values
  of the state entry ``u``: found on the dense output, the horizon by an event; ``s`` has no end.
- :class:`Schedule`: a learning-rate schedule's clock ``ds = eta(t) dt`` with ``eta = lr (1+t)^-decay``
  (sign and Adam-proxy flows), ``last = s``; tau is ``s`` itself.

Save targets are held in the clock's own units (:meth:`Clock.own`): values of ``u`` compared with the
state's last entry under tau, values of ``s`` under the other two.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

#: the clock names :func:`flowsim.solve` takes (a schedule clock comes with its flow)
NAMES = ("tau", "log_time")


class Clock:
    """What a clock says of a solve's integration variable ``s`` and its state's last entry ``last``.
    Subclasses: the three clocks of this module. Every method takes arrays as well as numbers."""

    name: str
    #: the state's last entry is u: save targets and the horizon are found on it (else on s)
    u_in_state = False
    #: ``backend="auto"`` can hand a stiff run over to an implicit method, which continues in
    #: :meth:`implicit_clock`
    hands_over = False
    #: the field carries a rate (:meth:`log_rate`) that can leave float range
    carries_rate = False

    def u(self, s, last):
        """u = log(1 + t) at integration variable ``s`` with last state entry ``last``."""
        raise NotImplementedError

    def tau(self, s, last):
        """The loss-normalised clock tau there."""
        raise NotImplementedError

    def own(self, u):
        """Save targets (values of u) in the units they are compared with (:meth:`reading`)."""
        return np.asarray(u, float)

    def reading(self, s, last):
        """What save targets are compared with at (s, last): s, or u where ``u_in_state``."""
        return last if self.u_in_state else s

    def for_flow(self, flow) -> Clock:
        """This clock for ``flow`` (a balanced solve's tied flow runs on a schedule of its own lr)."""
        return self

    def check_horizon(self, u1):
        """A ValueError where the clock cannot reach the horizon u1 in float range."""

    def end(self, u1) -> float:
        """The integration variable's end for a horizon u1."""
        return float(self.own(u1))

    def rates(self, xp, S, s, last):
        """(scale of the field F, d last / ds) at a state whose log mean loss weight is ``S`` (S~)."""
        raise NotImplementedError

    def jacobian(self, xp, F, S, dF, dS, s, last):
        """d(rhs)/dy from the field F (column), its Jacobian dF and that of S, dS (a row)."""
        raise NotImplementedError

    def log_rate(self, S, s) -> float:
        """log of the rate the field carries (e^{S~ + s} in log-time; -inf where it carries none)."""
        return -math.inf

    def held(self, theta, s, last, S, targets):
        """The records (s, y) of a state ``theta`` held still from (s, last) through the remaining ``targets``
        (own units): only the clocks move (dt/dtau = e^{-S~})."""
        u_now, tau_now = float(self.u(s, last)), float(self.tau(s, last))
        records = []
        with np.errstate(over="ignore"):
            for u in np.asarray(targets, float).tolist():
                # t_k - t_now = e^u - e^{u_now}
                dtau = np.exp(S + u + np.log1p(-np.exp(min(u_now - u, 0.0)))) if u > u_now else 0.0
                records.append(self.record(theta, u, tau_now + dtau))
        return records

    def record(self, theta, u, tau):
        """(s, y) of a state ``theta`` at (u, tau)."""
        raise NotImplementedError

    def implicit_clock(self) -> Clock:
        """The clock an implicit method continues in after a hand-over."""
        return self

    def for_implicit(self, s, y):
        """(s, y) of a record in :meth:`implicit_clock`."""
        return s, y

    def __repr__(self):
        return self.name


class _LogTime(Clock):
    name, hands_over, carries_rate = "log_time", True, True

    def u(self, s, last):
        return s

    def tau(self, s, last):
        return last

    def rates(self, xp, S, s, last):
        rate = xp.exp(S + s)
        return rate, rate

    def jacobian(self, xp, F, S, dF, dS, s, last):
        rate = xp.exp(S + s)
        top = xp.concatenate([rate * (dF + F * dS[None, :]), xp.zeros_like(F)], axis=1)
        return top, xp.concatenate([rate * dS, xp.zeros(1)])[None, :]

    def log_rate(self, S, s):
        return float(S + s)

    def record(self, theta, u, tau):
        return u, np.concatenate([np.ravel(theta), [tau]])

    def implicit_clock(self):
        # an implicit method's trial steps overflow the log-time rate e^{S~ + u}: it continues under tau
        return TAU

    def for_implicit(self, s, y):
        # (s = u, y = [theta, tau]) becomes (s = tau, y = [theta, u]): the two clock entries swap places
        return float(y[-1]), np.concatenate([y[:-1], [s]])


class _Tau(Clock):
    name, u_in_state = "tau", True

    def u(self, s, last):
        return last

    def tau(self, s, last):
        return s

    def end(self, u1):
        return 1e300  # the horizon is an event on u

    def rates(self, xp, S, s, last):
        return None, xp.exp(-S - last)

    def jacobian(self, xp, F, S, dF, dS, s, last):
        rate = xp.exp(-S - last)  # du/dtau
        top = xp.concatenate([dF, xp.zeros_like(F)], axis=1)
        return top, xp.concatenate([-rate * dS, -rate * xp.ones(1)])[None, :]

    def record(self, theta, u, tau):
        return tau, np.concatenate([np.ravel(theta), [u]])


@dataclasses.dataclass(frozen=True, repr=False)
class Schedule(Clock):
    """The clock ``ds = lr (1+t)^-decay dt`` of a flow with a learning-rate schedule: s = lr expm1((1-a) u)/(1-a)
    (decay a < 1), lr u (a = 1)."""

    lr: float
    decay: float
    name, hands_over = "schedule", True

    def u(self, s, last):
        s = np.asarray(s, float)
        if self.decay == 1.0:
            return s / self.lr
        return np.log1p((1 - self.decay) * s / self.lr) / (1 - self.decay)

    def tau(self, s, last):
        return s

    def own(self, u):
        u = np.asarray(u, float)
        if self.decay == 1.0:
            return self.lr * u
        return self.lr * np.expm1((1 - self.decay) * u) / (1 - self.decay)

    @classmethod
    def of(cls, flow) -> Schedule:
        """The schedule clock of ``flow`` (its ``lr`` and ``decay``)."""
        return cls(float(flow.lr), float(flow.decay))

    def for_flow(self, flow):
        return Schedule.of(flow)

    def check_horizon(self, u1):
        if self.decay != 1.0 and (1 - self.decay) * u1 > 700:
            raise ValueError(f"with decay={self.decay} the schedule clock s ~ t^(1-a) overflows before t1; use decay=1 "
                             "(s = lr log(1+t)) for horizons beyond t ~ 10^(300/(1-a)).")

    def rates(self, xp, S, s, last):
        return None, 1.0  # the last entry counts s

    def jacobian(self, xp, F, S, dF, dS, s, last):
        n = dF.shape[0]
        return xp.concatenate([dF, xp.zeros_like(F)], axis=1), xp.zeros((1, n + 1))

    def held(self, theta, s, last, S, targets):
        return [(sk, np.concatenate([np.ravel(theta), [sk]])) for sk in np.asarray(targets, float).tolist()]


LOG_TIME, TAU = _LogTime(), _Tau()


def clock_for(flow, asked: str, default: str) -> Clock:
    """The clock a solve of ``flow`` runs in: its schedule's for a flow that has one (``asked`` must be "auto"),
    else ``asked`` ("tau", "log_time", or "auto": the backend's ``default``)."""
    if getattr(flow, "clock", None) == "schedule":
        if asked != "auto":
            raise ValueError(f"{flow} runs on its learning-rate schedule's clock; clock={asked!r} would be ignored: "
                             "leave clock='auto'.")
        return Schedule.of(flow)
    return named(default if asked == "auto" else asked)


def named(name: str) -> Clock:
    """The clock of that name in :data:`NAMES`."""
    if name not in NAMES:
        raise ValueError(f"clock must be one of {(*NAMES, 'auto')}; got {name!r}.")
    return TAU if name == "tau" else LOG_TIME
