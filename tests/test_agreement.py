"""Random small cases through two backends (issue 12): same status class, the same end state where both
end normally with the same status, no exception, no NaN, no case past 30 s.

The default run draws 100 cases on LSODA and Radau (no compile per shape); the ``slow`` runs draw 1,000
on LSODA and BDF, 40 on LSODA and ``auto`` (diffrax Tsit5, which hands stiff plateaus over to BDF), and
100 on LSODA, scipy DOP853 and diffrax Tsit5. A bare explicit method is stability-limited on stiff
plateaus and can run out of steps where the implicit ones finish: that is accepted only with its
message saying so (steps at the stability bound, measured). End states agree to 1e-5 relative
(rtol = 1e-8 per step, horizons up to 1e100)."""

import os
import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import flowsim as fs

FLOWS = {"GD": lambda rho: fs.GD(), "l2-SAM": lambda rho: fs.SAM(rho, 2), "linf-SAM": lambda rho: fs.SAM(rho, float("inf")),
         "l3-SAM": lambda rho: fs.SAM(rho, 3), "USAM": lambda rho: fs.USAM(rho)}


@st.composite
def cases(draw):
    form = draw(st.sampled_from(["product", "tied", "difference"]))
    depth = draw(st.integers(1, 4))
    loss = draw(st.sampled_from(["logistic", "exponential"]))
    flow = FLOWS[draw(st.sampled_from(sorted(FLOWS)))](draw(st.floats(0.0, 0.5)))
    alpha = draw(st.sampled_from([-1.0, 1.0])) * 10 ** draw(st.floats(-3.0, 0.0))
    n, d = draw(st.integers(1, 10)), draw(st.integers(1, 6))
    r = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    while True:
        w, X = r.normal(size=d), r.normal(size=(n, d))
        if np.min(np.abs(X @ w)) > 0.05:
            break
    system = fs.derive(fs.DiagonalNet(depth, form), loss, flow)
    return system, fs.Dataset(X, np.sign(X @ w)), alpha, draw(st.floats(0.0, 100.0))


def _agree(case, backends):
    system, data, alpha, log10_t1 = case
    ends = []
    for backend in backends:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            sol = fs.solve(system, data, alpha, log10_t1=log10_t1, backend=backend, throw=False)
            # the bound on any one case (a guard against hangs: CI machines are slower, and no case
            # here takes over 10 s on the development machine)
            assert time.perf_counter() - start < 30.0, (backend, sol)
        assert np.all(np.isfinite(sol.params)), (backend, sol)
        ends.append(sol)
    # an explicit method whose steps sit at its stability bound may run out of them where an implicit one
    # finishes: allowed only when it says so (the "or say why not" of every backend's answer)
    ends = [s for s in ends if not (s.status == "max_steps" and "limited by stability" in s.message)]
    classes = {s.ok for s in ends}
    assert len(classes) == 1, [(s.config["backend"], s.status, s.message) for s in ends]
    first = ends[0]
    for sol in ends[1:]:
        if sol.ok and sol.status == first.status == "collapsed":
            # the end state is at the floor, resolved only to atol there (1e-3 of it at the default floor,
            # 1000 atol): the collapse time is known to that over the decay rate of log|theta| per decade
            # (global errors are a multiple of the local tolerance: 100 atol); the way there is compared
            # save by save, like any other trajectory
            size = np.abs(first.params[-1]).max()
            rate = abs(np.log(np.abs(first.params[-2]).max() / size)) / max(np.diff(first.log10_t[-2:])[0], 1e-12)
            tol = max(1e-4, 100 * ATOL / size / max(rate, 1e-300))
            assert sol.log10_t[-1] == pytest.approx(first.log10_t[-1], abs=tol)
            k = min(len(sol.log10_t), len(first.log10_t)) - 2  # the last save both made before the floor
            if k >= 0 and sol.log10_t[k] == first.log10_t[k]:  # near the floor the state is atol-limited
                np.testing.assert_allclose(sol.params[k], first.params[k], rtol=1e-5, atol=100 * ATOL)
        elif sol.ok and sol.status == first.status and sol.status != "blew_up":
            size = max(np.abs(first.beta[-1]).max(), 1e-12)
            np.testing.assert_allclose(sol.beta[-1], first.beta[-1], rtol=1e-5, atol=1e-5 * size,
                                       err_msg=f"{system}, {sol.status}, {first.config['backend']} vs {sol.config['backend']}")


ATOL = 1e-10  # solve's default, which the cases use

QUICK = settings(max_examples=int(os.environ.get("FLOWSIM_AGREEMENT_EXAMPLES", 100)), deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow], phases=[Phase.generate])


@QUICK
@given(cases())
def test_random_cases_agree_on_scipy_backends(case):
    _agree(case, ["scipy:LSODA", "scipy:Radau"])


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("FLOWSIM_AGREEMENT_SLOW_EXAMPLES", 1000)), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow], phases=[Phase.generate])
@given(cases())
def test_random_cases_agree_on_every_family(case):
    _agree(case, ["scipy:LSODA", "scipy:BDF"])


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("FLOWSIM_AGREEMENT_AUTO_EXAMPLES", 40)), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow], phases=[Phase.generate])
@given(cases())
def test_random_cases_agree_with_auto(case):
    """The default backend (diffrax Tsit5, handing stiff plateaus over to scipy BDF) against LSODA: the
    explicit path through the same checks (one compile per shape, hence fewer examples)."""
    _agree(case, ["scipy:LSODA", "auto"])


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("FLOWSIM_AGREEMENT_EXPLICIT_EXAMPLES", 100)), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow], phases=[Phase.generate])
@given(cases())
def test_random_cases_agree_on_explicit_backends(case):
    """scipy DOP853 and diffrax Tsit5 against LSODA: the same status class and end state, or max_steps
    with the measured reason (the steps at the method's stability bound)."""
    _agree(case, ["scipy:LSODA", "scipy:DOP853", "diffrax:Tsit5"])


@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:DOP853", "scipy:Radau", "scipy:LSODA"])
def test_stats_mean_the_same_on_every_backend(backend):
    """The keys of ``Solution.stats`` are documented per backend: ``accepted`` everywhere, ``steps`` as
    ``max_steps`` counts them (tried on diffrax, accepted on scipy)."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1))
    sol = fs.solve(system, fs.Dataset([[1.0, 2.0, 3.0]], [1]), 0.05, t1=1e30, backend=backend)
    st = sol.stats
    assert {"steps", "accepted", "segments", "switches", "wall_s"} <= set(st) and st["accepted"] > 10
    if backend.startswith("diffrax"):
        assert st["steps"] == st["accepted"] + st["rejected"] and st["rejected"] > 0
    else:
        assert st["steps"] == st["accepted"] and st["nfev"] >= st["accepted"]
        assert ("njev" in st and "nlu" in st) == (backend != "scipy:DOP853")
        if backend == "scipy:Radau":  # (LSODA stays on its non-stiff method here: no Jacobian)
            assert st["nlu"] >= st["njev"] > 0


@pytest.mark.parametrize("init", [1e-3, 1e-6])
def test_small_inits_are_resolved_to_rtol_by_default(init):
    """The default atol follows the init's size: with atol 1e-10 a run from init 1e-6 was 1.6e-5 off a tight
    reference at rtol 1e-8 (the state near atol is resolved to atol/size only); now ~6e-8."""
    data = fs.Dataset([[1.0, 2.0, 3.0]], [1])
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    tight = fs.solve(system, data, init, t1=1e100, saves=50, rtol=1e-12, atol=1e-30, backend="scipy:DOP853")
    sol = fs.solve(system, data, init, t1=1e100, saves=50)
    assert sol.config["atol"] == min(1e-10, 1e-8 * init)
    assert np.max(np.abs(sol.params - tight.params) / np.abs(tight.params)) < 3e-7


def test_a_collapse_from_below_the_old_floor_is_a_collapse():
    """l2-SAM from init 1e-8 (below 1000 x the old fixed atol) reached 0 by arrival and said 'stalled', from 1e-6
    'collapsed': the same collapse, now one status at every init."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1))
    data = fs.Dataset([[1.0, 2.0, 3.0]], [1])
    ends = {a: fs.solve(system, data, a, t1=1e100) for a in (1e-6, 1e-8, 1e-9)}
    assert {sol.status for sol in ends.values()} == {"collapsed"}
    # the collapse time scales with the init (finite-time arrival at 0: t ~ alpha / rho-scaled rate)
    np.testing.assert_allclose(np.diff([sol.log10_t[-1] for sol in ends.values()]), [-2.0, -1.0], atol=0.01)


def test_a_sign_flow_sees_a_switch_two_crossings_would_undo_in_one_step():
    """SignFlow on a depth-3 product: its field is constant between switches, so Tsit5 and Radau took steps so long
    that w[1, 0] and then w[2, 0] crossed 0 within one, flipping sign(G) of the other layers twice: sigma_k G_k was
    positive again at the step's end, the switch went unseen, and both said "completed" at beta_1 = -0.475 where
    DOP853, LSODA and BDF (and sign descent by hand) reach -1.016. Every backend now agrees with the hand loop."""
    X = np.array([[0.18905338179353307, -0.5227484414807474, -0.41306354339189344],
                  [-2.4414673826398556, 1.799707382720902, 1.1441658720372287],
                  [-0.32542283686782436, 0.7738065867276614, 0.28121066979764925]])
    data = fs.Dataset(X, [-1, 1, 1])
    init = np.array([[0.32170393950010645, 0.43416219092835767, 0.3775247235201223],
                     [0.2951904434384941, 0.43682573417131254, 0.2908151635057126],
                     [0.599503745829285, 0.5074108208139387, 0.3415653764179259]])
    system = fs.derive(fs.DiagonalNet(3, "product"), "exponential", fs.SignFlow(lr=0.5, decay=1.0))
    # sign descent in the schedule clock s = 0.5 log(1 + t), by Euler steps of 1e-4 (error O(step))
    w, h = init.copy(), 1e-4
    for _ in range(int(round(0.5 * np.log(11.0) / h))):
        q = np.exp(-data.z @ np.prod(w, axis=0))
        dbeta = -(data.z * q[:, None]).mean(axis=0)
        w = w - h * np.sign(dbeta * np.prod(w, axis=0) / w)  # dL/dw_k = dL/dbeta * prod of the other layers
    for backend in ("auto", "diffrax:Tsit5", "scipy:Radau", "scipy:DOP853", "scipy:LSODA", "scipy:BDF"):
        sol = fs.solve(system, data, init, t1=10.0, backend=backend)
        assert sol.status == "completed" and sol.stats["switches"] >= 1, backend
        np.testing.assert_allclose(sol.beta[-1], np.prod(w, axis=0), atol=2e-3, err_msg=backend)
    # an entry the crossing event has just stopped at (w = -1e-15 here) is not watched again: watched, Radau and
    # BDF ended 10,000 segments later, "chattering", where LSODA and Tsit5 completed
    one = fs.derive(fs.DiagonalNet(3, "tied"), "logistic", fs.SAM(0.3870177080088453, np.inf))
    data = fs.Dataset(np.array([[-0.53707195], [0.17237112], [-1.32358703]]), [-1, 1, -1])
    ends = [fs.solve(one, data, -1.0, log10_t1=0.387, backend=b) for b in ("scipy:LSODA", "scipy:Radau", "scipy:BDF")]
    assert max(s.stats["segments"] for s in ends) <= 10 and {s.status for s in ends} == {"completed"}
    np.testing.assert_allclose([s.beta[-1, 0] for s in ends], ends[0].beta[-1, 0], rtol=1e-5)
