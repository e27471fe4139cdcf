"""Run a reproduction suite and write ``report.md``."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import flowsim as fs

from . import adam, sam

SUITES = {"sam": sam.run, "adam": adam.run}
NOT_YET: dict = {}


def reproduce(suite: str, out, quick: bool = False, progress=print) -> Path:
    if suite not in (*SUITES, *NOT_YET, "all"):
        raise ValueError(f"suite must be one of {sorted([*SUITES, *NOT_YET, 'all'])}; got {suite!r}.")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = [*SUITES, *NOT_YET] if suite == "all" else [suite]
    start = time.perf_counter()
    claims, missing = [], []
    for name in names:
        if name in NOT_YET:
            missing.append((name, NOT_YET[name]))
            progress(f"[not run     ] {name}: {NOT_YET[name]}")
        else:
            claims.extend(SUITES[name](out, quick=quick, progress=progress))
    total = time.perf_counter() - start
    lines = [f"# flowsim reproduction report: {suite}{' (quick preset)' if quick else ''}", "",
             f"flowsim {fs.__version__}, Python {platform.python_version()}, {platform.machine()}; "
             f"total wall time {total:.1f} s.", "", "| claim | verdict | why | s |", "|---|---|---|---|"]
    lines += [f"| {c.id} | **{c.verdict}** | {c.why} | {c.seconds:.1f} |" for c in claims]
    lines += [f"| {n} | **not run** | {why} | |" for n, why in missing]
    for c in claims:
        lines += ["", f"## {c.id}: {c.verdict}", "", c.statement, "", f"Setting: {c.setting}.", "",
                  f"Verdict: **{c.verdict}** ({c.why}).", "", "| run | measured |", "|---|---|"]
        lines += [f"| {a} | {b} |" for a, b in c.numbers]
        if c.figure:
            lines += ["", f"![{c.id}]({c.figure})"]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
