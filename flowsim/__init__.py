r"""flowsim: exact, long-horizon simulation of optimizer flows on linear models and diagonal linear
networks, for testing implicit-bias theorems.

The whole public API is re-exported here::

    import flowsim as fs
    system = fs.derive(fs.DiagonalNet(depth=2), "logistic", fs.SAM(rho=0.1, norm=2))
    sol = fs.solve(system, fs.Dataset(X, y), init=0.05, t1=1e100)

Names are imported on first use (PEP 562), so ``import flowsim`` and ``flowsim --help`` do not pay for
JAX, sympy and scipy until something needs them.
"""

import importlib as _importlib
import os as _os
import sys as _sys

#: the persistent compile cache's bound, least recently used entries evicted first (a kernel: ~0.1 MB)
COMPILE_CACHE_BYTES = 1024**3


def _configure_jax():
    """float64 everywhere, before any array is created, and a persistent compile cache (a solve compiles
    in seconds; FLOWSIM_JAX_CACHE=0 turns it off, or names the folder). Equinox must not be imported
    before flowsim for the cache to hold the solve kernel (see EQX_ON_ERROR below). Set through JAX's environment
    variables when jax is not imported yet (so importing flowsim does not import it), else directly."""
    where = _os.environ.get("FLOWSIM_JAX_CACHE", _os.path.join(_os.path.expanduser("~"), ".cache", "flowsim", "jax"))
    _os.environ["JAX_ENABLE_X64"] = "1"
    # equinox's runtime errors are host callbacks, and JAX never caches a kernel that has one: as NaN
    # instead, the solve kernel is cached (a second process's first solve: 2.1 s, not 5.8). flowsim calls
    # diffrax with throw=False and reads its result codes; a NaN state ends a solve as "failed".
    _os.environ.setdefault("EQX_ON_ERROR", "nan")
    settings = {} if where == "0" else _compile_cache_settings(where)
    for name, value in settings.items():
        _os.environ.setdefault(name.upper(), str(value))
    if "jax" in _sys.modules:
        jax = _sys.modules["jax"]
        jax.config.update("jax_enable_x64", True)
        for name, value in settings.items():
            jax.config.update(name, value)


def _compile_cache_settings(where):
    """JAX's persistent compile cache in ``where/xla``, bounded, so that JAX takes the folder's file lock
    (``filelock``) around every read and write of it: unbounded, JAX writes its entries in place unlocked, and
    a process sharing the folder could read one half written. A new folder, as a bounded cache needs an
    access-time file beside each entry, which the unbounded one (``where`` itself) never wrote."""
    return {"jax_compilation_cache_dir": _os.path.join(where, "xla"),
            "jax_persistent_cache_min_compile_time_secs": 0.5,
            "jax_compilation_cache_max_size": COMPILE_CACHE_BYTES}


_configure_jax()

#: public name -> (module, attribute); attribute None: the name is the module itself
_EXPORTS = {
    'Convergence': ('flowsim.theory.analysis', 'Convergence'),
    'LimitEstimate': ('flowsim.theory.analysis', 'LimitEstimate'),
    'Verdict': ('flowsim.theory.analysis', 'Verdict'),
    'angle': ('flowsim.theory.analysis', 'angle'),
    'convergence': ('flowsim.theory.analysis', 'convergence'),
    'distance': ('flowsim.theory.analysis', 'distance'),
    'limit_direction': ('flowsim.theory.analysis', 'limit_direction'),
    'leading_by_alpha': ('flowsim.theory.analysis', 'leading_by_alpha'),
    'leading_coordinate': ('flowsim.theory.analysis', 'leading_coordinate'),
    'linf_sam_prediction': ('flowsim.theory.analysis', 'linf_sam_prediction'),
    'margin_gap': ('flowsim.theory.analysis', 'margin_gap'),
    'sequential_amplification': ('flowsim.theory.analysis', 'sequential_amplification'),
    'shares': ('flowsim.theory.analysis', 'shares'),
    'switch_times': ('flowsim.theory.analysis', 'switch_times'),
    'verdict': ('flowsim.theory.analysis', 'verdict'),
    'Dataset': ('flowsim.data', 'Dataset'),
    'System': ('flowsim.symbolic.derive', 'System'),
    'derive': ('flowsim.symbolic.derive', 'derive'),
    'DerivationError': ('flowsim.errors', 'DerivationError'),
    'FlowsimError': ('flowsim.errors', 'FlowsimError'),
    'IntegrationError': ('flowsim.errors', 'IntegrationError'),
    'NonSeparableError': ('flowsim.errors', 'NonSeparableError'),
    'ReachabilityWarning': ('flowsim.errors', 'ReachabilityWarning'),
    'UncertifiedError': ('flowsim.errors', 'UncertifiedError'),
    'kept_entry_signs': ('flowsim.symbolic.reachable', 'kept_entry_signs'),
    'reachable_signs': ('flowsim.symbolic.reachable', 'reachable_signs'),
    'Flow': ('flowsim.symbolic.flow', 'Flow'),
    'ASAM': ('flowsim.symbolic.flows', 'ASAM'),
    'GD': ('flowsim.symbolic.flows', 'GD'),
    'SAM': ('flowsim.symbolic.flows', 'SAM'),
    'USAM': ('flowsim.symbolic.flows', 'USAM'),
    'AdamProxy': ('flowsim.symbolic.flows', 'AdamProxy'),
    'NormalizedGD': ('flowsim.symbolic.flows', 'NormalizedGD'),
    'SignFlow': ('flowsim.symbolic.flows', 'SignFlow'),
    'SteepestDescent': ('flowsim.symbolic.flows', 'SteepestDescent'),
    'directions': ('flowsim.symbolic.directions', None),
    'points': ('flowsim.symbolic.points', None),
    'Loss': ('flowsim.symbolic.loss', 'Loss'),
    'exponential_loss': ('flowsim.symbolic.loss', 'exponential_loss'),
    'logistic_loss': ('flowsim.symbolic.loss', 'logistic_loss'),
    'DiagonalNet': ('flowsim.symbolic.model', 'DiagonalNet'),
    'Linear': ('flowsim.symbolic.model', 'Linear'),
    'Parametrization': ('flowsim.symbolic.model', 'Parametrization'),
    'FAILURES': ('flowsim.integrate.status', 'FAILURES'),
    'OUTCOMES': ('flowsim.integrate.status', 'OUTCOMES'),
    'STATUSES': ('flowsim.integrate.status', 'STATUSES'),
    'Status': ('flowsim.integrate.status', 'Status'),
    'Solution': ('flowsim.integrate.solution', 'Solution'),
    'Event': ('flowsim.integrate.events', 'Event'),
    'LeaderSwitch': ('flowsim.integrate.events', 'LeaderSwitch'),
    'SignSwitch': ('flowsim.integrate.events', 'SignSwitch'),
    'Arrival': ('flowsim.integrate.events', 'Arrival'),
    'BackendChange': ('flowsim.integrate.events', 'BackendChange'),
    'datasets': ('flowsim.datasets', None),
    'io': ('flowsim.io', None),
    'plot': ('flowsim.plot', None),
    'testing': ('flowsim.testing', None),
    'optimizers': ('flowsim.discrete.optimizers', None),
    'AdamFixedPoint': ('flowsim.theory.fixed_point', 'AdamFixedPoint'),
    'FixedPointSearch': ('flowsim.theory.fixed_point', 'FixedPointSearch'),
    'adam_fixed_point': ('flowsim.theory.fixed_point', 'adam_fixed_point'),
    'adam_fixed_points': ('flowsim.theory.fixed_point', 'adam_fixed_points'),
    'Basins': ('flowsim.theory.fixed_point', 'Basins'),
    'adam_basins': ('flowsim.theory.fixed_point', 'adam_basins'),
    'L1Slack': ('flowsim.theory.slack', 'L1Slack'),
    'l1_dual_slack': ('flowsim.theory.slack', 'l1_dual_slack'),
    'adam_metric': ('flowsim.theory.fixed_point', 'adam_metric'),
    'DiscreteRun': ('flowsim.discrete.iterate', 'DiscreteRun'),
    'flow_distance': ('flowsim.discrete.iterate', 'flow_distance'),
    'iterate': ('flowsim.discrete.iterate', 'iterate'),
    'Optimizer': ('flowsim.discrete.optimizers', 'Optimizer'),
    'MaxMargin': ('flowsim.theory.references', 'MaxMargin'),
    'kkt_max_margin': ('flowsim.theory.references', 'kkt_max_margin'),
    'max_margin': ('flowsim.theory.references', 'max_margin'),
    'normalised_margin': ('flowsim.theory.references', 'normalised_margin'),
    'TailLimit': ('flowsim.theory.heavy_tails', 'TailLimit'),
    'polynomial_tail_limit': ('flowsim.theory.heavy_tails', 'polynomial_tail_limit'),
    'SaddleToSaddle': ('flowsim.theory.regression', 'SaddleToSaddle'),
    'implicit_regularizer_limit': ('flowsim.theory.regression', 'implicit_regularizer_limit'),
    'plot_saddle_to_saddle': ('flowsim.plot', 'plot_saddle_to_saddle'),
    'saddle_to_saddle': ('flowsim.theory.regression', 'saddle_to_saddle'),
    'Case': ('flowsim.theory.hunt', 'Case'),
    'Choice': ('flowsim.theory.hunt', 'Choice'),
    'Floats': ('flowsim.theory.hunt', 'Floats'),
    'HuntResult': ('flowsim.theory.hunt', 'HuntResult'),
    'Ints': ('flowsim.theory.hunt', 'Ints'),
    'SearchSpace': ('flowsim.theory.hunt', 'SearchSpace'),
    'hunt': ('flowsim.theory.hunt', 'hunt'),
    'solve': ('flowsim.integrate.solve', 'solve'),
    'sweep': ('flowsim.integrate.sweep', 'sweep'),
    'first_switch_log10_t': ('flowsim.theory.phase', 'first_switch_log10_t'),
    'linf_sam_boundaries': ('flowsim.theory.phase', 'linf_sam_boundaries'),
    'linf_sam_phase': ('flowsim.theory.phase', 'linf_sam_phase'),
    'switch_log10_t': ('flowsim.theory.phase', 'switch_log10_t'),
}

__version__ = "0.1.0"
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'flowsim' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = _importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
