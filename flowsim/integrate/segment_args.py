"""What a segment's field and events read, fixed for the length of one backend call."""

from __future__ import annotations

from typing import Any, NamedTuple


class Sliding(NamedTuple):
    """What slides in a segment, part of its compiled structure: entries held on their planes w = 0
    (``planes``), on how many switching surfaces the state slides (``surfaces``, one per coordinate), and
    whether it slides along a regression's interpolating minima (``on_minima``: docs/theory.md 12)."""

    planes: bool = False
    surfaces: int = 0
    on_minima: bool = False


class SegmentArgs(NamedTuple):
    """The arguments of one segment, by name. A NamedTuple is a JAX pytree: a compiled solve takes it whole,
    and ``jax.vmap`` maps its fields by name (``in_axes=SegmentArgs(...)`` with 0 or None per field).

    The field reads the first four and ``surfaces``; the events read the rest (``backends._events``). Fields an event set does
    not use may be None (a sweep's kernels have no sign switches: no ``watched`` nor ``sides``).
    """

    #: the data, sample-signed: z_i = y_i x_i (n, d)
    Z: Any
    #: the perturbation radius of a SAM flow (0: none)
    rho: Any
    #: per parameter entry: the Filippov sign of a sign flow, or the sign a smooth flow keeps (0: free)
    sigma: Any
    #: parameter entries held on their plane w = 0 (sliding there, or arrived on an invariant plane)
    pinned: Any
    #: the horizon as a value of u = log(1 + t), for a clock that carries u in the state
    u_end: Any = None
    #: log of the collapse floor (``collapse`` event)
    log_floor: Any = None
    #: log of the blow-up size (``blowup`` event)
    log_ceiling: Any = None
    #: the current leading coordinate of each tracked score (``lead_<kind>`` events)
    leaders: Any = None
    #: the entries whose sign switch is watched in this segment (sign flows)
    watched: Any = None
    #: per entry not watched, the |G_k| past which it is examined again (at least ``_events.SETTLE`` max |G|)
    settle: Any = None
    #: the side of 0 each parameter entry started on (0: not watched for a crossing)
    sides: Any = None
    #: the switching surfaces slid on, (m, K d) (``flowsim.field.surfaces.spread_of``; sign flows; None: none)
    surfaces: Any = None
    #: per entry approaching its rest plane theta_k = -rho sigma_k (``arrival.rest_planes``), sign(theta_k + rho
    #: sigma_k) / the distance at which it is set on the plane; 0 elsewhere (l_inf-SAM; None: none watched)
    rest: Any = None
    #: per coordinate with entries held on their planes w = 0, the sign of its coupling r_j at the segment's start;
    #: r_j turning through 0 turns the planes from attracting to repelling (sign flows without a perturbation; 0:
    #: not watched; None: none)
    held_couplings: Any = None

    def on_host(self) -> SegmentArgs:
        """The fields as NumPy arrays (None kept), ready for a compiled solve's C++ dispatch."""
        import numpy as np

        return SegmentArgs(*(None if a is None else np.asarray(a) for a in self))
