r"""The built-in flows, each a :class:`~flowsim.symbolic.flow.Flow` made from its parts with the
constructor a user gets (docs/theory.md 3)."""

from __future__ import annotations

from flowsim.symbolic.directions import AdamProxyDirection, Gradient, Normalized, Steepest
from flowsim.symbolic.flow import Flow
from flowsim.symbolic.points import AdaptiveAscent, Ascent, Here, UnnormalizedAscent


def GD(rho: float = 0.0) -> Flow:
    r"""Gradient flow :math:`\dot\theta = -\nabla L(\theta)`. It has no radius: ``rho`` is there only to refuse
    a non-zero one with the fix (``SAM(rho)`` or ``USAM(rho)`` for a perturbed flow)."""
    if rho:
        raise ValueError("GD takes no rho; use SAM(rho=...) or USAM(rho=...) for a perturbed flow.")
    return Flow(Here(), Gradient(), name="GD", shows=())


def SAM(rho: float, norm: float = 2, eps: float = 0.0) -> Flow:
    r"""Sharpness-aware minimisation flow with an :math:`\ell_p` ball of radius rho:
    :math:`\tilde\theta = \theta + \rho\,\mathrm{sign}(g)|g|^{q-1}/\|g\|_q^{q-1}`, 1/p + 1/q = 1.

    ``norm=2``: :math:`\rho g/\|g\|_2`; ``norm=inf``: :math:`\rho\,\mathrm{sign}(g)` (a Filippov
    system: sign switches are located by events and sliding on w_j = 0 is handled). The gradient at the
    perturbed point is applied at theta; the Jacobian of the perturbation is not differentiated
    (arXiv 2603.08290).

    ``eps > 0`` (finite p) normalises by :math:`\|(g, \epsilon)\|_q` instead (at p = 2,
    :math:`\rho g/\sqrt{\|g\|^2+\epsilon^2}`), a flow whose field vanishes at a regression's minima, so
    :func:`flowsim.solve` runs it there. It follows SAM until the flow reaches the set of minima and stops at
    the first minimum it reaches, for every eps > 0 (the ends converge as eps -> 0). The exact SAM flow
    (eps = 0) slides on along the set of minima, as discrete SAM at small steps does, so the eps -> 0 end is not
    SAM's after the arrival: :func:`flowsim.solve` follows that slide where it is unique (one sample, or samples on
    one line) and ends at the arrival, saying why, where it is not (docs/theory.md 12)."""
    return Flow(Ascent(norm, eps), Gradient(), rho=rho, name="SAM", shows=("rho", "norm", "eps") if eps else ("rho", "norm"))


def USAM(rho: float) -> Flow:
    r"""Unnormalised SAM flow: :math:`\tilde\theta = \theta + \rho\,\nabla L(\theta)`."""
    return Flow(UnnormalizedAscent(), Gradient(), rho=rho, name="USAM", shows=('rho',))


def ASAM(rho: float, norm: float = 2, eta: float = 0.01) -> Flow:
    r"""Adaptive SAM (Kwon et al. 2021): :math:`\tilde\theta = \theta + \rho T^2 g/\|T g\|_2`,
    :math:`T = |\theta| + \eta` elementwise; eta -> oo is SAM with radius rho eta."""
    return Flow(AdaptiveAscent(norm, eta), Gradient(), rho=rho, name="ASAM", shows=('rho', 'norm', 'eta'))


def SteepestDescent(norm: float = 2) -> Flow:
    r"""Steepest descent for the l_p norm, :math:`\dot\theta = -\|g\|_q\,\mathrm{sign}(g)|g|^{q-1}/\|g\|_q^{q-1}`:
    on a linear model and separable data its direction tends to the l_p max-margin (Gunasekar et al.
    2018). ``norm=2`` is GD; ``norm=inf`` is :math:`-\|g\|_1\mathrm{sign}(g)` (a Filippov system)."""
    return Flow(Here(), Steepest(norm), name="SteepestDescent", shows=('norm',))


def NormalizedGD(lr: float = 1.0, decay: float = 1.0) -> Flow:
    r"""Normalised gradient flow :math:`\dot\theta = -\eta(t)\,g/\|g\|_2`, :math:`\eta = lr\,(t+1)^{-a}`,
    in the schedule clock ds = eta dt (decay = 1: s = lr log(1+t))."""
    return Flow(Here(), Normalized(2), lr=lr, decay=decay, name="NormalizedGD", shows=('lr', 'decay'))


def SignFlow(lr: float = 1.0, decay: float = 1.0) -> Flow:
    r"""Sign flow :math:`\dot\theta = -\eta(t)\,\mathrm{sign}(g)`, :math:`\eta = lr\,(t+1)^{-a}`: the
    small-step limit of Signum and full-batch Adam (docs/theory.md 3). Integrated in the schedule clock
    :math:`ds = \eta(t)\,dt` as a Filippov system (sign switches by events). The default decay = 1
    makes s = lr log(1+t), so every horizon is a short integration."""
    return Flow(Here(), Normalized(float("inf")), lr=lr, decay=decay, name="SignFlow", shows=('lr', 'decay'))


def AdamProxy(lr: float = 1.0, decay: float = 1.0, batch: int = 1) -> Flow:
    r"""The beta_2 -> 1 proxy of (mini-batch) Adam (seed 002, Prop. 4.1 and its mini-batch form):
    :math:`\dot\theta = -\eta(t)\,\Phi`; b = 1 gives S / sqrt(N Q) (per-sample Adam). 1 <= b < N: b = N
    gives sign(S), which is :func:`SignFlow`. The limit of Adam on random mini-batches of b
    (``optimizers.adam(batch=("shuffle", b))``), not of fixed cyclic blocks (``batch=b``). Integrated in the
    schedule clock ds = eta(t) dt."""
    return Flow(Here(), AdamProxyDirection(batch), lr=lr, decay=decay, name="AdamProxy", shows=('lr', 'decay', 'batch'))
