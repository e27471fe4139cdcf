"""The classics suite (``flowsim reproduce classics``): its criteria on constructed cases that break each claim, its
references against each other, and the suite end to end in --quick through the command line (every claim holds,
every control fails, readable figures), with the suite names and groups of ``reproduce``."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from figure_layout import layout_problems
from matplotlib.figure import Figure
from typer.testing import CliRunner

import flowsim as fs
from flowsim.cli import app
from flowsim.reproduce import classics, report
from flowsim.reproduce._claim import Claim, Statement

runner = CliRunner()


# --- the criteria, on cases made to break them ---

def test_limit_matches_tells_a_limit_from_one_1e6_away():
    reference = np.array([0.5, -1.0, 2.0])
    assert classics.limit_matches(reference + 1e-10, reference, "case").holds is True
    assert classics.limit_matches(reference + np.array([0, 1e-6, 0]), reference, "case").holds is False
    assert classics.limit_matches(np.full(3, np.nan), reference, "case").holds is None


def test_kernel_to_rich_needs_both_trends_and_both_ends():
    alphas = [10.0, 1.0, 0.1, 0.01]
    kernel, rich = [1e-6, 3e-3, 0.44, 0.75], [0.65, 0.64, 0.34, 0.1]
    assert classics.kernel_to_rich(alphas, kernel, rich, "case").holds is True
    assert classics.kernel_to_rich(alphas[::-1], kernel[::-1], rich[::-1], "case").holds is True  # any order
    assert classics.kernel_to_rich(alphas, rich, kernel, "case").holds is False  # roles swapped
    stalled = [0.65, 0.64, 0.34, 0.3]  # falls, but the smallest alpha is not near the rich limit
    assert classics.kernel_to_rich(alphas, kernel, stalled, "case").holds is False
    bump = [1e-6, 0.5, 0.44, 0.75]  # the distance to the kernel limit does not grow monotonically
    assert classics.kernel_to_rich(alphas, bump, rich, "case").holds is False


ALPHAS = [1e-8, 1e-16, 1e-32, 1e-64]
LOGS = np.log(1 / np.array(ALPHAS))


def test_jump_times_converge_like_one_over_log_but_not_to_a_shift():
    b = np.array([-25.0, 3.0, -1.0])  # errors b / log(1/alpha): the closed form's law
    duration = 10.0
    errors = [b / L for L in LOGS]
    assert classics.jump_times_converge(ALPHAS, errors, duration, "case").holds is True
    shifted = [e + 0.03 * duration for e in errors]  # still falling, but towards 3% of the path's duration
    outcome = classics.jump_times_converge(ALPHAS, shifted, duration, "case")
    assert outcome.holds is False and "extrapolated to alpha -> 0: 0.03" in outcome.why
    rising = [b / L for L in LOGS[::-1]]
    assert classics.jump_times_converge(ALPHAS, rising, duration, "case").holds is False
    assert classics.jump_times_converge(ALPHAS, errors[:-1] + [np.array([np.nan, 0, 0])], duration, "case").holds is None


def test_plateaus_converge_only_to_the_path_values():
    decaying = [np.full((2, 3), 0.5 * L**-2) for L in LOGS]
    assert classics.plateaus_converge(ALPHAS, decaying, 1.0, "case").holds is True
    off = [e + 0.05 for e in decaying]  # a plateau 5% off: falls, but not to 0
    assert classics.plateaus_converge(ALPHAS, off, 1.0, "case").holds is False


def test_path_errors_of_a_flow_on_the_path_are_its_grid_spacing():
    """A made-up flow that is exactly the path (beta = path.beta(t~)) has jump errors below one save's spacing and
    no plateau error; the same flow with its time stretched has jump errors of the stretch."""
    path = fs.saddle_to_saddle(*classics.regression_problem(0))
    alpha = 1e-8
    times = np.linspace(0, 1.5 * path.jump_times[-1], 3001)[1:]
    on_path = SimpleNamespace(t=times * np.log(1 / alpha), beta=path.beta(times))
    errors = classics.path_errors(on_path, path, alpha)
    assert np.all(np.abs(errors.jump_errors) <= times[1] - times[0]) and not np.any(errors.plateau_errors)
    late = SimpleNamespace(t=on_path.t, beta=path.beta(times / 1.1))
    np.testing.assert_allclose(classics.path_errors(late, path, alpha).jump_errors, 0.1 * path.jump_times,
                               atol=2 * (times[1] - times[0]))


def test_the_min_l1_interpolator_is_the_last_plateau_of_the_path():
    """Two independent references to the rich limit agree: the LP and the end of Pesme and Flammarion's path."""
    X, y = classics.regression_problem(0)
    np.testing.assert_allclose(classics.min_l1_interpolator(X, y), fs.saddle_to_saddle(X, y).plateaus[-1], atol=1e-9)


# --- the suite end to end ---

def test_the_shrunken_init_interpolator_with_one_scale_is_woodworths_q_alpha():
    """One scale a_i = alpha for every coordinate: the BFGS dual solve equals fs.implicit_regularizer_limit (Newton
    on another form of the dual) to 1e-8; scales that differ by coordinate give another interpolator."""
    X, y = classics.regression_problem()
    for alpha in (0.1, 1.0):
        np.testing.assert_allclose(classics.shrunken_init_interpolator(X, y, np.full(12, alpha)),
                                   fs.implicit_regularizer_limit(X, y, alpha), rtol=0, atol=1e-8)
    other = classics.shrunken_init_interpolator(X, y, np.linspace(0.05, 0.1, 12))
    assert np.abs(X @ other - y).max() < 1e-10
    assert np.abs(other - fs.implicit_regularizer_limit(X, y, 0.1)).max() > 1e-2


def test_leader_order_lists_each_new_leader_once():
    beta = np.array([[0.1, 0.2, 0.3], [0.1, 0.4, 0.3], [-0.5, 0.4, 0.3], [0.6, 0.1, 0.0]])
    assert classics.leader_order(beta) == [3, 2, 1]


@pytest.fixture(scope="module")
def quick_suite(tmp_path_factory):
    """``flowsim reproduce classics --quick``, its figures kept as drawn."""
    out = tmp_path_factory.mktemp("classics")
    figures = {}
    original = Figure.savefig

    def keep(fig, path, *args, **kw):
        figures[str(path).rsplit("/", 1)[-1]] = fig
        return original(fig, path, *args, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", keep)
        result = runner.invoke(app, ["reproduce", "classics", "--quick", "--out", str(out)])
    return SimpleNamespace(result=result, out=out, figures=figures,
                           summary=json.loads((out / "report.json").read_text()))


def test_every_classic_claim_holds_with_every_control_failing(quick_suite):
    assert quick_suite.result.exit_code == 0, quick_suite.result.output
    summary = quick_suite.summary
    assert summary["suite"] == "classics" and summary["quick"] and summary["complete"]
    assert [c["id"] for c in summary["claims"]] == ["soudry2018-l2", "gunasekar2018-lp", "polynomial-tail-limit",
                                                    "woodworth2020-q-alpha", "pesme2023-saddles",
                                                    "andriushchenko2022-shrunken-init", "sam-regression-minor-major"]
    measured_only = summary["claims"].pop()  # the open question: measured, no controls, no verdict
    assert measured_only["verdict"] == "open" and (quick_suite.out / measured_only["figure"]).exists()
    assert measured_only["measured"] and not measured_only["controls"]
    for c in summary["claims"]:
        assert c["verdict"] == "holds", (c["id"], c["why"])
        assert c["seed"] == "classics" and c["controls"] and all(k["verdict"] == "fails" for k in c["controls"]), c["id"]
        assert (quick_suite.out / c["figure"]).exists()
        for row in c["measured"] + c["controls"]:
            keys = [n["key"] for n in row["numbers"]]
            assert keys and len(set(keys)) == len(keys) and all(n["unit"] for n in row["numbers"]), row
    report_md = (quick_suite.out / "report.md").read_text()
    assert "Soudry et al. (JMLR 2018)" in report_md and "seed 000" not in report_md


def test_the_classics_figures_are_readable(quick_suite):
    assert set(quick_suite.figures) == {f"classics_{name}.png" for name in ("soudry", "gunasekar", "polynomial_tail",
                                                                              "woodworth", "pesme", "andriushchenko",
                                                                              "minor_major")}
    for name, fig in quick_suite.figures.items():
        assert layout_problems(fig) == [], name


# --- the suite names of `reproduce` ---

def _one_claim(suite):
    def run(out, quick, progress=print):
        yield Claim(f"{suite}-claim", suite, Statement("p", "c", "as stated"), "s", "descriptive", "w")
    return run


def test_all_keeps_the_seeds_and_everything_runs_every_suite(tmp_path, monkeypatch):
    for suite in report.SUITES:
        monkeypatch.setitem(report.SUITES, suite, _one_claim(suite))
    ran = {}
    for group in ("all", "everything", "classics"):
        report.reproduce(group, tmp_path / group, progress=lambda _: None)
        ran[group] = [c["seed"] for c in json.loads((tmp_path / group / "report.json").read_text())["claims"]]
    assert ran == {"all": ["sam", "adam"], "everything": ["sam", "adam", "classics"], "classics": ["classics"]}
    assert classics.PROVENANCE in (tmp_path / "everything" / "report.md").read_text()
    assert classics.PROVENANCE not in (tmp_path / "all" / "report.md").read_text()


def test_an_unknown_suite_is_one_line_naming_the_suites(tmp_path):
    r = runner.invoke(app, ["reproduce", "classic", "--out", str(tmp_path)])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert "suite must be one of sam, adam, classics, all, everything; got 'classic'" in lines[0]
