"""BLAS held at one thread while flowsim's own NumPy and SciPy work runs: the implicit methods' LU, the
separability certificate's products. Its matrices are small or matrix-vector, and OpenBLAS threads competing
with XLA's for the cores made BDF 3x slower at n = d = 100 and the certificate 30x slower at 2,000 x 500."""

from __future__ import annotations

import functools
import threading

from threadpoolctl import ThreadpoolController


class _OneBlasThread:
    """``enter`` ... ``leave`` (or ``with``): BLAS on one thread in between. Counted: solves in
    several threads at once (a sweep's chunks) limit it on entering first and restore it on leaving last
    (each restoring its own left it at one thread).
    The process's thread pools are found once (as ``threadpool_limits`` does on each call, 1 ms a
    segment: 5% of an LSODA solve at 20 x 10)."""

    def __init__(self):
        self._lock, self._inside, self._limited = threading.Lock(), 0, None

    def enter(self):
        with self._lock:
            if not self._inside:
                self._limited = _pools().limit(limits=1, user_api="blas")
            self._inside += 1

    def leave(self):
        with self._lock:
            self._inside -= 1
            if not self._inside:
                self._limited.restore_original_limits()

    def __enter__(self):
        self.enter()

    def __exit__(self, *exc):
        self.leave()


@functools.lru_cache(maxsize=None)
def _pools() -> ThreadpoolController:
    return ThreadpoolController()


ONE_BLAS_THREAD = _OneBlasThread()
