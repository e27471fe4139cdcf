"""Random discontinuous flows on random data: flowsim follows their sliding modes, and every backend agrees.

Each seed draws a model (linear, or a product / tied / difference network of depth 2-4), a flow whose field jumps
with the sign of the gradient (l_inf-SAM, the sign flow, steepest descent in l_inf) or with its direction (l3-SAM),
separable Gaussian data with n in 2..30, d in 2..6, and an init scale in [0.01, 1]; it is solved to t1 = 1e30 on
backend="auto", scipy:LSODA and scipy:Radau. A case passes when no backend ends on a "cannot follow" status
(chattering, failed, max_steps) and all three end with the same status and the same direction of beta (1e-6).
The slow set runs 200 seeds and allows at most 2% "cannot follow" endings (each with a message that names its
reason); CI runs the first 40.
"""

import math
import warnings

import numpy as np
import pytest

import flowsim as fs

BACKENDS = ("auto", "scipy:LSODA", "scipy:Radau")
#: endings where flowsim could not follow the flow
CANNOT_FOLLOW = {"chattering", "failed", "max_steps"}
SEEDS = 200
IN_CI = 40


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
    spread = max(float(np.abs(a[1] - b[1]).max()) for a in ends.values() for b in ends.values())
    return {"stuck": stuck, "agree": len(statuses) == 1 and spread <= 1e-6, "statuses": statuses, "spread": spread,
            "case": random_case(seed)}


@pytest.mark.parametrize("seed", range(IN_CI))
def test_a_random_discontinuous_flow_is_followed_alike_on_every_backend(seed):
    result = judged(seed)
    assert not result["stuck"], result
    assert result["agree"], result


@pytest.mark.slow
def test_at_most_two_percent_of_200_random_cases_cannot_be_followed():
    results = [judged(seed) for seed in range(SEEDS)]
    stuck = [r for r in results if r["stuck"]]
    for r in stuck:
        print(r["case"], r["stuck"])
    assert len(stuck) <= 0.02 * SEEDS
    assert all(r["agree"] for r in results if not r["stuck"]), [r for r in results if not r["agree"]]
