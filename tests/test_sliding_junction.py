"""At a switch of several coordinates, only the switching surfaces r_j = 0 the state is on have a side to choose.

The states are junctions where l_inf-SAM runs of tests/test_random_slides.py stopped (seeds 121, 15, 96: "3
consistent continuations", "2 consistent continuations", "6 switching surfaces at once"). Each had candidates whose
G = (dbeta_j/dw_lj) r_j was 0 with the factor, not with r_j: entries held on their planes w = 0 (no surface of their
coordinate to choose a side of: the choices differed in nothing) or a free entry whose factor is tiny (its coordinate
off its surface, with one side only). The continuation is unique once they are left out, and it is the limit of
discrete l_inf-SAM as its step goes to 0.
"""

import numpy as np
import pytest

import flowsim as fs
from flowsim.field import surfaces
from flowsim.field.vector_field import numpy_field
from flowsim.integrate import sliding
from tests.test_random_slides import random_case


def _mask(shape, entries):
    out = np.zeros(shape, bool)
    for k in entries:
        out[tuple(k)] = True
    return out


#: seed -> (theta, sigma, pinned entries, candidate entries, the coordinates (from 0) that slide on): the state at
#: the switch where the run stopped, as the solve reached it on backend "auto"
JUNCTIONS = {
    121: ([[1.534827793297063, 1.2824291817282565, 2.6754499999130834, 0.6072644676912587, 0.265478537689808, 0.0]],
          [[-0.9211430513863195, -1.0, -1.0, 1.0, 1.0, 0.0]], [(0, 5)], [(0, 0), (0, 1), (0, 5)], [0, 1]),
    15: ([[0.0, 0.9470240839965108, 0.17445720363593173], [0.6855818337762839, 0.0, 0.6410620317340574]],
         [[0.0, -1.0, -1.0], [-1.0, 0.0, -1.0]], [(0, 0), (1, 1)], [(0, 0), (1, 1), (1, 2)], [2]),
    96: ([[0.0, 0.0, 0.0, 0.0, 0.0, 0.11278954284108444],
          [0.000217836493907159, 0.031672256708642633, 0.0, 0.0, 0.0, 4.419208055050916e-16]],
         [[0.0, 0.0, 0.0, 0.0, 0.0, -1.0], [-1.0, -1.0, 0.0, 0.0, 0.0, 1.0]],
         [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)],
         [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (1, 5)], []),
}


def _junction(seed):
    """(field, theta, Z, rho, sigma, pinned, candidates, sliding coordinates) of one junction."""
    model, flow, data, _ = random_case(seed)
    theta, sigma, pinned, candidates, slides = JUNCTIONS[seed]
    theta, sigma = np.array(theta), np.array(sigma)
    vf = numpy_field(fs.derive(model, "logistic", flow), *theta.shape)
    return (vf, theta, data.z, float(flow.rho), sigma, _mask(theta.shape, pinned), _mask(theta.shape, candidates),
            slides)


@pytest.mark.parametrize("seed", sorted(JUNCTIONS))
def test_the_switch_chooses_sides_only_on_the_surfaces_the_state_is_on(seed):
    vf, theta, Z, rho, sigma, pinned, candidates, slides = _junction(seed)
    found = sliding.continuation(vf, theta, Z, rho, sigma, pinned, np.zeros_like(pinned), candidates)
    assert found.reason is None, found.reason
    assert np.flatnonzero(found.active.any(axis=0)).tolist() == slides
    r = vf.couplings(theta, Z)[3]
    assert np.all(np.abs(r[slides]) <= 1e-5 * np.abs(r).max())  # on their surfaces; the others well off theirs
    G = vf.direction(theta, Z)[0]
    off = ~found.active & ~pinned & (G != 0)
    assert np.array_equal(found.sigma[off], np.sign(G[off])), "a coordinate off its surface keeps the side of its G"


def _discrete_velocity(vf, theta, Z, rho, pinned, T, h):
    """(theta(T) - theta) / T of discrete l_inf-SAM with step h: theta <- theta - h grad L(theta + rho sign(grad L)),
    in real time (e^S~ F), with the held entries 1e-12 off their planes as a discrete run has them (sign(0) = 0 at
    exactly 0 would switch their perturbation off)."""
    th = theta + np.where(pinned, 1e-12, 0.0)
    for _ in range(int(round(T / h))):
        F, S = vf.field_and_scale(th, Z, rho, np.sign(vf.direction(th, Z)[0]))
        th = th + h * np.exp(S) * F
    return (th - theta) / T


def test_the_continuation_at_a_junction_is_the_limit_of_discrete_sam():
    """Seed 15's junction: the one continuation left (coordinate 3 slides, 1 and 2 keep the side of their G) moves
    as discrete l_inf-SAM does from there, ever closer as its step shrinks (2.5e-4, 1.0e-4 at steps 1e-6, 1e-7 over
    1e-4 of time); the one the old test also accepted (coordinate 1 on the side against its G) does not."""
    vf, theta, Z, rho, sigma, pinned, candidates, _ = _junction(15)
    found = sliding.continuation(vf, theta, Z, rho, sigma, pinned, np.zeros_like(pinned), candidates)

    def velocity(signs, active):
        spread = surfaces.spread_of(vf, theta, active)
        F, S = surfaces.evaluate(surfaces.jax_of(vf), "field_and_scale", theta, Z, rho, signs, pinned, spread)
        return np.exp(S) * np.asarray(F)

    flowsim = velocity(found.sigma, found.active)
    errors = [float(np.abs(_discrete_velocity(vf, theta, Z, rho, pinned, 1e-4, h) - flowsim).max()) for h in
              (1e-6, 1e-7)]
    print(f"discrete l_inf-SAM from the junction, max |velocity error| at steps 1e-6, 1e-7: {errors}")
    assert errors[1] < errors[0] and errors[1] < 1e-3 * np.abs(flowsim).max()
    other = found.sigma.copy()
    other[1, 0] = -other[1, 0]  # coordinate 1's free entry against the sign of its G, coordinate 3's control solved again
    other = sliding.filippov_control(vf, theta, Z, rho, other, pinned, found.active).sigma
    assert np.abs(velocity(other, found.active) - flowsim).max() > 100 * errors[0]
