"""The integrators: diffrax (``diffrax:<Solver>``) and scipy (``scipy:<Method>``) behind one segment
interface (:class:`Backend`: ``integrate(SegmentRequest) -> Segment``), and the choice ``backend="auto"`` makes."""

from __future__ import annotations

from flowsim.integrate.backends._base import Backend, Ending, Segment, SegmentRequest
from flowsim.integrate.backends._diffrax import DiffraxBackend
from flowsim.integrate.backends._scipy import ScipyBackend, segment_jacobian

#: Beyond this log10 t1 ``backend="auto"`` switches to an implicit method: in either clock the
#: relation between t and the loss relaxes at an O(1) rate, so explicit steps stay O(1) in log t.
AUTO_IMPLICIT_LOG10_T1 = 1000.0
#: scipy's implicit methods square error / atol in their error norms, which overflows below this atol
ATOL_MIN_IMPLICIT = 1e-150
#: integrates the segments that slide on switching surfaces for a backend that does not (an explicit method,
#: in any clock, with events on its dense output)
SURFACE_BACKEND = ScipyBackend("DOP853")


def backend_for(spec: str, log10_t1: float):
    if spec == "auto":
        spec = "diffrax:Tsit5" if log10_t1 <= AUTO_IMPLICIT_LOG10_T1 else "scipy:BDF"
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"backend must look like 'diffrax:Tsit5' or 'scipy:Radau'; got {spec!r}.")
    family, name = spec.split(":", 1)
    if family == "diffrax":
        return DiffraxBackend(name)
    if family == "scipy":
        return ScipyBackend(name)
    raise ValueError(f"unknown backend family {family!r} in {spec!r}; use 'diffrax:<Solver>' or 'scipy:<Method>'.")


__all__ = ["ATOL_MIN_IMPLICIT", "AUTO_IMPLICIT_LOG10_T1", "Backend", "DiffraxBackend", "Ending", "ScipyBackend", "Segment",
           "SURFACE_BACKEND", "SegmentRequest", "backend_for", "segment_jacobian"]
