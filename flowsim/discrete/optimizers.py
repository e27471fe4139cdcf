r"""Discrete optimizers (what the flows idealise), in the optax style: a factory validates its
hyper-parameters eagerly and returns an :class:`Optimizer` of pure ``init``/``update`` functions.

Gradients come from ``jax.grad`` of the loss, independent of the symbolic derivation, so a
discrete run is also an independent check of the flows. Every gradient is handled in scale-free
form :math:`g = e^{c} G`, c per parameter entry (the log of the largest q_i among the batch's samples with
that feature; -inf where none has it): sign steps need only G, SAM's normalised perturbation G on a common
scale, and Adam and Signum keep their moment estimates relative to a running scale per entry
(:math:`(m, v) \to (s m, s^2 v)` leaves the step unchanged, docs/theory.md 7), so margins in the thousands,
and coordinates fed by samples e^-745 below the others, underflow nothing.

Steps: :math:`\eta_t = c\,(t+1)^{-a}` (``lr`` and ``decay``; ``decay=0`` is a constant step).

Batches, the ``batch`` of every factory (which samples' gradient a step uses):

- ``"full"`` (default): all n samples (full-batch; for Adam, seed 002's sign-descent-like case);
- ``"cyclic"``: one sample a step, i = t mod n (per-sample, incremental Adam of seed 002);
- ``"shuffle"``: one sample a step, a new permutation each epoch; ``"replace"``: one uniform sample a step;
- ``("shuffle", b)``: b distinct samples a step, consecutive blocks of a new permutation each epoch (the
  n mod b left over are not drawn that epoch). This is what ``flowsim.AdamProxy(batch=b)`` idealises;
- an int b: cyclic blocks of b, step t taking samples t b, ..., t b + b - 1 (mod n: {0..b-1}, {b..2b-1},
  ..., wrapping around the end where b does not divide n): a different algorithm with a different limit
  (0.075 apart on a Gaussian set, docs/theory.md 3), not the random mini-batches of the proxy.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from flowsim._checks import is_real_number, is_whole
from flowsim._jax import jax, jnp


class Optimizer(NamedTuple):
    """``init(params) -> state``; ``update(grad_fn, params, state, t) -> (params, state)`` where
    ``grad_fn(params) -> (G, c)`` returns the scale-free gradient of the current batch: grad = e^c G, c of
    params' shape (one log scale per entry, -inf where the batch has no gradient)."""

    name: str
    init: Callable
    update: Callable
    batch: object  # "full"; per-sample "cyclic" (i = t mod n), "shuffle" (a new permutation each epoch)
    # or "replace" (i uniform, with replacement); an int batch size (cyclic blocks); ("shuffle", b):
    # b samples a step, drawn at random (consecutive blocks of a new permutation each epoch, the n mod b
    # left over not drawn that epoch); or
    # "per_sample" (update receives every sample's gradient: the epoch map)
    schedule: Callable  # t -> eta_t
    samples: int | None = None  # the n an epoch map was made for (iterate holds it to the data's)


def _number(name, v) -> float:
    """``v`` as a float, if it is a real number (not a bool or a string: "0.5" and True were taken, or failed
    later as TypeErrors)."""
    if not is_real_number(v):
        raise ValueError(f"{name} must be a number; got {v!r}.")
    return float(v)


def _fraction(name, v) -> float:
    v = _number(name, v)
    if not 0.0 <= v < 1.0:
        raise ValueError(f"{name} must be in [0, 1); got {v!r}.")
    return v


def _positive(name, v, allow_zero=False):
    v = _number(name, v)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}; got {v!r}.")
    return v


SAMPLINGS = ("full", "cyclic", "shuffle", "replace")


def _check_batch(batch):
    if batch in SAMPLINGS:
        return batch
    if isinstance(batch, (int, np.integer)) and not isinstance(batch, bool) and batch >= 1:
        return int(batch)
    if isinstance(batch, tuple) and len(batch) == 2 and batch[0] == "shuffle":
        return ("shuffle", _check_size(batch[1]))
    raise ValueError(f"batch must be one of {SAMPLINGS} (the last three per-sample), a positive int (cyclic "
                     f"mini-batches) or ('shuffle', b) (random mini-batches of b); got {batch!r}.")


def _check_size(b):
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b >= 1:
        return int(b)
    raise ValueError(f"a mini-batch size must be a positive int; got {b!r}.")


def _schedule(lr, decay):
    lr, decay = _positive("lr", lr), _positive("decay", decay, allow_zero=True)
    if decay > 1:
        raise ValueError(f"decay a must be in [0, 1] (eta_t = lr (t+1)^-a); got {decay!r}.")
    return lambda t: lr * (t + 1.0) ** (-decay)


def gd(lr: float, decay: float = 0.0, batch="full") -> Optimizer:
    """Gradient descent w <- w - eta_t g (``batch``: the module docstring)."""
    eta = _schedule(lr, decay)

    def update(grad_fn, params, state, t):
        G, c = grad_fn(params)
        return params - eta(t) * _times_scale(G, c), state

    return Optimizer("gd", lambda p: (), update, _check_batch(batch), eta)


def sam(lr: float, rho: float, norm: float = 2, decay: float = 0.0, batch="full") -> Optimizer:
    """SAM: ascend to w + rho P(g) (P = g/||g||_2 for norm=2, sign(g) for norm=inf), descend with
    the gradient there, applied at w (the discrete counterpart of flowsim.SAM; ``batch``: the module
    docstring)."""
    eta = _schedule(lr, decay)
    rho = _positive("rho", rho, allow_zero=True)
    norm = _number("norm", norm)
    if norm not in (2.0, math.inf):  # (-inf was taken as l_inf)
        raise ValueError(f"norm must be 2 or float('inf'); got {norm!r}.")

    def update(grad_fn, params, state, t):
        G, c = grad_fn(params)
        if math.isinf(norm):
            P = jnp.sign(G)
        else:  # on a common scale (a finite c where any is)
            G = jnp.where(c == -jnp.inf, 0.0, jnp.exp(c - jnp.max(c)) * G)
            n = jnp.sqrt(jnp.sum(G**2))
            P = G / jnp.where(n > 0, n, 1.0)
        Gt, ct = grad_fn(params + rho * P)
        return params - eta(t) * _times_scale(Gt, ct), state

    return Optimizer(f"sam{'_inf' if math.isinf(norm) else ''}", lambda p: (), update, _check_batch(batch), eta)


def adam(lr: float, b1: float = 0.9, b2: float = 0.999, decay: float = 0.5, eps: float = 0.0,
         bias_correction: bool = False, batch="full") -> Optimizer:
    """Adam without bias correction and epsilon by default (docs/theory.md 7): m = b1 m + (1-b1) g,
    v = b2 v + (1-b2) g^2, w <- w - eta_t m / sqrt(v); 0 < b1 <= b2 < 1. ``batch="cyclic"`` is
    per-sample (incremental) Adam, ``("shuffle", b)`` random mini-batches of b (what ``AdamProxy(batch=b)``
    idealises), an int b fixed cyclic blocks (another algorithm; the module docstring). eps > 0 (added to
    sqrt(v) in the unscaled units) changes the limit toward GD's."""
    eta = _schedule(lr, decay)
    b1, b2 = _fraction("b1", b1), _fraction("b2", b2)
    if b1 > b2:
        raise ValueError(f"need b1 <= b2 (the regime of arXiv 2510.26303); got b1={b1}, b2={b2}.")
    eps = _positive("eps", eps, allow_zero=True)
    if not isinstance(bias_correction, (bool, np.bool_)):  # the string "no" is truthy: it turned correction on
        raise ValueError(f"bias_correction must be True or False; got {bias_correction!r}.")

    def init(params):
        z = jnp.zeros_like(params)
        return (z, z, jnp.full_like(params, -jnp.inf))  # m, v relative to the scale e^c per entry, and c

    def update(grad_fn, params, state, t):
        m, v, c = state
        G, cg = grad_fn(params)
        # the state's scale follows sqrt(v) itself, so both rescalings below stay bounded
        # (r <= 1/sqrt(b2), s <= 1/sqrt(1-b2)) however fast or unevenly the gradients shrink
        c_new = 0.5 * jnp.logaddexp(2 * c + math.log(b2) if b2 > 0 else -jnp.inf, 2 * cg + math.log(1 - b2))
        r, s = _ratio(c, c_new), _ratio(cg, c_new)
        # a coefficient 0 drops its term (r is unbounded then: 0 * inf was NaN, and the step 0 for ever)
        m = (b1 * r * m if b1 > 0 else 0.0) + (1 - b1) * s * G
        v = (b2 * r**2 * v if b2 > 0 else 0.0) + (1 - b2) * (s * G) ** 2
        mh, vh = m, v
        if bias_correction:
            mh = m / (1 - b1 ** (t + 1.0))
            vh = v / (1 - b2 ** (t + 1.0))
        den = jnp.sqrt(vh)
        if eps > 0:  # eps in the unscaled units: eps e^{-c} relative to the scaled state
            den = den + eps * jnp.exp(-c_new)
        # no gradient yet (v = 0, m = 0): no step; a NaN stays NaN, and the run fails saying so
        step = jnp.where(den == 0, 0.0, mh / jnp.where(den == 0, 1.0, den))
        return params - eta(t) * step, (m, v, c_new)

    return Optimizer("adam", init, update, _check_batch(batch), eta)


def signum(lr: float, beta: float = 0.9, decay: float = 0.5, batch="full") -> Optimizer:
    """Signum: m = beta m + (1-beta) g, w <- w - eta_t sign(m), any batch (the module docstring)."""
    eta = _schedule(lr, decay)
    beta = _fraction("beta", beta)

    def init(params):
        return (jnp.zeros_like(params), jnp.full_like(params, -jnp.inf))

    def update(grad_fn, params, state, t):
        m, c = state
        G, cg = grad_fn(params)
        c_new = jnp.logaddexp(c + math.log(beta) if beta > 0 else -jnp.inf, cg + math.log(1 - beta))
        m = (beta * _ratio(c, c_new) * m if beta > 0 else 0.0) + (1 - beta) * _ratio(cg, c_new) * G
        return params - eta(t) * jnp.sign(m), (m, c_new)

    return Optimizer("signum", init, update, _check_batch(batch), eta)


def _times_scale(G, c):
    """e^c G, 0 where c = -inf (no gradient there: G is 0)."""
    return jnp.where(c == -jnp.inf, 0.0, jnp.exp(c) * G)


def _ratio(a, b):
    """e^(a - b) for log scales, 0 where both are -inf (nothing yet on either side)."""
    return jnp.where(b == -jnp.inf, 0.0, jnp.exp(a - b))


def epoch_direction(g, b1: float, b2: float):
    r"""Per-sample Adam's steady-state update over one epoch of N samples with gradients g_j frozen
    (seed 002, Prop. 2.5): :math:`\sum_i C \,[\sum_j b_1^{(i-j) \bmod N} g_j] / \sqrt{\sum_j b_2^{(i-j) \bmod N} g_j^2}`,
    :math:`C = \frac{1-b_1}{1-b_1^N}\sqrt{\frac{1-b_2^N}{1-b_2}}`. ``g``: (N, ...) array (any scale)."""
    xp = jnp if isinstance(g, jax.Array) else np
    N = g.shape[0]
    lag = (np.arange(N)[:, None] - np.arange(N)[None, :]) % N  # (i, j) -> (i - j) mod N
    W1, W2 = xp.asarray(b1**lag), xp.asarray(b2**lag)
    flat = g.reshape(N, -1)
    num = W1 @ flat
    den = xp.sqrt(W2 @ flat**2)
    C = (1 - b1) / (1 - b1**N) * math.sqrt((1 - b2**N) / (1 - b2))
    step = xp.where(den > 0, num / xp.where(den > 0, den, 1.0), 0.0)
    return (C * step.sum(axis=0)).reshape(g.shape[1:])


def adam_epoch_map(lr: float, n: int, b1: float = 0.9, b2: float = 0.999, decay: float = 0.5) -> Optimizer:
    """Fast path of per-sample Adam: one update is one epoch of ``n`` cyclic samples through the
    steady-state map :func:`epoch_direction` with the gradients taken at the epoch's start, and step
    eta_{rN}. Its ``schedule`` is the epoch's total time n * eta_{rN}."""
    eta = _schedule(lr, decay)
    if not is_whole(n):
        raise ValueError(f"n must be the number of samples (a positive int); got {n!r}.")
    b1, b2 = _fraction("b1", b1), _fraction("b2", b2)
    if b1 > b2:
        raise ValueError(f"need 0 <= b1 <= b2 < 1; got b1={b1}, b2={b2}.")

    def update(grad_fn, params, state, r):
        G, c = grad_fn(params)  # per-sample: (n, K, d), (n,)
        g = jnp.exp(c - jnp.max(c))[:, None, None] * G
        return params - eta(r * n) * epoch_direction(g, b1, b2), state

    return Optimizer("adam_epoch_map", lambda p: (), update, "per_sample", lambda r: n * eta(r * n), int(n))
