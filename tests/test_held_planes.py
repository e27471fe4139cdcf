"""Entries held on their planes w = 0: planes that turn repelling (sign flows), entries arriving one after another.

Random cases 32 (sign flow, depth-4 product net) and 59 (steepest descent p = inf, depth-4 tied net) of
tests/test_random_slides.py. Early on, every entry of one coordinate reaches 0 together (the init is balanced) and is
held there: with beta_j = w^4 >= 0 and r_j > 0 the plane attracts from both sides (|w|' = -sign(r_j)). Later r_j turns
negative and the same plane repels. The field on it is 0 either way (every G_lj has a factor w = 0), so nothing in
the field says so: a run that kept the entries held came to a rest point with r_j < 0, an unstable one, and the
backends left it (or not) by rounding. The coupling of a held coordinate is now watched, and where it turns through 0
the entries are probed again: they leave, as discrete sign descent does as its step goes to 0. Random case 89
(l_inf-SAM) is the plane's own mirror test, made with one entry's sign flipped, not every candidate's; 166 an
entry near its plane, not on its coordinate's surface.
"""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

import flowsim as fs
from tests.test_random_slides import ending, random_case


def _restricted_minimiser(data, coordinates):
    """The logistic loss's minimiser over beta with every other coordinate 0, by BFGS in beta (no flow)."""
    Z = data.X[:, coordinates] * data.y[:, None]
    loss = lambda b: np.mean(np.logaddexp(0.0, -Z @ b))  # noqa: E731
    grad = lambda b: -(Z.T @ (0.5 * (1.0 - np.tanh(Z @ b / 2.0)))) / len(Z)  # noqa: E731
    found = minimize(loss, np.zeros(len(coordinates)), jac=grad, method="BFGS", options={"gtol": 1e-13})
    beta = np.zeros(data.d)
    beta[coordinates] = found.x
    return beta / np.linalg.norm(beta)


@pytest.mark.parametrize("seed, coordinates, backend", [(32, [0, 1], "auto"), (59, [3, 4], "auto")])
def test_a_held_plane_that_turns_repelling_is_left_for_the_minimum_beyond(seed, coordinates, backend):
    """The run ends at the loss's minimiser over the coordinates that leave 0 (the held one among them), found
    independently; kept on its plane, case 32 ended at (1, 0, 0) and case 59 at e_5."""
    _, _, data, _ = random_case(seed)
    status, direction, message = ending(seed, backend)
    assert status == "converged", message
    np.testing.assert_allclose(direction, _restricted_minimiser(data, coordinates), atol=1e-6)


def _product_gradient(w, Z):
    """dL/dw (L, d) of the logistic loss of beta = prod_l w_l."""
    m = Z @ w.prod(axis=0)
    r = -(Z.T @ (0.5 * (1.0 - np.tanh(m / 2.0)))) / len(Z)  # sigmoid(-m), without overflow
    return np.stack([r * np.prod(np.delete(w, layer, axis=0), axis=0) for layer in range(len(w))])


@pytest.mark.slow
def test_sign_descent_leaves_the_plane_where_the_solve_does():
    """Case 32 to tau = 1.5, past r_2's turn (tau 1.18): discrete sign descent (dw/dtau = -sign(G), written here from
    the loss) approaches fs.solve like its step h; errors printed. Magnitudes are compared: the plane's two sides are
    mirror images. Held on the plane, |w_2| would stay 0 where both reach 0.32."""
    model, flow, data, alpha = random_case(32)
    assert (model, flow) == (fs.DiagonalNet(4, "product"), fs.SignFlow())
    tau1, Z = 1.5, data.X * data.y[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.ReachabilityWarning)
        sol = fs.solve(fs.derive(model, "logistic", flow), data, alpha, t1=np.expm1(tau1), backend="scipy:Radau",
                       rtol=1e-11, atol=1e-13)
    solved = np.abs(np.reshape(sol.params[-1], (4, data.d)))
    assert solved[:, 1].min() > 0.3  # left its plane
    errors = []
    for h in (1e-3, 1e-4, 1e-5):
        w = np.full((4, data.d), alpha)
        for _ in range(int(round(tau1 / h))):
            w = w - h * np.sign(_product_gradient(w, Z))
        errors.append(float(np.abs(np.abs(w) - solved).max()))
    print("max ||w_h| - |w||:", errors)
    assert errors[2] < errors[1] < errors[0] < 2e-3 and errors[2] < 3e-5


def test_linf_sam_entries_reaching_their_planes_one_after_another_are_held():
    """Random case 89 (l_inf-SAM, depth-4 tied, rho = 0.39 against an init of 0.016): both entries decay to 0, the
    first reaching its plane while the other's G is tiny too (w^3). The plane's mirror test flipped the signs of
    every candidate together, the other entry's perturbation with them, so the first entry's fields were no mirror
    images and it was handed on as sliding on a surface it is not on: more than 10,000 switches at one instant on
    every backend. Discrete l_inf-SAM (written here from the loss) keeps both entries within a multiple of its step
    of 0 from t = 1 to 5 (errors printed), where the run holds them: it ends `stalled` at w = 0."""
    model, flow, data, alpha = random_case(89)
    assert (model, flow.norm) == (fs.DiagonalNet(4, "tied"), np.inf)
    status, _, message = ending(89, "auto")
    assert status == "stalled", message
    Z = data.X * data.y[:, None]

    def gradient(w):
        m = Z @ w**4
        return 4.0 * w**3 * (-(Z.T @ (0.5 * (1.0 - np.tanh(m / 2.0)))) / len(Z))

    sizes = []
    for eta in (1e-2, 1e-3, 1e-4):
        w, largest = np.full(data.d, alpha), 0.0
        for step in range(int(round(5.0 / eta))):
            w = w - eta * gradient(w + flow.rho * np.sign(gradient(w)))
            largest = max(largest, float(np.abs(w).max())) if step * eta >= 1.0 else 0.0
        sizes.append(largest)
    print("max |w| over t in [1, 5]:", sizes)
    assert sizes[2] < sizes[1] < sizes[0] < 1e-3 and sizes[2] < 1e-5


def test_an_entry_near_its_plane_is_not_read_as_on_its_coordinates_surface():
    """Random case 166 (sign flow, depth-4 difference net): as u_2 leaves its surface, v_2 leaves its plane and sits
    at -5e-4, its G = -4 v^3 r_2 tiny with its factor. Read as on its switching surface (both one-sided fields move
    G toward 0 there), it was handed on as sliding, and Radau found no continuation for coordinates 2 and 3. Only
    entries whose r_j is near 0 and whose factor is not tiny are read so: Radau follows the case to t1 and ends where
    LSODA does."""
    radau, lsoda = ending(166, "scipy:Radau"), ending(166, "scipy:LSODA")
    assert radau[0] == lsoda[0] == "completed", (radau[2], lsoda[2])
    np.testing.assert_allclose(radau[1], lsoda[1], atol=1e-6)
