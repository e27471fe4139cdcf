"""Sign flow and the Adam proxy flow (seed 002): derivation against autodiff, closed forms, limits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flowsim as fs
from flowsim.field.vector_field import VectorField


def per_sample_reference(model, theta, Z, flow):
    def beta(th):
        return jnp.prod(th, axis=0) if model.form == "product" else th[0] ** model.depth

    def losses(th):
        return jnp.logaddexp(0.0, -(Z @ beta(th)))

    g_i = jax.jacobian(losses)(theta)  # (n, K, d): per-sample gradients
    S, Q = g_i.sum(axis=0), (g_i**2).sum(axis=0)
    N = Z.shape[0]
    if flow.name == "SignFlow":
        return -jnp.sign(S / N)
    b = flow.direction.batch
    if b == 1:
        return -S / jnp.sqrt(N * Q)
    return -jnp.sqrt(b * (N - 1) / N) * S / jnp.sqrt((b - 1) * S**2 + (N - b) * Q)


@pytest.mark.parametrize("model", [fs.Linear(), fs.DiagonalNet(2), fs.DiagonalNet(3, "tied")], ids=str)
@pytest.mark.parametrize("flow", [fs.SignFlow(), fs.AdamProxy(batch=1), fs.AdamProxy(batch=3)], ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_schedule_flows_equal_autodiff(model, flow, seed):
    rng = np.random.default_rng(seed)
    n, d = 5, 3
    Z = rng.normal(size=(n, d))
    theta = rng.uniform(0.2, 1.0, size=(model.n_layers, d)) * rng.choice([-1, 1], size=(model.n_layers, d))
    system = fs.derive(model, "logistic", flow)
    ref = per_sample_reference(model, jnp.asarray(theta), jnp.asarray(Z), flow)
    for xp, c in ((np, system.numpy), (jnp, system.jax)):
        vf = VectorField(c, xp, model.n_layers, d, None, flow.needs_P)
        G, _ = vf.direction(xp.asarray(theta), xp.asarray(Z))
        F, _ = vf.field_and_scale(xp.asarray(theta), xp.asarray(Z), 0.0, xp.sign(G))
        np.testing.assert_allclose(np.asarray(F), ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("decay, s_of_t", [(1.0, lambda t: np.log1p(t)), (0.5, lambda t: 2 * (np.sqrt(1 + t) - 1))])
def test_sign_flow_closed_form(decay, s_of_t):
    # one sample: G = -x (constant sign), so w(s) = w0 + sign(x) s with ds = eta dt, eta = (t+1)^-decay
    x = np.array([1.0, -2.0, 0.5])
    data = fs.Dataset(x[None], [1])
    for be in ("diffrax:Tsit5", "scipy:DOP853"):
        sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.SignFlow(decay=decay)), data, 0.1, t1=1e30, backend=be)
        np.testing.assert_allclose(sol.params[-1, 0], 0.1 + np.sign(x) * s_of_t(1e30), rtol=1e-10)


def test_proxy_goes_to_l2_on_rademacher_and_sign_flow_follows_its_sliding():
    r = fs.datasets.scaled_rademacher(10, 4, seed=0)
    proxy = fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy()), r, 1e-3, t1=1e100)
    assert fs.normalised_margin(r, proxy.beta[-1], 2) / fs.max_margin(r, 2).margin >= 0.99  # Thm 3.3
    # sign descent on several samples slides on surfaces G_k = 0 that are not coordinate planes: flowsim follows
    # the Filippov sliding mode (three coordinates join and leave their surfaces by log10 t = 0.4)
    sign = fs.solve(fs.derive(fs.Linear(), "logistic", fs.SignFlow()), r, 1e-3, t1=1e10)
    assert sign.status == "completed"
    assert {x["coordinate"] for e in sign.events for x in e.get("sliding", [])} == {2, 3, 4}


def test_proxy_goes_to_the_fixed_point_on_gaussian_data():
    g = fs.datasets.gaussian_clusters(10, 5, seed=0)
    fp = fs.adam_fixed_point(g)
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy()), g, 1e-3, t1=1e100)
    assert sol.direction[-1] @ fp.direction >= 0.99  # Thm 4.8
    assert sol.direction[-1] @ fp.direction > sol.direction[-1] @ fs.max_margin(g, 2).direction + 0.02


def test_proxy_validation():
    g = fs.datasets.gaussian_clusters(10, 5, seed=0)
    with pytest.raises(ValueError, match="batch = n is the sign flow"):
        fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy(batch=10)), g, 0.1, t1=10)
    one = fs.Dataset([[1.0, -2.0]], [1])  # one sample: per-sample Adam is the sign flow, batch 2 a 0/0 field
    for batch in (1, 2):  # (both were integrated: a frozen beta and a max_steps message)
        with pytest.raises(ValueError, match=rf"AdamProxy\(batch={batch}\) on n=1 sample\(s\): batch must be < n"):
            fs.solve(fs.derive(fs.Linear(), "logistic", fs.AdamProxy(batch=batch)), one, 0.1, t1=10)
    with pytest.raises(ValueError, match="decay must be in"):
        fs.SignFlow(decay=2)
    with pytest.raises(ValueError, match="batch must be a positive int"):
        fs.AdamProxy(batch=0)
    with pytest.raises(ValueError, match="overflows"):
        fs.solve(fs.derive(fs.Linear(), "logistic", fs.SignFlow(decay=0.5)), g, 0.1, log10_t1=1e4)


@pytest.mark.parametrize("backend", ["auto", "scipy:Radau", "scipy:LSODA", "scipy:DOP853"])
def test_the_proxy_at_a_jump_of_its_field_says_so_on_every_backend(backend):
    """On a depth-2 tied net the proxy's field carries sign(dbeta/dw) = sign(w): it jumps across w = 0,
    and here drives w_2 onto that plane at log10 t ~ -0.954, where the exact flow slides. The backends
    ended 'max_steps' ("raise max_steps or loosen rtol/atol") or 'failed' ("step size less than
    spacing"); each now says 'chattering' and names the entry, at the same time."""
    data = fs.Dataset(np.array([[1.0, -2.0], [0.7, -1.0]]), [1, 1])
    system = fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.AdamProxy(batch=1))
    sol = fs.solve(system, data, 0.1, t1=1e10, backend=backend, throw=False)
    assert sol.status == "chattering" and "entries w[layer 1, coordinate 2] are at w = 0" in sol.message and "jumps" in sol.message, sol.message
    assert abs(sol.log10_t[-1] - (-0.954)) < 2e-3 and abs(sol.params[-1, 0, 1]) < 1e-9


BACKENDS_ALL = ("diffrax:Tsit5", "scipy:BDF", "scipy:LSODA", "scipy:DOP853")


@pytest.mark.parametrize("backend", BACKENDS_ALL)
def test_adam_proxy_where_one_sample_holds_a_coordinate_far_ahead(backend):
    """Coordinate 2 is only in sample 2, whose margin outgrows sample 1's: Phi_2 = q_2 / sqrt(2 q_2^2) = 1/sqrt 2
    for ever, so beta_2 = 1e-3 + s / sqrt 2 exactly. P_2 = p_2^2 underflowed once the margins were 372 apart
    (Phi_2 = 0/0): every backend failed (or ran out of steps) before log10 t = 300; the gap reaches 3e4 here."""
    system = fs.derive(fs.Linear(), "logistic", fs.AdamProxy(batch=1))
    sol = fs.solve(system, fs.Dataset(np.array([[1.0, 0.0], [2.0, 1.0]]), [1, 1]), 1e-3, log10_t1=1e4, backend=backend)
    assert sol.status == "completed" and sol.beta[-1, 0] > 1e4
    np.testing.assert_allclose(sol.beta[:, 1], 1e-3 + sol.tau / np.sqrt(2), rtol=1e-9)


_MIXED = (np.array([[1.0, 0.0, 0.3], [0.5, 0.0, -1.0], [1.0, 0.0, 1.0]]), [1, 1, -1])
_SAME_SIGNS = (np.array([[1.0, 0.0, 0.5], [0.5, 0.0, 1.0]]), [1, 1])  # (on _MIXED the sign flows slide off planes)


@pytest.mark.parametrize("flow, data", [(fs.AdamProxy(batch=1), _MIXED), (fs.AdamProxy(batch=2), _MIXED),
                                        (fs.SignFlow(), _SAME_SIGNS), (fs.SteepestDescent(float("inf")), _SAME_SIGNS)],
                         ids=["proxy1", "proxy2", "sign", "steepest_inf"])
@pytest.mark.parametrize("backend", ["diffrax:Tsit5", "scipy:BDF"])
def test_a_column_of_zeros_is_left_where_it_starts(flow, data, backend):
    """A feature no sample has (digits' blank pixels) has G = 0 for ever: its entry stays, and the others run as
    without it. The Adam proxy's S/sqrt(Q) was 0/0 (max_steps on Tsit5, NaN on BDF), the sign flows called it
    a sliding mode away from the plane (chattering at t = 0)."""
    X, y = data
    system = fs.derive(fs.Linear(), "logistic", flow)
    full = fs.solve(system, fs.Dataset(X, y), 1e-3, t1=1e8, backend=backend)
    without = fs.solve(system, fs.Dataset(X[:, [0, 2]], y), 1e-3, t1=1e8, backend=backend)
    assert full.status == without.status == "completed"
    np.testing.assert_allclose(full.beta[:, 1], 1e-3, rtol=1e-12)  # (BDF's Newton iterates round it)
    np.testing.assert_allclose(full.beta[-1, [0, 2]], without.beta[-1], rtol=1e-7)
