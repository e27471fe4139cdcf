"""Compiled solve kernels kept on disk between processes, so a new process starts warm.

JAX's persistent cache stores a kernel's *compiled* form, but finding it still means tracing the whole
diffrax solve in Python first, a second or more in every new process. Here a kernel is also exported
(``jax.export``: the lowered module, serialised) on its first call, and a later process that asks for
the same kernel loads that module instead of tracing: its compile then hits JAX's cache. The file name
is a digest of everything the traced code depends on: flowsim's own source, the versions of JAX and the
diffrax stack, the platform, the generated code of the system's formulas, the kernel's structure and
its arguments' shapes, so a change to any of them makes a new file rather than reusing a stale one.
Anything that fails here (no folder, an export JAX refuses, a damaged file) falls back to the traced
kernel.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
import tempfile
import threading
from importlib import metadata
from pathlib import Path

from flowsim._jax import jax
from flowsim.integrate.segment_args import SegmentArgs

# a kernel takes the segment's arguments as one SegmentArgs: its exported form names the type (a JAX without the
# registration exports nothing, and each process traces its kernels again)
if hasattr(jax.export, "register_namedtuple_serialization"):
    jax.export.register_namedtuple_serialization(SegmentArgs, serialized_name="flowsim.SegmentArgs")

#: kernels kept at most (each ~100 KB): every change of flowsim's source or a shape makes new ones
KEEP = 1000

_STACK = ("jax", "jaxlib", "diffrax", "equinox", "optimistix", "lineax", "flatbuffers")


def folder() -> Path | None:
    """Where exported kernels live: ``kernels/`` beside JAX's compile cache (FLOWSIM_JAX_CACHE; 0: none)."""
    where = os.environ.get("FLOWSIM_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "flowsim", "jax"))
    return None if where == "0" else Path(where) / "kernels"


@functools.lru_cache(maxsize=1)
def _environment() -> str:
    """flowsim's source and the versions of the stack it traces through, digested once per process."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]  # the flowsim package
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    for name in _STACK:
        try:
            h.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name}=-".encode())
    h.update(jax.default_backend().encode())
    return h.hexdigest()


def formulas(vf) -> str:
    """The generated code of a field's formulas and the field's own settings, as text. sympy numbers its
    dummy symbols process-wide (``_Dummy_168`` in one process, ``_Dummy_169`` in the next): they are
    renumbered by first appearance, so one system gives one text."""
    raw = vf.compiled.raw
    parts = [f"{name}:{_canonical(inspect.getsource(raw[name]))}" for name in sorted(raw)]
    return "\n".join(parts + [repr((vf.K, vf.d, vf.dual_exponent, vf.needs_P, vf.signed))])


def _canonical(source: str) -> str:
    seen: dict[str, str] = {}
    return re.sub(r"_Dummy_\d+", lambda m: seen.setdefault(m.group(0), f"_Dummy_{len(seen)}"), source)


class StoredKernel:
    """``jitted(*args)``, loaded from or exported to ``folder()`` on its first call with each set of argument
    shapes (an exported module has fixed shapes; a new n, as jit would, makes another). ``vf``: the field it
    integrates; ``structure``: the kernel's other build settings (both digested into the file name, only
    when a folder is in use)."""

    def __init__(self, run, vf, structure: tuple):
        self._run, self._vf, self._structure, self._calls = run, vf, structure, {}
        self._first = threading.Lock()

    def __call__(self, *args):
        leaves, tree = jax.tree_util.tree_flatten(args)
        signature = (tree, tuple((a.shape, a.dtype.str) for a in leaves))  # (NumPy leaves: ``host_arguments``)
        call = self._calls.get(signature)
        if call is not None:
            return call(*args)
        # a sweep's chunks arrive together from threads: one loads or exports, compiles and runs, the others
        # wait (a cold process's first chunk runs alone: one chunk's time beside a compile of seconds)
        with self._first:
            if signature in self._calls:
                return self._calls[signature](*args)
            call = self._load_or_export(repr(jax.tree_util.tree_unflatten(tree, signature[1])), args)
            if call is not None:
                try:
                    out = call(*args)
                    self._calls[signature] = call
                    return out
                except Exception:  # noqa: BLE001 -- a module this JAX cannot run: trace instead
                    pass
            out = self._run(*args)
            self._calls[signature] = self._run
            return out

    def _load_or_export(self, shapes, args):
        where = folder()
        if where is None:
            return None
        describe = f"{_environment()}\n{formulas(self._vf)}\n{self._structure!r}\n{shapes}"
        key = hashlib.sha256(describe.encode()).hexdigest()
        path = where / f"{key}.jaxexport"
        try:
            if path.exists():
                exported = jax.export.deserialize(bytearray(path.read_bytes()))
                os.utime(path)  # last used now (``_prune`` removes the longest unused)
            else:
                exported = jax.export.export(self._run)(*args)
                where.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=where, suffix=".part", delete=False) as f:
                    name = f.name
                    f.write(exported.serialize())
                os.replace(name, path)  # never a half-written kernel under its name
                _prune(where)
            return jax.jit(exported.call)
        except Exception:  # noqa: BLE001 -- any failure here only costs the trace it would have saved
            return None


def _prune(where: Path, keep: int | None = None) -> None:
    """Remove all but the ``keep`` (default ``KEEP``) most recently used kernels."""
    files = sorted(where.glob("*.jaxexport"), key=_last_used, reverse=True)
    for path in files[KEEP if keep is None else keep:]:
        path.unlink(missing_ok=True)


def _last_used(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another process's prune
        return 0.0
