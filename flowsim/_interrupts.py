"""Where flowsim turns a Ctrl-C into a result (an "interrupted" solve, sweep point or discrete run, with what
it computed kept), where it holds one back until a block ends (:func:`after_block`: a backend call's saves, a
file) or a result is whole (:func:`held`), and the one context in which it does not keep it.

One run interrupted is a result to keep. Work made of many runs (the reproduction suite) must stop at the
first instead: going on, it judged claims on partial sweeps and reported them with exit code 0. Under
:func:`propagating`, :func:`absorbed` raises the KeyboardInterrupt on.
"""

from __future__ import annotations

import signal
import threading
import warnings
from contextlib import contextmanager

_state = threading.local()  # (per thread: a sweep's worker threads are not the caller's work)


@contextmanager
def propagating():
    """Within this block a Ctrl-C that a solve, sweep or iterate would keep as a result goes on up."""
    before = getattr(_state, "propagate", False)
    _state.propagate = True
    try:
        yield
    finally:
        _state.propagate = before


def absorbed() -> None:
    """Call where a Ctrl-C has become a result: raises KeyboardInterrupt inside :func:`propagating`."""
    if getattr(_state, "propagate", False):
        raise KeyboardInterrupt


@contextmanager
def _deferred():
    """SIGINT held back in this block (the main thread's; others get no SIGINT): yields the list of presses held.
    A second press stops at once."""
    pressed = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return

    def later(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(signum)

    before = signal.signal(signal.SIGINT, later)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, before)


@contextmanager
def after_block():
    """A Ctrl-C in this block lands when it ends (a backend call whose saves must be recorded, a file written)."""
    with _deferred() as pressed:
        yield
    if pressed:
        raise KeyboardInterrupt


@contextmanager
def held():
    """Around assembling a result already computed: a Ctrl-C here waits for the block's end and then counts as
    :func:`absorbed` (the whole result is returned, with a warning that says so; it was lost, exit code 130,
    when the Ctrl-C came just as a sweep finished)."""
    with _deferred() as pressed:
        yield
    if pressed:
        absorbed()
        warnings.warn("Ctrl-C as the last points were assembled: the result is whole, and returned",
                      RuntimeWarning, stacklevel=3)
