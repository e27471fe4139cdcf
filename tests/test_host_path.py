"""The host side of a solve: the saves kept in blocks (``Records``), a kernel's outputs read back from one
vector, the tied system made once, and the log-loss of states asked again."""

import numpy as np
import pytest

import flowsim as fs
from flowsim._jax import jax, jnp
from flowsim.integrate.backends._diffrax import _packed, unpacked
from flowsim.integrate.balanced import reduction
from flowsim.integrate.records import Records
from flowsim.integrate.segment_args import SegmentArgs


class RowsReference:
    """What ``Records`` keeps, as a plain list of rows: the reference its blocks must read as."""

    def __init__(self):
        self.s, self.y = [], []

    def extend(self, s_values, y_values):
        self.s.extend(s_values)
        self.y.extend(list(np.asarray(y_values, dtype=float)))

    def rewind(self, keep):
        dropped = list(zip(self.s[keep:], self.y[keep:]))
        del self.s[keep:], self.y[keep:]
        return dropped


def _same(records, reference):
    assert len(records) == len(reference.s)
    s, y = records.arrays()
    assert s.tolist() == reference.s
    assert np.array_equal(y, np.array(reference.y).reshape(len(reference.s), -1))
    for i in list(range(len(records))) + [-1, -len(records)]:
        assert records.s_at(i) == reference.s[i]
        assert np.array_equal(records.y_at(i), reference.y[i])
        assert np.array_equal(records.theta_at(i), reference.y[i][:-1].reshape(2, 2))


def test_saves_kept_in_blocks_read_as_the_rows_given():
    """Blocks of several segments, single saves and an empty block; rewinds inside a block and across
    blocks; a clock swap; losses found once and kept through a rewind: each read as a list of rows reads."""
    rng = np.random.default_rng(0)
    losses_found = []

    def loss_of(states):
        losses_found.append(len(states))
        return [float(np.sum(t)) for t in states]

    records, reference = Records(loss_of, 2, 2), RowsReference()
    for m in (3, 0, 4, 1):
        s, y = sorted(rng.random(m).tolist()), rng.random((m, 5))
        records.extend(s, y)
        reference.extend(s, y)
    records.add(9.0, np.arange(5.0))
    reference.extend([9.0], [np.arange(5.0)])
    _same(records, reference)
    assert records.losses(2) == [float(np.sum(y[:-1])) for y in reference.y[2:]]
    dropped = records.rewind(5)  # inside the second block
    expected = reference.rewind(5)
    assert [s for s, _ in dropped] == [s for s, _ in expected]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(dropped, expected))
    _same(records, reference)
    assert records.known_losses() == [float(np.sum(y[:-1])) for y in reference.y]
    records.extend([10.0, 11.0], rng.random((2, 5)))
    reference.extend([10.0, 11.0], records.arrays()[1][-2:])
    assert records.losses(0)[:5] == records.known_losses()[:5] and losses_found == [9, 2]
    records.rewind(2)  # across blocks
    reference.rewind(2)
    _same(records, reference)

    class Swap:
        def for_implicit(self, s, y):
            return float(y[-1]), np.concatenate([y[:-1], [s]])

    records.hand_over(Swap())
    reference.s, reference.y = [float(y[-1]) for y in reference.y], [
        np.concatenate([y[:-1], [s]]) for s, y in zip(reference.s, reference.y)]
    _same(records, reference)
    with pytest.raises(IndexError):
        records.y_at(2)


def test_empty_records_read_as_no_saves():
    records = Records(lambda states: [], 1, 3)
    records.extend([], np.zeros((0, 4)))
    s, y = records.arrays()
    assert len(records) == 0 and s.shape == (0,) and y.shape == (0,)
    assert records.rewind(0) == []


def test_a_kernels_outputs_come_back_from_its_one_vector_exactly():
    """Saved times and states, the reached flags, the end, the event index (-1 too), the flags, the step
    counts, the targets reached and the two end losses: joined in one float64 vector on the device and read back
    by name, each exactly."""
    size, slots = 3, 4

    def run(y0, s0, s_max, args, u_targets, tol):
        s_t = jnp.array([0.5, 1.5, jnp.inf, jnp.inf])
        y_t = jnp.arange(slots * size, dtype=jnp.float64).reshape(slots, size) / 7.0
        ok = jnp.array([True, True, False, False])
        flags = (jnp.int32(-1), jnp.bool_(True), jnp.bool_(False))
        stats = (jnp.int32(16_383), jnp.int32(16_000), jnp.int32(383))
        return s_t, y_t, ok, jnp.float64(1.75), jnp.array([1e-300, -2.5, 1e300]), flags, stats

    def losses(y_t, ok, y_end, Z):
        return jnp.sum(ok), jnp.array([-1e-300, 7.0 / 3.0]) * Z

    args = (None, 0.0, 1.0, SegmentArgs(jnp.float64(1.0), 0.0, None, None), None, None)
    out = unpacked(np.asarray(jax.jit(_packed(run, losses))(*args)), slots, size)
    s_t, y_t, ok, s_end, y_end, _, _ = jax.device_get(run(*args))
    assert np.array_equal(out.s_t, s_t) and np.array_equal(out.y_t, y_t) and np.array_equal(out.y_end, y_end)
    assert out.ok.dtype == bool and out.ok.tolist() == ok.tolist() and out.s_end == 1.75
    assert (out.fired, out.maxed, out.failed) == (-1, True, False)
    assert (out.steps, out.accepted, out.rejected) == (16_383, 16_000, 383)
    assert out.reached == 2 and out.end_log_losses == (-1e-300, 7.0 / 3.0)


@pytest.mark.parametrize("case", ["margin", "regression"])
def test_the_end_losses_a_kernel_finds_are_the_hosts_at_the_last_two_saves(case):
    """The plateau check at the horizon reads the log-losses at the second-to-last save and at the end from the
    compiled solve: in every segment with two saves or more they are the host's (``Run.log_losses``) at those two
    states to rounding, for a margin loss and a regression's residuals; a segment with fewer has none (the host
    finds them). Chunks of 8 steps make segments of each kind."""
    from flowsim.integrate.options import Options
    from flowsim.integrate.run import Run
    from flowsim.integrate.solve import backend_for, check_problem, initial_params, set_up

    rng = np.random.default_rng(3)
    if case == "regression":
        system = fs.derive(fs.DiagonalNet(2), "square", fs.GD())
        X = rng.normal(size=(6, 4))
        data = fs.Dataset(X, X @ rng.normal(size=4), task="regression")
        init, t1 = [[0.3, 0.1, 0.2, 0.4], [0.2, 0.3, 0.1, 0.2]], 1e2
    else:
        system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
        data = fs.datasets.gaussian_clusters(20, 10, seed=0, separation=4.0)
        init, t1 = [[0.1] * 10, [0.2] * 10], 1e30
    opts = Options.checked(t1=t1, backend="diffrax:Tsit5", saves=50, max_steps=8)
    be = backend_for("diffrax:Tsit5", opts.log10_t1)
    theta0 = initial_params(system, data, init)
    run = Run(set_up(system, data, theta0, opts, be, check_problem(system, data, "auto", be, False)))
    found = []
    for _ in range(1000):
        seg = run.integrate()
        found.append(seg.end_log_losses is not None)
        if len(seg.s_saves) < 2:
            assert seg.end_log_losses is None
        else:
            host = run.log_losses(run.records.theta_at(-2), run.theta)
            assert host[0] != host[1]  # (two states apart: a kernel that took another save would not match)
            np.testing.assert_allclose(seg.end_log_losses, host, rtol=1e-12, atol=0)
        if seg.reason == "end":
            break
    assert seg.reason == "end" and any(found) and not all(found)


def test_the_tied_system_is_made_once_and_solves_as_a_new_one():
    """Two reductions of one balanced product give one tied System; a solve with it matches one with the tied
    system derived afresh (the tied net's own solve at the same settings)."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05, 2))
    data = fs.Dataset(np.array([[1.0, 2.0, 0.5], [2.0, 0.3, 1.0]]), [1, 1])
    theta0 = system.model.init_params(0.1, 3)
    first, second = reduction(system, theta0, data), reduction(system, theta0, data)
    assert first[0] is second[0] and first[1] == 2.0
    fresh = fs.derive(fs.DiagonalNet(2, "tied"), "logistic", first[0].flow)
    a = fs.solve(first[0], data, 0.01, t1=1e6, backend="diffrax:Tsit5", saves=20)
    b = fs.solve(fresh, data, 0.01, t1=1e6, backend="diffrax:Tsit5", saves=20)
    assert np.array_equal(a.beta, b.beta) and np.array_equal(a.log_loss, b.log_loss)


def test_a_lifted_solve_has_every_layer_from_the_tied_one():
    """The anti-balanced start w2 = -w1 with a flipped entry: each layer is its flips times the tied w, and the
    lifted beta the product of the layers."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.Dataset(np.array([[1.0, -2.0, 0.5], [2.0, -0.3, 1.0]]), [1, 1])
    init = np.array([[0.1, 0.1, 0.1], [0.1, -0.1, 0.1]])
    sol = fs.solve(system, data, init, t1=1e4, backend="diffrax:Tsit5", saves=10)
    assert sol.params.shape == (10, 2, 3) and sol.params.flags.writeable
    assert np.array_equal(sol.params[:, 1], sol.params[:, 0] * [1.0, -1.0, 1.0])
    assert np.allclose(sol.beta, sol.params[:, 0] * sol.params[:, 1], rtol=1e-15, atol=0)


def _mean_logistic_log_loss(margins):
    """log of the mean logistic loss log(1 + e^-m) per row, written independently of flowsim's formulas."""
    return np.log(np.mean(np.logaddexp(0.0, -margins), axis=1))


@pytest.mark.parametrize("case", ["plain", "lifted", "rest point"])
def test_a_solves_margins_and_losses_are_found_on_first_read_as_the_saves_give_them(case):
    """Most runs never read the saves' margins and losses, which cost up to twice a solve's host work: a fresh
    Solution finds them on first read. Read then, they are the saves' own (Z beta, against the margins and the
    mean logistic loss written here; bit for bit the eager computation on the states that ran), kept once read,
    untouched by a change in place to ``sol.beta`` before, carried unread through ``dataclasses.replace``, and the
    Solution stays frozen. "rest point": the losses the look-back for rest points found during the solve are
    kept (test_saves_io's depth-3 l2-SAM case); "lifted": a balanced start runs as the tied net."""
    import dataclasses

    from flowsim.integrate.solution import Deferred
    from flowsim.integrate.timeline import beta_margins_loss

    if case == "rest point":
        X = np.array([[-1.27288316, 1.88158494], [0.46245432, 0.52199432], [1.27781334, 1.13738853],
                      [0.35180389, 0.24086668], [-1.25543163, 0.70697094], [-0.00727093, -1.60658444]])
        data = fs.Dataset(X, [1, 1, 1, 1, 1, -1])
        system = fs.derive(fs.DiagonalNet(3), "logistic", fs.SAM(0.331226403393368, 2))
        with pytest.warns(fs.ReachabilityWarning):
            sol = fs.solve(system, data, -0.0017383405674502239, log10_t1=74.3, backend="scipy:BDF")
        assert sol.status == "converged"
    else:
        system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
        data = fs.datasets.gaussian_clusters(20, 10, seed=0, separation=4.0)
        init = 0.1 if case == "lifted" else [[0.1] * 10, [0.2] * 10]
        sol = fs.solve(system, data, init, t1=1e30, backend="diffrax:Tsit5")
        assert ("integrated_as" in sol.config) == (case == "lifted")
    assert isinstance(sol.__dict__["_margins"], Deferred) and isinstance(sol.__dict__["_log_loss"], Deferred)
    copy = dataclasses.replace(sol, message="a copy")  # (reads every field: found here, for the copy)
    beta = sol.beta.copy()
    sol.beta[:] = 0.0  # the saves' margins come from the beta they were made with
    margins, log_loss = sol.margins, sol.log_loss
    assert margins is sol.margins and log_loss is sol.log_loss  # found once
    assert margins.shape == (len(beta), data.n) and log_loss.shape == (len(beta),)
    np.testing.assert_allclose(margins, beta @ data.z.T, rtol=1e-13, atol=1e-15 * np.abs(margins).max())
    np.testing.assert_allclose(log_loss, _mean_logistic_log_loss(margins), rtol=1e-12)
    assert np.array_equal(copy.margins, margins) and np.array_equal(copy.log_loss, log_loss)
    if case == "plain":  # the states that ran are the Solution's own: the eager computation, bit for bit
        _, eager_margins, eager_loss = beta_margins_loss(system, data, sol.params)
        assert np.array_equal(margins, eager_margins) and np.array_equal(log_loss, eager_loss)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.margins = margins


def test_a_solution_built_with_its_arrays_holds_them():
    """A Solution made from arrays (a saved run read back, ``dataclasses.replace``) holds those arrays as given."""
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.Dataset(np.array([[1.0, 2.0], [2.0, 0.5]]), [1, 1])
    sol = fs.solve(system, data, 0.1, t1=1e3, saves=5)
    margins, log_loss = np.arange(10.0).reshape(5, 2), np.arange(5.0)
    made = fs.Solution(system=system, data=data, log10_t=sol.log10_t, tau=sol.tau, params=sol.params, beta=sol.beta,
                       log_loss=log_loss, margins=margins, status=sol.status, message=sol.message)
    assert made.margins is margins and made.log_loss is log_loss


def test_a_starts_answers_are_found_once_per_start_and_never_shared_across_starts():
    """A solve asks the reachable signs, the underflow check and the tied form of its start on every call: each is
    found once per start (model, flow or system, and the start's exact values) and handed out as a copy, so a
    caller's change does not reach the next solve, and another start, however close, gets its own answers."""
    from flowsim.integrate.balanced import _tied_start
    from flowsim.symbolic.reachable import _reachable_signs, _underflowing, reachable_signs

    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.Dataset(np.array([[1.0, 2.0, 0.5], [2.0, 0.3, 1.0]]), [1, 1])
    init = np.full((2, 3), 0.1)
    fs.solve(system, data, init, t1=1e3, saves=5)
    counts = [f.cache_info().misses for f in (_reachable_signs, _underflowing, _tied_start)]
    fs.solve(system, data, init, t1=1e3, saves=5)
    assert [f.cache_info().misses for f in (_reachable_signs, _underflowing, _tied_start)] == counts
    signs = reachable_signs(system.model, init, system.flow)
    signs[:] = -7.0
    assert np.array_equal(reachable_signs(system.model, init, system.flow), [1.0, 1.0, 1.0])
    flipped = init * [[1.0], [-1.0]]  # anti-balanced: beta <= 0, layer 2 flipped
    assert np.array_equal(reachable_signs(system.model, flipped, system.flow), [-1.0, -1.0, -1.0])
    assert np.array_equal(reduction(system, flipped, data)[3], [[1.0] * 3, [-1.0] * 3])
    near = init.copy()
    near[1, 2] = np.nextafter(0.1, 1.0)  # one entry a rounding off balanced: the product runs, beta_3 free
    assert reduction(system, near, data) is None
    assert np.array_equal(reachable_signs(system.model, near, system.flow), [1.0, 1.0, np.nan], equal_nan=True)


@pytest.mark.parametrize("seed", range(20))
def test_the_sign_checks_all_clear_never_hides_an_excluded_sign(seed):
    """``_may_exclude`` says False only where ``excluded_signs`` finds nothing: checked on random saves with
    entries of either sign, zeros, NaN and inf, against kept signs of every kind (+1, -1, 0, NaN)."""
    from flowsim.integrate.solve import _may_exclude, excluded_signs

    rng = np.random.default_rng(seed)
    saves, d = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    beta = rng.choice([-1.0, 1.0], (saves, d)) * 10.0 ** rng.uniform(-30, 3, (saves, d))
    beta[rng.random((saves, d)) < 0.2] = rng.choice([0.0, np.nan, np.inf, -np.inf])
    if seed % 2:
        beta = np.abs(beta)
    kept = rng.choice([1.0, -1.0, 0.0, np.nan], d)
    if not _may_exclude(kept, beta):
        assert not excluded_signs(kept, beta, 1e-10, 2).any()
    assert not _may_exclude(np.full(d, np.nan), beta) and not _may_exclude(np.ones(d), np.abs(np.nan_to_num(beta)))


def test_a_balanced_starts_layers_are_found_on_first_read_from_the_tied_states():
    """A balanced start runs as the tied net w^2: its layers are w each, written out when first read (many runs
    never read them), writable, and their product is the saved beta bit for bit."""
    from flowsim.integrate.solution import Deferred

    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.datasets.gaussian_clusters(20, 10, seed=0, separation=4.0)
    sol = fs.solve(system, data, 0.1, t1=1e30, backend="diffrax:Tsit5", saves=50)
    assert isinstance(sol.__dict__["_params"], Deferred)
    params = sol.params
    assert params is sol.params and params.shape == (50, 2, 10) and params.flags.writeable
    assert np.array_equal(params[:, 0], params[:, 1]) and np.array_equal(params[:, 0] * params[:, 1], sol.beta)


def test_save_slots_pad_a_sixteenth_at_most_and_change_no_result(monkeypatch):
    """A compiled solve's save slots: at least the saves, padded by under a sixteenth of them (or 16), the default
    400 not at all (diffrax saves every padded slot at the last step); and the padding changes no result: the
    same solve with the slots of a power of two is the same, bit for bit."""
    from flowsim.integrate.backends import _diffrax

    for n in range(1, 5000):
        slots = _diffrax.target_slots(n)
        assert slots >= max(n, 16) and slots - n < max(16, (n - 1) / 16), (n, slots)
    assert _diffrax.target_slots(400) == 400
    system = fs.derive(fs.DiagonalNet(2), "logistic", fs.GD())
    data = fs.datasets.gaussian_clusters(20, 10, seed=0, separation=4.0)
    solves = []
    for slots in (_diffrax.target_slots, lambda n: max(16, 1 << (int(n) - 1).bit_length())):
        monkeypatch.setattr(_diffrax, "target_slots", slots)
        solves.append(fs.solve(system, data, [[0.1] * 10, [0.2] * 10], t1=1e30, backend="diffrax:Tsit5"))
    a, b = solves
    for name in ("log10_t", "tau", "params", "beta", "log_loss", "margins"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.status, a.stats["steps"]) == (b.status, b.stats["steps"])
