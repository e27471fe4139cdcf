"""fs.adam_basins: which fixed point of per-sample Adam the proxy flow reaches from each init scale, confirmed by the
fixed-point iteration; and the 002-basins judgement (discrete Adam at its basin's fixed point, not at a unique one)."""

import functools

import numpy as np
import pytest

import flowsim as fs
from flowsim.reproduce.adam import ADAM
from flowsim.reproduce.criteria import nearest_reference
from flowsim.theory.fixed_point import FixedPointSearch

U = np.random.default_rng(2).normal(size=5)  # 002-basins' first direction: it crosses basins between 0.1 and 0.3


@functools.cache
def _search():
    return fs.adam_fixed_points(fs.datasets.shifted_diagonal(10, 5))


def test_two_init_scales_reach_two_fixed_points_each_confirmed():
    data = fs.datasets.shifted_diagonal(10, 5)
    basins = fs.adam_basins(data, [0.01, 1.0], U, search=_search())
    small, large = basins.reached
    assert small == 0 and large is not None and large != 0  # the uniform-weights point, then another
    for index, end in zip(basins.reached, basins.ends):
        point = _search().points[index]
        assert point.residual < 1e-9
        assert np.linalg.norm(end - point.direction) < 1e-3
    assert basins.scales_of(0).tolist() == [0.01]
    np.testing.assert_allclose(np.linalg.norm(basins.direction), 1.0)


def test_a_flow_whose_fixed_point_the_search_missed_is_in_no_basin():
    # the search holds only the uniform-weights point; from scale 1 the flow goes to another one
    data = fs.datasets.shifted_diagonal(10, 5)
    partial = FixedPointSearch(points=_search().points[:1], reached=(1,), starts=1, failed=())
    basins = fs.adam_basins(data, [1.0], U, search=partial)
    assert basins.reached == (None,)
    assert "iteration from the flow's loss weights ends" in basins.why[0]


@pytest.mark.parametrize("scales, direction, word", [([-1.0], U, "scales"), ([], U, "scales"),
                                                     ([1.0], U[:3], "direction"), ([1.0], np.zeros(5), "direction")])
def test_bad_scales_or_direction_are_refused_by_name(scales, direction, word):
    with pytest.raises(ValueError, match=word):
        fs.adam_basins(fs.datasets.shifted_diagonal(10, 5), scales, direction, search=_search())


def test_discrete_adam_ends_at_its_basins_fixed_point_and_not_at_the_uniform_one():
    data = fs.datasets.shifted_diagonal(10, 5)
    basin = fs.adam_basins(data, [1.0], U, search=_search()).reached[0]
    run = fs.iterate(fs.optimizers.adam(**ADAM, batch="cyclic"), fs.Linear(), "logistic", data, steps=1_000_000,
                     init=U / np.linalg.norm(U), records=24)
    dist = {i: np.linalg.norm(run.direction - p.direction, axis=1) for i, p in enumerate(_search().points)}
    assert nearest_reference(dist, basin).holds is True
    assert nearest_reference(dist, 0).holds is False  # the uniqueness assumption of 002-basins' control


@pytest.mark.slow
def test_the_quick_claim_holds_and_the_uniqueness_control_fails(tmp_path):
    from flowsim.reproduce import adam

    claim = adam.fixed_point_basins(tmp_path, quick=True)
    assert claim.verdict == "holds", claim.why
    assert [c.verdict for c in claim.controls] == ["fails"]
    reached = {r.numbers[1].value for k, r in claim.numbers.items() if k.endswith("(defines the basin)")}
    assert len(reached) >= 3  # three fixed points reached from the inits of the map
    rows = [_row(r) for r in claim.numbers.values()] + [c.outcome.measured.as_dict("") for c in claim.controls]
    assert all(row["numbers"] for row in rows)


def _row(value):
    return (value.measured if hasattr(value, "measured") else value).as_dict("")
