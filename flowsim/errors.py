"""Typed errors. Structural misuse is a ``ValueError``; numerical failure is a status on the
solution, raised as :class:`IntegrationError` only when ``throw=True``."""

from __future__ import annotations


class FlowsimError(Exception):
    """Base class of flowsim's own errors."""


class NonSeparableError(FlowsimError, ValueError):
    """The data set is not linearly separable (no beta with y_i <x_i, beta> > 0 for all i)."""


class IntegrationError(FlowsimError, RuntimeError):
    """An integration did not complete. ``.solution`` holds everything computed up to the failure."""

    def __init__(self, message: str, solution):
        super().__init__(message)
        self.solution = solution


class UncertifiedError(FlowsimError, RuntimeError):
    """A max-margin reference whose optimality could not be certified; ``.certificate`` holds the primal
    and dual margin bounds found (:class:`flowsim.theory.conic.Certificate`)."""

    def __init__(self, message: str, certificate=None):
        super().__init__(message)
        self.certificate = certificate


class ReachabilityWarning(UserWarning):
    """The data are separable, but not by any beta the model can reach from its initialisation
    (``Dataset.is_separable_by``): the flow converges to a critical point with a positive loss."""


class DerivationError(FlowsimError, AssertionError):
    """A derived system disagrees with an independent autodiff reference (``System.check``);
    ``.component`` names the piece that disagrees."""

    def __init__(self, message: str, component: str):
        super().__init__(message)
        self.component = component
