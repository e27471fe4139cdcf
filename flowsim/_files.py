"""Where flowsim writes files: the figure formats it saves, and the check that a file can be written at a path
(shared by saved runs, :mod:`flowsim.io`, and figures, :mod:`flowsim.plot`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

#: figure formats :func:`flowsim.plot.save` writes, by file extension
FIGURE_FORMATS = (".png", ".svg", ".pdf")


def writable_place(path) -> Path:
    """``path``, if a file can be written there: its nearest existing folder is a folder (not a file) we may
    write in (missing folders below it are made when it is written); ValueError otherwise, before any work
    (a file in the way had ended a finished run in a traceback, the run lost)."""
    path = Path(path)
    there = next(p for p in path.absolute().parents if p.exists())  # (the root always does)
    if not there.is_dir():
        raise ValueError(f"cannot write {path}: {there} is a file, not a folder.")
    try:  # by trying: as root, os.access says yes to /sys and /proc, where the save failed after the run
        tempfile.NamedTemporaryFile(dir=there).close()
    except OSError as err:
        raise ValueError(f"cannot write {path}: {there} does not take new files ({err.strerror}).") from None
    return path
