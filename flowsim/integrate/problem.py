"""One solve as set up (:class:`Problem`): what the segment loop integrates, from where, and how."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowsim.integrate.timeline import clock_plan, u_of
from flowsim.symbolic.reachable import kept_entry_signs


@dataclass(frozen=True)
class Problem:
    """The system and data a solve integrates (a balanced start's tied net, where it reduces to one), its start,
    its backend and clock, and its checked options, with the collapse and blow-up levels they give.

    ``speedup``: the system runs that many times faster than the one asked for (a reduced solve): the horizon and
    the saves are shifted to match; ``flips`` (layers, d): the reduction's sign of each entry relative to layer
    1's (``balanced.reduction``), None for a solve not reduced. ``adaptive``: an explicit method that spends a whole chunk of steps hands over
    to an implicit one (``backend`` and ``clock`` "auto")."""

    system: Any
    data: Any
    theta0: np.ndarray = field(repr=False)
    backend: Any
    clock: Any
    log10_t1: float
    #: the log10 t of every save, in the asked-for system's time
    points: np.ndarray = field(repr=False)
    rtol: float
    atol: float
    max_steps: int
    log_floor: float
    log_ceiling: float
    track: tuple = ()
    speedup: float = 1.0
    adaptive: bool = False
    flips: Any = field(default=None, repr=False)

    @property
    def shift(self) -> float:
        """log10 of the speedup: the asked-for system's log10 t is the integrated one's plus this."""
        return math.log10(self.speedup)

    @property
    def u1(self) -> float:
        """The horizon as u = log(1 + t) of the integrated system."""
        return float(u_of(self.log10_t1 - self.shift))

    @property
    def reduced(self) -> bool:
        """Integrated as the tied net of a balanced product start (``balanced.reduction``)."""
        return self.flips is not None

    def plan(self):
        """The save targets in u and in the clock's own units, and the integration variable's end
        (``timeline.clock_plan``)."""
        return clock_plan(self.clock, self.u1, self.points, self.shift)

    def kept_signs(self) -> np.ndarray:
        """The sign each entry of the start keeps for ever under a smooth flow (``flowsim.kept_entry_signs``): the
        crossing event's sigma."""
        return kept_entry_signs(self.system.model, self.theta0, self.system.flow)
