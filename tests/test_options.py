"""Options and statuses: one source for solve, sweep and a config file."""

import numpy as np
import pytest

import flowsim as fs
from flowsim import config
from flowsim.integrate.options import Options

PROBLEM = {"data": {"X": [[1.0, 2.0], [0.5, -1.0]], "y": [1, 1]}, "model": {"form": "difference", "depth": 2},
           "flow": {"name": "gd"}}

#: options wrong in one way each, and what the message names
BAD = [
    ({"t1": 100, "saves": 1}, "saves must be an integer in"),
    ({"t1": 100, "rtol": 2.0}, "rtol must be in"),
    ({"t1": 100, "rtol": 1e-20}, "rtol must be in"),
    ({"t1": 100, "atol": -1.0}, "atol must be a positive"),
    ({"t1": 100, "max_steps": 0}, "max_steps must be a positive integer"),
    ({"t1": -1.0}, "t1 must be a positive"),
    ({"t1": 100, "log10_t1": 2}, "give exactly one of t1"),
    ({"t1": 100, "saves": 10, "save_at_t": [1.0, 2.0]}, "give only one of saves"),
    ({"t1": 100, "save_at_t": [2.0, 1.0]}, "save_at_t"),
    ({"t1": 100, "backend": "scipy:Euler"}, "unknown scipy method"),
]


@pytest.mark.parametrize("options, match", BAD)
def test_solve_sweep_and_a_config_refuse_the_same_options_with_the_same_message(options, match):
    """The three entry points share one check (they had drifted: a config refused saves > 100,000 where solve took
    up to 1,000,000)."""
    system = fs.derive(fs.DiagonalNet(2, "difference"), "exponential", fs.GD())
    data = fs.Dataset(PROBLEM["data"]["X"], PROBLEM["data"]["y"])
    messages = []
    for attempt in (lambda: fs.solve(system, data, 0.1, **options),
                    lambda: fs.sweep(system, data, {"alpha": [0.1]}, **options),
                    lambda: config.parse({**options, **PROBLEM}, config.Experiment)):
        with pytest.raises(ValueError, match=match) as err:
            attempt()
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert messages[0].rstrip(".") in messages[2]


def test_as_many_saves_in_a_config_as_solve_takes():
    exp = config.parse({"t1": 100, "saves": 200_000, **PROBLEM}, config.Experiment)
    assert exp.saves == 200_000


def test_options_keep_what_was_asked_and_give_solve_the_same_run():
    opts = Options.checked(t1=1e3, saves=50, rtol=1e-9)
    assert opts.log10_t1 == pytest.approx(3.0) and len(opts.save_at_log10_t) == 50 and opts.asked_saves == {"saves": 50}
    given = Options.checked(log10_t1=3.0, save_at_t=[1.0, 10.0])
    assert given.asked_saves == {"save_at_log10_t": [0.0, 1.0, 3.0]}  # t1 appended
    system = fs.derive(fs.Linear(), "exponential", fs.GD())
    data = fs.Dataset([[1.0, 2.0], [0.5, -1.0]], [1, 1])
    a = fs.solve(system, data, 0.1, **opts.solve_arguments())
    b = fs.solve(system, data, 0.1, t1=1e3, saves=50, rtol=1e-9)
    np.testing.assert_array_equal(a.beta, b.beta)


def test_a_status_is_its_name_and_knows_what_it_means():
    assert fs.Status.COMPLETED == "completed" and f"{fs.Status.BLEW_UP}" == "blew_up"
    assert repr(fs.Status.CHATTERING) == "'chattering'"
    assert set(fs.STATUSES) == {str(s) for s in fs.Status}
    assert {str(s) for s in fs.Status if s.is_failure} == set(fs.FAILURES)
    assert {str(s) for s in fs.Status if s.held} == {"stalled", "converged"}
    assert all(fs.Status(name).meaning == text for name, text in fs.STATUSES.items())
    with pytest.raises(ValueError):
        fs.Status("finished")


def test_a_solve_reports_a_status_member():
    system = fs.derive(fs.Linear(), "exponential", fs.GD())
    sol = fs.solve(system, fs.Dataset([[1.0, 2.0]], [1]), 0.1, t1=10.0)
    assert sol.status is fs.Status.COMPLETED and sol.ok and not sol.status.is_failure
