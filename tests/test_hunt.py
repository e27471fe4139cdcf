"""The conjecture hunt (fs.hunt): its search space, its shrinker, and the report's hunts with their controls."""

import math
import re

import pytest

import flowsim as fs
from flowsim.reproduce import hunts
from flowsim.reproduce._claim import Control, Evidence, Outcome, Statement, claim, judge
from flowsim.reproduce.report import _markdown
from flowsim.theory.hunt import Case, Choice, Floats, Ints, SearchSpace

SPACE = SearchSpace({"n": Ints(1, 50), "d": Ints(0, 10), "x": Floats(0.0, 1.0), "kind": Choice(("a", "b"))})


def fails_when_large(n, d, x, kind):
    """False ("a counterexample") exactly when n >= 7, d >= 3 and x > 0.25: the simplest such case is n = 7,
    d = 3, x = 0.3 (the fewest digits above 0.25), kind 'a'."""
    return not (n >= 7 and d >= 3 and x > 0.25)


def test_the_shrinker_reaches_the_simplest_failing_case():
    result = fs.hunt(fails_when_large, SPACE, budget=400, seed=1, max_found=1)
    (found,) = result.counterexamples
    assert found.shrunk == Case({"n": 7, "d": 3, "x": 0.3, "kind": "a"})
    assert fails_when_large(**found.case) is False and found.case != found.shrunk
    assert found.reproducer.endswith("fails_when_large(n=7, d=3, x=0.3, kind='a'))\"")
    assert result.drawn < result.cases <= 400


def test_a_true_statement_has_no_counterexample_and_undecided_cases_are_counted():
    result = fs.hunt(lambda n, d, x, kind: True if n > 1 else None, SPACE, budget=60, seed=2)
    assert result.found == 0 and result.cases == result.drawn == 60 and result.exhausted
    assert 0 < result.undecided < 60


def test_a_case_flowsim_cannot_judge_is_undecided_and_a_bug_ends_the_hunt():
    def uncertified(n, d, x, kind):
        if n % 2:
            raise fs.UncertifiedError("the bounds are 1e-3 apart")
        return True

    result = fs.hunt(uncertified, SPACE, budget=40, seed=0)
    assert result.found == 0 and 0 < result.undecided < 40

    def buggy(n, d, x, kind):
        raise ZeroDivisionError("a bug")

    with pytest.raises(ZeroDivisionError):
        fs.hunt(buggy, SPACE, budget=5)


def test_the_same_seed_gives_the_same_hunt():
    one, two = (fs.hunt(fails_when_large, SPACE, budget=100, seed=5) for _ in range(2))
    assert one == two


@pytest.mark.parametrize("make, match", [
    (lambda: Ints(3, 1), r"dimensions\['k'\]: Ints needs whole numbers low <= high"),
    (lambda: Ints(0.5, 2), r"Ints needs whole numbers"),
    (lambda: Floats(math.nan, 1.0), r"dimensions\['k'\]: Floats needs finite numbers"),
    (lambda: Floats(0.0, 1.0, log=True), r"Floats\(log=True\) needs low > 0"),
    (lambda: Choice(()), r"Choice needs a non-empty tuple of distinct values"),
    (lambda: Choice(["a", "b"]), r"Choice needs a non-empty tuple"),
    (lambda: Choice((1, 1)), r"distinct values"),
    (lambda: (0, 1), r"dimensions\['k'\] must be Ints, Floats or Choice"),
])
def test_a_bad_dimension_is_refused_naming_it(make, match):
    with pytest.raises(ValueError, match=match):
        SearchSpace({"k": make()})


def test_a_bad_space_or_hunt_argument_is_refused_naming_it():
    with pytest.raises(ValueError, match="dimensions must be a non-empty mapping"):
        SearchSpace({})
    with pytest.raises(ValueError, match="each name must be a Python identifier"):
        SearchSpace({"not a name": Ints(0, 1)})
    for kw, match in (({"budget": 0}, "budget must be a whole number >= 1"), ({"seed": -1}, "seed must be"),
                      ({"max_found": 1.5}, "max_found must be"), ({"budget": True}, "budget must be")):
        with pytest.raises(ValueError, match=match):
            fs.hunt(fails_when_large, SPACE, **kw)
    with pytest.raises(ValueError, match="space must be a flowsim SearchSpace"):
        fs.hunt(fails_when_large, {"n": Ints(0, 1)})
    with pytest.raises(TypeError, match="returns True, False, None"):
        fs.hunt(lambda **case: "no", SPACE, budget=1)


def _rerun(found):
    """The criterion call of a report hunt's reproducer, evaluated here."""
    call = re.search(r"print\((\w+\(.*\))\.why\)", found.reproducer).group(1)
    return eval(call, vars(hunts))


def test_the_false_statement_control_finds_a_counterexample_that_its_reproducer_reruns():
    searched = hunts.HUNTS["000-thm3.1-false-l1"].run(budget=12)
    assert searched.result.found >= 1
    first = searched.result.counterexamples[0]
    assert (first.shrunk["n"], first.shrunk["d"]) == (2, 2)  # the fewest samples and features there are
    assert _rerun(first).holds is False


@pytest.mark.parametrize("claim_id, budget", [("000-thm3.1", 6), ("000-thm3.2", 12)])
def test_a_true_statement_survives_a_small_hunt(claim_id, budget):
    searched = hunts.HUNTS[claim_id].run(budget=budget, seed=3)
    assert searched.result.found == 0 and searched.result.cases == budget


def test_a_leader_the_horizon_has_not_reached_is_undecided_not_a_counterexample():
    """mu = (1, 1.1): e_2 overtakes e_1 at tau = ln 2 / 0.1 ~ 6.9, past t = 1e30 (tau ~ 5.8); the run's limit e_1
    there is no counterexample to Cor 3.5's e_2."""
    assert hunts.linf_fates(depth=2, mu_2=1.1, alpha_1=0.08, alpha_2=0.07, rho=0.06).holds is None
    assert hunts.linf_fates_reversed(depth=2, mu_2=2.0, alpha_1=0.01, alpha_2=0.01, rho=0.05).holds is False


def test_a_run_passing_a_nearby_reference_is_undecided_not_a_counterexample():
    """There fs.verdict called a run still 1.7 deg from l2 at t = 1e100 "closer to" l1 (2.05 deg from l2), its l2
    gap decaying like (log t)^-1.2: the hunt reported it as a counterexample to Thm 3.1."""
    outcome = hunts.gd_converges_to_l2(n=7, d=3, seed=63, alpha=0.01, rho=0.01, flow="GD")
    assert outcome.holds is None and "passing another reference on its way" in outcome.why, outcome.why


def _searched(found: int):
    result = fs.hunt(fails_when_large if found else (lambda **case: True), SPACE, budget=300, seed=1, max_found=1)
    hunt = hunts.Hunt("x", "a statement", fails_when_large, SPACE, budget=300, quick_budget=5)
    return hunts.Searched(hunt, result, 0.5)


def test_a_claim_with_a_found_counterexample_cannot_hold_and_the_report_says_what_was_searched():
    yes, no = Outcome(True, "y"), Outcome(False, "n")
    verdict, why = judge(Evidence(yes, [Control("c", no)], searched=_searched(1)))
    assert verdict == "fails" and "found 1 counterexample" in why and "rerun: python -c" in why
    assert judge(Evidence(yes, [Control("c", no)], searched=_searched(0)))[0] == "holds"
    c = claim(id="x", seed="000", statement=Statement("p", "c", "as stated"), setting="s",
              evidence=Evidence(yes, [Control("c", no)], searched=_searched(1)), numbers={})
    d = c.as_dict()
    cases = d["searched"]["cases"]
    assert d["searched"]["found"] == 1 and d["searched"]["drawn"] < cases < 300
    assert [k["found_by"] for k in d["counterexamples"]] == ["hunt"]
    assert d["counterexamples"][0]["shrunk_case"] == {"n": 7, "d": 3, "x": 0.3, "kind": "a"}
    text = _markdown({"suite": "sam", "quick": True, "complete": True, "flowsim_version": "0", "python": "3",
                      "wall_s": 1.0, "cpu_s": 1.0, "claims": [d]})
    assert f"Searched for counterexamples: {cases} cases, found 1" in text and "n=7, d=3, x=0.3, kind='a'" in text


def test_the_hunt_control_leaves_a_claim_inconclusive_when_it_finds_nothing(monkeypatch):
    barren = hunts.Hunt("000-thm3.1-false-l1", "false", lambda **case: True, hunts._LINEAR, budget=3, quick_budget=3)
    monkeypatch.setitem(hunts.HUNTS, "000-thm3.1-false-l1", barren)
    monkeypatch.setitem(hunts.HUNTS, "000-thm3.1", hunts.Hunt("000-thm3.1", "true", lambda **case: True,
                                                              hunts._LINEAR, 3, 3, "000-thm3.1-false-l1"))
    searched, control = hunts.search("000-thm3.1", quick=True)
    assert control.verdict == "holds" and searched.result.cases == 3
    assert judge(Evidence(Outcome(True, "y"), [control], searched=searched))[0] == "inconclusive"

