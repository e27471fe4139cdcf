"""A solve's events are typed records that read as mappings and come back from a saved run as the same types."""

import numpy as np
import pytest

import flowsim as fs
from flowsim.integrate.events import event_of


@pytest.fixture(scope="module")
def readme_sam():
    data = fs.Dataset(np.array([[1.0, 2.0, 3.0]]), [1])
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1, norm=2))
    return fs.solve(system, data, init=0.05, t1=1e100, track=("magnitude",))


def test_a_leader_switch_names_its_coordinates_both_ways(readme_sam):
    first, second = readme_sam.events
    assert isinstance(first, fs.LeaderSwitch) and first.kind == first["kind"] == "lead_magnitude"
    assert (first.from_index, first.to_index, first["from_coordinate"], first["to_coordinate"]) == (0, 1, 1, 2)
    # the switch is where the tracked leader changes: beta_2 overtakes beta_1 there
    assert first.beta[1] == pytest.approx(first.beta[0], rel=1e-9) and second.to_coordinate == 3
    assert np.argmax(np.abs(readme_sam.evaluate(first.log10_t + 0.05).beta[0])) == first.to_index


def test_events_read_back_from_a_saved_run_as_the_same_types(readme_sam, tmp_path):
    fs.io.save(readme_sam, tmp_path / "run.nc")
    back = fs.io.load(tmp_path / "run.nc", as_solution=True)
    assert [type(e) for e in back.events] == [type(e) for e in readme_sam.events]
    assert back.events == readme_sam.events and dict(back.events[0]) == dict(readme_sam.events[0])


def test_a_record_of_an_unknown_kind_or_other_fields_is_kept_as_it_is():
    other = {"kind": "from_a_later_version", "log10_t": 1.0, "tau": 2.0}
    assert event_of(other) is other
    extra = {"kind": "arrival", "log10_t": 1.0, "tau": 2.0, "entries": [], "what": 3}
    assert event_of(extra) is extra
    arrival = event_of({"kind": "arrival", "log10_t": 1.0, "tau": 2.0, "entries": []})
    assert isinstance(arrival, fs.Arrival) and arrival != extra


def test_events_are_immutable(readme_sam):
    with pytest.raises(AttributeError):
        readme_sam.events[0].to_index = 2
