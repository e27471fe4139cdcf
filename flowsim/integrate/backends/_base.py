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

Everything else (sign switches, sliding, statuses, saving) is the driver's (``flowsim.integrate.solve``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Segment:
    """What one backend call returns."""

    s_saves: np.ndarray  # independent variable at the save targets reached
    y_saves: np.ndarray  # (n_reached, state)
    s_end: float
    y_end: np.ndarray
    reason: str  # "end" | an event name | "max_steps" | "failed" | "interrupted"
    message: str = ""
    stats: dict = field(default_factory=dict)
    #: a segment that ended on its step budget may return the live solver, which the next call continues
    #: from (``integrate(..., resume=...)``) instead of restarting: scipy's LSODA fails restarted at huge s
    resume: object = None
