"""Phase diagrams from sweeps: leading-coordinate switch times and the l_inf-SAM limit over the
initialisation plane, against seed 000's Cor 3.5."""

from __future__ import annotations

import numpy as np

from flowsim._checks import is_real_number, is_whole
from flowsim.data import Dataset
from flowsim.integrate.solve import solve
from flowsim.integrate.status import Status
from flowsim.integrate.sweep import sweep
from flowsim.progress import progress_bar
from flowsim.symbolic.derive import derive
from flowsim.symbolic.flows import SAM
from flowsim.symbolic.model import DiagonalNet
from flowsim.theory.analysis import linf_sam_prediction


def switch_log10_t(ds, max_switches: int | None = None):
    """log10 t of each change of the leading coordinate argmax |beta_j| in a :func:`flowsim.sweep`
    result, as a DataArray over the grid and ``switch`` (NaN where fewer switches happened).

    A switch between save points k and k+1 (from a to b) is placed where log|beta_b/beta_a|
    crosses zero, linearly interpolated in log10 t: the log-ratio is smooth in log t, so the error
    is second order in the save spacing. The first save (just after t = 0, where a uniform alpha ties
    every coordinate) is not a switch."""
    import xarray as xr

    if not (isinstance(ds, xr.Dataset) and "beta" in ds and "leader" in ds):
        raise ValueError(f"ds must be the Dataset of a flowsim.sweep (with 'beta' and 'leader'); got "
                         f"{type(ds).__name__}.")
    if max_switches is not None and not is_whole(max_switches):
        raise ValueError(f"max_switches must be an integer >= 1 or None (d - 1); got {max_switches!r}.")
    with np.errstate(divide="ignore"):
        beta = np.log(np.abs(ds["beta"].values))
    lead = ds["leader"].values - 1  # labels 1..d (0 past the end) to indices (-1 past the end)
    x = ds["log10_t"].values
    grid_shape = lead.shape[:-1]
    flat_b = beta.reshape((-1,) + beta.shape[-2:])
    flat_l = lead.reshape(-1, lead.shape[-1])
    d = beta.shape[-1]
    cap = max_switches if max_switches is not None else max(d - 1, 1)
    out = np.full((flat_l.shape[0], cap), np.nan)
    for i, (b, lv) in enumerate(zip(flat_b, flat_l)):
        found = 0
        for k in range(1, len(x) - 1):
            a, c = lv[k], lv[k + 1]
            if a < 0 or c < 0 or a == c:
                continue
            g0, g1 = b[k, c] - b[k, a], b[k + 1, c] - b[k + 1, a]
            w = g0 / (g0 - g1) if np.isfinite(g0 - g1) and g0 != g1 else 0.5
            if found < cap:
                out[i, found] = x[k] + np.clip(w, 0.0, 1.0) * (x[k + 1] - x[k])
            found += 1
    dims = [dim for dim in ds["leader"].dims if dim != "log10_t"]
    coords = {dim: ds[dim].values for dim in dims}
    if "status" in ds:  # (a map then tells "no switch" from "not run to the end": interrupted, failed)
        coords["status"] = (dims, ds["status"].transpose(*dims).values)
    return xr.DataArray(out.reshape(grid_shape + (cap,)), dims=dims + ["switch"], coords=coords, name="switch_log10_t",
                        attrs={"description": "log10 t of the k-th change of argmax |beta_j| (NaN: none)"})


def first_switch_log10_t(ds):
    """log10 t of the first change of the leading coordinate (NaN where it never changed)."""
    return switch_log10_t(ds, max_switches=1).isel(switch=0, drop=True).rename("first_switch_log10_t")


def linf_sam_boundaries(mu, rho: float, depth: int, alpha_max: float) -> list[np.ndarray]:
    """Cor 3.5's boundaries between limits in the (alpha_1, alpha_2) plane of two features mu (the
    other coordinates not growing), from the formula: polylines of shape (k, 2) inside [0, alpha_max]^2.

    alpha_j = rho separates "beta_j bounded" from "beta_j grows"; where both grow, the limit is
    e_argmax mu_j at L = 2, and at L >= 3 the curve mu_1 (alpha_1 - rho)^(L-2) = mu_2 (alpha_2 - rho)^(L-2)
    (the first coordinate to blow up wins)."""
    mu1, mu2 = _check_setting(mu, rho, depth)[:2]
    if not (is_real_number(alpha_max) and np.isfinite(alpha_max) and alpha_max > rho):
        raise ValueError(f"alpha_max must be a finite number above rho = {rho:g} (the plot's edge); got {alpha_max!r}.")
    lines = [np.array([[rho, 0.0], [rho, rho]]), np.array([[0.0, rho], [rho, rho]])]
    if depth == 2:
        lines.append(np.array([[rho, rho], [alpha_max, rho]]) if mu2 > mu1 else np.array([[rho, rho], [rho, alpha_max]]))
    else:
        a1 = np.linspace(rho, alpha_max, 200)
        a2 = rho + (mu1 / mu2) ** (1.0 / (depth - 2)) * (a1 - rho)
        lines.append(np.column_stack([a1, a2])[a2 <= alpha_max])
    return lines


def _check_setting(mu, rho, depth) -> np.ndarray:
    """Cor 3.5's setting checked: mu >= 2 positive features, rho >= 0, an integer depth >= 2; mu as floats."""
    try:
        mu = np.asarray(mu, dtype=np.float64)
    except (TypeError, ValueError):
        mu = np.full(1, np.nan)
    if mu.ndim != 1 or mu.size < 2 or not np.all(np.isfinite(mu) & (mu > 0)):
        raise ValueError(f"mu must be a vector of >= 2 positive features (Cor 3.5 is for mu > 0); got {mu.tolist()}.")
    if not (is_real_number(rho) and np.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho must be a finite number >= 0; got {rho!r}.")
    if not is_whole(depth, 2):
        raise ValueError(f"Cor 3.5 is for an integer depth >= 2; got depth={depth!r}.")
    _distinct_at_depth_2(mu[0], mu[1], depth)
    return mu


def _distinct_at_depth_2(mu1, mu2, depth):
    if depth == 2 and mu1 == mu2:  # every growing init then ties: the limit is no basis vector (not a boundary)
        raise ValueError(f"mu_1 = mu_2 = {mu1:g} at depth 2: Cor 3.5 predicts no basis vector there (the limit is "
                         "proportional to (alpha_j - rho)^2 on the tied features); use distinct features.")


#: the label of a cell whose solve failed before the flow could be judged
UNDECIDED = -3


#: saves of a cell solved again: its last two give the growth rates its asymptotic order is read from
LATE_SAVES = 20
#: at L >= 3 the first coordinate to blow up (a finite tau, t -> inf) leaves the others standing still: the
#: leader is settled once no other coordinate's log grows faster than this fraction of the leader's
SETTLED_RATIO = 0.5


def asymptotic_limit(beta_tail, mu, rho: float, depth: int, held: bool = False, leader_factor: float = 10.0) -> int:
    """The limit one run of a phase diagram reaches, read from its last two saves ``beta_tail`` (shape (2, d))
    by the asymptotics of Thm 3.2 rather than by who leads at the horizon: j (0-based) for e_j, -1 bounded,
    ``UNDECIDED`` where the horizon does not settle it.

    A coordinate grows when log|beta_j| rises between the two saves. None growing (or a run held at a rest
    point, ``held``): bounded (-1), unless a held run's largest |beta_j| exceeds ``leader_factor`` rho^L (then
    e_j). At L = 2 a growing w_j moves like e^{mu_j tau} (GD: w_j; l_inf-SAM: w_j - rho), so beta_j grows at a
    rate tending to 2 mu_j and the growing coordinate of the largest mu_j leads in the end whoever leads at the
    horizon (GD at mu = (1, 2) from (0.4, 0.0175) leads with beta_1 at t = 1e100 and is overtaken at log10 t =
    106); two growing coordinates of the same mu: undecided. At L >= 3 the first growing coordinate to blow up (a
    finite tau) wins and the others stand still in t: the leader is settled when it leads in size and every
    other coordinate's log grows at most ``SETTLED_RATIO`` times as fast; otherwise undecided."""
    beta_tail = np.abs(np.asarray(beta_tail, float))
    end = beta_tail[-1]
    if held:
        return int(np.argmax(end)) if end.max() > leader_factor * rho**depth else -1
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(end > 0, np.log(end) - np.log(beta_tail[-2]), -np.inf)
    growing = np.flatnonzero(rate > 0)
    if growing.size == 0:
        return -1
    if depth == 2:
        top = growing[mu[growing] == mu[growing].max()]
        return int(top[0]) if top.size == 1 else UNDECIDED
    lead = int(np.argmax(end))
    others = np.delete(rate, lead)
    return lead if rate[lead] > 0 and np.all(others <= SETTLED_RATIO * rate[lead]) else UNDECIDED


def linf_sam_phase(mu, alpha_1, alpha_2, rho: float, depth: int = 2, *, loss="logistic", t1: float | None = None,
                   log10_t1: float | None = None, atol: float | None = None, init=None, leader_factor: float = 10.0,
                   flow=None, late_log10_t1: float | None = 1e5, progress: bool = False, **sweep_kw):
    """The l_inf-SAM limit over the (alpha_1, alpha_2) plane on one example ``mu``, next to seed
    000's prediction (Thm 3.2 / Cor 3.5, :func:`flowsim.linf_sam_prediction`).

    Labels: j (0-based) when the flow's limit direction is e_j, -1 when beta stays bounded, both read by
    :func:`asymptotic_limit` from the last two saves (the growth rates Thm 3.2's asymptotics order), never from
    who leads at the horizon; predicted -2 where growing coordinates tie (on a boundary curve: no basis vector
    is predicted, so no observation matches). Defaults: t1 = 1e30 and
    atol 1e-10 for even L; t1 = 1e10 and atol 1e-14 for odd L, where w_j = rho is semi-stable
    (attracting from below, repelling from above) and a solver error of size atol lets w_j escape
    at t ~ 1/(mu_j atol). ``flow``: the flow to run, by default the l_inf-SAM flow the prediction is
    about; another one without a radius (``flowsim.GD()``) is a negative control (one with another rho is
    refused). ``late_log10_t1``: cells whose order the horizon does not settle, whose solve failed, or (L >= 3)
    whose limit disagrees with the prediction are solved again to this log10 t (atol 1e-14, ``LATE_SAVES`` saves; None:
    not): near a boundary at L = 3 the order settles only when log t is in the thousands. A cell still unsettled
    there, or whose solve failed, is undecided (observed -3): the flow was not followed to where the prediction
    speaks. ``progress``: bars (to stderr) for the sweep and for the cells solved again. Extra keywords go to
    :func:`flowsim.sweep` (e.g. ``executor``).

    Returns the sweep's Dataset with ``observed``, ``predicted``, ``decided`` and ``match`` (decided and
    equal) added; ``attrs["re_solved"]`` counts the cells solved again, ``attrs["undecided"]`` those left so.
    """
    mu = _check_setting(mu, rho, depth)
    odd = depth % 2 == 1
    if t1 is None and log10_t1 is None:
        t1 = 1e10 if odd else 1e30
    atol = atol if atol is not None else (1e-14 if odd else 1e-10)
    if flow is not None and flow.rho not in (0.0, rho):
        raise ValueError(f"flow {flow} has rho = {flow.rho:g}, the prediction is for rho = {rho:g}: give both the "
                         "same radius (or a flow without one, such as the control flowsim.GD()).")
    system = derive(DiagonalNet(depth), loss, SAM(rho, float("inf")) if flow is None else flow)
    base = np.full(mu.size, rho) if init is None else init
    ds = sweep(system, Dataset(mu[None], [1]), {"alpha_1": alpha_1, "alpha_2": alpha_2}, init=base, t1=t1, log10_t1=log10_t1, atol=atol,
               progress=progress, **sweep_kw)

    def alpha_at(i, j):
        alpha = np.array(np.broadcast_to(np.asarray(base, float), mu.shape))
        alpha[:2] = ds["alpha_1"].values[i], ds["alpha_2"].values[j]
        return alpha

    def judged(status, beta_tail):
        if Status(status).is_failure or not np.all(np.isfinite(beta_tail[-1])):
            return UNDECIDED
        return asymptotic_limit(beta_tail, mu, rho, depth, held=Status(status).held, leader_factor=leader_factor)

    status, beta = ds["status"].values, ds["beta"].values
    observed = np.array([[judged(status[i, j], beta[i, j, -2:]) for j in range(status.shape[1])]
                         for i in range(status.shape[0])], dtype=np.int64)
    predicted = np.empty_like(observed)
    for i, j in np.ndindex(*predicted.shape):
        said = linf_sam_prediction(mu, alpha_at(i, j), rho, depth)
        predicted[i, j] = -2 if said["tied"] else -1 if said["leader"] is None else said["leader"]
    # a cell whose order is not settled at t1 is followed further; at L >= 3 one that disagrees too (its leader's
    # lead is read off rates that still change, where at L = 2 they tend to 2 mu_j)
    unsure = (observed == UNDECIDED) | ((observed != predicted) & (depth >= 3))
    late = np.argwhere(unsure & (predicted != -2)) if late_log10_t1 is not None else []
    bar = progress_bar(len(late), "cells", f"cells solved again to log10 t = {late_log10_t1:g}") if progress and len(late) else None
    for i, j in late:
        again = solve(system, Dataset(mu[None], [1]), alpha_at(i, j), log10_t1=late_log10_t1, atol=1e-14,
                      throw=False, saves=LATE_SAVES)
        observed[i, j] = judged(again.status, again.beta[-2:])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    dims = ("alpha_1", "alpha_2")
    ds["observed"] = (dims, observed, {"long_name": "the flow's limit by its asymptotic order: j (0-based) for e_j, "
                                                     "-1 bounded, -3 undecided (its solve failed, or the order is not "
                                                     "settled at its horizon)"})
    ds["predicted"] = (dims, predicted, {"long_name": "Cor 3.5's limit: j (0-based) for e_j, -1 bounded, -2 a tie"})
    ds["decided"] = (dims, observed != UNDECIDED, {"long_name": "the flow was followed to where it is judged"})
    ds["match"] = (dims, observed == predicted, {"long_name": "decided, and the limit Cor 3.5 predicts"})
    ds.attrs.update(mu=mu.tolist(), rho=rho, depth=depth, log10_t1=float(np.log10(t1)) if log10_t1 is None else log10_t1,
                    flow=str(system.flow), re_solved=len(late), undecided=int((observed == UNDECIDED).sum()),
                    init="alpha_1, alpha_2 swept"
                    + (f"; the others {np.asarray(base)[2:].tolist()}" if mu.size > 2 else ""))
    return ds
