"""How a solve runs, validated once for :func:`flowsim.solve`, :func:`flowsim.sweep` and a config file."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flowsim._checks import is_whole
from flowsim.integrate.backends import backend_for
from flowsim.integrate.timeline import log10_horizon, positive, refuse_save_at, save_points, u_of

#: the tightest rtol a float64 step can be asked for (1e-300 failed with NaNs; scipy raises one below 100 eps to
#: that itself, with a warning, while diffrax takes it)
RTOL_MIN = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Options:
    """The horizon, the save grid, the tolerances and the step budget of a solve, and the backend and clock
    as asked ("auto" kept: what it picks depends on the flow). Make one with :meth:`checked`."""

    log10_t1: float
    #: the log10 t of every save (the default grid, or the points given)
    save_at_log10_t: np.ndarray = field(repr=False)
    #: the points were given (``save_at_log10_t`` or ``save_at_t``), not the default grid
    points_given: bool
    backend: str
    clock: str
    rtol: float
    #: None: each solve's own, from its init's size (``flowsim.integrate.timeline.atol_for``)
    atol: float | None
    collapse_tol: float
    blowup_size: float
    max_steps: int

    @classmethod
    def checked(cls, *, t1=None, log10_t1=None, backend="auto", clock="auto", rtol=1e-8, atol=None, saves=None,
                save_at_log10_t=None, save_at_t=None, save_at=None, max_steps=16_384, collapse_tol=1e-10,
                blowup_size=1e100, default_saves=400) -> Options:
        """Options from :func:`flowsim.solve`'s keyword arguments, each checked; a ValueError names the first
        that is wrong and how to mend it. ``default_saves``: the size of the default grid."""
        L1, _ = log10_horizon(t1, log10_t1)
        backend_for(backend, L1)  # the name
        refuse_save_at(save_at)
        given = save_at_log10_t is not None or save_at_t is not None
        points = save_points(L1, default_saves if saves is None and not given else saves, save_at_log10_t, save_at_t)
        rtol = positive("rtol", rtol)
        if not RTOL_MIN <= rtol < 1:  # (1e-300 was taken, and failed as "array must not contain infs or NaNs")
            raise ValueError(f"rtol must be in [{RTOL_MIN:.3g}, 1) (a relative error per step, 1e-8 by default; below "
                             f"float64's epsilon no step can meet it); got {rtol!r}.")
        atol = None if atol is None else positive("atol", atol)
        collapse_tol, blowup_size = positive("collapse_tol", collapse_tol), positive("blowup_size", blowup_size)
        if not collapse_tol < 1:
            raise ValueError(f"collapse_tol must be < 1 (the fraction of the init's size below which the parameters "
                             f"have collapsed; 1e-10 by default); got {collapse_tol!r}.")
        if not is_whole(max_steps):
            raise ValueError(f"max_steps must be a positive integer; got {max_steps!r}.")
        return cls(L1, points, given, backend, clock, rtol, atol, collapse_tol, blowup_size, int(max_steps))

    @property
    def u1(self) -> float:
        """The horizon as u = log(1 + t1)."""
        return float(u_of(self.log10_t1))

    @property
    def auto(self) -> bool:
        """Backend and clock both "auto": an explicit method that spends a whole chunk of steps may hand over to
        an implicit one."""
        return self.backend == "auto" and self.clock == "auto"

    @property
    def asked_saves(self) -> dict:
        """The saves as asked, in JSON's types (a saved run reads back equal): the points, or the grid's size."""
        if self.points_given:
            return {"save_at_log10_t": self.save_at_log10_t.tolist()}
        return {"saves": len(self.save_at_log10_t)}

    def solve_arguments(self) -> dict:
        """The keyword arguments of :func:`flowsim.solve` that give these options (the save grid as points)."""
        return dict(log10_t1=self.log10_t1, backend=self.backend, clock=self.clock, rtol=self.rtol, atol=self.atol,
                    save_at_log10_t=self.save_at_log10_t, max_steps=self.max_steps, collapse_tol=self.collapse_tol,
                    blowup_size=self.blowup_size)
