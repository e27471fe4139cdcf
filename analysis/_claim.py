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


def run_checks(checks, out, quick: bool, progress=print) -> list:
    """Run each check(out, quick) -> Claim, timing it and reporting its verdict as it goes."""
    import time

    claims = []
    for check in checks:
        start = time.perf_counter()
        c = check(out, quick)
        c.seconds = time.perf_counter() - start
        progress(f"[{c.verdict:>12}] {c.id}  ({c.seconds:.1f} s)")
        claims.append(c)
    return claims
