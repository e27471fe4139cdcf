"""Steepest descent for p = inf stops at a critical point of the loss: flowsim recognises it, sliding or not.

Its field -||g||_1 sign(g) vanishes with g, but its Jacobian there, -sigma (d||g||_1/dtheta)^T, has rank one: Newton's
method on that field finds no critical point, and its spectrum reads a minimum as a saddle. The critical-point test
runs Newton's method on -G instead, whose zeros are the loss's critical points for every flow. The reference here is
the minimum of the (convex) logistic loss over beta on the coordinates the flow keeps, found by Newton's method in
beta, independently of flowsim's engine.

Random case 131 (test_random_slides): a depth-2 tied net (beta = w^2), whose coordinates 1, 4, 5 and 6 decay to 0
while 2 and 3 slide on their surfaces g_k = 0 into the minimum; LSODA failed there ('Unexpected istate').
"""

import sys
import warnings
from pathlib import Path

import numpy as np

import flowsim as fs
from flowsim.field.vector_field import numpy_field
from flowsim.integrate import critical

sys.path.insert(0, str(Path(__file__).parent))
from test_random_slides import random_case  # noqa: E402

SEED = 131
#: the coordinates the flow keeps (0-based); the others decay to 0 on their planes
KEPT = [1, 2]


def _restricted_minimum(Z):
    """argmin over beta supported on KEPT of the mean logistic loss of the margins Z beta (Newton's method)."""
    A = Z[:, KEPT]
    b = np.zeros(len(KEPT))
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(A @ b))  # -l'(m) at m = A b
        step = np.linalg.solve(A.T @ (A * (p * (1 - p))[:, None]), A.T @ p)
        b += step
        if np.abs(step).max() <= 1e-15 * np.abs(b).max():
            break
    beta = np.zeros(Z.shape[1])
    beta[KEPT] = b
    return beta


def _case():
    model, flow, data, alpha = random_case(SEED)
    assert isinstance(model, fs.DiagonalNet) and model.depth == 2 and model.form == "tied"
    assert flow == fs.SteepestDescent(np.inf)
    return model, flow, data, alpha


def test_the_critical_point_test_finds_a_minimum_of_the_loss_whatever_the_flows_field():
    """From a state 1e-9 off the minimum (within the solver's tolerance), the test finds the minimum for steepest
    descent p = inf as it does for GD: one map, -G, whatever the flow; the old test, on the flow's own field, found
    none."""
    model, flow, data, _ = _case()
    beta = _restricted_minimum(data.z)
    theta_star = np.sqrt(beta)[None, :]  # beta = w^2, from a positive init
    theta = theta_star + 1e-9 * np.array([[0.0, 1.0, -1.0, 0.0, 0.0, 0.0]])
    found = {}
    for name, f in (("steepest", flow), ("gd", fs.GD())):
        vf = numpy_field(fs.derive(model, "logistic", f), 1, data.d)
        sigma = np.sign(vf.direction(theta, data.z)[0])
        found[name] = critical.find(vf, theta, data.z, 1e-8, 1e-10, sigma=sigma)
        assert found[name] is not None, name
        assert found[name].of_loss and found[name].growth_rate == 0.0 and found[name].decay_rate > 0.0
        np.testing.assert_allclose(found[name].limit, theta_star, rtol=1e-12, atol=1e-14)
    assert found["steepest"].decay_rate == found["gd"].decay_rate


def test_steepest_descent_sliding_into_a_minimum_converges_there_on_lsoda():
    """LSODA slides on the surfaces of coordinates 2 and 3 into the minimum and fails there; the test, now also run
    while sliding, holds the minimum, the same as Radau's and the restricted minimum of the loss."""
    model, flow, data, alpha = _case()
    system = fs.derive(model, "logistic", flow)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        ends = [fs.solve(system, data, alpha, t1=1e30, backend=b, throw=False) for b in ("scipy:LSODA", "scipy:Radau")]
    for sol in ends:
        assert sol.status == "converged", (sol.config["backend"], sol.message)
        np.testing.assert_allclose(sol.beta[-1], _restricted_minimum(data.z), rtol=1e-6, atol=1e-12)
