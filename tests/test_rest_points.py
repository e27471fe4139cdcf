"""Rest points of flows whose field is discontinuous at a critical point of the loss
(flowsim.integrate.rest_points), checked against references written here without flowsim's engine: the
critical points by Newton's method on the logistic regression of a face, the exact flow as the eps -> 0
limit of its smooth regularisation (scipy solve_ivp, Radau, rtol 1e-10) and as the step -> 0 limit of
discrete SAM.

The case: iid_gaussian(20, 10, 0), logistic loss, the tied depth-2 net beta = w^2 (a balanced product
integrates as it). Its saddle beta* minimises the loss with beta_j = 0 off {1, 6, 7, 8} (1-based); there
dL/dbeta_2 < 0, the one unstable direction, with Hessian eigenvalue 2 dL/dbeta_2 = -0.0045847. The
minimum m* adds beta_2 > 0."""

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import expit

import flowsim as fs
from flowsim.field.vector_field import numpy_field
from flowsim.integrate.rest_points import linf_sam_minimum_is_rest_point, normalised_rest_point

sys.path.insert(0, str(Path(__file__).parent))

DATA = fs.datasets.iid_gaussian(20, 10, 0)
Z = DATA.z
N = Z.shape[0]
#: the unstable coordinate at the saddle (0-based)
K = 1


def dl_dbeta(beta):
    """dL/dbeta of the mean logistic loss."""
    return -(Z.T @ expit(-(Z @ beta))) / N


def grad(w):
    """grad_w L of the tied net beta = w^2."""
    return 2.0 * w * dl_dbeta(w * w)


def face_minimum(support):
    """w >= 0 minimising the loss with beta_j = 0 off ``support`` (Newton on the convex face problem)."""
    b = np.full(len(support), 0.5)
    for _ in range(40):
        p = expit(-(Z[:, support] @ b))
        step = np.linalg.solve((Z[:, support].T * (p * (1 - p))) @ Z[:, support] / N, -(Z[:, support].T @ p) / N)
        b = b - step
    w = np.zeros(Z.shape[1])
    w[support] = np.sqrt(b)
    return w


SADDLE = face_minimum([0, 5, 6, 7])
MINIMUM = face_minimum([0, 1, 5, 6, 7])


def l2_sam(rho):
    return numpy_field(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(rho, 2)), 1, 10)


def test_the_references_are_a_saddle_and_a_minimum():
    for w in (SADDLE, MINIMUM):
        assert np.abs(grad(w)).max() < 1e-14 and np.all(w >= 0)
    D = dl_dbeta(SADDLE**2)
    assert np.flatnonzero(D < -1e-12).tolist() == [K]
    assert 2 * D[K] == pytest.approx(-0.0045847, abs=1e-7)
    zero = MINIMUM == 0
    assert np.all(dl_dbeta(MINIMUM**2)[zero] > 0)  # strict: every zero coordinate is pushed back


def test_the_eigenvalues_are_those_of_the_loss():
    """H = dG/dtheta with grad L = e^S G: e^S lambda is the Hessian's 2 dL/dbeta_2 at the saddle."""
    verdict = normalised_rest_point(l2_sam(0.05), SADDLE[None, :], Z, 0.05)
    S = l2_sam(0.05).direction(SADDLE[None, :], Z)[1]
    assert math.exp(S) * verdict.eigenvalues[0] == pytest.approx(2 * dl_dbeta(SADDLE**2)[K], rel=1e-6)
    assert np.sum(verdict.eigenvalues < 0) == 1


def line_criterion(rho):
    """dL/dbeta_2 where the ascent along the unstable coordinate alone lands: the guess that ignores how the
    stable coordinates turn the gradient."""
    beta = SADDLE**2
    beta[K] = rho**2
    return dl_dbeta(beta)[K]


@pytest.mark.parametrize("rho, trapped", [(0.05, True), (0.1765, True), (0.1815, False), (0.35, False)])
def test_which_saddles_trap(rho, trapped):
    verdict = normalised_rest_point(l2_sam(rho), SADDLE[None, :], Z, rho)
    assert verdict.is_rest_point is trapped
    assert (verdict.margin > 0) is trapped
    assert (verdict.escape_direction is None) is trapped
    if not trapped:  # it leaves along the unstable coordinate
        assert abs(verdict.escape_direction[0, K]) > 0.99


def test_the_stable_coordinates_move_the_threshold():
    """At rho = 0.1765 the unstable coordinate's own slope at the ascent point says 'passes'; the rays, where
    the stable coordinates have turned the gradient, say 'trapped', and the regularised flow traps."""
    assert line_criterion(0.1765) > 0
    assert normalised_rest_point(l2_sam(0.1765), SADDLE[None, :], Z, 0.1765).is_rest_point


def test_the_threshold_is_the_distance_to_the_minimum():
    """On the ray at the threshold nu = 0, so F(u) = 0: theta* + rho u is a critical point, here the minimum
    (w_2 of either sign). The radius where the decision turns is the distance between the two references."""
    rho_c = float(np.linalg.norm(MINIMUM - SADDLE))
    for rho, trapped in ((rho_c - 1e-4, True), (rho_c + 1e-4, False)):
        assert normalised_rest_point(l2_sam(rho), SADDLE[None, :], Z, rho).is_rest_point is trapped


def test_a_minimum_and_normalised_gd():
    assert normalised_rest_point(l2_sam(0.35), MINIMUM[None, :], Z, 0.35).is_rest_point
    gd = numpy_field(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.NormalizedGD(1.0)), 1, 10)
    verdict = normalised_rest_point(gd, SADDLE[None, :], Z, 0.0)
    assert not verdict.is_rest_point and verdict.margin == pytest.approx(-1.0, abs=1e-3)


def test_bad_input():
    with pytest.raises(ValueError, match="not a critical point"):
        normalised_rest_point(l2_sam(0.1), SADDLE[None, :] + 0.01, Z, 0.1)
    linf = numpy_field(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(1.0, np.inf)), 1, 10)
    with pytest.raises(ValueError, match="linf_sam_minimum_is_rest_point"):
        normalised_rest_point(linf, SADDLE[None, :], Z, 1.0)
    with pytest.raises(ValueError, match="normalised_rest_point"):
        linf_sam_minimum_is_rest_point(l2_sam(0.1), MINIMUM[None, :], Z, 0.1)


def regularised(rho, eps, w_k, t1):
    """The l2-SAM flow with G/|G| -> g/sqrt(|g|^2 + eps^2) from the saddle with w_k set: w_k at t1."""

    def field(t, w):
        g = grad(w)
        return -grad(w + rho * g / math.sqrt(g @ g + eps**2))

    start = SADDLE.copy()
    start[K] = w_k
    sol = solve_ivp(field, (0.0, t1), start, method="Radau", rtol=1e-10, atol=1e-14)
    assert sol.status == 0
    return sol.y[K, -1]


def predicted_trap(rho):
    return normalised_rest_point(l2_sam(rho), SADDLE[None, :], Z, rho).is_rest_point


@pytest.mark.parametrize("eps", [1e-6, 1e-7, 1e-8])
@pytest.mark.parametrize("rho", [0.05, 0.35])
def test_regularised_flow_agrees(rho, eps):
    """Trapped: w_2 -> 0; passed: on to the minimum, w_2 = 0.179."""
    w_k = regularised(rho, eps, 1e-2, 2000.0)
    assert (abs(w_k) < 1e-12) if predicted_trap(rho) else (w_k > 0.15)


@pytest.mark.parametrize("rho, trapped", [(0.1765, True), (0.1815, False)])
def test_regularised_flow_at_the_threshold(rho, trapped):
    """Either side of the threshold 0.17907: from w_2 = 1e-4, trapped (w_2 -> 0) or off the saddle (to the
    flow's own rest point w_2 = 2.4e-3, where theta + rho g/|g| is the minimum)."""
    assert predicted_trap(rho) is trapped
    w_k = regularised(rho, 1e-8, 1e-4, 2e4)
    assert (abs(w_k) < 1e-12) if trapped else (w_k > 1e-3)


@pytest.mark.parametrize("eps_over_threshold", [0.5, 2.0])
def test_a_coarse_regularisation_escapes_a_trap(eps_over_threshold):
    """Within |g| << eps the regularised field is USAM with radius rho/eps, -H (I + (rho/eps) H) x, so w_2
    moves at the rate |lambda| (1 - rho |lambda| / eps): it escapes a saddle that traps once eps passes
    rho |lambda| (2.29e-4 at rho = 0.05; the measured threshold of discrete-minded regularisations)."""
    lam = abs(2 * dl_dbeta(SADDLE**2)[K])
    eps = eps_over_threshold * 0.05 * lam
    rate = math.log(regularised(0.05, eps, 1e-3, 200.0) / 1e-3) / 200.0
    assert rate == pytest.approx(lam * (1 - 0.05 * lam / eps), rel=0.02)


def discrete_sam(rho, eta, w_k, t1):
    """Discrete l2-SAM, w <- w - eta grad L(w + rho g/|g|), from the saddle with w_k set: w_k after t1 / eta
    steps."""
    w = SADDLE.copy()
    w[K] = w_k
    for _ in range(int(round(t1 / eta))):
        g = grad(w)
        w = w - eta * grad(w + rho * g / math.sqrt(g @ g))
    return w[K]


@pytest.mark.parametrize("eta", [0.01, 0.003, 0.001])
def test_discrete_sam_agrees(eta):
    """Step -> 0 at rho = 0.05 (trapped: w_2 shrinks) and 0.35 (passed: w_2 grows to the minimum's)."""
    for rho in (0.05, 0.35):
        w_k = discrete_sam(rho, eta, 1e-2, 100.0)
        assert (w_k < 0.9e-2) if predicted_trap(rho) else (w_k > 0.1)


def linf_sam(rho):
    return numpy_field(fs.derive(fs.DiagonalNet(2, "tied"), "logistic", fs.SAM(rho, np.inf)), 1, 10)


def discrete_linf_sam(rho, eta, t1):
    """Discrete l_inf-SAM, w <- w - eta grad L(w + rho sign(g)), from the minimum nudged by 1e-3: the distance
    from the minimum after t1 / eta steps."""
    w = MINIMUM + 1e-3 * np.random.default_rng(1).normal(size=MINIMUM.size)
    for _ in range(int(round(t1 / eta))):
        w = w - eta * grad(w + rho * np.sign(grad(w)))
    return float(np.linalg.norm(w - MINIMUM))


@pytest.mark.parametrize("rho, rests", [(0.5, True), (1.0, True), (1.5, False), (2.0, False)])
def test_linf_sam_at_a_minimum(rho, rests):
    verdict = linf_sam_minimum_is_rest_point(linf_sam(rho), MINIMUM[None, :], Z, rho)
    assert verdict.patterns == 2**10 and verdict.is_rest_point is rests
    if rests:
        return
    # the separation checked here, field by field: every one-sided field gains along the direction
    c = verdict.separating_direction.ravel()
    for signs in itertools.product((1.0, -1.0), repeat=10):
        assert c @ -grad(MINIMUM + rho * np.array(signs)) > 0


def test_discrete_linf_sam_stays_where_0_is_in_the_hull_and_leaves_where_not():
    """rho = 0.5: within O(eta) of the minimum (the distance halves with eta); rho = 2: far off."""
    near = [discrete_linf_sam(0.5, eta, 20.0) for eta in (4e-3, 2e-3)]
    assert near[1] < 0.7 * near[0] < 0.01
    assert discrete_linf_sam(2.0, 2e-3, 20.0) > 1.0


def test_0_in_the_hull_is_necessary_not_sufficient():
    """At rho = 1 the LP finds 0 in the hull, yet discrete l_inf-SAM with a small step leaves the minimum (an
    entry at w = 0 moves off its plane to |w| = 0.18): the LP alone does not make the minimum a limit."""
    assert linf_sam_minimum_is_rest_point(linf_sam(1.0), MINIMUM[None, :], Z, 1.0).is_rest_point
    assert discrete_linf_sam(1.0, 1e-3, 50.0) > 0.1
