"""Where a solve saves and how its clocks map to t: the horizon, the save grid in log10 t, the maps
between the integration variable s and u = log(1+t) (docs/theory.md 4), a held state carried to t1,
and the assembly of the records into a :class:`Solution`."""

from __future__ import annotations

import functools
import math

import numpy as np

from flowsim._checks import is_whole
from flowsim.field.vector_field import numpy_field
from flowsim.integrate.status import Status

#: upper bound on the number of saves (each holds the whole state)
MAX_SAVES = 1_000_000


LN10 = math.log(10.0)


#: the earliest horizon (t1 = 1e-300), and the earliest save (the default grid's first, 2 FIRST_DECADES before the
#: earliest horizon): below t = 1e-307 float64 has subnormals and 0, and saves there would be -inf rows
MIN_LOG10_T = -300.0
MIN_LOG10_SAVE = -306.0


def log10_horizon(t1, log10_t1):
    if (t1 is None) == (log10_t1 is None):
        raise ValueError("give exactly one of t1 (e.g. t1=1e100) or log10_t1 (e.g. log10_t1=1e6, beyond float range).")
    if t1 is not None:
        if is_whole(t1) and t1 > 1e300:  # 10**400, a Python int: exact in log10 (float() overflowed)
            return log10_horizon(None, math.log10(t1))
        if isinstance(t1, float) and math.isinf(t1) and t1 > 0:
            raise ValueError("t1 = inf cannot be reached; give a finite t1, or log10_t1 (e.g. 1e6) for horizons beyond float range.")
        t1 = positive("t1", t1)
        log10_t1 = math.log10(t1)
    else:
        try:
            x = math.nan if isinstance(log10_t1, bool) else float(log10_t1)
        except (TypeError, ValueError):
            x = math.nan
        except OverflowError:  # an int past float range
            x = math.inf
        if not math.isfinite(x):
            raise ValueError(f"log10_t1 must be a finite number; got {log10_t1!r}.")
        log10_t1 = x
    if log10_t1 < MIN_LOG10_T:
        raise ValueError(f"the horizon log10 t1 = {log10_t1:g} is below {MIN_LOG10_T:g}: t that small is not "
                         "resolved in float64.")
    return log10_t1, float(u_of(log10_t1))


#: the default grid's first save, this many decades before its second (t = 1e-6 for horizons
#: beyond t = 1e-3): the init itself is ``sol.config["init"]``; every saved log10 t is finite. Not
#: closer to 0: in the tau clock a save is found by bisection in tau, which resolves t = 1e-6 to
#: ~1e-12 relative and t = 1e-12 only to ~1e-7
FIRST_DECADES = 3.0
#: the default grid is uniform in log(SPREAD + decades since its start): uniform in log10 t over the
#: first few dozen decades (where switches and amplification happen), uniform in log log t beyond
SPREAD = 10.0


@functools.lru_cache(maxsize=32)
def default_grid(log10_t1, saves):
    """log10 t of ``saves`` default save points up to t1: one near t = 0, then dense in log10 t from
    t = 1e-3 over the first decades and in log10 log10 t far out (``SPREAD``). Made once per (t1, saves), and
    read-only, as it is shared."""
    lo = min(-3.0, log10_t1 - 3.0)
    w = np.linspace(math.log(SPREAD), math.log(SPREAD + log10_t1 - lo), saves - 1)
    grid = lo + np.expm1(w - math.log(SPREAD)) * SPREAD
    grid[-1] = log10_t1
    points = np.concatenate([[lo - FIRST_DECADES], grid])
    points.flags.writeable = False
    return points


def save_points(log10_t1, saves=None, save_at_log10_t=None, save_at_t=None):
    """The log10 t of every save: ``save_at_log10_t`` (log10 t) or ``save_at_t`` (t) as given (t1 appended
    when they stop short), or the default grid of ``saves`` points (400 when none of them is given)."""
    given = [name for name, value in (("saves", saves), ("save_at_log10_t", save_at_log10_t),
                                      ("save_at_t", save_at_t)) if value is not None]
    if len(given) > 1:
        raise ValueError("give only one of saves (a number of default save points), save_at_log10_t (the log10 t of "
                         f"each save) or save_at_t (the time t of each); got {' and '.join(given)}.")
    if save_at_t is not None:
        return explicit_points("save_at_t", log10_of_times(save_at_t), log10_t1)
    if save_at_log10_t is not None:
        return explicit_points("save_at_log10_t", one_dimensional("save_at_log10_t", save_at_log10_t, "log10 t"),
                               log10_t1)
    saves = 400 if saves is None else saves
    if not is_whole(saves, 2) or saves > MAX_SAVES:
        raise ValueError(f"saves must be an integer in [2, {MAX_SAVES:,}] (each save holds the whole state); "
                         f"got {saves!r}.")
    return default_grid(log10_t1, int(saves))


def refuse_save_at(save_at):
    """``save_at`` names no unit (a list of times t was read as log10 t): refused, naming the two that do."""
    if save_at is not None:
        raise ValueError("save_at does not say its unit: give save_at_t=[...] (the times t of the saves, e.g. "
                         "[0.5, 1, 2, 5]) or save_at_log10_t=[...] (their log10 t, e.g. [-0.3, 0, 0.3, 0.7]).")


def one_dimensional(name, values, unit):
    """``values`` as a 1-D float64 array of 1 to MAX_SAVES - 1 entries; ValueError naming ``name`` otherwise."""
    try:
        pts = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a list or array of {unit} values; got {values!r}.") from None
    if pts.ndim != 1 or not 1 <= pts.size <= MAX_SAVES - 1:
        raise ValueError(f"{name} must be a 1-D list of 1 to {MAX_SAVES - 1:,} {unit} values; got shape {pts.shape}.")
    return pts


def log10_of_times(save_at_t):
    """log10 of the save times t of ``save_at_t`` (finite, > 0, strictly increasing)."""
    t = one_dimensional("save_at_t", save_at_t, "time t")
    if not np.all(np.isfinite(t) & (t > 0)) or np.any(np.diff(t) <= 0):
        raise ValueError("save_at_t must be finite and strictly increasing times t > 0 (t = 0 is the init, saved "
                         "on its own; for log10 t give save_at_log10_t).")
    return np.log10(t)


def explicit_points(name, pts, log10_t1):
    """Save points ``pts`` (log10 t) given as ``name``, checked against the horizon; t1 appended where they stop
    short."""
    if not np.all(np.isfinite(pts)) or np.any(np.diff(pts) <= 0) or pts[0] < MIN_LOG10_SAVE:
        raise ValueError(f"{name} must be finite and strictly increasing, from log10 t = {MIN_LOG10_SAVE:g} on "
                         "(t = 0 is the init, saved on its own: use e.g. log10 t = -12 for a save just after it).")
    if pts[-1] > log10_t1 + 1e-12 * max(1.0, abs(log10_t1)):
        raise ValueError(f"{name} goes to log10 t = {pts[-1]:g}, beyond the horizon log10 t1 = {log10_t1:g}; "
                         "raise t1 or drop those points.")
    return pts if pts[-1] >= log10_t1 - 1e-12 * max(1.0, abs(log10_t1)) else np.append(pts, log10_t1)


def log10_t_from_u(u):
    """log10 t from u = log(1 + t), stable for u far beyond float range of t."""
    u = np.asarray(u, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(u > 1.0, (u + np.log1p(-np.exp(-np.maximum(u, 1.0)))) / np.log(10.0), np.log10(np.expm1(u)))


def u_of(log10_t):
    """u = log(1 + t) from log10 t, beyond float range of t."""
    return np.logaddexp(0.0, np.asarray(log10_t, float) * LN10)


#: the absolute tolerance on the state when none is given, for an init of size >= 1e-2 (at rtol 1e-8)
ATOL = 1e-10


#: the solver resolves the state down to this many atol (the collapse floor's least value)
RESOLVED = 1e3


def atol_for(theta0, rtol, atol=None):
    """``atol`` where given, else the absolute tolerance for an init (K, d): ATOL, or rtol x its size (max |theta0|)
    where that is smaller. An atol near the state's size resolves it to atol/size only: from init 1e-6 with atol
    1e-10 the params were 1.6e-5 off a tight reference at rtol 1e-8 (6e-8 with atol 1e-14)."""
    if atol is not None:
        return atol
    size = float(np.abs(theta0).max())
    return min(ATOL, rtol * size) if size > 0 else ATOL


def log_floor_of(theta0, collapse_tol, atol):
    """log of the collapse floor of an init (K, d), or of each of a stack of them (m, K, d)."""
    # below ~atol the solver no longer resolves the state, and the l2-SAM field is discontinuous at 0
    return np.log(np.maximum(collapse_tol * np.abs(theta0).max(axis=(-2, -1)), RESOLVED * atol))


def clock_plan(clock, u1, points, shift=0.0):
    """The save targets in u and in the clock's own units, and the integration variable's end, for save points
    ``points`` (log10 t) of a system ``10**shift`` times faster than the one asked for."""
    clock.check_horizon(u1)
    targets = u_of(np.asarray(points, float) - shift)
    return targets, clock.own(targets), clock.end(u1)


def at_rest(field_and_scale) -> bool:
    """An exact equilibrium: the field (``field_and_scale()``, with whatever slides) vanishes (every entry sliding,
    l_inf-SAM with alpha_j = rho, a critical point), so the state stays put for ever. Integrating it instead would
    follow the clocks alone until they leave float range (t ~ 1e300), short of any longer horizon."""
    with np.errstate(all="ignore"):
        F, _ = field_and_scale()
    return not np.any(F)


def close_records(status, clock, remaining, s, y, records):
    """Finish the saved records of a solve that ended at (s, y) with ``remaining`` targets unreached."""
    if status is Status.COMPLETED and len(remaining):
        # the horizon event is located to ~1e-13 in u; targets within that of the end are the end point. Where a
        # solver's dense output did not bracket it (BDF: 1.4e-9 short in u) the end is short of the last target:
        # it is kept, at its own time (the last row was a save before it: log10 t = 99.31 for a run to 1e100)
        end = clock.reading(s, y[-1])
        close = max(int((remaining <= end + 1e-9 * (1.0 + abs(end))).sum()), 1)
        records.extend([s] * close, [y] * close)
    if not status.reaches_t1 and (not len(records) or records.s_at(-1) != s):
        records.add(s, y)  # keep the final state of an early ending


def beta_margins_loss(system, data, params, known=()):
    """beta (m, d), margins (m, n) and the log of the mean loss (m,) of parameters (m, K, d), all at once
    (``VectorField.observe`` on NumPy; ``known``: the log-losses of the first rows, found before)."""
    beta = saved_beta(system, params)
    return (beta, *margins_and_loss(system, data, beta, known))


def saved_beta(system, params):
    """beta (m, d) of parameters (m, K, d) (``beta_margins_loss``)."""
    with np.errstate(all="ignore"):  # states past a sweep member's end are not finite
        return numpy_field(system, params.shape[1], params.shape[2]).saved_beta(params)


def margins_and_loss(system, data, beta, known=()):
    """The margins (m, n) and the log of the mean loss (m,) of rows of beta (m, d) (``beta_margins_loss``)."""
    with np.errstate(all="ignore"):
        return numpy_field(system, system.model.n_layers, beta.shape[1]).margins_and_log_loss(beta, data.z, known)


def positive(name, value):
    try:
        if isinstance(value, bool):  # (True was t1 = 1)
            raise TypeError
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a positive number; got {value!r}.") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}.")
    return v
