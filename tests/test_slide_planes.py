"""Entries of a sliding coordinate that reach their own plane w = 0 (flowsim.integrate.slide_planes).

Random case 118 of tests/test_random_slides.py: the sign flow on a depth-2 difference net (beta = u^2 - v^2), where
coordinates 3, 4 and 6 slide on their surfaces r_j = 0 while some of their entries reach w = 0. There each entry's
sign sign(dbeta/dw) s_j flips, and the sliding field points into the plane from both sides (|w|' = -s_j): the flow
holds the entry at 0. Stepping it across with its old sign made two such entries bounce across their planes in turn,
ever faster: more than 10,000 switches (Zeno), on every backend. Where the plane repels instead (an entry held at 0
whose coordinate starts to slide, |w|' = +s_j), the entry leaves with its coordinate's control; beta_j is even in it,
so the two sides are mirror images with the same beta.

The reference is discrete sign descent (Signum with momentum 0), written here from the loss alone, as its step goes
to 0. (The tanh(G/eps) regularisation is no reference here: it smooths the plane too, and keeps an entry that the
plane repels at 0 for a time that grows like 1/eps: one of the two Filippov solutions there, not the discrete one.)
"""

import warnings

import numpy as np
import pytest

import flowsim as fs
from tests.test_random_slides import random_case

SEED = 118


def _case():
    model, flow, data, alpha = random_case(SEED)
    assert (model, flow) == (fs.DiagonalNet(2, "difference"), fs.SignFlow())
    return model, flow, data, alpha


def _solve(t1, **options):
    model, flow, data, alpha = _case()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        return fs.solve(fs.derive(model, "logistic", flow), data, alpha, t1=t1, **options)


def _gradient(w, Z):
    """dL/d(u, v) of the logistic loss of beta = u^2 - v^2 (d each)."""
    d = Z.shape[1]
    u, v = w[:d], w[d:]
    m = Z @ (u**2 - v**2)
    r = -(Z.T @ (0.5 * (1.0 - np.tanh(m / 2.0)))) / len(Z)  # sigmoid(-m), without overflow
    return np.concatenate([2.0 * u * r, -2.0 * v * r])


def _sign_descent(Z, w0, tau1, h):
    """Discrete sign descent in the sign flow's clock tau (dw/dtau = -sign(G)), steps of about h to tau1."""
    steps = int(round(tau1 / h))
    w = w0.copy()
    for _ in range(steps):
        w = w - (tau1 / steps) * np.sign(_gradient(w, Z))
    return w


def test_entries_reaching_their_planes_in_a_slide_are_held_there():
    """No Zeno switching: the run completes with a few dozen switches on an implicit and an explicit-start backend,
    and ends with the entries held on their planes at exactly 0."""
    for backend in ("scipy:LSODA", "auto"):
        sol = _solve(1e30, backend=backend)
        assert sol.status == "completed", (backend, sol.message)
        assert sol.stats["switches"] < 100, (backend, sol.stats)
        held = [(x["layer_index"], x["index"]) for e in sol.events for x in e.get("pinned", [])
                if e["log10_t"] > 0.5]
        assert held, backend  # entries held while their coordinates slide
        assert all(sol.params[-1][k] == 0.0 for k in held), backend


@pytest.mark.slow
def test_sign_descent_converges_to_the_solve_as_its_step_shrinks():
    """To tau = 3.5 (log10 t = 1.5), through a plane that repels (tau 0.35) and two that hold (tau 2.45, 2.72):
    discrete sign descent approaches fs.solve like h; errors printed. The magnitudes |w| are compared: the two sides
    of a repelling plane are mirror images. (beta alone would not tell: while a coordinate slides its r_j = 0 fixes
    beta_j however its entries share it, and the solve that stepped entries across their planes had beta right to
    1e-9 here, with |u_3| = 0.31 where the flow holds u_3 at 0.)"""
    _, _, data, alpha = _case()
    sol = _solve(np.expm1(3.5), backend="scipy:Radau", rtol=1e-11, atol=1e-13)
    assert sol.status == "completed", sol.message
    tau1, size = float(sol.tau[-1]), np.abs(sol.params[-1].ravel())
    w0 = np.full(size.size, alpha)
    errors = [float(np.abs(np.abs(_sign_descent(data.z, w0, tau1, h)) - size).max()) for h in (1e-3, 1e-4, 1e-5)]
    print(f"\ncase {SEED} to tau = {tau1:.4g}: max ||w_h| - |w_solve|| for h = 1e-3, 1e-4, 1e-5: {errors}")
    assert errors[0] > 4 * errors[1] > 16 * errors[2] and errors[2] < 1e-4
