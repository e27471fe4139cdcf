"""The saves of a solve so far (:class:`Records`), kept in step with one another."""

from __future__ import annotations

import bisect

import numpy as np


class Records:
    """Each save's ``(s, y)``; the log-loss of the first saves, each found once; and, for a sign flow, the stretches
    of saves over which its signs held. Saves are appended, dropped from the end (``rewind``) or have their clock
    entries swapped (``hand_over``), and these keep the three in step. The states are kept in the blocks they
    came in (a segment's saves are one array: split into rows and stacked again they cost a tenth of a millisecond
    a solve).

    ``loss_of(states)``: the log-losses of parameter states (m, K, d).
    """

    def __init__(self, loss_of, K: int, d: int):
        self._s, self._blocks, self._ends, self._loss = [], [], [], []
        self._signs = []  # (first save, signs, sliding) of each stretch
        self._loss_of, self._shape = loss_of, (K, d)

    def __len__(self) -> int:
        return len(self._s)

    def s_at(self, i) -> float:
        return self._s[i]

    def y_at(self, i) -> np.ndarray:
        i = range(len(self._s))[i]  # (a negative index counts from the end; past it, an IndexError)
        b = bisect.bisect_right(self._ends, i)
        return self._blocks[b][i - (self._ends[b - 1] if b else 0)]

    def theta_at(self, i) -> np.ndarray:
        return self.y_at(i)[:-1].reshape(self._shape)

    def add(self, s, y):
        self.extend([s], np.asarray(y)[None])

    def extend(self, s_values, y_values):
        """Append saves: their s and their states (m, state) as one block."""
        s_values = list(s_values)
        if s_values:
            self._s.extend(s_values)
            self._blocks.append(np.asarray(y_values))
            self._ends.append(len(self._s))

    def rewind(self, keep: int) -> list:
        """Keep the first ``keep`` saves; returns the ``(s, y)`` of those dropped."""
        dropped = list(zip(self._s[keep:], self._states_from(keep)))
        kept = self._states_from(0)[:keep]
        del self._s[keep:], self._loss[keep:]
        self._blocks, self._ends = ([kept], [len(kept)]) if len(kept) else ([], [])
        self._signs = [stretch for stretch in self._signs if stretch[0] <= keep] or self._signs[:1]
        return dropped

    def hand_over(self, clock):
        """Every save in the clock an implicit method continues in (``Clock.for_implicit``)."""
        pairs = [clock.for_implicit(s, y) for s, y in zip(self._s, self._states_from(0))]
        self._s, self._blocks, self._ends = [], [], []
        self.extend([p[0] for p in pairs], [p[1] for p in pairs])

    def signs_from_here(self, sigma, sliding: bool):
        """A sign flow's signs from the next save on (and whether an entry slides under them)."""
        self._signs.append((len(self._s), sigma.copy(), bool(sliding)))

    def signs_at(self, i):
        """The signs a sign flow held when save ``i`` was made (None for other flows), and whether an entry slid."""
        if not self._signs:
            return None, False
        return next((sigma, sliding) for start, sigma, sliding in reversed(self._signs) if start <= i)

    def losses(self, start: int) -> list:
        """The log-losses of the saves from ``start`` on, each found once (and kept for the ``Solution``)."""
        if len(self._loss) < len(self._s):
            new = self._states_from(len(self._loss))
            self._loss.extend(self._loss_of(new[:, :-1].reshape((-1,) + self._shape)))
        return self._loss[start:]

    def known_losses(self) -> list:
        """The log-losses found so far, of the first saves."""
        return list(self._loss)

    def arrays(self):
        """(s, y) of every save, as arrays of their own: y is the one block itself where the saves are one block that
        owns its memory (a backend's copy, never written to; a solve reads this once, at its end, and copying it
        cost 30 us at 400 saves x 100), else the blocks joined into a new array."""
        if len(self._blocks) == 1 and self._blocks[0].base is None:
            return np.asarray(self._s), self._blocks[0]
        return np.asarray(self._s), np.concatenate(self._blocks) if self._blocks else np.asarray([])

    def _states_from(self, i: int) -> np.ndarray:
        """The states of saves ``i`` on, (saves, state): a view where they lie in one block (an empty list's array
        when there are none)."""
        b = bisect.bisect_right(self._ends, i)
        if b == len(self._blocks):
            return np.asarray([])
        first = self._blocks[b][i - (self._ends[b - 1] if b else 0):]
        return np.concatenate([first, *self._blocks[b + 1:]]) if b + 1 < len(self._blocks) else first
