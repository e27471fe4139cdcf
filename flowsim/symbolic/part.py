"""What evaluation points and directions share: their identity for the derivation cache and their label."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Part:
    """Base of :class:`~flowsim.symbolic.points.EvaluationPoint` and :class:`~flowsim.symbolic.directions.Direction`."""

    @property
    def key(self):
        # the class itself, not its name: two user parts named alike are different derivations
        return (type(self), *(getattr(self, f.name) for f in fields(self)))

    def describe(self) -> list[str]:
        return [f"{f.name}={getattr(self, f.name):g}" for f in fields(self)]
