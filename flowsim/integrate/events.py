"""The events of a trajectory (``Solution.events``): small immutable records, one class a kind, each also
read as a mapping (``event["to_coordinate"]``, ``dict(event)``) as saved runs hold them.

Weight entries are named both ways (``weight_entries``): ``layer`` (its name) and ``coordinate`` (from 1, as a
saved run's labels and the papers), ``layer_index`` and ``index`` (from 0: ``sol.params[:, layer_index, index]``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class Event(Mapping):
    """When an event happened: ``log10_t`` (the asked-for system's time) and ``tau``. Equal to any mapping with
    the same keys and values (a saved run's events read back)."""

    kind: str = field(init=False, default="")
    log10_t: float
    tau: float

    def __getitem__(self, key):
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self.__dataclass_fields__)

    def __len__(self) -> int:
        return len(self.__dataclass_fields__)

    def retimed(self, shift: float, stretch: float, scale: np.ndarray | None = None) -> Event:
        """The event of a system whose clock runs ``10**shift`` slower (tau ``stretch`` times longer); ``scale``:
        per coordinate, what beta is multiplied by (``integrate.balanced``)."""
        return dataclasses.replace(self, log10_t=self.log10_t + shift, tau=self.tau * stretch)


@dataclass(frozen=True, eq=False)
class SignSwitch(Event):
    """A sign flow's signs changed: the entries ``pinned`` on their planes w = 0, those starting to slide on
    their switching surfaces (``sliding``) and those that ``left`` theirs."""

    kind: str = field(init=False, default="sign_switch")
    pinned: list = field(default_factory=list)
    sliding: list = field(default_factory=list)
    left: list = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class Arrival(Event):
    """``entries`` reached their invariant planes w = 0 in finite time and were set on them."""

    kind: str = field(init=False, default="arrival")
    entries: list = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class BackendChange(Event):
    """``backend="auto"`` handed the run over from ``from_backend`` to ``to_backend`` (an implicit method)."""

    kind: str = field(init=False, default="backend")
    from_backend: str = ""
    to_backend: str = ""


@dataclass(frozen=True, eq=False)
class LeaderSwitch(Event):
    """The leading coordinate by the tracked ``score`` changed (``kind`` is ``"lead_<score>"``). ``from_index``/
    ``to_index`` count from 0 (columns of ``sol.beta``), ``from_coordinate``/``to_coordinate`` from 1 (the papers'
    beta_j, a saved run's labels); ``beta`` at the switch."""

    score: str
    from_index: int
    to_index: int
    beta: list
    from_coordinate: int = field(init=False)
    to_coordinate: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "kind", f"lead_{self.score}")
        object.__setattr__(self, "from_coordinate", self.from_index + 1)
        object.__setattr__(self, "to_coordinate", self.to_index + 1)

    def retimed(self, shift, stretch, scale=None) -> LeaderSwitch:
        beta = self.beta if scale is None else (scale * np.asarray(self.beta)).tolist()
        return dataclasses.replace(self, log10_t=self.log10_t + shift, tau=self.tau * stretch, beta=beta)


KINDS = {cls.kind: cls for cls in (SignSwitch, Arrival, BackendChange)}


def event_of(record: Mapping) -> Event | Mapping:
    """The typed event a saved run's record holds (a record of a kind not known here is kept as it is)."""
    values = {k: v for k, v in record.items() if k not in ("from_coordinate", "to_coordinate")}
    kind = values.pop("kind", "")
    try:
        if kind.startswith("lead_"):
            return LeaderSwitch(**dict(values, score=kind.removeprefix("lead_")))
        return KINDS[kind](**values) if kind in KINDS else record
    except TypeError:  # a record with other fields than this version's
        return record


def weight_entries(layer_names, mask) -> list[dict]:
    """The weight entries where ``mask`` (layers, d) is set, each named both ways (see the module's text)."""
    return [{"layer": layer_names[i], "coordinate": int(j) + 1, "layer_index": int(i), "index": int(j)}
            for i, j in zip(*np.nonzero(mask))]
