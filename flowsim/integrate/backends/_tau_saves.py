"""Save points of the tau clock for the scipy backend, found in batches.

Under the tau clock the save targets are values of the state's last entry u, so each one's time s
is a root of u(s) = target on the dense output of the step that holds it. scipy's dense outputs are
polynomials in s over a step, of degree at most 12 (LSODA's Adams order; BDF <= 5, DOP853 7, RK45 4,
Radau 3): sampled at 13 Chebyshev points they are interpolated exactly, the state's every entry as
well as u. So a step that holds targets costs one call of its dense output here, and the roots and
the states at them are found later for many steps at once, in a few NumPy operations each.
Before: safeguarded Newton per target in Python scalars, then a second dense call per step, 20 us a
step, a third of an LSODA solve (``benchmarks/bench_peers.py``, part b).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.integrate._ivp.lsoda import LsodaDenseOutput

from flowsim import testing

NODES = 13
_K = np.arange(NODES)
_X = np.cos(np.pi * (_K + 0.5) / NODES)  # in decreasing order
#: Chebyshev coefficients from the values at _X (a discrete cosine transform, well conditioned)
_TO_CHEB = (2.0 / NODES) * np.cos(np.outer(_K, np.arccos(_X)))
_TO_CHEB[0] /= 2
#: the nodes in increasing order with the interval's ends
_XS = np.concatenate([[-1.0], _X[::-1], [1.0]])
_EPS4 = 4 * float(np.finfo(float).eps)
#: node values held before the roots are found (each step keeps 13 copies of the state)
MAX_BYTES = 2**24


def chebyshev_basis(x):
    """T_k(x) and T_k'(x) for k < NODES, each (m, NODES), by the three-term recurrences (the
    trigonometric forms cost 3x, in transcendental functions, and lose T_k' at the ends)."""
    T, dT = np.empty((NODES, len(x))), np.empty((NODES, len(x)))
    T[0], T[1], dT[0], dT[1] = 1.0, x, 0.0, 1.0
    two_x = 2.0 * x
    for k in range(1, NODES - 1):
        np.multiply(two_x, T[k], out=T[k + 1])
        T[k + 1] -= T[k - 1]
        np.multiply(two_x, dT[k], out=dT[k + 1])  # T_{k+1}' = 2 T_k + 2x T_k' - T_{k-1}'
        dT[k + 1] -= dT[k - 1]
        dT[k + 1] += 2.0 * T[k]
    return T.T, dT.T


#: values at _XS from Chebyshev coefficients (rows: coefficients)
_AT_XS = chebyshev_basis(_XS)[0].T


def roots(c, targets):
    """x in [-1, 1] where sum_k c[i, k] T_k(x) = targets[i], for each row of ``c`` (the Chebyshev
    coefficients of an increasing u): safeguarded Newton, vectorised over the rows, each started
    from linear interpolation between the two nodes around its target. A target at or beyond an
    end of the interval (rounding) is that end."""
    u = c @ _AT_XS  # values at _XS, from the coefficients (as f below)
    k = (u < targets[:, None]).sum(axis=1)
    rows = np.arange(len(targets))
    kk = np.clip(k, 1, len(_XS) - 1)
    u_a, u_b = u[rows, kk - 1], u[rows, kk]
    bracketed = (k > 0) & (k < len(_XS)) & (u_a < targets) & (targets <= u_b)
    # u not increasing across the nodes (rounding, where it barely moves): the whole interval
    a, b = np.where(bracketed, _XS[kk - 1], -1.0), np.where(bracketed, _XS[kk], 1.0)
    u_a, u_b = np.where(bracketed, u_a, u[:, 0]), np.where(bracketed, u_b, u[:, -1])
    with np.errstate(divide="ignore", invalid="ignore"):
        x = a + (b - a) * (targets - u_a) / (u_b - u_a)
    at_end = u[:, -1] - targets <= 0
    at_start = ~at_end & (u[:, 0] - targets >= 0)
    x = np.where(at_end, 1.0, np.where(at_start, -1.0, x))
    todo = np.flatnonzero(~(at_end | at_start))  # rows still iterating
    for _ in range(100):
        if not todo.size:
            break
        xi, ci, ti, ai, bi = x[todo], c[todo], targets[todo], a[todo], b[todo]
        T, dT = chebyshev_basis(xi)
        f = np.einsum("ik,ik->i", T, ci) - ti
        slope = np.einsum("ik,ik->i", dT, ci)
        hit = np.abs(f) <= _EPS4 * np.abs(ti)  # u at its target to rounding: x stays
        ai, bi = np.where(f < 0, xi, ai), np.where(f < 0, bi, xi)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_new = xi - np.where(slope > 0, f / slope, np.inf)
        x_new = np.where((ai < x_new) & (x_new < bi), x_new, 0.5 * (ai + bi))  # Newton left the bracket: bisect
        x[todo], a[todo], b[todo] = np.where(hit, xi, x_new), ai, bi
        todo = todo[~(hit | (np.abs(x_new - xi) <= _EPS4) | (bi - ai <= _EPS4))]
    return x


#: powers ((X - 1) / 2)^j (columns j) of the Chebyshev nodes X, for LSODA's steps (``at_nodes``)
_WHOLE_STEP_POWERS = np.vander((_X - 1.0) / 2.0, NODES, increasing=True)
_J = np.arange(NODES)


def at_nodes(dense, lo, hi):
    """``dense`` at the Chebyshev nodes of [lo, hi], (NODES, n), C-ordered (``take`` joins them).

    LSODA's dense output raises (s - t) / h to each power with np.power, 7.5 of its 8.5 us at 13 points
    (more than the rest of a save); its Nordsieck polynomial (the attributes it evaluates) by a
    Vandermonde matrix costs 4, and 1.5 over an interval that ends at the step's end t, where
    x = (s - t) / h = c (X - 1) / 2 with c = (hi - lo) / h (h is the scale of the Nordsieck array, which
    LSODA may already have set for its next step), so that the powers are the fixed ones times c^j."""
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    if type(dense) is not LsodaDenseOutput:
        return np.ascontiguousarray(dense(mid + half * _X).T)
    yh = dense.yh
    if hi == dense.t:
        q = yh.shape[1]  # order + 1 <= 13: LSODA's Adams methods go to order 12
        assert q <= NODES
        return (_WHOLE_STEP_POWERS[:, :q] * ((hi - lo) / dense.h) ** _J[:q]) @ yh.T
    return np.vander((mid + half * _X - dense.t) / dense.h, yh.shape[1], increasing=True) @ yh.T


class TauSaves:
    """The targets that steps hold, with each step's dense output sampled at the Chebyshev nodes;
    ``take`` returns their times and states, in order, and empties the batch."""

    def __init__(self):
        self._steps = []  # (lo, hi, targets, values at the nodes (NODES, n))
        self.nbytes = 0

    def add(self, dense, targets, lo, hi):
        values = at_nodes(dense, lo, hi)
        self._steps.append((lo, hi, targets, values))
        self.nbytes += values.nbytes

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """(s (m,), y (m, n)) of every target added since the last call; the batch is emptied only once
        they are computed (a Ctrl-C on the way leaves it whole, to be taken again)."""
        if not self._steps:
            return np.empty(0), np.empty((0, 0))
        lo, hi, targets, node_values = zip(*self._steps)
        node_values = np.concatenate(node_values)  # (steps * NODES, n), a step's nodes together
        step = np.repeat(np.arange(len(targets)), [len(t) for t in targets])
        c = node_values[:, -1].reshape(len(targets), NODES) @ _TO_CHEB.T  # u's Chebyshev coefficients, per step
        testing.reached("tau saves")
        x = roots(c[step], np.concatenate(targets))
        mid, half = 0.5 * (np.add(lo, hi)), 0.5 * (np.subtract(hi, lo))
        s = np.where(x == 1.0, np.asarray(hi)[step], np.where(x == -1.0, np.asarray(lo)[step], mid[step] + half[step] * x))
        # each state is the same interpolant's value, its step's node values weighted: one sparse product
        # (NODES weights a row), which copies no node values per save (a gather held 13 copies of the saves;
        # node by node it cost 3x at 100 x 100)
        m = len(x)
        weights = sparse.csr_array(
            ((chebyshev_basis(x)[0] @ _TO_CHEB).ravel(), (step[:, None] * NODES + _K).ravel(),
             np.arange(0, NODES * m + 1, NODES)), shape=(m, len(node_values)))
        y = weights @ node_values
        self._steps, self.nbytes = [], 0
        return s, y
