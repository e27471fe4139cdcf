"""Discrete runs: an :class:`~flowsim.discrete.optimizers.Optimizer` iterated on a model x loss x data set,
jitted between log-spaced records, with the same failure reporting as the flows."""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from flowsim import testing
from flowsim._checks import is_whole
from flowsim._interrupts import absorbed, stopped_by, terminable
from flowsim._jax import jax, jnp
from flowsim.discrete.optimizers import Optimizer
from flowsim.errors import IntegrationError
from flowsim.field.vector_field import coordinate_weights
from flowsim.integrate.solution import unit_rows
from flowsim.integrate.status import Status
from flowsim.integrate.timeline import margins_and_loss
from flowsim.progress import progress_bar


class DiscreteRun(NamedTuple):
    """Recorded iterates: ``steps`` (records,), ``t`` = sum of the step sizes so far, ``params`` (records,
    layers, d), ``beta``, ``margins`` (a regression's residuals X beta - y), ``log_loss``; ``status``
    ("completed", "failed": the parameters became non-finite, "interrupted": Ctrl-C) and its
    ``message``; ``problem`` names the model and the loss. A run that did not complete holds every
    record up to its end. The figures of a flow's :class:`~flowsim.Solution` take it too
    (``flowsim.plot.summary``, ``beta_vs_log_t``, ...), against log10 t.

    ``t`` is the time of the gradient flows GD and SAM idealise (their flows have no step size). The sign and
    Adam-type flows carry the schedule themselves (``fs.SignFlow(lr, decay)``: dtheta/dt = -eta(t) sign(g)):
    step k of ``signum``/``adam`` with the same lr and decay matches that flow at t = k (``steps``), and
    ``t`` here is its schedule clock s = sum eta (the flow with lr = 1, decay = 0 at t = s)."""

    optimizer: str
    steps: np.ndarray
    t: np.ndarray
    params: np.ndarray
    beta: np.ndarray
    margins: np.ndarray
    log_loss: np.ndarray
    status: str = Status.COMPLETED
    message: str = ""
    problem: str = ""

    def __repr__(self) -> str:  # (the tuple's own printed every array: hundreds of lines)
        last, t_end = (int(self.steps[-1]), float(self.t[-1])) if len(self.steps) else (0, 0.0)
        return (f"DiscreteRun({self.optimizer} on {self.problem or 'a problem'}, {self.status}, {len(self.steps)} "
                f"records to step {last}, t = {t_end:g})")

    @property
    def log10_t(self):
        """log10 of the flow's time at each record (-inf at step 0), the axis of the flows' figures."""
        with np.errstate(divide="ignore"):
            return np.log10(self.t)

    @property
    def direction(self):
        return unit_rows(self.beta)


def _record_points(steps, records):
    """``records`` distinct steps from 0 to ``steps`` (every step where there are fewer), log-spaced after
    the first; early on, where log spacing would round several records to one step, consecutive steps
    (rounding then dropping repeats gave 46 records of 50 asked at 2,000 steps)."""
    m = max(min(records, steps + 1), 2)
    grid = np.geomspace(1, steps, m - 1)
    grid[-1] = steps  # (a grid of one point is its start)
    pts = [0]
    for i, g in enumerate(grid):
        pts.append(int(min(max(round(g), pts[-1] + 1), steps - (m - 2 - i))))  # room left for the rest
    return np.asarray(pts, np.int64)


def _sample_weights(batch, n, key):
    """t -> the weight of each sample in step t's gradient (1 per draw) under the sampling ``batch``."""
    def weights(t):
        if batch == "full":
            return jnp.ones(n)
        if batch == "shuffle":
            perm = jax.random.permutation(_fold(key, t // n), n)
            return jnp.zeros(n).at[perm[t % n]].add(1.0)
        if batch == "replace":
            return jnp.zeros(n).at[jax.random.randint(_fold(key, t), (), 0, n)].add(1.0)
        if isinstance(batch, tuple):  # random batches: consecutive blocks of each epoch's permutation
            b = batch[1]
            per_epoch = n // b  # the n mod b samples left over are not drawn that epoch: a block across two
            # permutations could hold a sample twice (MATH.md's E[g_B^2] is for draws without replacement)
            perm = jax.random.permutation(_fold(key, t // per_epoch), n)
            return jnp.zeros(n).at[jax.lax.dynamic_slice(perm, ((t % per_epoch) * b,), (b,))].add(1.0)
        b = 1 if batch == "cyclic" else batch
        idx = (t * b + jnp.arange(b)) % n
        return jnp.zeros(n).at[idx].add(1.0)

    return weights


def _fold(key, i):
    """``jax.random.fold_in`` for counts past 2**32 (it takes uint32: step 2**32 + 5 drew as step 5, and
    "replace" repeated its samples after 2**32 steps); the same keys below."""
    high = i // 2**32
    return jax.random.fold_in(jnp.where(high > 0, jax.random.fold_in(key, high), key), i % 2**32)


def _gradients(compiled, Z, batch, key, residual: bool):
    """t -> the scale-free gradient function of step t: theta -> (G, c) with grad = e^c G, c a log scale per
    parameter entry (per sample for ``batch="per_sample"``: G_i with q_i factored out, c_i = log q_i). ``residual``:
    a regression loss, Z = [X, -y] (:func:`_residual_gradients`)."""
    n = Z.shape[0]
    weights = _sample_weights(batch, n, key)
    if residual:
        return _residual_gradients(compiled, Z, weights)

    def margins(th):
        return Z @ compiled.beta(th)

    def per_sample(th):
        m, vjp = jax.vjp(margins, th)
        return jax.vmap(lambda e: -vjp(e)[0])(jnp.eye(n)), compiled.log_q(m)

    def grad_at(t):
        if batch == "per_sample":
            return per_sample
        w = weights(t)

        def grad_fn(th):
            # beta_j depends on theta[:, j] alone, so coordinate j's gradient scales with the largest q_i among
            # the batch's samples that have feature j: one scale for all underflowed a coordinate fed only by
            # samples e^-745 below the largest (its Adam and sign steps were 0, its exact steps +-eta). Samples
            # outside the batch weigh e^-inf = 0 (their q can be far above the batch's: never 0 * inf)
            beta, vjp = jax.vjp(compiled.beta, th)
            log_e = jnp.where(w > 0, compiled.log_q(Z @ beta) + jnp.log(jnp.where(w > 0, w, 1.0)), -jnp.inf)
            scaled, c = coordinate_weights(jnp, log_e, Z)  # (c = -inf: no sample of the batch has feature j)
            G = -vjp(scaled.sum(axis=0) / jnp.sum(w))[0]
            return G, jnp.broadcast_to(c, G.shape)

        return grad_fn

    return grad_at


def _residual_gradients(compiled, Z, weights):
    """t -> the gradient function of step t for a regression loss l(m) of the residuals m = X beta - y (Z = [X, -y]):
    grad L = -(1/|batch|) sum_i q(m_i) dm_i/dtheta with the signed q = -l'(m), at scale c = 0. The margin losses'
    scale-free form is not needed: q is O(residual), and it is 0 at an interpolator, where no log is defined."""
    X, offset = Z[:, :-1], Z[:, -1]

    def grad_at(t):
        w = weights(t)

        def grad_fn(th):
            beta, vjp = jax.vjp(compiled.beta, th)
            G = -vjp((w * compiled.q(X @ beta + offset)) @ X / jnp.sum(w))[0]
            return G, jnp.zeros_like(G)

        return grad_fn

    return grad_at


def _check(optimizer, data, steps, records, seed, allow_nonseparable):
    from flowsim.data import Dataset, require_separable

    if not isinstance(optimizer, Optimizer):
        raise ValueError("optimizer must come from flowsim.optimizers (gd, sam, adam, signum).")
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flowsim.Dataset(X, y); got {type(data).__name__}.")
    if data.is_regression and optimizer.batch == "per_sample":
        raise ValueError(f"{optimizer.name} on a regression: the epoch map is per-sample Adam's steady state for a "
                         "margin loss (each sample's gradient scaled by its q = -l'(m) > 0); a regression's q is "
                         "signed. Run per-sample Adam itself: flowsim.optimizers.adam(..., batch='cyclic').")
    require_separable(data, allow_nonseparable)
    if not is_whole(steps):
        raise ValueError(f"steps must be a positive integer; got {steps!r}.")
    if not is_whole(records, 2):
        raise ValueError(f"records must be an integer >= 2 (the init and the last step at least); got {records!r}.")
    if optimizer.samples is not None and optimizer.samples != data.n:  # its steps and clock were for another n
        raise ValueError(f"{optimizer.name} was made for n = {optimizer.samples} samples; these data have "
                         f"n = {data.n}: make it with n={data.n}.")
    size = optimizer.batch[1] if isinstance(optimizer.batch, tuple) else optimizer.batch
    if isinstance(size, int) and size > data.n:  # a batch would count samples twice
        raise ValueError(f"batch: mini-batches of {size} on n = {data.n} samples; a batch is at most n "
                         "(batch='full' is all of them).")
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and 0 <= seed < 2**63):
        raise ValueError(f"seed must be an integer in [0, 2**63); got {seed!r}.")


def iterate(optimizer: Optimizer, model, loss, data, steps: int, init=0.1, records: int = 200,
            seed: int = 0, *, allow_nonseparable: bool = False, progress: bool = False,
            throw: bool = True) -> DiscreteRun:
    """Run ``optimizer`` for ``steps`` steps on ``model`` x ``loss`` x ``data`` from ``init``,
    recording ``records`` times (every step where there are fewer) on a log-spaced grid of steps from 0 to
    ``steps``, consecutive where log spacing would repeat a step (jitted ``lax.fori_loop`` between records). ``seed``
    drives the "shuffle" and "replace" samplings; ``progress`` shows a bar in steps. Non-separable
    ``data`` raise :class:`flowsim.NonSeparableError` unless ``allow_nonseparable=True``, as in
    :func:`flowsim.solve` (the runs compared with max-margin limits need separable data). On a regression (real
    targets and a regression loss such as ``"square"``) every optimizer but the epoch map runs on the gradient of
    the mean loss of the residuals, and ``margins`` are the residuals X beta - y.

    If the parameters become non-finite (a step size too large for the loss) or the run is
    interrupted (Ctrl-C), the run ends there with status "failed" or "interrupted", keeping every
    finite record; ``throw=True`` raises :class:`flowsim.IntegrationError` with it as ``.solution``.
    """
    from flowsim.integrate.solve import check_task, refuse_still_start
    from flowsim.symbolic.derive import derive
    from flowsim.symbolic.flows import GD

    _check(optimizer, data, steps, records, seed, allow_nonseparable)
    system = derive(model, loss, GD())
    check_task(system, data)
    compiled = system.jax
    grad_at = _gradients(compiled, jnp.asarray(data.z), optimizer.batch, jax.random.PRNGKey(seed),
                         data.is_regression)

    @jax.jit
    def advance(th, st, t0, t1):
        return jax.lax.fori_loop(t0, t1, lambda t, carry: optimizer.update(grad_at(t), *carry, t), (th, st))

    theta0 = jnp.asarray(model.init_params(init, data.d))
    refuse_still_start(system, data, np.asarray(theta0))  # (as solve: a start where every step is 0)
    at_init, _ = margins_and_loss(system, data, np.asarray(compiled.beta(theta0))[None])
    if not np.all(np.isfinite(at_init)):
        raise ValueError(f"init: beta = {system.model}(init) or its margins are not finite (beyond float64); give "
                         "a smaller init.")
    pts = _record_points(int(steps), records)
    out, pts, status, message = _advance_between_records(advance, theta0, optimizer.init(theta0), pts, progress)
    times = _elapsed(optimizer.schedule, pts)
    run = _discrete_run(optimizer.name, system, data, pts, times, np.stack(out), status, message)
    if throw and status != Status.COMPLETED:
        raise IntegrationError(f"{optimizer.name}: status {status!r}: {message}. The records so far are in .solution.", run)
    return run


def _elapsed(schedule, pts, block=1 << 20):
    """The flow time sum_{s < p} eta_s at each record point p, in blocks of steps (memory independent of
    the number of steps)."""
    out, total = [0.0], 0.0
    for a, b in zip(pts[:-1], pts[1:]):
        for lo in range(int(a), int(b), block):
            total += float(np.sum(schedule(np.arange(lo, min(lo + block, int(b)), dtype=np.float64))))
        out.append(total)
    return np.array(out)


#: the wall time one jitted call aims at: a Ctrl-C or SIGTERM lands when the call in progress ends
CALL_SECONDS = 0.25


def _advance_between_records(advance, th, st, pts, progress):
    """The records at ``pts`` and the steps they are at, stopping at the first non-finite one or at Ctrl-C
    (status and message). Between records the steps run in calls of about :data:`CALL_SECONDS`, so that an
    interrupt answers at once; the state the last call reached is then kept as a record of its own."""
    out, at = [np.asarray(th)], [0]
    current = (0, th, st)  # the step reached and the state there, replaced whole (an interrupt sees one or the other)
    status, message = Status.COMPLETED, ""
    bar = progress_bar(int(pts[-1]), "steps", "iterate") if progress else None
    pace = _Pace()
    try:
        with terminable():  # SIGTERM as a Ctrl-C: the records so far are kept
            for p in pts[1:]:
                while current[0] < p:
                    here = current[0]
                    stop = min(int(p), here + pace.steps)
                    started = time.perf_counter()
                    th, st = advance(current[1], current[2], here, stop)
                    new = np.asarray(th)
                    pace.took(stop - here, time.perf_counter() - started)
                    if not np.all(np.isfinite(new)):
                        status, message = Status.FAILED, (f"the parameters became non-finite between steps {here} and "
                                                     f"{stop}; a smaller lr (or a faster decay) keeps the steps stable")
                        break
                    current = (stop, th, st)
                    if bar:
                        bar.update(stop - here)
                    testing.reached("discrete call")
                if status == Status.FAILED:
                    break
                out.append(np.asarray(current[1])), at.append(int(p))
    except KeyboardInterrupt as err:
        status, message = Status.INTERRUPTED, f"{stopped_by(err)} after step {current[0]}"
        if current[0] > at[-1]:
            out.append(np.asarray(current[1])), at.append(current[0])
    finally:
        if bar:
            bar.close()
    if status == Status.INTERRUPTED:
        absorbed()
    return out, np.asarray(at, np.int64), status, message


class _Pace:
    """Steps per jitted call: grown (at most 8x a call) or shrunk to about :data:`CALL_SECONDS` of work, from
    the time the calls so far took (the first one includes compiling)."""

    def __init__(self):
        self.steps = 1000

    def took(self, steps, seconds):
        aim = steps * CALL_SECONDS / max(seconds, 1e-6)
        self.steps = int(max(1, min(8 * self.steps, aim)))


def _discrete_run(name, system, data, pts, times, P, status, message):
    """The :class:`DiscreteRun` of the records ``P`` at steps ``pts`` (flow times ``times``), cut before the first
    record whose beta or margins are not finite."""
    beta = np.asarray(jax.vmap(system.jax.beta)(jnp.asarray(P)))
    m, log_loss = margins_and_loss(system, data, beta)
    finite = np.all(np.isfinite(m), axis=1)
    if not finite.all():  # finite parameters whose beta overflows (w^3 at w = 1e110) are no result either
        k = int(np.argmin(finite))
        pts, times, P, beta, m, log_loss = pts[:k], times[:k], P[:k], beta[:k], m[:k], log_loss[:k]
        status, message = Status.FAILED, (f"beta (or the margins) became non-finite between steps {int(pts[-1])} and the "
                                     "next record, the parameters still finite; a smaller lr (or a faster decay) keeps "
                                     "the steps stable")
    return DiscreteRun(name, pts, times, P, beta, m, log_loss, status, message, f"{system.model}, {system.loss.name} loss")


def flow_distance(make_optimizer, flow, model, loss, data, init, t_end: float, etas, *, rtol=1e-12, atol=1e-14):
    """Run the discrete optimizer ``make_optimizer(eta)`` (whose first step must be eta) for round(t_end / eta)
    steps and the flow to the time those steps reach (``DiscreteRun.t``, the sum of the step sizes: t_end
    itself only for a constant step that divides it) on the same problem; return (errors
    max|beta_eta - beta_flow|, fitted order in eta). For GD and SAM against their flows the order is 1. The
    order is NaN where every error is at round-off (1e-12 of |beta|): the discrete run is the flow there."""
    from flowsim.integrate.solve import solve
    from flowsim.symbolic.derive import derive

    try:
        etas = np.asarray(etas, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"etas must be step sizes (numbers); got {etas!r}.") from None
    if etas.size < 2 or len(set(etas.tolist())) < 2 or not np.all(np.isfinite(etas) & (etas > 0)):
        raise ValueError(f"etas must be at least two different finite step sizes > 0 (the order is a slope in "
                         f"log eta); got {etas.tolist()}.")
    if not (np.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a finite time > 0; got {t_end!r}.")
    steps = [int(round(t_end / eta)) for eta in etas]
    if min(steps) < 1:
        raise ValueError(f"t_end = {t_end:g} is shorter than a step of eta = {etas[int(np.argmin(steps))]:g}.")
    runs = [iterate(_made_for(make_optimizer, float(eta)), model, loss, data, steps=k, init=init, records=2)
            for eta, k in zip(etas, steps)]
    reached = [float(run.t[-1]) for run in runs]
    at = sorted(set(np.log10(reached).tolist()))
    ref = solve(derive(model, loss, flow), data, init, log10_t1=at[-1], save_at_log10_t=at, rtol=rtol, atol=atol,
                track=())
    flow_at = dict(zip(at, ref.beta))
    ends = [flow_at[float(np.log10(t))] for t in reached]
    errs = np.array([np.abs(run.beta[-1] - end).max() for run, end in zip(runs, ends)])
    if np.all(errs <= 1e-12 * max(np.abs(ends).max(), 1e-300)):
        return errs, float("nan")
    slope = np.polyfit(np.log(etas), np.log(np.maximum(errs, 1e-300)), 1)[0]
    return errs, float(slope)


def _made_for(make_optimizer, eta):
    """``make_optimizer(eta)``, checked: an optimizer whose first step is eta (one that ignored eta fitted an
    order to runs that were all the same)."""
    opt = make_optimizer(eta)
    if not isinstance(opt, Optimizer):
        raise ValueError(f"make_optimizer(eta) must return a flowsim optimizer (e.g. lambda eta: "
                         f"fs.optimizers.gd(eta)); got {type(opt).__name__}.")
    first = float(opt.schedule(0))
    if not abs(first - eta) <= 1e-12 * eta:
        raise ValueError(f"make_optimizer(eta) must make steps of eta: its first step is {first:g} for eta = "
                         f"{eta:g} (pass eta as its lr).")
    return opt
