"""A switching surface met while another slides (flowsim.integrate.filippov.classify, flowsim.field.surfaces).

Random cases 3 and 91 of tests/test_random_slides.py (l_inf-SAM on depth-4 and depth-3 product nets, run as tied
nets) ended with more than 10,000 switches. In case 3, coordinate 6 meets its surface while coordinate 2 slides:
the exact flow's field there is Filippov's combination on coordinate 2's surface, along which both sides of
coordinate 6's surface point into it, but the sides were probed with coordinate 2's control put in as a sign
(Utkin's field, not affine in the signs for l_inf-SAM), which carries G_6 away on one side: a crossing was decided,
the integrated field brought G_6 straight back, and the switch fired again at the same instant, for ever. In case
91 (LSODA) two coordinates meet their surfaces while a third slides, and the switch is located 1e-4 off the surface:
the probe, a short step along each side's field, read that offset, not the fields, and the two coordinates flipped
sign at every switch. Both one-sided fields now decide where both move G_k toward the surface, and the probe is the
sliding field. Case 3 then ends with every other entry decaying to its plane, where the pull back onto the
surfaces, scaled by the largest |G| off them (~w^3), grew without bound and acted on the rounding of G on the
surfaces: BDF failed; the pull is now bounded by the flow's own rate.

The reference is discrete l_inf-SAM (fs.iterate) as its step goes to 0.
"""

import math
import warnings

import numpy as np
import pytest

import flowsim as fs
from flowsim.field import surfaces
from flowsim.field.vector_field import numpy_field
from flowsim.integrate.filippov import classify
from tests.test_random_slides import random_case


def _solve(seed, t1, **options):
    model, flow, data, alpha = random_case(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        return fs.solve(fs.derive(model, "logistic", flow), data, alpha, t1=t1, throw=False, **options)


def _join_state():
    """Linear l_inf-SAM on iid_gaussian(10, 4, 0) where coordinate 2 starts to slide (G_2 = 0, both sides in)."""
    data, rho = fs.datasets.iid_gaussian(10, 4, 0), 0.1
    system = fs.derive(fs.Linear(), "exponential", fs.SAM(rho, math.inf))
    join = next(e for e in fs.solve(system, data, init=0.1, t1=1e100).events if e.get("sliding"))
    assert [e["coordinate"] for e in join["sliding"]] == [2]
    theta = np.asarray(fs.solve(system, data, init=0.1, t1=10 ** join["log10_t"]).params[-1])
    return numpy_field(system, 1, 4), theta, data.z, rho


def test_a_sliding_mode_is_found_whatever_offset_the_switch_left():
    """G_2 put 1e-5 of max |G| on the side opposite its sign (a switch located off the surface, as LSODA's were in
    case 91): both one-sided fields still move G_2 toward 0, so entry 2 slides. The short probe step read the
    offset and crossed to the side G_2 was on."""
    vf, theta, Z, rho = _join_state()
    G = np.asarray(vf.direction(theta, Z)[0])
    grad = (np.asarray(vf.direction(theta + 1e-7 * np.eye(4)[1], Z)[0]) - G)[0, 1] / 1e-7  # dG_2/dtheta_2
    for side in (1.0, -1.0):
        shifted = theta.copy()
        shifted[0, 1] -= side * 1e-5 * np.abs(G).max() / grad  # G_2 = -side 1e-5 max|G|
        G_now = np.asarray(vf.direction(shifted, Z)[0])
        assert side * G_now[0, 1] < 0
        sigma = np.where(np.arange(4) == 1, side, np.sign(G_now))
        signs = classify(vf, shifted, Z, rho, sigma, np.zeros((1, 4), bool))
        assert signs.sliding.tolist() == [[False, True, False, False]], side


def test_the_pull_onto_the_surfaces_has_a_floor_above_rounding():
    """Where every entry off the sliding surfaces decays to its plane, max |G| off them falls to 0 (like w^3 at
    depth 4) and the pull gamma = (largest rate on the surfaces) / that |G| grew without bound (1e10 times the
    flow's rate in case 3). That |G| now counts at least sqrt(eps) of the change of G_A while the state moves by its
    own size; above that floor the pull is as it was."""
    unit, F_top, theta = 1e-3, 2e-3, np.array([0.5, -1.0])
    own_rate = F_top / 1.0  # the rate at which the state moves by its own size
    assert float(surfaces._pull(unit, F_top, theta, 1.0)) == pytest.approx(unit)
    assert float(surfaces._pull(unit, F_top, theta, 1e-6)) == pytest.approx(unit / 1e-6)
    tiny = [float(surfaces._pull(unit, F_top, theta, G_off)) for G_off in (1e-13, 1e-20)]
    assert tiny[0] == pytest.approx(tiny[1]) and tiny[0] <= own_rate / 1e-8, tiny
    assert float(surfaces._pull(unit, F_top, theta, 0.0)) == pytest.approx(own_rate)  # all others at rest on planes


@pytest.mark.slow
def test_case_3_is_followed_to_its_rest_point():
    """On auto: coordinates 2 and 6 slide, entries 1, 3, 4, 5 reach their planes, and the flow comes to rest on the
    two surfaces, as on LSODA and Radau (tests/test_random_slides.py compares them). Before: more than 10,000
    switches at log10 t = 0.83, then (with the probe fixed) BDF failing at log10 t = 1.9."""
    sol = _solve(3, 1e30, backend="auto")
    assert sol.status == "converged" and "coordinate 2, coordinate 6" in sol.message, sol.message
    assert sol.stats["switches"] < 20, sol.stats
    assert np.count_nonzero(sol.params[-1][0]) == 2


@pytest.mark.slow
def test_discrete_sam_converges_to_case_3_as_its_step_shrinks():
    """To t = 20, past the instant case 3 went Zeno: discrete l_inf-SAM approaches the solve about like its step
    (errors printed)."""
    model, flow, data, alpha = random_case(3)
    sol = _solve(3, 20.0, backend="auto", rtol=1e-10, atol=1e-12)
    assert sol.status == "completed", sol.message
    errors = []
    for eta in (1e-2, 1e-3, 1e-4):
        run = fs.iterate(fs.optimizers.sam(eta, flow.rho, math.inf), model, "logistic", data, int(round(20 / eta)),
                         init=alpha, records=2)
        errors.append(float(np.abs(np.asarray(run.params[-1]) - np.asarray(sol.params[-1])).max()))
    print(f"\ncase 3 to t = 20: max |w_eta - w_solve| for eta = 1e-2, 1e-3, 1e-4: {errors}")
    assert errors[0] > 5 * errors[1] > 25 * errors[2] and errors[2] < 1e-5


@pytest.mark.slow
def test_case_145_entries_rest_where_their_evaluation_point_is_zero():
    """Depth-3 tied l_inf-SAM: four entries approach w = -rho (sigma = +1), where the evaluation point w + rho sigma
    has them at 0 and their field (-3 r (w + rho)^2) vanishes; past that plane it runs away. BDF (auto) stepped past
    it by rounding at log10 t ~ 17 and failed at a step below float spacing. Each is now set on its plane within
    atol/100 (held there exactly by its field), and the flow comes to rest sliding on coordinate 5's surface."""
    model, flow, data, alpha = random_case(145)
    sol = _solve(145, 1e30, backend="auto")
    assert sol.status == "converged" and "coordinate 5" in sol.message, sol.message
    end = sol.params[-1][0]
    assert np.count_nonzero(np.abs(end + flow.rho) <= 1e-9) == 4, end  # at rest on their planes
