"""When a run's order of leading coordinates is final, and horizons that grow until it is.

A leader order read at a horizon is only the order so far: a later switch (000-depth3's rho 0.4, alpha 0.2 has
one at log10 t = 32.05, past t = 1e30) would change it. So the reproduction extends a run's horizon until a
certificate says the leader can no longer change, and reports the order as truncated when no horizon it tries
gets there.

The certificate (one example (mu, +1), the balanced product network beta_j = w_j^L from a positive init, the
loss's common factor divided out as the clock tau): each flow here moves w_j by dw_j/dtau = mu_j w_j^(L-1)
f_j^(L-1), where f_j = 1 - p_j is what the perturbation leaves of w_j (p_j >= 0; p = 0 for GD; L = 1: dw_j/dtau
= mu_j). The leader a (largest w) stays the leader for ever once

* L = 1: mu_a is the largest mu (every w_j grows at its own constant rate mu_j);
* L >= 2: mu_a (1 - P)^(L-1) w_a^(L-2) >= mu_k w_k^(L-2) for every other k, where P >= p_a bounds the leader's
  perturbation from now on (so its rate is at least mu_a (1 - P)^(L-1) w_a^(L-1), and every other's at most
  mu_k w_k^(L-1) when 0 <= p_k <= 2). At L = 2 this compares relative growth rates, which the leader then wins
  for ever; at L >= 3 it says the leader's lower solution blows up (t -> infinity) before any other's upper one,
  and 1/w^(L-2) of both is linear in tau, so they cannot cross first.

P for each flow, from its perturbation (N = ||mu * w^(L-1)||_2 >= mu_a w_a^(L-1); P falls as w_a or the margin
m grows, so a bound that holds now holds later):

* l2-SAM: p_j = rho mu_j w_j^(L-2) / (sqrt(L) N), so P = rho / (sqrt(L) w_a), and p_k <= rho mu_k / (sqrt(L) mu_a
  w_a) for the others (checked <= 2 at L >= 3);
* USAM (L = 2): p_j = rho s mu_j, s = -l'(m) = 1 / (1 + e^m) the logistic loss's slope, so P = rho s mu_a;
* ASAM (L = 2, p = 2): p_j = rho mu_j (w_j + eta)^2 / (sqrt 2 ||mu w (w + eta)||), so P = rho (1 + eta / w_a) / sqrt 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

#: the horizons tried in turn after a run's own (log10 t): t -> infinity at a finite tau at L >= 3, and at L = 2 the
#: relative growth rates settle like the loss's slope, so each costs little more than the one before
LATER_LOG10_T1 = (1e2, 1e3, 1e4)


@dataclass(frozen=True)
class Finality:
    """Whether a run's leader at its horizon is its leader for ever: ``final``, ``why`` (a sentence) and
    ``slack``, the certificate's left side over its right side minus 1 (>= 0: final)."""

    final: bool
    why: str
    slack: float


def leader_perturbation_bound(flow, w, mu, leader: int, depth: int) -> float:
    """P: a bound on how much ``flow``'s perturbation shrinks the leader's weight (relative), valid from the state
    ``w`` (balanced layers, one example ``mu``) on; see the module's text."""
    name, rho = flow.name, flow.rho
    if name == "GD":
        return 0.0
    if name == "SAM" and flow.point.norm == 2:
        return rho / (np.sqrt(depth) * w[leader])
    if name == "USAM" and depth == 2:
        return rho * mu[leader] * float(expit(-np.dot(mu, w**2)))
    if name == "ASAM" and depth == 2 and flow.point.norm == 2:
        return rho * (1 + flow.point.eta / w[leader]) / np.sqrt(2)
    raise ValueError(f"flow: no finality certificate for {name} at depth {depth}; use GD, l2-SAM, or USAM / "
                     "l2-ASAM at depth 2.")


def order_is_final(flow, beta_end, mu, depth: int) -> Finality:
    """The certificate of the module's text on the state ``beta_end`` (positive, one example ``mu``, balanced
    depth-``depth`` product network) of a run of ``flow``."""
    beta, mu = np.asarray(beta_end, float), np.asarray(mu, float)
    if not np.all(np.isfinite(beta) & (beta > 0)):
        return Finality(False, f"beta = {beta.tolist()} is not positive and finite", float("nan"))
    w = beta ** (1.0 / depth)
    lead = int(np.argmax(w))
    others = np.arange(len(w)) != lead
    if depth == 1:
        slack = mu[lead] / mu[others].max() - 1.0
        return Finality(bool(slack >= 0), f"L = 1: the leader beta_{lead + 1} has {'the' if slack >= 0 else 'not the'} "
                        "largest feature", float(slack))
    bound = leader_perturbation_bound(flow, w, mu, lead, depth)
    rival = mu[others] * w[others] ** (depth - 2)
    slack = mu[lead] * (1 - bound) ** (depth - 1) * w[lead] ** (depth - 2) / rival.max() - 1.0
    why = (f"leader beta_{lead + 1}: mu_a (1 - P)^(L-1) w_a^(L-2) over the largest other mu_k w_k^(L-2) is "
           f"{slack + 1:.4g} (P = {bound:.3g})")
    others_bounded = depth == 2 or flow.name == "GD" or flow.rho * mu.max() / (np.sqrt(depth) * mu[lead] * w[lead]) <= 2
    return Finality(bool(slack >= 0 and bound < 1 and others_bounded), why, float(slack))
