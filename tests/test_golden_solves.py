"""A fixed set of solves across every backend, clock, model and flow family, against numbers stored from the
code before a change of the engine (``tests/data/golden_solves.json``): the engine's reorganisation must
leave every result as it was.

The stored numbers are compared at ``GOLDEN_RTOL`` (1e-7 relative, 1e-12 absolute on beta; the event and
end times to 1e-7): the solves run at rtol 1e-10, so a change in what is computed moves results far above
this, while another CPU's or library version's last-bit differences, which can flip one accepted step, stay
below it. ``FLOWSIM_GOLDEN_RTOL=1e-12`` checks the exact agreement a reorganisation promises on the machine
that wrote the numbers. ``python tests/test_golden_solves.py`` writes them anew (after a deliberate
change of results, said in the CHANGELOG)."""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import flowsim as fs

STORED = Path(__file__).parent / "data" / "golden_solves.json"
GOLDEN_RTOL = float(os.environ.get("FLOWSIM_GOLDEN_RTOL", "1e-7"))

DATA = {
    "three": fs.Dataset([[1.0, 2.0, 3.0]], [1]),
    "mixed": fs.Dataset([[1.0, 0.5, -0.2], [0.3, 1.2, 0.4], [-0.8, -0.4, 0.1], [0.2, -1.0, 0.9]], [1, 1, -1, -1]),
}
MODELS = {
    "linear": lambda: fs.Linear(),
    "product2": lambda: fs.DiagonalNet(2),
    "tied2": lambda: fs.DiagonalNet(2, "tied"),
    "difference2": lambda: fs.DiagonalNet(2, "difference"),
    "product3": lambda: fs.DiagonalNet(3),
    "own": lambda: fs.Parametrization("w1*w2**2", 2, lambda a, b: a * b**2),
}
FLOWS = {
    "gd": lambda: fs.GD(),
    "sam2": lambda: fs.SAM(0.05),
    "saminf": lambda: fs.SAM(0.05, float("inf")),
    "sam3": lambda: fs.SAM(0.05, 3),
    "usam": lambda: fs.USAM(0.05),
    "asam": lambda: fs.ASAM(0.05),
    "steepest3": lambda: fs.SteepestDescent(3),
    "normalized": lambda: fs.NormalizedGD(),
    "sign": lambda: fs.SignFlow(),
    "adam": lambda: fs.AdamProxy(),
}


def _cases():
    """(name, data, model, flow, init, options): every flow on two models, every backend x clock on GD and
    l2-SAM, the models on their own, long horizons on the defaults."""
    cases = []
    for flow in FLOWS:
        for model in ("product2", "linear"):
            cases.append((f"{flow}-{model}", "mixed", model, flow, 0.1, {"t1": 1e8}))
    backends = ["diffrax:Tsit5", "diffrax:Dopri5", "diffrax:Dopri8", "diffrax:Kvaerno5", "scipy:RK45", "scipy:DOP853",
                "scipy:Radau", "scipy:BDF", "scipy:LSODA"]
    for backend in backends:
        for clock in ("log_time", "tau"):
            for flow in ("gd", "sam2"):
                cases.append((f"{flow}-{backend}-{clock}", "mixed", "product2", flow, 0.1,
                              {"t1": 1e6, "backend": backend, "clock": clock}))
    for model in MODELS:
        cases.append((f"gd-{model}-long", "mixed", model, "gd", 0.1, {"t1": 1e100, "track": ("magnitude",)}))
        cases.append((f"sam2-{model}-long", "three", model, "sam2", 0.05, {"t1": 1e100, "track": ("magnitude",)}))
    cases.append(("gd-product2-deep-time", "three", "product2", "gd", 0.05, {"log10_t1": 1e6}))
    cases.append(("saminf-product3-long", "three", "product3", "saminf", 0.3, {"t1": 1e30, "track": ("magnitude",)}))
    return cases


CASES = _cases()


def _run(case):
    name, data, model, flow, init, options = case
    sol = fs.solve(fs.derive(MODELS[model](), "logistic", FLOWS[flow]()), DATA[data], init, rtol=1e-10, saves=24,
                   throw=False, **options)
    middle = len(sol.log10_t) // 2
    return {"status": sol.status, "rows": len(sol.log10_t), "log10_t_end": float(sol.log10_t[-1]),
            "beta_end": sol.beta[-1].tolist(), "beta_middle": sol.beta[middle].tolist(),
            "events": [float(e["log10_t"]) for e in sol.events if "log10_t" in e]}


def test_the_set_spans_every_backend_clock_model_and_flow():
    assert len(CASES) >= 50 and len({c[0] for c in CASES}) == len(CASES)
    options = [c[5] for c in CASES]
    assert {o.get("clock") for o in options} >= {"log_time", "tau", None}
    assert {c[2] for c in CASES} == set(MODELS) and {c[3] for c in CASES} == set(FLOWS)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_solve_gives_the_stored_result(case):
    stored = json.loads(STORED.read_text())[case[0]]
    got = _run(case)
    assert (got["status"], got["rows"]) == (stored["status"], stored["rows"]), (got, stored)
    assert math.isclose(got["log10_t_end"], stored["log10_t_end"], rel_tol=GOLDEN_RTOL, abs_tol=1e-12)
    for key in ("beta_end", "beta_middle"):
        np.testing.assert_allclose(got[key], stored[key], rtol=GOLDEN_RTOL, atol=1e-12, err_msg=key)
    assert len(got["events"]) == len(stored["events"]), (got["events"], stored["events"])
    np.testing.assert_allclose(got["events"], stored["events"], rtol=GOLDEN_RTOL, atol=1e-12)


if __name__ == "__main__":  # write the stored numbers from the code as it is
    results = {}
    for case in CASES:
        results[case[0]] = _run(case)
        print(case[0], results[case[0]]["status"], results[case[0]]["rows"], file=sys.stderr)
    STORED.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(results)} results to {STORED}", file=sys.stderr)
