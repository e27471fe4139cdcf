"""One checked claim of a paper."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Claim:
    id: str
    statement: str
    setting: str
    verdict: str  # "holds" | "fails" | "inconclusive"
    why: str
    numbers: list = field(default_factory=list)  # rows of a markdown table: (name, value)
    figure: str | None = None
    seconds: float = 0.0


def verdict_word(holds) -> str:
    return {True: "holds", False: "fails", None: "inconclusive"}[holds]
