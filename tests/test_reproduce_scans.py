"""The parameter scans of seed 002 (flowsim/reproduce/scans.py) and the depth-L leader maps of seed 000
(flowsim/reproduce/depth_maps.py): threshold location against a closed-form curve, the criterion failing where it
must, and the map's classification against known orders and an independent integration of the depth-3 flow."""

import numpy as np
import pytest
from figure_layout import layout_problems
from scipy.integrate import solve_ivp

from flowsim.reproduce import depth_maps as dm
from flowsim.reproduce import scans
from flowsim.reproduce.scans import ScanPoint, approaches, locate_threshold

TOL = 2.0


def _linear_bias(p):
    """A settled scan point whose end angle is 100 (1 - p) degrees: within 2 degrees exactly from p = 0.98."""
    return ScanPoint(p, 100.0 * (1.0 - p), 0.0)


def test_threshold_of_a_monotone_curve_is_bracketed_and_bisected_onto_the_closed_form():
    points = [_linear_bias(p) for p in (0.0, 0.5, 0.9, 0.95, 0.97, 0.99, 0.999)]
    found, _ = locate_threshold(points, TOL)
    assert (found.below, found.at, found.bisections) == (0.97, 0.99, 0)
    refined, all_points = locate_threshold(points, TOL, _linear_bias, bisections=12)
    assert refined.below < 0.98 <= refined.at and refined.bisections == 12
    assert refined.at - refined.below < 1e-5 and len(all_points) == len(points) + 12


def test_bisection_stops_at_a_midpoint_the_budget_does_not_settle():
    points = [_linear_bias(p) for p in (0.9, 0.99)]

    def unsettled(p):
        return ScanPoint(p, 5.0, 1.0)  # 3 deg above the tolerance, drifting 1 deg per decade

    found, _ = locate_threshold(points, TOL, unsettled, bisections=5)
    assert (found.below, found.at, found.bisections) == (0.9, 0.99, 1)


def test_a_scan_within_everywhere_has_its_threshold_below_the_scan():
    found, _ = locate_threshold([ScanPoint(p, 0.5, 0.1) for p in (0.0, 0.9)], TOL)
    assert found.below is None and found.at == 0.0


def test_states_follow_the_drift():
    assert ScanPoint(0.9, 1.0, 50.0).state(TOL) == "within"
    assert ScanPoint(0.9, 30.0, 1.0).state(TOL) == "outside"  # 28 deg to go at 1 deg a decade
    assert ScanPoint(0.9, 30.0, 5.0).state(TOL) == "unsettled"  # 28 deg to go at 5 deg a decade


def test_approaches_fails_on_a_curve_that_rises_again_and_on_a_reference_never_reached():
    monotone = [_linear_bias(p) for p in (0.0, 0.9, 0.99, 0.999)]
    assert approaches(monotone, TOL, "l_inf").holds is True
    rising = monotone + [ScanPoint(0.9999, 20.0, 0.0)]  # settled outside above values within
    assert approaches(rising, TOL, "l_inf").holds is False
    control = [ScanPoint(p, 30.0, 0.1) for p in (0.0, 0.9, 0.99, 0.999)]
    assert approaches(control, TOL, "l2").holds is False
    assert approaches([ScanPoint(0.9, 30.0, 20.0)], TOL, "l_inf").holds is None


def test_an_unsettled_value_above_the_threshold_does_not_break_it():
    points = [_linear_bias(p) for p in (0.0, 0.9, 0.99)] + [ScanPoint(0.9999, 20.0, 10.0)]
    o = approaches(points, TOL, "the fixed point")
    assert o.holds is True and "(0.9, 0.99]" in o.why


@pytest.mark.parametrize("leaders, final, kind", [
    ((3,), True, "major throughout"), ((1, 2, 3), True, "monotone, major last"), ((2, 3), True, "monotone, major last"),
    ((3, 1, 3), True, "non-monotone, major last"), ((3, 2, 1, 2, 3), True, "non-monotone, major last"),
    ((2, 3, 2), True, "major not last"), ((1,), False, "undecided"), ((3, 1, 3), False, "undecided")])
def test_sequence_kinds(leaders, final, kind):
    assert dm.sequence_kind(leaders, final, 3) == kind


def test_major_last_is_undecided_where_the_order_is_not_final():
    cell = dm.Cell(0.03, 0.8, 4, (1,), (), False, "completed", 1e4)
    assert dm.major_last(cell, 3).holds is None
    assert dm.major_last(dm.Cell(0.03, 0.8, 4, (1,), (), True, "completed", 1e4), 3).holds is False
    assert dm.major_last(dm.Cell(0.03, 0.8, 3, (3, 2, 3), (1.0, 2.0), True, "completed", 1e4), 3).holds is True
    collapsed = dm.Cell(0.03, 0.8, 4, (1,), (), False, "collapsed", 0.53)
    assert dm.major_last(collapsed, 3).holds is None and collapsed.kind(3) == "collapsed" and collapsed.label == "1c"


def test_a_collapsing_depth4_cell_is_reported_collapsed_not_undecided():
    cell = dm.run_cell(0.03, 0.8, 4)  # every w_j - p_j < 0 from the start: all weights shrink to 0
    assert cell.collapsed and cell.kind(3) == "collapsed"


def test_ratio_bands_cut_the_cells_where_the_sequence_changes_along_rho_over_alpha():
    def cell(alpha, rho, leaders):
        return dm.Cell(alpha, rho, 3, leaders, (), True, "completed", 1e4)

    bands, one_each = dm.ratio_bands([cell(0.1, 0.05, (3,)), cell(0.1, 0.15, (2, 3)), cell(0.2, 0.1, (3,)),
                                      cell(0.1, 0.4, (3, 1, 3)), cell(0.05, 0.075, (2, 3))])
    assert [b.label for b in bands] == ["3", "23", "313"]
    assert [x for b in bands for x in (b.lowest, b.highest)] == pytest.approx([0.5, 0.5, 1.5, 1.5, 4.0, 4.0])
    assert one_each
    bands, one_each = dm.ratio_bands([cell(0.1, 0.1, (3,)), cell(0.1, 0.2, (2, 3)), cell(0.1, 0.3, (3,))])
    assert not one_each and [b.label for b in bands] == ["3", "23", "3"]


@pytest.mark.parametrize("depth", [3, 4])
def test_cells_with_the_same_rho_over_alpha_have_the_same_order(depth):
    """The scaling w = alpha v, tau = tau' / alpha^(L-2) leaves p_j depending on rho / alpha only."""
    a, b = dm.run_cell(0.05, 0.2, depth), dm.run_cell(0.15, 0.6, depth)
    assert a.leaders == b.leaders and (a.final, a.collapsed) == (b.final, b.collapsed)


@pytest.mark.parametrize("depth, ratio", [(3, 0.5), (3, 1.2), (3, 2.0), (3, 2.7), (3, 3.0), (3, 8.0), (4, 1.0),
                                          (4, 1.5), (4, 2.6)])
def test_the_first_leader_has_the_largest_initial_rate(depth, ratio):
    """From w = alpha (1, 1, 1) the rates are mu_j alpha^(L-1) (1 - c mu_j)^(L-1), c = (rho / alpha) / (sqrt L |mu|):
    at L = 3 the major coordinate leads first again once rho / alpha > sqrt 42 (1 + sqrt 3) / (1 + 3 sqrt 3) = 2.857."""
    mu = dm.sam.MU3
    c = ratio / (np.sqrt(depth) * np.linalg.norm(mu))
    expected = int(np.argmax(mu * (1 - c * mu) ** (depth - 1))) + 1
    assert dm.run_cell(0.1, 0.1 * ratio, depth).leaders[0] == expected


def _independent_depth3_leaders(alpha, rho, mu=np.array([1.0, 2.0, 3.0]), depth=3):
    """The order of leaders of balanced l2-SAM on one example, dw_j/dtau = mu_j (w_j - rho mu_j w_j^(L-1) /
    (sqrt L N))^(L-1), N = ||mu w^(L-1)||, integrated in tau until the leader blows up (t -> infinity)."""
    def field(tau, w):
        n = np.linalg.norm(mu * w ** (depth - 1))
        return mu * (w - rho * mu * w ** (depth - 1) / (np.sqrt(depth) * n)) ** (depth - 1)

    def blow_up(tau, w):
        return np.max(w) - 1e8

    blow_up.terminal = True
    sol = solve_ivp(field, (0, 1e6), np.full(3, alpha), method="LSODA", rtol=1e-11, atol=1e-14, events=blow_up,
                    dense_output=True)
    taus = np.geomspace(1e-9, sol.t[-1], 200000)
    leaders = np.argmax(sol.sol(taus), axis=0) + 1
    return tuple(int(x) for i, x in enumerate(leaders) if i == 0 or x != leaders[i - 1])


@pytest.mark.parametrize("alpha, rho", [(0.03, 0.8), (0.03, 0.155), (0.1, 0.1), (0.6, 0.03)])
def test_a_map_cell_at_depth3_has_the_order_of_an_independent_integration(alpha, rho):
    cell = dm.run_cell(alpha, rho, 3)
    assert cell.final
    assert cell.leaders == _independent_depth3_leaders(alpha, rho)


def test_the_map_figure_is_readable_and_outlines_the_non_monotone_cells():
    C = dm.Cell
    maps = {3: [[C(0.1, 0.1, 3, (2, 3), (0.7,), True, "completed", 5.0), C(0.2, 0.1, 3, (3,), (), True, "completed", 5.0)],
                [C(0.1, 0.4, 3, (3, 1, 3), (0.2, 30.0), True, "completed", 5.0),
                 C(0.2, 0.4, 3, (1, 2, 3), (1.2, 32.0), True, "completed", 5.0)]],
            4: [[C(0.1, 0.1, 4, (1,), (), False, "collapsed", 0.5), C(0.2, 0.1, 4, (3,), (), True, "completed", 5.0)],
                [C(0.1, 0.4, 4, (2, 3), (0.9,), True, "completed", 5.0),
                 C(0.2, 0.4, 4, (3, 2, 3), (0.1, 88.0), True, "completed", 5.0)]]}
    fig = dm.map_figure([0.1, 0.2], [0.1, 0.4], maps, 3)
    assert layout_problems(fig) == []
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == sorted(["23", "3", "313", "123"])
    outlined = [p for ax in fig.axes[:2] for p in ax.patches]
    assert len(outlined) == 2  # 3 -> 1 -> 3 at L = 3 and 3 -> 2 -> 3 at L = 4


@pytest.mark.slow
def test_adam_b2_scan_holds_with_its_control_failing(tmp_path):
    c = scans.adam_b2_scan(tmp_path, quick=True)
    assert c.verdict == "holds" and [k.verdict for k in c.controls] == ["fails"]
    assert (tmp_path / c.figure).exists()
