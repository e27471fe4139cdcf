"""Degenerate critical points of the loss (flowsim.integrate.critical): an entry decaying to 0 on its plane with a
gradient of higher order in it, where Newton's method converges only linearly; and whether a minimum traps normalised
SAM where its gradient is not linear across rho (flowsim.integrate.rest_points.normalised_minimum_traps).

The case, built so that its critical point is known in closed form: a tied net beta = w^L on two signed samples
z = (-1, 1) and (-1, -1/2). Every z_i1 < 0, so dL/dbeta_1 > 0: at even L (beta_1 >= 0) the loss is least at
beta_1 = 0, reached as w_1 -> 0 with g_1 = L w_1^(L-1) dL/dbeta_1; in beta_2 it is least at b* with
sigma(-b*) = sigma(b*/2)/2 (sigma the logistic function), so w_2* = b*^(1/L)."""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

import flowsim as fs
from flowsim.field.vector_field import numpy_field
from flowsim.integrate import critical
from flowsim.integrate.rest_points import normalised_minimum_traps

Z = np.array([[-1.0, 1.0], [-1.0, -0.5]])
B_STAR = brentq(lambda b: expit(-b) - 0.5 * expit(0.5 * b), 0.0, 20.0)
RTOL, ATOL = 1e-8, 1e-10


def _field(depth, flow):
    return numpy_field(fs.derive(fs.DiagonalNet(depth, "tied"), "logistic", flow), 1, 2)


def _find(depth, flow, w1):
    theta = np.array([[w1, B_STAR ** (1.0 / depth)]])
    return critical.find(_field(depth, flow), theta, Z, RTOL, ATOL, critical.arrival_radius(flow, theta.size),
                         flow_rho=getattr(flow, "rho", 0.0))


@pytest.mark.parametrize("depth", [3, 4])
def test_an_entry_decaying_to_0_with_a_higher_order_gradient_is_a_degenerate_critical_point_of_l3_sam(depth):
    """w_1 = 1e-3 (its Newton steps shrink it by 1 - 1/(L-1) each; 8 steps left it 1e-5 at L = 4, far above the
    tolerance, and no critical point was found): the limit holds w_1 at 0 and w_2 at its closed form."""
    cp = _find(depth, fs.SAM(0.1, 3), 1e-3)
    assert cp is not None and cp.degenerate
    assert cp.vanishing.tolist() == [[True, False]]
    assert cp.limit[0, 0] == 0.0
    assert cp.limit[0, 1] == pytest.approx(B_STAR ** (1.0 / depth), rel=1e-10)
    assert cp.displacement > 1.0  # accepted within the arrival radius, as l3-SAM arrives in finite time


def test_gd_is_not_held_at_a_degenerate_critical_point_it_is_still_far_from():
    """GD approaches it like a power of 1/t: an entry 1e-3 from its plane is motion left to resolve."""
    assert _find(4, fs.GD(), 1e-3) is None


def test_an_entry_on_the_side_where_the_loss_falls_off_its_plane_is_not_held():
    """At odd depth w_1 < 0 gives beta_1 < 0, where the loss falls: the gradient leads away from the plane there."""
    assert _find(3, fs.SAM(0.1, 3), 1e-3) is not None
    assert _find(3, fs.SAM(0.1, 3), -1e-3) is None


def test_a_minimum_traps_normalised_sam_unless_its_ascent_crosses_the_plane_where_the_gradient_turns():
    """At L = 4 the restricted loss in w_2 has g_2 = 4 w^3 dL/dbeta_2(w^4), whose sign along w is that of
    (w - w*) for |w| < w* as well as beyond: from w_2* the ascent by rho < w* stays on the side where the gradient
    points back (trapped); for w* < rho < 2 w* the ascent towards 0 lands at w* - rho in (-w*, 0), where g_2 > 0 and
    the descent from there pushes w_2 further from w* (||G|| grows: not trapped). Not linear across rho either way."""
    w_star = B_STAR ** 0.25
    theta = np.array([[0.0, w_star]])
    for rho, traps in ((0.3 * w_star, True), (0.9 * w_star, True), (1.5 * w_star, False)):
        vf = _field(4, fs.SAM(rho, 3))
        verdict = normalised_minimum_traps(vf, theta, Z, rho)
        assert verdict.is_rest_point is traps, (rho, verdict.reason)
