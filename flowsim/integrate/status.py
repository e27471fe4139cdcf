"""How a solve ends: :class:`Status`, each with what it means and whether it is a failure.

A ``Status`` is a ``str`` enum: ``sol.status == "completed"`` and ``sol.status == fs.Status.COMPLETED`` both
hold, and saved runs store the plain name.
"""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """The ending of a solve (a sweep point, a discrete run)."""

    COMPLETED = "completed"
    STALLED = "stalled"
    CONVERGED = "converged"
    COLLAPSED = "collapsed"
    BLEW_UP = "blew_up"
    MAX_STEPS = "max_steps"
    CHATTERING = "chattering"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    def __repr__(self) -> str:
        return repr(self.value)  # messages and reprs show the name a user compares with

    @property
    def meaning(self) -> str:
        """What the status says, in words (the message of a solve that gives no more specific one)."""
        return _MEANINGS[self]

    @property
    def is_failure(self) -> bool:
        """The integration did not follow the flow as far as it goes; ``throw=True`` raises."""
        return self in _FAILURES

    @property
    def held(self) -> bool:
        """The state is held constant from where the solve stopped up to t1 (a rest point of the flow)."""
        return self in (Status.STALLED, Status.CONVERGED)

    @property
    def reaches_t1(self) -> bool:
        """The trajectory is known up to the horizon t1: it got there, or rests on the way."""
        return self is Status.COMPLETED or self.held


_FAILURES = (Status.MAX_STEPS, Status.CHATTERING, Status.FAILED, Status.INTERRUPTED)
_MEANINGS = {
    Status.COMPLETED: "reached the horizon t1",
    Status.STALLED: "reached an equilibrium (every parameter entry sliding or at a critical point); the state is "
                    "constant up to t1",
    Status.CONVERGED: "converged to a critical point with a positive loss (the flow does not separate the data from "
                      "this init); the limit is held constant up to t1",
    Status.COLLAPSED: "the parameters fell below the collapse floor (collapse_tol x the init's size, at least 1000 "
                      "atol): the flow goes to beta = 0 (l2-SAM from a small initialisation reaches it in finite "
                      "time; a flow whose start cannot separate the data, fs.reachable_signs, decays towards it) and "
                      "is stopped there",
    Status.BLEW_UP: "the parameters diverged in finite clock time (depth >= 3)",
    Status.MAX_STEPS: "the step budget max_steps ran out before t1; raise max_steps or loosen rtol/atol",
    Status.CHATTERING: "a sliding mode flowsim does not integrate: a sign switch with no consistent side (not on a "
                       "coordinate plane w = 0), Zeno switching, or normalised SAM sliding where its field jumps (a "
                       "saddle of the loss among them)",
    Status.FAILED: "the solver failed (step size underflow or a non-finite state)",
    Status.INTERRUPTED: "interrupted by the user; everything up to the interrupt is kept",
}

#: statuses that end a solve normally (the flow was followed as far as it goes), with their meanings
OUTCOMES = {str(s): s.meaning for s in Status if not s.is_failure}
#: statuses that mean the integration failed; ``throw=True`` raises :class:`flowsim.IntegrationError`
FAILURES = {str(s): s.meaning for s in Status if s.is_failure}
STATUSES = {**OUTCOMES, **FAILURES}
#: statuses whose state is held constant from where the solve stopped up to t1
HELD = tuple(str(s) for s in Status if s.held)
