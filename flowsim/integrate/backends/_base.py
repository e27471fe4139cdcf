"""The backend contract.

A backend integrates one *segment*: from ``(s0, y0)`` with fixed ``args`` until the end of the
independent variable (``s_max``), an event, ``max_steps``, a failure or an interrupt. It must

- evaluate the state at the save targets (values of u = log(1+t)) that the segment passes, on its
  dense output (under the tau clock by root-finding u(tau) = target, under the log-time clock
  directly, since there s = u);
- locate events (see ``_events.py``) by root-finding on the dense output, not at step ends, arming only
  those positive at the segment's start;
- count steps, accepted/rejected steps and right-hand-side evaluations;
- accept ``resume`` (``Segment.resume`` of the previous call, or None) and may ignore it.

A backend subclasses :class:`Backend`: it says its ``name``, whether it is ``implicit``, its
``default_clock``, the array namespace its field runs on (``field``) and whether a sweep may batch its
points in one compiled solve (``batches``), and implements ``integrate(request) -> Segment``.

Everything else (sign switches, sliding, statuses, saving) is the driver's (``flowsim.integrate.solve``).
A backend that cannot follow sliding on switching surfaces says so (``slides_on_surfaces``).
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class Ending(enum.StrEnum):
    """How a backend call ends other than at an event (whose name is its reason)."""

    END = "end"  # the end of the independent variable, s_max
    MAX_STEPS = "max_steps"  # the call's step budget
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass
class Segment:
    """What one backend call returns."""

    s_saves: np.ndarray  # independent variable at the save targets reached
    y_saves: np.ndarray  # (n_reached, state)
    s_end: float
    y_end: np.ndarray
    reason: str  # an :class:`Ending` or an event's name
    message: str = ""
    stats: dict = field(default_factory=dict)
    #: a segment that ended on its step budget may return the live solver, which the next call continues
    #: from (``integrate(..., resume=...)``) instead of restarting: scipy's LSODA fails restarted at huge s
    resume: object = None
    #: log of the summed loss at the second-to-last save of this segment and at its end, where the backend found
    #: them with the solve (diffrax; None: not found, or fewer than two saves): the plateau check at the horizon
    end_log_losses: tuple | None = None


@dataclass(frozen=True)
class SegmentRequest:
    """One backend call: integrate ``vf`` from ``(s0, y0)`` towards ``s_max`` under ``clock``."""

    vf: Any  # the field, on the backend's array namespace (``Backend.field``)
    key: Any  # the system's structure: what a compiled solve is keyed by
    clock: Any  # a :class:`flowsim.integrate.clock.Clock`
    uses_sign: bool  # a Filippov flow: watch sign switches
    sliding: Any  # a :class:`flowsim.integrate.segment_args.Sliding`: what slides, on planes and on surfaces
    y0: np.ndarray
    s0: float
    s_max: float
    args: Any  # a :class:`flowsim.integrate.segment_args.SegmentArgs`
    u_targets: np.ndarray  # the save targets left, values of u = log(1 + t)
    rtol: float
    atol: float
    max_steps: int
    n_targets: int  # the whole solve's save targets (a compiled solve's slots)
    track: tuple = ()  # tracked leader scores (``lead_<kind>`` events)
    resume: object = None  # ``Segment.resume`` of the previous call
    progress: Any = None  # called with u as the segment advances (None: no progress)


class Backend(abc.ABC):
    """An integrator behind the segment interface (see the module's contract)."""

    name: str
    implicit: bool
    #: the clock ``clock="auto"`` runs in on this backend
    default_clock: str
    #: a sweep may integrate its points together in one compiled, vmapped solve
    batches: bool = False
    #: integrates segments that slide on switching surfaces (``SegmentRequest.sliding.surfaces``); where not, the
    #: driver hands those segments to ``SURFACE_BACKEND``
    slides_on_surfaces: bool = True

    @abc.abstractmethod
    def field(self, system, K: int, d: int):
        """The field of ``system`` on this backend's array namespace."""

    @abc.abstractmethod
    def integrate(self, request: SegmentRequest) -> Segment:
        """Integrate one segment."""
