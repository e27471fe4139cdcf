"""The saves of a solve so far (:class:`Records`), kept in step with one another."""

from __future__ import annotations

import numpy as np


class Records:
    """Each save's ``(s, y)``; the log-loss of the first saves, each found once; and, for a sign flow, the stretches
    of saves over which its signs held. Saves are appended, dropped from the end (``rewind``) or have their clock
    entries swapped (``hand_over``), and these keep the three in step.

    ``loss_of(states)``: the log-losses of parameter states (m, K, d).
    """

    def __init__(self, loss_of, K: int, d: int):
        self._s, self._y, self._loss = [], [], []
        self._signs = []  # (first save, signs, sliding) of each stretch
        self._loss_of, self._shape = loss_of, (K, d)

    def __len__(self) -> int:
        return len(self._y)

    def s_at(self, i) -> float:
        return self._s[i]

    def y_at(self, i) -> np.ndarray:
        return self._y[i]

    def theta_at(self, i) -> np.ndarray:
        return self._y[i][:-1].reshape(self._shape)

    def add(self, s, y):
        self._s.append(s)
        self._y.append(y)

    def extend(self, s_values, y_values):
        self._s.extend(list(s_values))
        self._y.extend(list(y_values))

    def rewind(self, keep: int) -> list:
        """Keep the first ``keep`` saves; returns the ``(s, y)`` of those dropped."""
        dropped = list(zip(self._s[keep:], self._y[keep:]))
        del self._s[keep:], self._y[keep:], self._loss[keep:]
        self._signs = [stretch for stretch in self._signs if stretch[0] <= keep] or self._signs[:1]
        return dropped

    def hand_over(self, clock):
        """Every save in the clock an implicit method continues in (``Clock.for_implicit``)."""
        pairs = [clock.for_implicit(s, y) for s, y in zip(self._s, self._y)]
        self._s, self._y = [p[0] for p in pairs], [p[1] for p in pairs]

    def signs_from_here(self, sigma, sliding: bool):
        """A sign flow's signs from the next save on (and whether an entry slides under them)."""
        self._signs.append((len(self._y), sigma.copy(), bool(sliding)))

    def signs_at(self, i):
        """The signs a sign flow held when save ``i`` was made (None for other flows), and whether an entry slid."""
        if not self._signs:
            return None, False
        return next((sigma, sliding) for start, sigma, sliding in reversed(self._signs) if start <= i)

    def losses(self, start: int) -> list:
        """The log-losses of the saves from ``start`` on, each found once (and kept for the ``Solution``)."""
        new = self._y[len(self._loss):]
        if new:
            self._loss.extend(self._loss_of(np.asarray(new)[:, :-1].reshape((-1,) + self._shape)))
        return self._loss[start:]

    def known_losses(self) -> list:
        """The log-losses found so far, of the first saves."""
        return list(self._loss)

    def arrays(self):
        """(s, y) of every save as arrays."""
        return np.asarray(self._s), np.asarray(self._y)
