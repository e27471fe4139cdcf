"""Seed 000's amplification controls (USAM, l2-ASAM, depth 1) and horizons that run until an order of leaders
is final: the certificate of flowsim/reproduce/horizons.py against closed forms and longer runs."""

import numpy as np
import pytest

import flowsim as fs
from flowsim.reproduce import criteria as cr
from flowsim.reproduce import sam
from flowsim.reproduce.horizons import Finality, order_is_final

MU3 = np.array([1.0, 2.0, 3.0])


def _gd_depth3_leader_changes(w0, mu):
    """Whether the leader of dw_j/dtau = mu_j w_j^2 (depth-3 GD, no perturbation) changes before the first
    blow-up, from the closed form 1/w_j(tau) = 1/w_j0 - mu_j tau."""
    blow_up = 1.0 / (mu * w0)
    tau = np.linspace(0.0, blow_up.min(), 20001)[:-1]
    w = 1.0 / (1.0 / w0 - np.outer(tau, mu))
    return bool(np.any(np.argmax(w, axis=1) != np.argmax(w0)))


def test_certificate_is_exact_for_depth3_gd_against_the_closed_form():
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(200):
        w0 = rng.uniform(0.2, 2.0, 3)
        final = order_is_final(fs.GD(), w0**3, MU3, 3).final
        assert final == (not _gd_depth3_leader_changes(w0, MU3)), w0
        seen.add(final)
    assert seen == {True, False}  # both answers were exercised


def test_certificate_at_depths_1_and_2_needs_the_major_coordinate_in_the_lead():
    assert order_is_final(fs.GD(), [1.0, 2.0], [1.0, 2.0], 1).final
    assert not order_is_final(fs.GD(), [2.0, 1.0], [1.0, 2.0], 1).final
    assert not order_is_final(fs.SAM(0.1, 2), [4.0, 1.0], [1.0, 2.0], 2).final
    # l2-SAM's leader beta_2 = 4 (w_2 = 2): P = 0.1 / (sqrt 2 * 2), 2 (1 - P) > 1
    assert order_is_final(fs.SAM(0.1, 2), [1.0, 4.0], [1.0, 2.0], 2).final
    # USAM with rho s mu_2 close to 1/2: the major's rate 2 (1 - P) may still fall below the minor's 1
    assert not order_is_final(fs.USAM(1.0), [0.01, 0.02], [1.0, 2.0], 2).final


def test_a_flow_without_a_certificate_is_refused_by_name():
    with pytest.raises(ValueError, match="flow: no finality certificate for SAM"):
        order_is_final(fs.SAM(0.1, np.inf), [1.0, 4.0], [1.0, 2.0], 2)


def test_a_truncated_order_is_undecided_not_failed():
    amp = {"order": [0, 1], "minor_to_major": False}  # minor 2 of 3 leads at the horizon
    o = cr.minor_to_major(amp, "completed", Finality(False, "not yet", -0.3))
    assert o.holds is None and "not final" in o.why
    assert cr.minor_to_major(amp, "completed", Finality(True, "final", 0.2)).holds is False
    assert cr.minor_to_major({"order": [0, 1], "minor_to_major": True}, "completed", Finality(True, "", 0.2)).holds


def test_no_minor_lead_fails_once_a_minor_coordinate_led():
    final, open_ = Finality(True, "", 0.5), Finality(False, "", -0.5)
    assert cr.no_minor_lead({"order": [1]}, 1, final).holds is True
    assert cr.no_minor_lead({"order": [1]}, 1, open_).holds is None
    assert cr.no_minor_lead({"order": [0, 1]}, 1, open_).holds is False
    assert cr.no_minor_lead({"order": [0]}, 1, final).holds is False


def test_depth3_cell_with_a_switch_past_1e30_reports_its_whole_order(tmp_path):
    claim = sam.depth3_switches(tmp_path, quick=True)
    row = {n.key: n.value for n in claim.numbers["rho 0.4, alpha 0.2"].numbers}
    assert row["leaders"] == [1, 2, 3]  # the 2 -> 3 switch lies at log10 t = 32.05
    assert 32.0 < row["switch_2_log10_t"] < 32.1
    assert row["order_final"] is True and row["log10_t_end"] > 32.05
    assert all(n.value is True for m in claim.numbers.values() for n in m.numbers if n.key == "order_final")


@pytest.mark.parametrize("rho, alpha", [(0.4, 0.1), (0.2, 0.1), (0.1, 0.1)])
def test_an_order_certified_final_does_not_change_on_a_longer_run(rho, alpha):
    sol, finality = sam._solve_until_final(fs.SAM(rho, 2), MU3, alpha, 3, 1e30, track=("magnitude",))
    assert finality.final
    longer = fs.solve(fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(rho, 2)), fs.Dataset(MU3[None], [1]), alpha,
                      log10_t1=1e4, track=("magnitude",))
    assert [e["to_index"] for e in fs.switch_times(longer)] == [e["to_index"] for e in fs.switch_times(sol)]


def test_usam_growth_leader_at_the_start_follows_its_threshold():
    mu, alpha = np.array([1.0, 2.0]), 0.06
    star = sam._usam_threshold(mu, alpha)
    assert star == pytest.approx(1 / (3 / (1 + np.exp(3 * alpha**2))))
    for rho, first in ((0.97 * star, 1), (1.03 * star, 0)):
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.USAM(rho)), fs.Dataset(mu[None], [1]), alpha,
                       t1=1e3, track=("magnitude", "growth"))
        assert fs.sequential_amplification(sol, "growth")["order"][0] == first


def test_usam_mechanism_claim_is_corrected_with_its_controls_failing(tmp_path):
    claim = sam.amplification_mechanism(tmp_path, quick=True)
    assert claim.verdict == "holds", claim.why
    assert claim.statement.strength.startswith("corrected: the normalisation is not necessary")
    assert [c.verdict for c in claim.controls] == ["fails"] * 3
    assert [k.verdict for k in claim.counterexamples] == ["fails"]
    rho1 = {n.key: n.value for n in claim.numbers["USAM rho=1.0 (> rho*), alpha=0.06"].numbers}
    assert rho1["leaders"] == [1, 2] and rho1["log10_t_end"] > 97  # its switch lies past t = 1e30
    assert (tmp_path / "sam_usam.png").exists()
