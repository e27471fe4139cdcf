"""The sympy-derived field against autodiff: for every model x loss x flow, at random points, the
real-time field e^{S~} F must equal -jax.grad(L)(theta~) with theta~ built from jax.grad(L)(theta)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import flowsim as fs
from flowsim.field.vector_field import VectorField

MODELS = [fs.Linear(), fs.DiagonalNet(2, "product"), fs.DiagonalNet(3, "product"), fs.DiagonalNet(2, "tied"),
          fs.DiagonalNet(3, "tied"), fs.DiagonalNet(2, "difference")]
FLOWS = [fs.GD(), fs.SAM(0.3, 2), fs.SAM(0.2, 3.0), fs.SAM(0.1, float("inf")), fs.USAM(0.4)]
LOSSES = ["exponential", "logistic"]


def reference_beta(model, th):
    if model.form == "product":
        return jnp.prod(th, axis=0)
    if model.form == "tied":
        return th[0] ** model.depth
    return th[0] ** model.depth - th[1] ** model.depth


def reference_loss(model, loss, Z):
    """Independent implementation: the loss by hand (gradients then by jax.grad)."""
    def L(th):
        m = Z @ reference_beta(model, th)
        return jnp.mean(jnp.exp(-m) if loss == "exponential" else jnp.logaddexp(0.0, -m))

    return L


def reference_point(model, loss, flow, theta, Z):
    """The evaluation point theta~ = theta + rho P(g), and g = grad L(theta)."""
    g = jax.grad(reference_loss(model, loss, Z))(theta)
    if flow.name == "GD":
        pert = 0.0
    elif flow.name == "USAM":
        pert = flow.rho * g
    elif np.isinf(flow.norm):
        pert = flow.rho * jnp.sign(g)
    else:
        q = flow.norm / (flow.norm - 1)
        pert = flow.rho * jnp.sign(g) * jnp.abs(g) ** (q - 1) / jnp.sum(jnp.abs(g) ** q) ** ((q - 1) / q)
    return theta + pert, g


def reference_field(model, loss, flow, theta, Z):
    """-grad L(theta~), and g."""
    point, g = reference_point(model, loss, flow, theta, Z)
    return -jax.grad(reference_loss(model, loss, Z))(point), g


@pytest.mark.parametrize("model", MODELS, ids=str)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("flow", FLOWS, ids=str)
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1))
def test_field_equals_autodiff(model, loss, flow, seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    Z = rng.normal(size=(n, d))
    theta = rng.uniform(0.2, 1.0, size=(model.n_layers, d)) * rng.choice([-1, 1], size=(model.n_layers, d))
    system = fs.derive(model, loss, flow)
    ref, g = reference_field(model, loss, flow, jnp.asarray(theta), jnp.asarray(Z))
    # USAM's unnormalised step rho g can throw the reference's exp(-m) out of float range; compare where it is finite
    assume(bool(np.all(np.isfinite(ref))))
    for xp, compiled in ((np, system.numpy), (jnp, system.jax)):
        vf = VectorField(compiled, xp, model.n_layers, d, flow.dual_exponent)
        G, S = vf.direction(xp.asarray(theta), xp.asarray(Z))
        np.testing.assert_allclose(np.exp(S) * np.asarray(G), g, rtol=1e-12, atol=1e-300)
        F, S_t = vf.field_and_scale(xp.asarray(theta), xp.asarray(Z), flow.rho, xp.sign(xp.asarray(G)))
        np.testing.assert_allclose(np.exp(S_t) * np.asarray(F), ref, rtol=1e-12, atol=1e-14)


def test_equations_are_sympy_and_printable():
    system = fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(0.1, 2))
    eqs = system.equations
    assert all(isinstance(e, sp.Eq) for e in eqs.values())
    w, r, N, rho = system.w[0], system.r, system.N, system.rho
    # docs/theory.md 5 item 5: tied L = 2 l2-SAM: w~ = w (1 - rho x/N) -> here in terms of the coupling r = x * p
    assert sp.simplify(eqs["w_tilde"].rhs - (w - 2 * rho * w * r / N)) == 0
    tex = system.latex()
    assert r"\tilde{w}" in tex and r"\rho" in tex and "align" in tex
    assert all("&=" in line for line in tex.splitlines()[2:2 + len(eqs)]) and r"\log q &=" in tex
    assert "\\" not in system.text() and "w~ = w - 2*r*rho*w/N" in system.text()
    assert "def _lambdifygenerated" in system.source("field")


@pytest.mark.parametrize("flow, says, not_says", [
    (fs.ASAM(0.1, eta=0.25), r"N = \|G \left(\left|{w}\right| + 0.25\right)\|_{2}", r"\sigma_{w} ="),
    (fs.SAM(0.1, 3), r"N = \|G\|_{1.5}", r"\sigma_{w} ="),
    (fs.SAM(0.1, float("inf")), r"\sigma_{w} = \mathrm{sign}(G_{w})", "N = "),  # sign(G) only: no N in its field
    (fs.GD(), r"\tilde r_j,\ \tilde S", "N = "),
])
def test_latex_says_what_its_symbols_are_for_this_flow(flow, says, not_says):
    """The legend is built from the flow: N is the norm of what the point normalises (ASAM: T G, not
    G), in the dual exponent of its ball, and only where the equations use it."""
    tex = fs.derive(fs.DiagonalNet(2), "logistic", flow).latex()
    assert says in tex and not_says not in tex, tex


def test_latex_of_layer_names_with_underscores_compiles():
    # \tilde{w_}_{1} (a double subscript) and G_{w 1} (sympy read G_w_1 as nested subscripts)
    model = fs.Parametrization("x", ("w_1", "w_2"), lambda a, b: a * b**2)
    tex = fs.derive(model, "logistic", fs.SAM(0.1)).latex()
    assert r"\tilde{w}_{1} &=" in tex and r"G_{w_1} &=" in tex and "w_}" not in tex and "{w 1}" not in tex, tex


def test_logistic_log_q_is_derived():
    # q = -l'(m) = sigmoid(-m); the derived log q must match it, also where exp(-m) underflows
    lq = fs.derive(fs.Linear(), "logistic", fs.GD()).numpy.log_q
    m = np.array([-50.0, -1.0, 0.0, 3.0, 800.0, 1e6])
    # absolute error in log q is relative error in q
    np.testing.assert_allclose(lq(m), -np.logaddexp(0.0, m), rtol=1e-14, atol=1e-15)


def test_derive_is_cached_and_rho_is_runtime():
    a = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1))
    b = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.7))
    assert a.numpy is b.numpy and a.flow.rho == 0.1 and b.flow.rho == 0.7


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.07, 2), fs.SAM(0.07, np.inf), fs.ASAM(0.05), fs.SignFlow(),
                                  fs.AdamProxy(batch=2), fs.SteepestDescent(3)], ids=str)
def test_field_on_many_points_is_the_field_at_each(flow):
    """The phase-portrait evaluator (one compiled call for a grid) against ``vector_field`` point by point,
    at the flow's rho and another (rho is an argument: no recompile)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(4, 3))
    data = fs.Dataset(X, np.sign(X @ np.array([1.0, 0.5, 2.0])))
    system = fs.derive(fs.DiagonalNet(3), "logistic", flow)
    points = rng.uniform(-0.8, 0.8, size=(6, 3, 3))
    field_on = system.field_on(data)
    for rho in (None, 0.2) if flow.rho else (None,):
        at = system if rho is None else fs.derive(fs.DiagonalNet(3), "logistic", dataclasses.replace(flow, rho=rho))
        expected = np.stack([at.vector_field(p, data)[0] for p in points])
        np.testing.assert_allclose(field_on(points, rho), expected, rtol=1e-11, atol=1e-14)
    with pytest.raises(ValueError, match=r"params: float64 of shape \(6, 3\); expected real numbers of shape "
                                         r"\(points, 3, 3\)"):
        field_on(points[:, 0])
    if flow.rho:
        with pytest.raises(ValueError, match="rho must be finite and >= 0"):  # -rho was a descent-side point
            field_on(points, -0.3)
    with pytest.raises(ValueError, match="data must be a flowsim.Dataset"):
        system.field_on(points)


@pytest.mark.parametrize("flow", [fs.GD(), fs.SAM(0.07, 2)], ids=str)
def test_vector_field_is_minus_the_gradient_at_the_perturbed_point(flow):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(5, 3))
    data = fs.Dataset(X, np.sign(X @ np.array([1.0, 0.5, 2.0])))
    system = fs.derive(fs.DiagonalNet(2), "logistic", flow)
    theta = rng.uniform(0.1, 0.6, size=(2, 3))

    def loss(th):
        return jnp.mean(jnp.logaddexp(0.0, -(jnp.asarray(data.z) @ (th[0] * th[1]))))

    g = np.asarray(jax.grad(loss)(jnp.asarray(theta)))
    point = theta + (flow.rho * g / np.linalg.norm(g) if flow.name == "SAM" else 0.0)
    F, log_scale = system.vector_field(theta, data)
    np.testing.assert_allclose(np.exp(log_scale) * F, -np.asarray(jax.grad(loss)(jnp.asarray(point))), rtol=1e-12)
