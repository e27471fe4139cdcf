"""Where flowsim turns a Ctrl-C into a result (an "interrupted" solve, sweep point or discrete run, with what
it computed kept), where it holds one back until a block ends (:func:`after_block`: a backend call's saves, a
file) or a result is whole (:func:`held`), and the one context in which it does not keep it.

SIGTERM (what ``timeout`` and batch schedulers send) is handled as a Ctrl-C wherever flowsim works
(:func:`terminable`): it raises :class:`Terminated`, a KeyboardInterrupt, so the same code keeps what was
computed; :func:`exit_code` then says 143 rather than 130.

One run interrupted is a result to keep. Work made of many runs (the reproduction suite) must stop at the
first instead: going on, it judged claims on partial sweeps and reported them with exit code 0. Under
:func:`propagating`, :func:`absorbed` raises the KeyboardInterrupt on.

A SIGTERM kept as a result only delays the process's end: the next solve, sweep or iterate the script starts
(a loop of solves) ends the process with exit code 143 instead (:func:`terminable`), so ``timeout`` and batch
schedulers can stop such a script. A Ctrl-C has no such after-effect (in a notebook the next cell runs).
"""

from __future__ import annotations

import signal
import sys
import threading
import warnings
from contextlib import contextmanager

_state = threading.local()  # (per thread: a sweep's worker threads are not the caller's work)
_last = {"signum": signal.SIGINT}  # the last stop signal received, for the exit code
_terminated = {"pending": False}  # a SIGTERM kept as a result in the main thread: no more work starts
STOPS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where flowsim works so that what was computed is kept, as after a Ctrl-C."""


def _stop(signum):
    _last["signum"] = signum
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def stopped_by(err: BaseException) -> str:
    """What stopped the work, for a result's message (and remembered for :func:`exit_code`)."""
    terminated = isinstance(err, Terminated)
    _last["signum"] = signal.SIGTERM if terminated else signal.SIGINT
    return "terminated (SIGTERM)" if terminated else "interrupted by the user (KeyboardInterrupt)"


def exit_code() -> int:
    """The shell's exit code for the last stop signal received: 130 after a Ctrl-C, 143 after SIGTERM."""
    return 128 + int(_last["signum"])


@contextmanager
def terminable():
    """SIGTERM raises :class:`Terminated` in this block (main thread, where Python's default handler is still
    in place: it would end the process keeping nothing); the default comes back after. Where an earlier SIGTERM
    was kept as a result, the process ends here instead (exit code 143): it was asked to stop."""
    if _terminated["pending"] and threading.current_thread() is threading.main_thread():
        sys.stderr.write("flowsim: terminated (SIGTERM) during an earlier solve, whose result was returned "
                         "'interrupted'; not starting more work\n")
        raise SystemExit(128 + signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, lambda signum, frame: _stop(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
    """Call where a Ctrl-C has become a result: raises KeyboardInterrupt inside :func:`propagating`; a SIGTERM
    kept in the main thread ends the process at its next start of work (:func:`terminable`)."""
    if getattr(_state, "propagate", False):
        raise Terminated if _last["signum"] == signal.SIGTERM else KeyboardInterrupt
    if _last["signum"] == signal.SIGTERM and threading.current_thread() is threading.main_thread():
        _terminated["pending"] = True


@contextmanager
def _deferred(patient=False):
    """SIGINT and SIGTERM held back in this block (the main thread's; others get no signals): yields the list
    of signals held. A second one stops at once, unless ``patient`` (a file being written: stopping inside
    netCDF's close deadlocked the process)."""
    pressed = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return

    def later(signum, frame):
        if pressed and not patient:
            _stop(signum)
        pressed.append(signum)

    before = {s: signal.signal(s, later) for s in STOPS}
    try:
        yield pressed
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextmanager
def after_block(patient=False):
    """A Ctrl-C or SIGTERM in this block lands when it ends (a backend call whose saves must be recorded, a file
    written); ``patient``: every one of them waits (see :func:`_deferred`)."""
    with _deferred(patient) as pressed:
        yield
    if pressed:
        _stop(pressed[0])


@contextmanager
def received_after():
    """A Ctrl-C or SIGTERM in this block (a file being written) waits for its end, then takes the effect it would
    have had: the default SIGTERM ends the process, a Ctrl-C raises KeyboardInterrupt, the handlers of an
    enclosing block (a command line's save) keep the run. Stopping mid-write lost the run with the file."""
    with _deferred(patient=True) as pressed:
        yield
    if pressed:
        signal.raise_signal(pressed[0])


@contextmanager
def held():
    """Around assembling a result already computed: a Ctrl-C here waits for the block's end and then counts as
    :func:`absorbed` (the whole result is returned, with a warning that says so; it was lost, exit code 130,
    when the Ctrl-C came just as a sweep finished)."""
    with _deferred() as pressed:
        yield
    if pressed:
        _last["signum"] = pressed[0]
        absorbed()
        warnings.warn("Ctrl-C as the last points were assembled: the result is whole, and returned",
                      RuntimeWarning, stacklevel=3)
