"""flowsim: exact, long-horizon simulation of optimizer flows on linear models and diagonal linear
networks, for testing implicit-bias theorems.

The whole public API is re-exported here::

    import flowsim as fs
    system = fs.derive(fs.DiagonalNet(depth=2), "logistic", fs.SAM(rho=0.1, norm=2))
    sol = fs.solve(system, fs.Dataset(X, y), init=0.05, t1=1e100)
"""

import jax as _jax

# float64 everywhere, before any array is created
_jax.config.update("jax_enable_x64", True)


def _enable_compile_cache():
    """Persist XLA compilations across processes (a solve compiles in seconds; set
    FLOWSIM_JAX_CACHE=0 to turn this off, or to a folder to choose where it lives)."""
    import os

    where = os.environ.get("FLOWSIM_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "flowsim", "jax"))
    if where == "0":
        return
    try:
        _jax.config.update("jax_compilation_cache_dir", where)
        _jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except Exception:  # an older jax without the persistent cache: compile every time
        pass


_enable_compile_cache()

from flowsim.theory.analysis import (  # noqa: E402
    Convergence, LimitEstimate, Verdict, angle, convergence, distance, limit_direction, leading_by_alpha, leading_coordinate, linf_sam_prediction,
    margin_gap, sequential_amplification, shares, switch_times, verdict,
)
from flowsim.data import Dataset  # noqa: E402
from flowsim.symbolic.derive import System, derive  # noqa: E402
from flowsim.errors import DerivationError, FlowsimError, IntegrationError, NonSeparableError, ReachabilityWarning  # noqa: E402
from flowsim.theory.reachable import kept_entry_signs, reachable_signs  # noqa: E402
from flowsim.symbolic.flow import Flow  # noqa: E402
from flowsim.symbolic.flows import ASAM, GD, SAM, USAM, AdamProxy, NormalizedGD, SignFlow, SteepestDescent  # noqa: E402
from flowsim.symbolic import directions, points  # noqa: E402
from flowsim.symbolic.loss import Loss, exponential_loss, logistic_loss  # noqa: E402
from flowsim.symbolic.model import DiagonalNet, Linear, Parametrization  # noqa: E402
from flowsim.integrate.solution import FAILURES, OUTCOMES, STATUSES, Solution  # noqa: E402
from flowsim import datasets as datasets  # noqa: E402
from flowsim.discrete import optimizers as optimizers  # noqa: E402
from flowsim.theory.fixed_point import AdamFixedPoint, adam_fixed_point, adam_metric  # noqa: E402
from flowsim.discrete.iterate import DiscreteRun, flow_distance, iterate  # noqa: E402
from flowsim.discrete.optimizers import Optimizer  # noqa: E402
from flowsim.theory.references import MaxMargin, kkt_max_margin, max_margin, normalised_margin  # noqa: E402
from flowsim.integrate.solve import solve  # noqa: E402
from flowsim.integrate.sweep import sweep  # noqa: E402
from flowsim.theory.phase import first_switch_log10_t, linf_sam_boundaries, linf_sam_phase, switch_log10_t  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Dataset", "Parametrization", "DiagonalNet", "Linear", "Flow", "points", "directions", "GD", "SAM", "USAM", "ASAM",
    "SteepestDescent", "NormalizedGD", "SignFlow", "AdamProxy", "Loss", "exponential_loss", "logistic_loss",
    "derive", "System", "solve", "sweep", "switch_log10_t", "first_switch_log10_t", "linf_sam_phase", "linf_sam_boundaries", "Solution", "STATUSES", "OUTCOMES", "FAILURES",
    "FlowsimError", "DerivationError", "IntegrationError", "NonSeparableError", "ReachabilityWarning", "reachable_signs", "kept_entry_signs", "__version__",
    "optimizers", "Optimizer", "iterate", "flow_distance", "DiscreteRun", "datasets",
    "adam_fixed_point", "AdamFixedPoint", "adam_metric",
    "max_margin", "kkt_max_margin", "MaxMargin", "normalised_margin",
    "leading_coordinate", "shares", "switch_times", "sequential_amplification", "margin_gap", "angle",
    "convergence", "Convergence", "distance", "limit_direction", "LimitEstimate", "verdict", "Verdict", "linf_sam_prediction", "leading_by_alpha",
]
