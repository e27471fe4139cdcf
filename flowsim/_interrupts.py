"""Where flowsim turns a Ctrl-C into a result (an "interrupted" solve, sweep point or discrete run, with what
it computed kept), where it holds one back until a result is whole, and the one context in which it does not.

One run interrupted is a result to keep. Work made of many runs (the reproduction suite) must stop at the
first instead: going on, it judged claims on partial sweeps and reported them with exit code 0. Under
:func:`propagating`, :func:`absorbed` raises the KeyboardInterrupt on.
"""

from __future__ import annotations

import signal
import threading
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
def held():
    """Around assembling a result already computed: a Ctrl-C here waits for the block's end (a second one stops
    at once) and then counts as :func:`absorbed`, so the whole result is returned (it was lost, exit code 130,
    when the Ctrl-C came just as a sweep finished)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []

    def later(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(signum)

    before = signal.signal(signal.SIGINT, later)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if pressed:
        absorbed()
