"""One checked claim of a paper, its negative controls, and how the two make a verdict.

A check is evidence only if it could have come out the other way. So every claim runs its
criterion (a function of :mod:`flowsim.reproduce.criteria`) on the setting the theorem covers and, through
the same criterion, on at least one control setting where the conclusion must NOT hold. The claim
"holds" only when the criterion holds on the claim and fails on every control; a control that also
"holds" makes the claim "inconclusive" (the criterion cannot tell the two apart).

Every claim also says how what was checked relates to what the paper states (:class:`Statement`): a
corrected form is reported as such, with the measured counterexamples to the stated form
(:class:`Counterexample`), which must fail the stated form's criterion for the claim to hold.

A claim with a cheap per-case criterion is also searched for counterexamples (:mod:`flowsim.reproduce.hunts`):
one found means the claim "fails", whatever its own runs say.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

VERDICTS = ("holds", "fails", "inconclusive", "open", "descriptive")
#: how the checked statement relates to the paper's; "corrected" is written "corrected: <what was corrected>"
STRENGTHS = ("as stated", "weaker", "corrected", "identity of the model", "beyond the available text")


@dataclass(frozen=True)
class Statement:
    """What a claim is about: ``paper`` (the paper's statement as far as the available text gives it, quoted or
    paraphrased from the abstracts and the notes of docs/theory.md 5b and 8), ``checked`` (the statement the
    criterion actually tests) and ``strength``, how the two relate: "as stated" (the paper's statement, tested on
    instances), "weaker" (a consequence of it; what is left out is said in ``checked``), "corrected: <what>" (the
    stated form is false; ``checked`` is the corrected one), "identity of the model" (it follows algebraically
    from the flow's equations: it tests the integrator, not a theorem) or "beyond the available text" (flowsim's
    own question or extension; the text states nothing to compare)."""

    paper: str
    checked: str
    strength: str

    def __post_init__(self):
        corrected = self.strength.startswith("corrected: ") and self.strength[len("corrected: "):].strip()
        if not (corrected or self.strength in STRENGTHS and self.strength != "corrected"):
            raise ValueError(f"strength must be one of {STRENGTHS} ('corrected: <what>' for a correction); "
                             f"got {self.strength!r}.")


@dataclass(frozen=True)
class Number:
    """One measured number of the report: ``key`` (a name, unique within its row), ``value`` (a JSON number,
    string, bool or list of them) and ``unit`` ("1": dimensionless; "log10 t", "tau", "deg", "s", "coordinate"
    (1-based), "cells", ...)."""

    key: str
    value: object
    unit: str

    def as_dict(self) -> dict:
        return {"key": self.key, "value": _native(self.value), "unit": self.unit}


def _native(value):
    """NumPy scalars and arrays as JSON's numbers and lists; non-finite floats as strings ("nan", "inf")."""
    value = value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value
    if isinstance(value, (list, tuple)):
        return [_native(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


@dataclass(frozen=True)
class Measured:
    """One row of a claim's measurements: the ``sentence`` the report prints and its ``numbers``."""

    sentence: str
    numbers: tuple = ()

    def as_dict(self, run: str) -> dict:
        return {"run": run, "sentence": self.sentence, "numbers": [n.as_dict() for n in self.numbers]}


@dataclass(frozen=True)
class Outcome:
    """What one criterion says of one run: ``holds`` True / False / None (undecided), why (a sentence) and the
    ``numbers`` it was judged on."""

    holds: bool | None
    why: str
    numbers: tuple = ()

    @property
    def measured(self) -> Measured:
        return Measured(self.why, self.numbers)

    @property
    def word(self) -> str:
        return {True: "holds", False: "fails", None: "inconclusive"}[self.holds]


def every(outcomes, what: str) -> Outcome:
    """All of ``outcomes`` hold (False if any fails, else None if any is undecided)."""
    outcomes = list(outcomes)
    if not outcomes:
        return Outcome(None, f"0 {what}: nothing was judged")
    n_ok = sum(o.holds is True for o in outcomes)
    holds = False if any(o.holds is False for o in outcomes) else (True if n_ok == len(outcomes) else None)
    bad = [o.why for o in outcomes if o.holds is False] + [o.why for o in outcomes if o.holds is None]
    return Outcome(holds, f"{n_ok}/{len(outcomes)} {what}" + (f"; first exception: {bad[0]}" if bad else ""))


@dataclass(frozen=True)
class Control:
    """A setting where the claim's conclusion must not hold, judged by the claim's own criterion."""

    setting: str
    outcome: Outcome

    @property
    def verdict(self) -> str:
        return self.outcome.word


@dataclass(frozen=True)
class Counterexample:
    """A measured case refuting the paper's stated form of a corrected claim: the stated form's criterion
    (``statement``) judged on ``setting`` must say "fails"."""

    statement: str
    setting: str
    outcome: Outcome

    @property
    def verdict(self) -> str:
        return self.outcome.word

    def as_dict(self) -> dict:
        return {"statement": self.statement, "setting": self.setting, "verdict": self.verdict,
                "why": self.outcome.why, "numbers": [n.as_dict() for n in self.outcome.numbers]}


@dataclass
class Claim:
    id: str
    seed: str  # "000" or "002"
    statement: Statement
    setting: str
    verdict: str
    why: str
    numbers: dict = field(default_factory=dict)  # run -> Measured (an Outcome: its ``measured``)
    controls: list = field(default_factory=list)  # list[Control]
    figure: str | None = None
    counterexamples: list = field(default_factory=list)  # list[Counterexample]
    searched: object = None  # a hunts.Searched: the hunt for counterexamples to the checked statement
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}; got {self.verdict!r}.")

    def as_dict(self) -> dict:
        return {"id": self.id, "seed": self.seed, "paper_statement": self.statement.paper,
                "checked_statement": self.statement.checked, "strength": self.statement.strength,
                "setting": self.setting, "verdict": self.verdict, "why": self.why,
                "measured": [_row(v).as_dict(run) for run, v in self.numbers.items()],
                "controls": [{"setting": c.setting, "verdict": c.verdict, "why": c.outcome.why,
                              "numbers": [n.as_dict() for n in c.outcome.numbers]} for c in self.controls],
                "searched": None if self.searched is None else self.searched.as_dict(),
                "counterexamples": [{"found_by": "measured", **k.as_dict()} for k in self.counterexamples]
                + ([] if self.searched is None else self.searched.counterexamples()),
                "figure": self.figure, "wall_s": round(self.seconds, 2), "cpu_s": round(self.cpu_seconds, 2)}


def _row(value) -> Measured:
    if isinstance(value, Outcome):
        return value.measured
    if not isinstance(value, Measured):
        raise TypeError(f"a claim's numbers are Measured rows or Outcomes; got {type(value).__name__}: {value!r}")
    return value


@dataclass(frozen=True)
class Evidence:
    """What a claim's verdict is judged on: ``main`` (its criterion's outcome on the setting the theorem covers),
    ``controls`` (its criterion on settings where the conclusion must not hold), for a corrected claim the stated
    form's ``counterexamples`` (each must fail) and the hunt ``searched`` for counterexamples to the checked
    statement (a hunts.Searched, or None when the claim has no hunt)."""

    main: Outcome
    controls: list
    counterexamples: tuple = ()
    searched: object = None


def judge(evidence: Evidence) -> tuple[str, str]:
    """The verdict of a claim and why, from its ``evidence``: a counterexample found by the hunt makes it fail; else
    its criterion's outcome, which holds only if the stated form fails on every counterexample (a stated form that
    holds there was not refuted, and the correction is not shown) and the criterion fails on every control."""
    main, controls, counterexamples, searched = (evidence.main, evidence.controls, evidence.counterexamples,
                                                 evidence.searched)
    if searched is not None and searched.result.found:
        k = searched.result.counterexamples[0]
        return "fails", (f"a hunt over {searched.result.cases} cases found {searched.result.found} counterexample(s); "
                         f"the simplest: {k.shrunk}: {k.why} (rerun: {k.reproducer})")
    if main.holds is not True:
        return main.word, main.why
    standing = [k for k in counterexamples if k.outcome.holds is not False]
    if standing:
        return "inconclusive", (f"{main.why}; but the stated form says {standing[0].verdict!r} on its counterexample "
                                f"'{standing[0].setting}', where it must fail")
    if not controls:
        return "inconclusive", main.why + "; no negative control was run, so the check could not have failed"
    leaky = [c for c in controls if c.outcome.holds is not False]
    if leaky:
        c = leaky[0]
        return "inconclusive", (f"{main.why}; but the criterion also says {c.verdict!r} on the control "
                                f"'{c.setting}', where the claim must not hold")
    refuted = f"; the stated form fails on {len(counterexamples)} counterexample(s)" if counterexamples else ""
    return "holds", f"{main.why}; {len(controls)} control(s) fail as they must{refuted}"


def claim(*, id: str, seed: str, statement: Statement, setting: str, evidence: Evidence, numbers: dict,
          figure: str | None = None) -> Claim:
    """The claim ``id`` of ``seed`` judged on its ``evidence`` (:func:`judge`), with its measured ``numbers`` (run ->
    Measured or Outcome) and the ``figure`` it draws, if any."""
    verdict, why = judge(evidence)
    return Claim(id, seed, statement, setting, verdict, why, numbers, evidence.controls, figure,
                 list(evidence.counterexamples), evidence.searched)


def run_checks(checks, out, quick: bool, progress=print):
    """Run each check(out, quick) -> Claim, timing it and reporting its verdict as it goes; yields each claim as
    it is judged."""
    for check in checks:
        start, cpu = time.perf_counter(), time.process_time()
        c = check(out, quick)
        c.seconds, c.cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        ctl = ", ".join(k.verdict for k in c.controls)
        progress(f"[{c.verdict:>12}] {c.id}  ({c.seconds:.1f} s, CPU {c.cpu_seconds:.1f} s)" + (f"  controls: {ctl}" if ctl else ""))
        yield c
