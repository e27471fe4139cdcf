"""Ctrl-C on cue, for testing code that must keep what a solve, a discrete run or a reproduction computed.

flowsim turns a Ctrl-C into a result: a solve ends ``"interrupted"`` with its saves so far, a discrete run with
its records, and the reproduction suite stops and writes the claims it judged. A real Ctrl-C lands wherever
the work happens to be; to test that handling at a chosen moment, :func:`interrupt` raises
``KeyboardInterrupt`` the ``nth`` time the work reaches that moment, as a Ctrl-C that lands at once would
there (where flowsim holds a first Ctrl-C back, inside a backend call, this is a second one).

```python
import flowsim as fs
from flowsim.testing import interrupt

with interrupt("scipy step", nth=50):
    sol = fs.solve(system, data, 0.1, t1=1e100, backend="scipy:RK45", throw=False)
assert sol.status == "interrupted"
```

The moments are :data:`MOMENTS`. Outside an ``interrupt`` block, passing a moment costs one look at an
empty dict, and nothing else changes.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

#: the moments :func:`interrupt` can land at, and where in the work each is
MOMENTS = {
    "segment": "a backend call is about to integrate a segment (every backend)",
    "scipy step": "a scipy solver has taken a step and its saves are in (scipy backends)",
    "tau saves": "a batch of tau-clock saves is about to be root-found on the steps' dense output (scipy backends)",
    "discrete call": "a call of discrete steps between records has returned (flowsim.iterate)",
    "sweep chunk": "a chunk of grid points is about to be solved (flowsim.sweep, on its own thread where the chunks "
                   "run on several)",
    "sweep assembly": "every point of a sweep is done and its dataset is about to be built (flowsim.sweep)",
}


class _Armed:
    """An :func:`interrupt` waiting at its moment: the passages so far, the one to interrupt, and how."""

    def __init__(self, nth, signum):
        self.passages, self.nth, self.signum = 0, nth, signum


_armed: dict = {}  # moment -> _Armed


@contextmanager
def interrupt(moment: str, nth: int = 1, signum: int | None = None):
    """Within this block, raise ``KeyboardInterrupt`` the ``nth`` time the work reaches ``moment``.

    Args:
        moment: one of :data:`MOMENTS`.
        nth: which passage through ``moment`` is interrupted (1: the first); later passages go on.
        signum: send this signal to the process instead (``signal.raise_signal``), as ``kill`` would: the
            handler in place decides what happens (e.g. ``signal.SIGTERM``, which flowsim handles as a Ctrl-C
            while it works and the default handler answers by ending the process).

    Raises:
        ValueError: an unknown moment or signal, or ``nth`` not a positive integer.
    """
    if moment not in MOMENTS:
        raise ValueError(f"interrupt(moment={moment!r}): choose one of {sorted(MOMENTS)}.")
    if isinstance(nth, bool) or not isinstance(nth, int) or nth < 1:
        raise ValueError(f"interrupt(nth={nth!r}): nth counts passages, a positive integer (1: the first).")
    if signum is not None and signum not in set(signal.Signals):
        raise ValueError(f"interrupt(signum={signum!r}): not a signal number; e.g. signal.SIGTERM.")
    before = _armed.get(moment)
    _armed[moment] = _Armed(nth, signum)
    try:
        yield
    finally:
        if before is None:
            del _armed[moment]
        else:
            _armed[moment] = before


def reached(moment: str) -> None:
    """Called by flowsim at each of :data:`MOMENTS`: interrupts the work where :func:`interrupt` asks."""
    armed = _armed.get(moment) if _armed else None
    if armed is None:
        return
    armed.passages += 1
    if armed.passages != armed.nth:
        return
    if armed.signum is None:
        raise KeyboardInterrupt
    signal.raise_signal(armed.signum)
