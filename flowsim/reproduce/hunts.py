"""The conjecture hunts of the report: for a claim with a cheap per-case criterion, a search for counterexamples
(:func:`flowsim.theory.hunt.hunt`) over data, initialisation, rho and depth, and for each a hunt for a
deliberately false statement that must find one (the hunt's negative control).

Each criterion is a module-level function of the case's values, so a counterexample's reproducer is a Python
one-liner: ``python -c "from flowsim.reproduce.hunts import gd_converges_to_l2; print(gd_converges_to_l2(n=2, ...))"``.
The cases are solved with the SciPy backend: it compiles nothing, so a new data shape costs no JAX compile.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import flowsim as fs
from flowsim.theory.analysis import linf_sam_beta_at_tau
from flowsim.theory.hunt import Choice, Floats, HuntResult, Ints, SearchSpace, hunt

from ._claim import Control, Number, Outcome
from .criteria import converges_to, fates_match, ran

INF = float("inf")
BACKEND = "scipy:LSODA"


def _gaussian(n: int, d: int, seed: int) -> fs.Dataset:
    """Separable Gaussian data: n samples in d dimensions, labelled by a random direction w and pushed 0.3 along
    it (as the report's depth-1 claim draws them)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = np.where(X @ w >= 0, 1.0, -1.0)
    return fs.Dataset(X + 0.3 * y[:, None] * w / np.linalg.norm(w), y)


def _linear_limit(n, d, seed, alpha, rho, flow, want) -> Outcome:
    data = _gaussian(n, d, seed)
    refs = {"l1": fs.max_margin(data, 1), "l2": fs.max_margin(data, 2), "linf": fs.max_margin(data, INF)}
    method = fs.GD() if flow == "GD" else fs.SAM(rho, 2)
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", method), data, alpha, t1=1e100, backend=BACKEND, throw=False)
    return ran(sol, converges_to(sol, refs, want))


def gd_converges_to_l2(n: int, d: int, seed: int, alpha: float, rho: float, flow: str) -> Outcome:
    """Thm 3.1 on one case: at L = 1, GD or l2-SAM (``flow``) from alpha (1, ..., 1) on :func:`_gaussian` data
    converges in direction to the l2 max-margin (fs.verdict's fitted gap at t = 1e100), on any of these data: where
    another max-margin direction lies too near l2 for the run to tell them apart, or the run passes it on its way,
    the verdict is undecided."""
    return _linear_limit(n, d, seed, alpha, rho, flow, "l2")


def gd_converges_to_l1(n: int, d: int, seed: int, alpha: float, rho: float, flow: str) -> Outcome:
    """The false statement of the negative control: at L = 1 the same flows converge to the l1 max-margin."""
    return _linear_limit(n, d, seed, alpha, rho, flow, "l1")


def _closed_form_beta(mu, alpha, rho: float, depth: int, tau: float) -> np.ndarray:
    """beta at the clock ``tau`` under l_inf-SAM on one example (the coordinates decouple, dw_j/dtau = mu_j (w_j -
    rho)^(L-1)): at L = 2 w_j = rho + (alpha_j - rho) e^(mu_j tau), staying at 0 once it reaches it."""
    if depth >= 3:
        return linf_sam_beta_at_tau(mu, alpha, rho, depth, tau)
    with np.errstate(over="ignore", invalid="ignore"):  # tau ~ t once every coordinate collapsed: e^(mu tau) is inf
        w = np.where(alpha == rho, rho, rho + (alpha - rho) * np.exp(mu * tau))
    return np.maximum(w, 0.0) ** 2


def _linf_fates(depth, mu_2, alpha_1, alpha_2, rho, predicted_from) -> Outcome:
    """The fates predicted from ``predicted_from(alpha, rho)`` against the run's; undecided where the closed form at
    the run's last tau has not reached the fates Thm 3.2 gives it (t = 1e30 is tau ~ 6 at L = 2: a leader that
    overtakes later, or a slow collapse, is not yet seen there)."""
    mu, alpha = np.array([1.0, mu_2]), np.array([alpha_1, alpha_2])
    system = fs.derive(fs.DiagonalNet(depth), "logistic", fs.SAM(rho, INF))
    # odd L: w_j = rho is semi-stable (attracting from below): the error must stay below atol 1e-14
    sol = fs.solve(system, fs.Dataset(mu[None], [1]), alpha, t1=1e30, backend=BACKEND, throw=False,
                   atol=1e-14 if depth % 2 else 1e-10)
    if not sol.ok:
        return Outcome(None, f"the run ended {sol.status!r}: {sol.message}")
    theory = fs.linf_sam_prediction(mu, alpha, rho, depth)
    reached = fates_match(theory, _closed_form_beta(mu, alpha, rho, depth, sol.tau[-1]), alpha, rho, depth)
    if reached.holds is not True:
        return Outcome(None, f"the horizon is short: at the run's last tau = {sol.tau[-1]:.4g} the closed form has not "
                             f"reached Thm 3.2's fates ({reached.why})")
    prediction = fs.linf_sam_prediction(mu, predicted_from(alpha, rho), rho, depth)
    return fates_match(prediction, sol.beta[-1], alpha, rho, depth)


def linf_fates(depth: int, mu_2: float, alpha_1: float, alpha_2: float, rho: float) -> Outcome:
    """Thm 3.2 / Cor 3.5 on one example mu = (1, mu_2): l_inf-SAM at ``depth`` from (alpha_1, alpha_2) gives each
    coordinate its predicted fate and the predicted limit by t = 1e30 (undecided when the run ends early)."""
    return _linf_fates(depth, mu_2, alpha_1, alpha_2, rho, lambda alpha, rho: alpha)


def linf_fates_reversed(depth: int, mu_2: float, alpha_1: float, alpha_2: float, rho: float) -> Outcome:
    """The false statement of the negative control: the same, with Thm 3.2's threshold reversed (the fates
    predicted from alpha mirrored about rho: a coordinate starting above rho collapses, one below it grows)."""
    return _linf_fates(depth, mu_2, alpha_1, alpha_2, rho, lambda alpha, rho: np.clip(2 * rho - alpha, 1e-3, None))


@dataclass(frozen=True)
class Hunt:
    """A claim's hunt: the ``statement`` searched, its ``criterion`` over ``space``, the ``budget`` (criterion
    calls) of the full report and of ``--quick``, and the ``control``: the id of the hunt for a false statement
    that must find a counterexample (None for a control itself)."""

    claim: str
    statement: str
    criterion: Callable
    space: SearchSpace
    budget: int
    quick_budget: int
    control: str | None = None

    def run(self, budget: int | None = None, seed: int = 0) -> Searched:
        start = time.perf_counter()
        result = hunt(self.criterion, self.space, budget=self.budget if budget is None else budget, seed=seed,
                      reproducer=self.reproducer)
        return Searched(self, result, time.perf_counter() - start)

    def reproducer(self, case) -> str:
        name = self.criterion.__name__
        return f'python -c "from {__name__} import {name}; print({name}({case}).why)"'


@dataclass(frozen=True)
class Searched:
    """A hunt that ran: the :class:`Hunt`, its :class:`~flowsim.theory.hunt.HuntResult` and its wall time."""

    hunt: Hunt
    result: HuntResult
    seconds: float

    @property
    def summary(self) -> str:
        r = self.result
        return (f"searched for counterexamples to '{self.hunt.statement}': {r.cases} cases ({r.drawn} drawn, the rest "
                f"shrinking; {r.undecided} undecided), found {r.found}")

    def as_dict(self) -> dict:
        r = self.result
        return {"statement": self.hunt.statement, "cases": r.cases, "drawn": r.drawn, "undecided": r.undecided,
                "found": r.found, "budget": r.budget, "seed": r.seed, "exhausted": r.exhausted,
                "space": self.hunt.space.describe(), "wall_s": round(self.seconds, 2)}

    def counterexamples(self) -> list[dict]:
        return [{"found_by": "hunt", "statement": self.hunt.statement, "setting": str(k.shrunk), "verdict": "fails",
                 "why": k.why, "case": dict(k.case), "shrunk_case": dict(k.shrunk), "reproducer": k.reproducer}
                for k in self.result.counterexamples]


_LINEAR = SearchSpace({"n": Ints(2, 12), "d": Ints(2, 5), "seed": Ints(0, 999), "alpha": Floats(0.01, 1.0, log=True),
                       "rho": Floats(0.01, 0.3), "flow": Choice(("GD", "l2-SAM"))})
_LINF = SearchSpace({"depth": Choice((2, 3)), "mu_2": Floats(1.0, 3.0), "alpha_1": Floats(0.01, 0.5),
                     "alpha_2": Floats(0.01, 0.5), "rho": Floats(0.05, 0.2)})

HUNTS = {h.claim: h for h in (
    Hunt("000-thm3.1", "L = 1: GD and l2-SAM converge in direction to the l2 max-margin", gd_converges_to_l2, _LINEAR,
         budget=300, quick_budget=30, control="000-thm3.1-false-l1"),
    Hunt("000-thm3.1-false-l1", "L = 1: GD and l2-SAM converge in direction to the l1 max-margin",
         gd_converges_to_l1, _LINEAR, budget=30, quick_budget=10),
    Hunt("000-thm3.2", "l_inf-SAM on one example, L = 2 and 3: the fates of Thm 3.2 and the limit of Cor 3.5",
         linf_fates, _LINF, budget=400, quick_budget=40, control="000-thm3.2-false-reversed"),
    Hunt("000-thm3.2-false-reversed", "l_inf-SAM fates with Thm 3.2's thresholds reversed about rho",
         linf_fates_reversed, _LINF, budget=30, quick_budget=10),
)}


def check_claim(claim_id: str) -> Hunt:
    if claim_id not in HUNTS:
        raise ValueError(f"claim-id must be one with a hunt: {', '.join(HUNTS)}; got {claim_id!r}.")
    return HUNTS[claim_id]


#: the budget (criterion calls) of each claim's hunt in a report; None: each hunt's own default (its controls keep
#: theirs: they only need to find one counterexample)
BUDGET = contextvars.ContextVar("hunt_budget", default=None)


def search(claim_id: str, quick: bool) -> tuple[Searched, Control]:
    """The claim's hunt at the report's budget and, as a control, its hunt for a false statement: the control
    "holds" (and leaves the claim inconclusive) when it finds no counterexample."""
    claim_hunt = HUNTS[claim_id]
    budget = BUDGET.get() or (claim_hunt.quick_budget if quick else claim_hunt.budget)
    control_hunt = HUNTS[claim_hunt.control]
    control = control_hunt.run(control_hunt.quick_budget if quick else control_hunt.budget)
    r = control.result
    outcome = Outcome(r.found == 0, f"{r.cases} cases, found {r.found} counterexample(s)"
                      + "".join(f"; the simplest: {k.shrunk}: {k.why}" for k in r.counterexamples[:1]),
                      (Number("cases", r.cases, "1"), Number("found", r.found, "1"),
                       Number("wall_s", round(control.seconds, 2), "s")))
    return claim_hunt.run(budget), Control(f"a hunt for counterexamples to the false statement "
                                           f"'{control_hunt.statement}' must find one", outcome)
