"""Random discontinuous flows on random data: flowsim follows their sliding modes, and every backend agrees.

Each seed draws a model (linear, or a product / tied / difference network of depth 2-4), a flow whose field jumps
with the sign of the gradient (l_inf-SAM, the sign flow, steepest descent in l_inf) or is not Lipschitz where a
component of it vanishes (l3-SAM),
separable Gaussian data with n in 2..30, d in 2..6, and an init scale in [0.01, 1]; it is solved to t1 = 1e30 on
backend="auto", scipy:LSODA and scipy:Radau. A case passes when no backend ends on a "cannot follow" status
(chattering, failed, max_steps) and all three end with the same status and the same direction of beta (1e-6).
All 200 seeds are in the slow set; CI's slow step runs the first 40. The target is at most 2% "cannot follow"
endings, each with a message that names its reason; the seeds that miss today are listed in ``KNOWN`` with what ends
them (marked xfail and not run). All 200 were re-run on the code of the held-plane and plane-probe changes
(tests/test_held_planes.py), one process each, 196 followed alike and 4 not (2.0%): l_inf-SAM (3: a slide across
a loss gap of e^32 that float64 cannot resolve, Zeno switching past a junction, a three-surface junction whose
control is not found) and l3-SAM on LSODA near a surface g_k = 0 (1).
"""

import math
import warnings

import numpy as np
import pytest

import flowsim as fs

BACKENDS = ("auto", "scipy:LSODA", "scipy:Radau")
#: endings where flowsim could not follow the flow
CANNOT_FOLLOW = {"chattering", "failed", "max_steps"}
#: endings with no direction to compare: beta fell below the collapse floor, where its direction is rounding
NO_DIRECTION = {"collapsed"}
SEEDS = 200
IN_CI = 40
#: seeds flowsim cannot follow yet, each with what ends it (the open part of the sliding work)
KNOWN = {
    15: "l_inf-SAM, depth-4 difference: past its junction (one continuation since the junction rule) coordinate 1 "
        "slides from log10 t = 1.2 with one side's loss e^18 to e^31 above the other's; the multilinear control "
        "(1 + s = 3e-14 at log10 t = 12) loses the field's digits, the state drifts off the surface and BDF and Radau "
        "fail (a step below float spacing), LSODA spends its step budget, near log10 t = 12.6, each saying why "
        "(docs/theory.md 3b; test_a_slide_whose_control_reaches_float64s_limit_says_so)",
    33: "l3-SAM, depth-4 tied: LSODA spends its steps on the stiff manifold next to g_2 = 0 at log10 t = 0.68, where "
        "it crosses the surface (its offset x* below the solver's resolution in x, its stiffness unbounded): "
        "LSODA's solution chatters across g_2 = 0 at steps of 1e-6 ('chattering'; with more steps it passes after "
        "25,000, over the budget); auto and Radau follow it (tests/test_lp_sam_held_limit.py) and converge at a "
        "degenerate minimum of the loss (w_1 -> 0) at log10 t = 3.5",
    96: "l_inf-SAM, depth-4 difference: more than 10,000 switches on auto and LSODA (Zeno), past the switch that was "
        "'6 switching surfaces at once' (none of the six coordinates was on its surface r_j = 0: their entries' G were "
        "small with their factors); Radau still running after 15 minutes",
    110: "l_inf-SAM, depth-3 difference: more than 10,000 switches on all three backends (Zeno) at a junction of three "
         "coordinates whose attracting control lies on the box's edge, s = (-1, 0.99994, -1) (least squares; Newton's "
         "method from 0 does not find it; the search found no continuation there before the plane-probe changes)",
}


def random_case(seed):
    """(model, flow, data, init scale) of one seed."""
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(1, 5))
    form = ("product", "tied", "difference")[int(rng.integers(3))]
    model = fs.Linear() if depth == 1 else fs.DiagonalNet(depth, form)
    rho = float(rng.uniform(0.01, 0.5))
    kind = int(rng.integers(4))
    flow = (fs.SAM(rho, math.inf), fs.SignFlow(), fs.SteepestDescent(math.inf), fs.SAM(rho, 3))[kind]
    n, d = int(rng.integers(2, 31)), int(rng.integers(2, 7))
    X = rng.normal(size=(n, d))
    y = np.sign(X @ rng.normal(size=d))
    y[y == 0] = 1
    return model, flow, fs.Dataset(X, y), float(10 ** rng.uniform(-2, 0))


def ending(seed, backend):
    """(status, unit direction of the last beta, message) of one seed on one backend."""
    model, flow, data, alpha = random_case(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        sol = fs.solve(fs.derive(model, "logistic", flow), data, alpha, t1=1e30, backend=backend, throw=False)
    beta = sol.beta[-1]
    size = np.linalg.norm(beta)
    return str(sol.status), beta / size if size > 0 else beta, sol.message


def judged(seed):
    """The endings of one seed on every backend, and what (if anything) is wrong with them."""
    ends = {backend: ending(seed, backend) for backend in BACKENDS}
    stuck = {b: e[2] for b, e in ends.items() if e[0] in CANNOT_FOLLOW}
    statuses = {e[0] for e in ends.values()}
    spread = 0.0 if statuses <= NO_DIRECTION else max(
        float(np.abs(a[1] - b[1]).max()) for a in ends.values() for b in ends.values())
    return {"stuck": stuck, "agree": len(statuses) == 1 and spread <= 1e-6, "statuses": statuses, "spread": spread,
            "case": random_case(seed)}


def _seeds(seeds):
    # not run: one of them (Zeno switching) takes minutes to say so
    return [pytest.param(seed, marks=pytest.mark.xfail(run=False, reason=KNOWN[seed])) if seed in KNOWN else seed
            for seed in seeds]


def _check(seed):
    result = judged(seed)
    assert not result["stuck"], result
    assert result["agree"], result


@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds(range(IN_CI)))
def test_random_slides_first_cases_are_followed_alike_on_every_backend(seed):
    """The first seeds: the CI's slow step runs these."""
    _check(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds(range(IN_CI, SEEDS)))
def test_random_slides_other_cases_are_followed_alike_on_every_backend(seed):
    _check(seed)


@pytest.mark.slow
def test_a_slide_whose_control_reaches_float64s_limit_says_so():
    """Case 15 (in ``KNOWN``): its run fails late in a slide whose one-sided losses differ by e^32; the message names
    the surface, the control's distance from -1 (rounding) and the gap, not only the solver's step-size failure."""
    status, _, message = ending(15, "scipy:Radau")
    assert status == "failed", message
    assert "sliding on the switching surface of coordinate 1" in message and "float64's rounding" in message, message
    gap = float(message.split("log scales differ by ")[1].split(",")[0])
    assert gap > 30, message
