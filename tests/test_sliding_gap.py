"""Sliding on one surface where one side's loss is e^31 above the other's: the field keeps its digits.

Random case 15 of tests/test_random_slides.py (l_inf-SAM, depth-4 difference net) slides on coordinate 1's surface
from log10 t = 1.2 to the end. The one-sided fields' log scales S_+ - S_- grow to 31 by log10 t = 12, where the
multilinear control s (the weight (1 + s)/2 of the real-time field e^S_+ F_+) is within 3e-14 of -1: a field computed
from it kept 2-3 digits, the state drifted off its surface and every backend failed at log10 t = 12.6
(docs/theory.md 3b, "One surface").
"""

import numpy as np

import flowsim as fs
from flowsim.field import surfaces
from flowsim.field.vector_field import numpy_field
from tests.test_random_slides import random_case

#: case 15's state at t = 1e12 (Radau), on coordinate 1's surface (|r_1| = 3e-11); u_1 and v_2 held on their planes
THETA = [[0.0, 3.295198314560233, 0.16450935785000334], [3.0032306799748443, 0.0, 0.24564885486352223]]
PINNED = [[True, False, False], [False, True, False]]
SLIDING = [[False, False, False], [True, False, False]]


def test_one_surface_field_is_filippovs_formula_at_a_gap_of_e31():
    model, flow, data, _ = random_case(15)
    vf = numpy_field(fs.derive(model, "logistic", flow), 2, 3)
    theta, pinned, Z, rho = np.array(THETA), np.array(PINNED), data.z, float(flow.rho)
    sigma = np.where(pinned, 0.0, np.sign(vf.direction(theta, Z)[0]))

    def one_sided(side):
        """The real-time field with v_1's sign ``side`` (NumPy field; the held entries by their own rule)."""
        signs = sigma.copy()
        signs[1, 0] = side
        F, S = vf.sliding_field_and_scale(theta, Z, rho, signs, pinned)
        return np.exp(S) * F, S

    def rate(V):
        """d G_v1 / dt along V, by central differences."""
        h = 1e-7 / np.abs(V).max()
        return (vf.direction(theta + h * V, Z)[0][1, 0] - vf.direction(theta - h * V, Z)[0][1, 0]) / (2 * h)

    (plus, S_plus), (minus, S_minus) = one_sided(1.0), one_sided(-1.0)
    assert abs(S_plus - S_minus) > 30
    a, b = rate(plus), rate(minus)
    assert a * b < 0  # both sides point into the surface
    filippov = (b * plus - a * minus) / (b - a)
    spread = surfaces.spread_of(vf, theta, np.array(SLIDING))
    F, S = surfaces.evaluate(surfaces.jax_of(vf), "field_and_scale", theta, Z, rho, sigma, pinned, spread)
    error = float(np.abs(np.exp(S) * np.asarray(F) - filippov).max() / np.abs(filippov).max())
    print(f"relative error of the sliding field at a gap S_+ - S_- = {abs(S_plus - S_minus):.1f}: {error:.2g}")
    assert error < 1e-6
