"""The reproduction's verdict machinery: every criterion says "fails" on a constructed case that
violates its claim (so none can only say "holds"), and a claim whose control also holds is
inconclusive."""


import numpy as np
import pytest

import flowsim as fs
from flowsim.reproduce import criteria as cr
from flowsim.reproduce._claim import (
    Control,
    Counterexample,
    Evidence,
    Measured,
    Number,
    Outcome,
    Statement,
    claim,
    every,
    judge,
)

YES, NO, UNDECIDED = Outcome(True, "y"), Outcome(False, "n"), Outcome(None, "?")
STATED = Statement("paper", "checked", "as stated")


def test_judge_needs_failing_controls():
    assert judge(Evidence(YES, [Control("c", NO)]))[0] == "holds"
    assert judge(Evidence(YES, [Control("c", NO), Control("d", YES)]))[0] == "inconclusive"
    assert judge(Evidence(YES, [Control("c", UNDECIDED)]))[0] == "inconclusive"
    assert judge(Evidence(YES, []))[0] == "inconclusive"
    assert judge(Evidence(NO, [Control("c", NO)]))[0] == "fails"
    assert judge(Evidence(UNDECIDED, [Control("c", NO)]))[0] == "inconclusive"


def test_a_control_that_did_not_run_is_not_evidence():
    """NaN from a failed run makes a criterion undecided, never "fails" (which on a control would pass)."""
    nan = float("nan")
    for o in (cr.at_most(nan, 0.01, "d"), cr.at_least(nan, 0.01, "d"), cr.share_above(nan, 0.3, "s"),
              cr.crossover_law(nan, 1.0, 2.0, 0.1), cr.error_order([0.1, 0.05], [nan, 0.1])):
        assert o.holds is None, o
    assert judge(Evidence(YES, [Control("c", cr.at_most(nan, 0.01, "d"))]))[0] == "inconclusive"
    assert cr.nearest_reference({"a": [nan, nan], "b": [1.0, 1.0]}, "a").holds is None


def test_every():
    assert every([], "x").holds is None  # nothing judged is not a pass
    assert every([YES, YES], "x").holds is True
    assert every([YES, UNDECIDED], "x").holds is None
    assert every([YES, UNDECIDED, NO], "x").holds is False


def test_fates_match_both_ways():
    mu, rho = [1.0, 2.0, 3.0], 0.1
    alpha = (0.3, 0.05, 0.05)
    pred = fs.linf_sam_prediction(mu, alpha, rho, 2)
    assert cr.fates_match(pred, [50.0, 0.0, 0.0], alpha, rho, 2).holds is True
    assert cr.fates_match(pred, [50.0, 0.0, 80.0], alpha, rho, 2).holds is False  # GD-like: e_3 wins, beta_3 grew
    # a tie (on a Cor 3.5 boundary) predicts no basis vector: undecided, not "predicted e_0 (bounded)"
    tied = fs.linf_sam_prediction([1.0, 1.0], [0.5, 0.3], 0.1, 2)
    assert cr.fates_match(tied, [50.0, 20.0], [0.5, 0.3], 0.1, 2).holds is None
    odd = fs.linf_sam_prediction(mu, (0.05, 0.08, 0.02), rho, 3)
    assert cr.fates_match(odd, [rho**3] * 3, (0.05, 0.08, 0.02), rho, 3).holds is True
    assert cr.fates_match(odd, [0.0] * 3, (0.05, 0.08, 0.02), rho, 3).holds is False  # the even-L limit at odd L


def test_the_report_names_limits_and_settings_in_words():
    """A bounded limit is "bounded", not "e_0"; basis vectors count from 1; NumPy numbers print as numbers,
    not as their reprs."""
    from flowsim.reproduce.sam import _setting

    mu, rho, alpha = [1.0, 2.0, 3.0], 0.1, (0.05, 0.08, 0.02)
    bounded = fs.linf_sam_prediction(mu, alpha, rho, 2)
    why = cr.fates_match(bounded, [0.09, 8.5, 19.3], alpha, rho, 2).why
    assert "limit e_3, predicted bounded" in why and "e_0" not in why, why
    assert cr.fates_match(bounded, [0.0] * 3, alpha, rho, 2).why.endswith("limit bounded as predicted")
    setting = _setting(mu=np.array([1.0, 2.0]), pair=(np.float64(0.5), 3), t1=1e6)
    assert setting == "mu=[1, 2], pair=[0.5, 3], t1=1e+06", setting


def test_prediction_compares_alpha_with_rho_exactly():
    assert fs.linf_sam_prediction([1.0, 2.0], (0.1 + 5e-9, 0.05), 0.1, 2)["fate"][0] == "grow"
    assert fs.linf_sam_prediction([1.0, 2.0], (0.1, 0.05), 0.1, 2)["fate"][0] == "stay"


def test_angle_falls():
    lt = np.linspace(0.1, 100, 50)
    assert cr.angle_falls(lt, 30 * lt**-0.5).holds is True
    assert cr.angle_falls(lt, 50 + 0 * lt).holds is False
    assert cr.angle_falls(lt, 1 + 0.01 * lt).holds is False  # rising


def test_minor_to_major_and_crossover():
    assert cr.minor_to_major({"order": [0, 1], "minor_to_major": True}).holds is True
    assert cr.minor_to_major({"order": [1], "minor_to_major": False}).holds is False
    assert cr.minor_to_major({"order": [0, 2], "minor_to_major": True}, "collapsed").holds is None  # no limit reached
    law = 0.1 * 3 / np.sqrt(2)
    assert cr.crossover_law(law * (1 + 1e-8), 1.0, 2.0, 0.1).holds is True
    assert cr.crossover_law(law * (1 + 1e-3), 1.0, 2.0, 0.1).holds is False


def test_error_order_and_leader_by_scale():
    etas = np.array([0.1, 0.05, 0.025])
    assert cr.error_order(etas, 0.3 * etas).holds is True
    assert cr.error_order(etas, 0.3 * etas**2).holds is False
    assert cr.error_order(etas, 0.1 + 0 * etas).holds is False
    assert cr.leader_by_scale([-1, 0, 0, 1, 1, np.nan]).holds is True
    assert cr.leader_by_scale([1, 1, 1, 1]).holds is False
    assert cr.leader_by_scale([0, 1, 0, 1]).holds is False
    assert cr.leader_by_scale([0, -1, 1]).holds is False  # a collapse between the survivors


def test_nearest_reference():
    steps = np.arange(1, 21)
    conv = {"a": 1.0 / steps, "b": 0.5 + 0 * steps}
    assert cr.nearest_reference(conv, "a").holds is True
    assert cr.nearest_reference(conv, "b").holds is False
    close = {"a": 0.02 + 0 * steps, "b": 0.31 + 0 * steps}
    moving = {"a": 0.3 + 0.2 / steps, "b": 0.31 + 0 * steps}
    assert cr.nearest_reference(close, "a").holds is True  # no spread: a is near, and stays so
    assert cr.nearest_reference(moving, "a").holds is None  # still moving by more than the gap
    nearer_only = {"a": 0.069 + 0 * steps, "b": 0.31 + 0 * steps}  # nearest, but not near: a planted metric bug
    assert cr.nearest_reference(nearer_only, "a").holds is None


def test_at_most_at_least():
    assert cr.at_most(0.005, 0.01, "d").holds and not cr.at_most(0.02, 0.01, "d").holds
    assert cr.at_least(0.02, 0.01, "d").holds and not cr.at_least(0.005, 0.01, "d").holds


def test_converges_to_says_fails_for_the_wrong_reference():
    data = fs.Dataset(np.array([[1.0, 2.0]]), [1])
    refs = {"l1": fs.max_margin(data, 1), "l2": fs.max_margin(data, 2)}
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), data, 0.1, t1=1e30)
    assert cr.converges_to(sol, refs, "l2").holds is True
    assert cr.converges_to(sol, refs, "l1").holds is False


@pytest.mark.parametrize("depth", [2, 3])
def test_boundaries_separate_the_predicted_labels(depth):
    """Each Cor 3.5 boundary drawn from the formula has different predictions on its two sides."""
    mu, rho = [1.0, 2.0], 0.1
    for line in fs.linf_sam_boundaries(mu, rho, depth, 0.4):
        mid = line[len(line) // 2]
        tangent = line[-1] - line[0]
        normal = np.array([-tangent[1], tangent[0]]) / np.linalg.norm(tangent)
        sides = [fs.linf_sam_prediction(mu, mid + s * 1e-4 * normal, rho, depth)["leader"] for s in (-1, 1)]
        assert sides[0] != sides[1], (line, sides)


def test_random_minibatches_visit_each_sample_once_per_epoch():
    """Two steps of random batches of 5 out of 10 samples cover every sample once: with a tiny step they
    move like one full-batch step of twice the size; draws with replacement do not."""
    data = fs.datasets.iid_gaussian(10, 4, seed=1)

    def end(batch, steps, lr):
        run = fs.iterate(fs.optimizers.gd(lr, batch=batch), fs.Linear(), "logistic", data, steps=steps, init=0.0, records=2)
        return run.beta[-1]

    full = end("full", 1, 2e-6)
    for seed_steps in (2, 4):  # the second epoch is a new permutation
        np.testing.assert_allclose(end(("shuffle", 5), seed_steps, 1e-6), full * seed_steps / 2, rtol=1e-4)
    # batches of 3 of 10 samples: three a epoch, each of distinct samples (one left over each epoch, not a sample
    # drawn twice in a batch that straddles two epochs: test_optimizers.test_random_mini_batches_never_repeat_a_sample)
    one_epoch = end(("shuffle", 3), 3, 1e-6)
    assert not np.allclose(one_epoch, full * 1.5, rtol=1e-3)  # 9 of the 10 samples, not the full batch's step
    assert not np.allclose(end("replace", 10, 2e-7), full, rtol=1e-2)
    with pytest.raises(ValueError, match="mini-batch size"):
        fs.optimizers.gd(0.1, batch=("shuffle", 0))


def test_discriminating_set_separates_the_references():
    data = fs.datasets.iid_gaussian(10, 20, seed=0)
    unit = [np.asarray(v, float) / np.linalg.norm(v) for v in (fs.max_margin(data, 2).direction,
            fs.max_margin(data, float("inf")).direction, fs.adam_fixed_point(data).direction)]
    cos = [unit[i] @ unit[j] for i, j in ((0, 1), (0, 2), (1, 2))]
    assert max(cos) <= 0.98, cos


def test_cells_match_wants_every_cell_and_forgives_only_the_boundary():
    """Cor 3.5's phase diagram: every cell agreeing holds; disagreements only on cells next to a predicted
    boundary are undecided; one away from the boundaries fails (">= 99%" held with a wrong threshold)."""
    a = np.linspace(0.02, 0.4, 40)
    predicted = np.where(a[:, None] > 0.1, 0, -1) * np.ones((1, 40), int)
    assert cr.cells_match(np.ones((40, 40), bool), predicted).holds is True
    shifted = np.where(a[:, None] > 0.11, 0, -1) * np.ones((1, 40), int)  # the threshold 10% off: a band of cells
    assert 0.97 < (shifted == predicted).mean() < 1 and cr.cells_match(shifted == predicted, predicted).holds is None
    far = np.ones((40, 40), bool)
    far[35, 20] = False
    assert cr.cells_match(far, predicted).holds is False



def test_angle_falls_wants_one_power_law_not_a_level_above_zero():
    """An angle falling toward 10.6 deg (c + A (log t)^-k), under the 15 deg bound and falling at every
    save, held; its rate slows from one half of the tail to the next, which a power law's does not."""
    lt = np.linspace(1.0, 100.0, 200)
    x = lt * np.log(10.0)
    power = 40.0 * x**-0.35
    assert cr.angle_falls(lt, power).holds is True
    levelling = 10.6 + 40.0 * x**-0.9
    assert levelling[-1] < 15 and np.all(np.diff(levelling) < 0)
    o = cr.angle_falls(lt, levelling)
    assert o.holds is None and "over the tail's halves" in o.why, o.why
    few = np.linspace(1.0, 100.0, 10)  # 5 tail saves: the halves cannot be compared, so no "holds" either
    assert cr.angle_falls(few, 10.6 + 40.0 * (few * np.log(10.0)) ** -0.9).holds is None


def test_report_json_gives_each_number_a_key_value_and_unit():
    """A claim's rows keep their sentence and list the numbers in it one by one (NumPy values as JSON's, a NaN
    as "nan"); a bare string row, a number with no key or unit, is refused."""
    import json

    main = cr.crossover_law(0.2121320344, 1.0, 2.0, 0.1)
    row = Measured("beta_1 -> beta_2 at log10 t = 0.816135 (tau 3.16038)",
                   (Number("switch_1_log10_t", np.float64(0.816135), "log10 t"), Number("switch_1_tau", 3.16038, "tau"),
                    Number("leaders", np.array([1, 2]), "coordinate"), Number("gap", float("nan"), "1")))
    c = claim(id="x", seed="000", statement=STATED, setting="setting",
              evidence=Evidence(main, [Control("c", cr.crossover_law(1.0, 1.0, 2.0, 0.1))]),
              numbers={"switches": row, "crossover": main}).as_dict()
    json.dumps(c, allow_nan=False)
    (switches, crossover) = c["measured"]
    assert switches["run"] == "switches" and switches["sentence"] == row.sentence
    assert switches["numbers"][0] == {"key": "switch_1_log10_t", "value": 0.816135, "unit": "log10 t"}
    assert switches["numbers"][2]["value"] == [1, 2] and switches["numbers"][3]["value"] == "nan"
    want = 0.1 * 3 / np.sqrt(2)
    assert {n["key"]: n["value"] for n in crossover["numbers"]}["N_predicted"] == pytest.approx(want, rel=1e-15)
    assert [n["key"] for n in c["controls"][0]["numbers"]] == ["N", "N_predicted", "relative_error"]
    with pytest.raises(TypeError, match="Measured rows or Outcomes"):
        claim(id="x", seed="000", statement=STATED, setting="setting", evidence=Evidence(main, []),
              numbers={"prose": "1.5 s"}).as_dict()


def test_each_claim_says_how_strong_its_check_is():
    """report.json carries the paper's statement, the one checked and how they relate; a strength outside the
    list, or "corrected" without saying what, is refused."""
    c = claim(id="x", seed="000", statement=Statement("p", "c", "corrected: only the leader"), setting="s",
              evidence=Evidence(YES, [Control("c", NO)]), numbers={"r": YES})
    d = c.as_dict()
    assert (d["paper_statement"], d["checked_statement"], d["strength"]) == ("p", "c", "corrected: only the leader")
    assert "statement" not in d and d["counterexamples"] == []
    for bad in ("stronger", "corrected", "corrected:", "weaker: a little"):
        with pytest.raises(ValueError, match="strength must be one of"):
            Statement("p", "c", bad)


def test_a_corrected_claim_needs_its_counterexample_to_refute_the_stated_form():
    refuted, standing = Counterexample("diverges", "case", NO), Counterexample("diverges", "case", UNDECIDED)
    assert judge(Evidence(YES, [Control("c", NO)], [refuted]))[0] == "holds"
    verdict, why = judge(Evidence(YES, [Control("c", NO)], [refuted, standing]))
    assert verdict == "inconclusive" and "counterexample 'case'" in why
    assert judge(Evidence(YES, [Control("c", NO)], [Counterexample("diverges", "case", YES)]))[0] == "inconclusive"
    d = claim(id="x", seed="000", statement=STATED, setting="s",
              evidence=Evidence(YES, [Control("c", NO)], counterexamples=[refuted]), numbers={}).as_dict()
    assert d["counterexamples"] == [{"found_by": "measured", "statement": "diverges", "setting": "case",
                                     "verdict": "fails", "why": "n", "numbers": []}]


LT = np.linspace(1.0, 100.0, 60)


def test_settles_at_tells_a_bounded_coordinate_from_a_diverging_one():
    """beta_2 of the L = 3 counterexample approaches 0.125^3 like (log t)^(-1/3); (log t)^0.5 diverges; a path off its
    closed form, or a value above its limit, fails."""
    limit = 0.125**3
    bounded = limit * (1 - 0.05 * (LT * np.log(10)) ** (-1 / 3))
    assert cr.settles_at(LT, bounded, limit, bounded[-1], "b").holds is True
    assert cr.settles_at(LT, bounded * (1 + 1e-2), limit, bounded[-1], "b").holds is False  # off its closed form
    assert cr.settles_at(LT, bounded, limit, None, "b").holds is None  # no path to compare with, does not grow
    assert cr.settles_at(LT, 1e-3 * LT**0.5, np.inf, None, "b").holds is False
    over = np.full_like(LT, 1.01 * limit)
    assert cr.settles_at(LT, over, limit, over[-1], "b").holds is False
    assert cr.settles_at(LT, np.full_like(LT, np.nan), limit, limit, "b").holds is None


def test_diverges_fails_only_on_a_coordinate_held_below_its_bound():
    limit = 0.125**3
    bounded = limit * (1 - 0.05 * (LT * np.log(10)) ** (-1 / 3))
    assert cr.diverges(LT, bounded, limit, "b").holds is False
    assert cr.diverges(LT, 1e-3 * LT**0.5, limit, "b").holds is True
    assert cr.diverges(LT, np.full_like(LT, 2 * limit), limit, "b").holds is True  # past the bound
    assert cr.diverges(LT, limit * 0.5 * (1 + 0.05 * LT / 100), limit, "b").holds is None  # 2.5% rise: neither


@pytest.mark.parametrize("depth", [3, 4])
def test_a_growing_coordinate_beside_a_faster_one_has_a_finite_limit(depth):
    """At L >= 3, mu = (1, 2, 3), alpha = (0.3, 0.12, 0.11), rho = 0.1: coordinate 1 blows up at tau* = 1/((L-2)
    mu_1 (alpha_1 - rho)^(L-2)); coordinates 2 and 3 (alpha_j > rho) end at their values then, integrated here by
    scipy from dw/dtau = mu_j (w - rho)^(L-1) (0.125^3 for beta_2 at L = 3), not at infinity."""
    from scipy.integrate import solve_ivp

    from flowsim.theory.analysis import linf_sam_beta_at_tau, linf_sam_leader_tau

    mu, alpha, rho = np.array([1.0, 2.0, 3.0]), np.array([0.3, 0.12, 0.11]), 0.1
    pred = fs.linf_sam_prediction(mu, alpha, rho, depth)
    assert pred["leader"] == 0 and pred["fate"] == ["grow"] * 3 and pred["limit"][0] == np.inf
    tau_star = 1 / ((depth - 2) * mu[0] * (alpha[0] - rho) ** (depth - 2))
    for j in (1, 2):
        w = solve_ivp(lambda t, w: mu[j] * (w - rho) ** (depth - 1), (0, tau_star), [alpha[j]], rtol=1e-12,
                      atol=1e-15).y[0, -1]
        assert pred["limit"][j] == pytest.approx(w**depth, rel=1e-9)
    if depth == 3:
        assert pred["limit"][1] == pytest.approx(0.125**3, rel=1e-12)
    # the leader's clock read back from its own value, and the closed form there
    at = linf_sam_beta_at_tau(mu, alpha, rho, depth, 0.5 * tau_star)
    assert linf_sam_leader_tau(mu[0], alpha[0], rho, depth, at[0]) == pytest.approx(0.5 * tau_star, rel=1e-12)
    assert np.isinf(linf_sam_beta_at_tau(mu, alpha, rho, depth, tau_star)[0])
    with pytest.raises(ValueError, match="depth must be an integer >= 3"):
        linf_sam_beta_at_tau(mu, alpha, rho, 2, 1.0)
