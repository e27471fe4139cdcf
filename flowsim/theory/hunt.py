"""A conjecture hunt: search a claim's criterion for counterexamples.

:func:`hunt` draws random cases from a :class:`SearchSpace` and, for each case the criterion says "fails" on,
shrinks it greedily toward the simplest case that still fails (fewer samples, smaller dimension, rounder
numbers), as hypothesis's shrinker does, and writes a one-line reproducer of the shrunk case.

The shrinker is written here rather than taken from ``hypothesis`` (a test dependency of flowsim): a case here is
a solve (tenths of a second), and hypothesis bounds the examples it generates but not the calls its shrinker
makes, stops at the first failure, and keeps an example database on disk; a hunt in the report must stay within a
fixed number of criterion calls, report every counterexample it found and write nothing but the report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from flowsim._checks import is_whole
from flowsim.errors import IntegrationError, NonSeparableError, UncertifiedError

#: what a case may raise and still be only undecided: flowsim cannot judge it (its data are not separable, a
#: reference is not certified, the solve failed); any other exception is a bug and ends the hunt
NOT_JUDGED = (NonSeparableError, IntegrationError, UncertifiedError)


@dataclass(frozen=True)
class Ints:
    """Integers from ``low`` to ``high`` (both included), simplest at ``low``."""

    low: int
    high: int

    def check(self, name: str) -> None:
        if not (is_whole(self.low, -math.inf) and is_whole(self.high, -math.inf)) or self.low > self.high:
            raise ValueError(f"{name}: Ints needs whole numbers low <= high; got low={self.low!r}, high={self.high!r}.")

    def draw(self, rng) -> int:
        return int(rng.integers(self.low, self.high + 1))

    def simpler(self, value: int) -> list[int]:
        return [v for v in dict.fromkeys([self.low, self.low + (value - self.low) // 2, value - 1]) if self.low <= v < value]

    def complexity(self, value: int) -> tuple:
        return (value - self.low,)


@dataclass(frozen=True)
class Floats:
    """Floats from ``low`` to ``high`` (both included), drawn uniformly (``log``: uniformly in log, low > 0);
    simplest at ``low``, then with the fewest significant digits."""

    low: float
    high: float
    log: bool = False

    def check(self, name: str) -> None:
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (self.low, self.high)) or self.low > self.high:
            raise ValueError(f"{name}: Floats needs finite numbers low <= high; got low={self.low!r}, high={self.high!r}.")
        if self.log and self.low <= 0:
            raise ValueError(f"{name}: Floats(log=True) needs low > 0; got low={self.low!r}.")

    def draw(self, rng) -> float:
        if self.log:
            return float(np.exp(rng.uniform(np.log(self.low), np.log(self.high))))
        return float(rng.uniform(self.low, self.high))

    def simpler(self, value: float) -> list[float]:
        # the value itself rounded, and round numbers part of the way down to low (a coarse bisection)
        rounded = [_round(value, 1), _round(value, 2), *(_round(value - (value - self.low) * f, 1) for f in (0.5, 0.25, 0.1))]
        inside = [v for v in dict.fromkeys([float(self.low), *rounded]) if self.low <= v <= self.high and v != value]
        return [v for v in inside if self.complexity(v) < self.complexity(value)]

    def complexity(self, value: float) -> tuple:
        return (value != self.low, _digits(value), abs(value - self.low))


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (numbers or strings), simplest first."""

    values: tuple

    def check(self, name: str) -> None:
        if not isinstance(self.values, tuple) or not self.values or len(set(self.values)) != len(self.values):
            raise ValueError(f"{name}: Choice needs a non-empty tuple of distinct values; got {self.values!r}.")

    def draw(self, rng):
        return self.values[int(rng.integers(len(self.values)))]

    def simpler(self, value) -> list:
        return list(self.values[: self.values.index(value)])

    def complexity(self, value) -> tuple:
        return (self.values.index(value),)


def _digits(value: float) -> int:
    """The fewest significant digits that write ``value`` exactly (0 for zero)."""
    return 0 if value == 0 else next(s for s in range(1, 18) if float(f"{value:.{s - 1}e}") == value)


def _round(value: float, digits: int) -> float:
    return float(f"{value:.{digits - 1}e}")


class Case(Mapping):
    """One point of a search space: its values by dimension name (immutable, hashable); ``str`` writes it as
    keyword arguments, ``n=3, d=2, alpha=0.1``."""

    def __init__(self, values: Mapping):
        self._values = dict(values)

    def __getitem__(self, name):
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __hash__(self):
        return hash(tuple(self._values.items()))

    def __eq__(self, other):
        return isinstance(other, Case) and self._values == other._values

    def __str__(self):
        return ", ".join(f"{k}={v!r}" for k, v in self._values.items())

    def __repr__(self):
        return f"Case({self})"

    def replace(self, name: str, value) -> Case:
        return Case({**self._values, name: value})


@dataclass(frozen=True)
class SearchSpace:
    """Where a hunt looks: ``dimensions`` maps each argument of the criterion to its :class:`Ints`,
    :class:`Floats` or :class:`Choice`. Shrinking tries the dimensions in this order: put the ones whose
    simplification matters most (samples, dimension) first."""

    dimensions: Mapping

    def __post_init__(self):
        if not isinstance(self.dimensions, Mapping) or not self.dimensions:
            raise ValueError(f"dimensions must be a non-empty mapping of names to Ints, Floats or Choice; "
                             f"got {self.dimensions!r}.")
        for name, dim in self.dimensions.items():
            if not (isinstance(name, str) and name.isidentifier()):
                raise ValueError(f"dimensions: each name must be a Python identifier (a keyword of the criterion); "
                                 f"got {name!r}.")
            if not isinstance(dim, (Ints, Floats, Choice)):
                raise ValueError(f"dimensions[{name!r}] must be Ints, Floats or Choice; got {dim!r}.")
            dim.check(f"dimensions[{name!r}]")
        object.__setattr__(self, "dimensions", dict(self.dimensions))

    def draw(self, rng) -> Case:
        return Case({name: dim.draw(rng) for name, dim in self.dimensions.items()})

    def simpler(self, case: Case) -> Iterator[Case]:
        """Cases one step simpler than ``case`` in one dimension, in the dimensions' order."""
        for name, dim in self.dimensions.items():
            for value in dim.simpler(case[name]):
                yield case.replace(name, value)

    def describe(self) -> dict:
        """Each dimension's range or choices, as JSON-friendly text."""
        return {name: (f"{dim.low}..{dim.high}" + (" (log)" if getattr(dim, "log", False) else "")
                       if not isinstance(dim, Choice) else list(dim.values))
                for name, dim in self.dimensions.items()}


@dataclass(frozen=True)
class Found:
    """A counterexample: the ``case`` the random search drew, its ``shrunk`` form (the simplest failing case
    the shrinker reached), the criterion's ``why`` on it, and a one-line ``reproducer``."""

    case: Case
    shrunk: Case
    why: str
    reproducer: str


@dataclass(frozen=True)
class HuntResult:
    """What a hunt did: ``cases`` (criterion calls, shrinking included), ``drawn`` (random cases among them),
    ``undecided`` (calls the criterion could not decide), the ``counterexamples`` (:class:`Found`), ``budget``,
    ``seed`` and whether the budget ran out (``exhausted``)."""

    cases: int
    drawn: int
    undecided: int
    counterexamples: tuple
    budget: int
    seed: int
    exhausted: bool

    @property
    def found(self) -> int:
        return len(self.counterexamples)


def _verdict(outcome) -> tuple:
    """(holds, why) of a criterion's answer: True / False / None, or an object with ``holds`` and ``why``."""
    holds = getattr(outcome, "holds", outcome)
    if holds not in (True, False, None):
        raise TypeError(f"a hunt's criterion returns True, False, None or an outcome with .holds; got {outcome!r}.")
    return holds, getattr(outcome, "why", "")


def default_reproducer(criterion: Callable, case: Case) -> str:
    """A Python one-liner calling a module-level ``criterion`` on ``case``."""
    name, module = getattr(criterion, "__qualname__", "criterion"), getattr(criterion, "__module__", None)
    if module and "<" not in name:
        return f'python -c "from {module} import {name}; print({name}({case}))"'
    return f"{name}({case})"


def hunt(criterion: Callable, space: SearchSpace, *, budget: int = 100, seed: int = 0, max_found: int = 3,
         reproducer: Callable | None = None) -> HuntResult:
    """Search ``space`` for cases where ``criterion`` fails.

    Args:
        criterion: called with a case's values as keyword arguments; returns True (holds), False (a
            counterexample), None (undecided), or an object with those in ``holds`` and a sentence in ``why``
            (as the report's criteria do). A case on which it raises one of ``NOT_JUDGED`` (non-separable
            data, an uncertified reference, a failed solve) is undecided; any other exception ends the hunt.
        space: the :class:`SearchSpace` to draw from.
        budget: the most criterion calls, drawing and shrinking together.
        seed: the random generator's seed: the same seed and budget give the same hunt.
        max_found: stop after this many distinct (shrunk) counterexamples.
        reproducer: ``reproducer(case) -> str``, one line that reruns a case; default
            :func:`default_reproducer`.

    Returns:
        A :class:`HuntResult`.

    Raises:
        ValueError: a bad ``space``, ``budget``, ``seed`` or ``max_found``.
    """
    if not isinstance(space, SearchSpace):
        raise ValueError(f"space must be a flowsim SearchSpace; got {type(space).__name__}.")
    if not callable(criterion):
        raise ValueError(f"criterion must be callable (case values as keywords -> outcome); got {criterion!r}.")
    for name, value, least in (("budget", budget, 1), ("seed", seed, 0), ("max_found", max_found, 1)):
        if not is_whole(value, least):
            raise ValueError(f"{name} must be a whole number >= {least}; got {value!r}.")
    write = reproducer or (lambda case: default_reproducer(criterion, case))
    search = _Search(criterion, space, budget)
    rng = np.random.default_rng(seed)
    found, drawn, repeats = {}, 0, 0
    while search.left() and len(found) < max_found and repeats < 100:  # 100 repeats in a row: the space is spent
        case = space.draw(rng)
        if case in search.seen:
            repeats += 1
            continue
        repeats, drawn = 0, drawn + 1
        if search.judge(case)[0] is False:
            shrunk = search.shrink(case)
            found.setdefault(shrunk, Found(case, shrunk, search.seen[shrunk][1], write(shrunk)))
    return HuntResult(len(search.seen), drawn, sum(h is None for h, _ in search.seen.values()), tuple(found.values()),
                      budget, seed, not search.left())


class _Search:
    """The criterion's answers so far (each case asked once), within ``budget`` calls."""

    def __init__(self, criterion, space, budget):
        self.criterion, self.space, self.budget = criterion, space, budget
        self.seen: dict = {}

    def left(self) -> bool:
        return len(self.seen) < self.budget

    def judge(self, case: Case) -> tuple:
        if case not in self.seen:
            try:
                self.seen[case] = _verdict(self.criterion(**case))
            except NOT_JUDGED as err:
                self.seen[case] = (None, f"not judged: {type(err).__name__}: {' '.join(str(err).split())}")
        return self.seen[case]

    def shrink(self, case: Case) -> Case:
        """Greedy: take the first simpler case that still fails, until none does or the budget is spent. Each
        step lowers one dimension's complexity, the others kept: it ends."""
        shrinking = True
        while shrinking:
            shrinking = False
            for simpler in self.space.simpler(case):
                if simpler not in self.seen and not self.left():
                    return case
                if self.judge(simpler)[0] is False:
                    case, shrinking = simpler, True
                    break
        return case
