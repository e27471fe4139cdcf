"""Event functions shared by both backends, written against an array namespace.

Each is ``f(s, y, args) -> float``, positive inside a segment, and ends the segment when it
falls through zero:

- ``horizon``  (tau clock): u_end - u;
- ``collapse`` (flows without sign): log max|theta| - log floor (l2-SAM collapses to 0 in finite time);
- ``blowup``:   log ceiling - log max|theta| (depth >= 3 blows up in finite tau);
- ``switch``   (sign flows): min over unsliding entries of sigma_k G_k(theta): some sign(G_k) is
  about to change, so the piecewise-smooth field must be re-examined.

``args = (Z, rho, sigma, pinned, u_end, log_floor, log_ceiling)``.
"""

from __future__ import annotations


def event_functions(vf, clock: str, uses_sign: bool) -> dict:
    xp, K, d = vf.xp, vf.K, vf.d

    def log_size(y):
        return xp.log(xp.max(xp.abs(y[:-1])) + 1e-300)

    fns = {"blowup": lambda s, y, args: args[6] - log_size(y)}
    if not uses_sign:  # sign flows reach 0 by sliding, which the switch event handles
        fns["collapse"] = lambda s, y, args: log_size(y) - args[5]
    if clock == "tau":
        fns["horizon"] = lambda s, y, args: args[4] - y[-1]
    if uses_sign:

        def switch(s, y, args):
            Z, _, sigma, pinned = args[:4]
            G, _ = vf.direction(xp.reshape(y[:-1], (K, d)), Z)
            return xp.min(xp.where(pinned, 1.0, sigma * G))

        fns["switch"] = switch
    return fns


def first_event(fns: dict, xp):
    """One continuous function, the minimum of all events: it crosses zero when the first does."""

    def combined(s, y, args):
        return xp.min(xp.stack([f(s, y, args) for f in fns.values()]))

    return combined
