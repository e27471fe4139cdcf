"""Run a reproduction suite and write ``report.md``, ``report.json`` and ``report.html`` (figures embedded).

``report.json`` schema (``SCHEMA_VERSION`` 4; docs/cli.md describes it)::

    {"schema_version": 4, "suite": str, "quick": bool, "complete": bool (false: stopped early, by a Ctrl-C or
     still running; the claims that finished are listed), "flowsim_version": str, "python": str,
     "wall_s": float, "cpu_s": float,
     "claims": [{"id": str, "seed": "000" | "002" | "classics",
                 "paper_statement": str, "checked_statement": str,
                 "strength": "as stated" | "weaker" | "corrected: <what>" | "identity of the model"
                             | "beyond the available text",
                 "setting": str,
                 "verdict": "holds" | "fails" | "inconclusive" | "open" | "descriptive", "why": str,
                 "measured": [{"run": str, "sentence": str, "numbers": [NUMBER]}],
                 "controls": [{"setting": str, "verdict": str, "why": str, "numbers": [NUMBER]}],
                 "searched": null | {"statement": str, "cases": int, "drawn": int, "undecided": int, "found": int,
                                     "budget": int, "seed": int, "exhausted": bool, "space": {str: str | list},
                                     "wall_s": float},
                 "counterexamples": [{"found_by": "measured", "statement": str, "setting": str, "verdict": str,
                                      "why": str, "numbers": [NUMBER]}
                                     | {"found_by": "hunt", "statement": str, "setting": str, "verdict": "fails",
                                        "why": str, "case": {str: value}, "shrunk_case": {str: value},
                                        "reproducer": str}],
                 "figure": str | null (a PNG next to the report), "wall_s": float, "cpu_s": float}]}

    NUMBER: {"key": str, "value": number | str | bool | list, "unit": str ("1": dimensionless)}
"""

from __future__ import annotations

import base64
import functools
import html
import json
import platform
import time
from pathlib import Path

import flowsim as fs
from flowsim._checks import is_whole
from flowsim._interrupts import propagating, stopped_by

from . import adam, classics, depth_maps, hunts, sam, scans
from ._claim import run_checks

#: each suite's checks: its seed's claims, then the scans and maps built on the same runs; the classic results
SUITES = {"sam": functools.partial(run_checks, sam.CHECKS + depth_maps.CHECKS),
          "adam": functools.partial(run_checks, adam.CHECKS + scans.CHECKS),
          "classics": functools.partial(run_checks, classics.CHECKS)}
#: names that run several suites in turn: "all" the two seeds' papers, "everything" every suite
GROUPS = {"all": ("sam", "adam"), "everything": tuple(SUITES)}
SCHEMA_VERSION = 4


def check_suite(suite: str) -> None:
    if suite not in (*SUITES, *GROUPS):
        raise ValueError(f"suite must be one of {', '.join([*SUITES, *GROUPS])}; got {suite!r}.")


def check_hunt_budget(budget) -> None:
    if budget is not None and not is_whole(budget):
        raise ValueError(f"hunt_budget must be a whole number >= 1 (criterion calls per claim's hunt); got {budget!r}.")


class Interrupted(Exception):
    """A Ctrl-C stopped the suite; ``path`` is the report of the ``finished`` claims (marked incomplete)."""

    def __init__(self, path: Path, finished: int):
        super().__init__(f"interrupted; {path} holds the {finished} claim(s) that finished")
        self.path, self.finished = path, finished


def prepare_out(out) -> Path:
    """``out`` as the report's folder, made if missing; a ValueError naming it if it cannot be (a file there)."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # FileExistsError (a file), NotADirectoryError (a file above), PermissionError
        raise ValueError(f"out: cannot make the folder {out} ({err.strerror}); give a folder for the report.") from None
    return out


def reproduce(suite: str, out, quick: bool = False, progress=print, hunt_budget: int | None = None) -> Path:
    """Run the suite's checks, rewriting the report after each claim (a run stopped later keeps them). A Ctrl-C
    stops the suite at once (a claim is not judged on a run it cut short) and raises :class:`Interrupted`.
    ``hunt_budget``: the criterion calls of each claim's search for counterexamples (None: each hunt's default,
    sized to keep the suite's time)."""
    check_suite(suite)
    check_hunt_budget(hunt_budget)
    out = prepare_out(out)
    names = GROUPS.get(suite, (suite,))
    start, cpu = time.perf_counter(), time.process_time()
    claims = []

    def write(complete: bool) -> Path:
        summary = {"schema_version": SCHEMA_VERSION, "suite": suite, "quick": quick, "complete": complete,
                   "flowsim_version": fs.__version__, "python": f"{platform.python_version()} {platform.machine()}",
                   "wall_s": round(time.perf_counter() - start, 1), "cpu_s": round(time.process_time() - cpu, 1),
                   "claims": [c.as_dict() for c in claims]}
        (out / "report.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        (out / "report.html").write_text(_html(summary, out))
        path = out / "report.md"
        path.write_text(_markdown(summary))
        return path

    budget = hunts.BUDGET.set(hunt_budget)
    try:
        with propagating():
            for name in names:
                for claim in SUITES[name](out, quick=quick, progress=progress):
                    claims.append(claim)
                    write(complete=False)
    except KeyboardInterrupt as err:
        stopped_by(err)
        raise Interrupted(write(complete=False), len(claims)) from None
    finally:
        hunts.BUDGET.reset(budget)
    return write(complete=True)


#: where the seeds' claims come from (docs/theory.md 5b and 8)
PROVENANCE = ("The claims are the papers' statements as docs/theory.md (5b, 8) gives them: from their abstracts, "
              "reviews and notes, not the papers' text; seed 000's statements at depth L >= 3 come from reviewers' "
              "notes only.")


#: what the strength column says (docs/reproduction.md)
STRENGTH = ("Strength: how the statement checked relates to the paper's: 'as stated' (tested on instances), 'weaker' "
            "(a consequence; what is left out is said), 'corrected: ...' (the stated form is false: the corrected form "
            "is checked and the stated one must fail on a measured counterexample), 'identity of the model' (follows "
            "algebraically from the flow's equations: it tests the integrator, not a theorem), 'beyond the available "
            "text' (flowsim's own question).")


#: where each suite's claims come from
SOURCES = {"sam": PROVENANCE, "adam": PROVENANCE, "classics": classics.PROVENANCE}


def _provenance(s) -> str:
    return " ".join(dict.fromkeys(SOURCES[name] for name in GROUPS.get(s["suite"], (s["suite"],))))


def _incomplete(s) -> list:
    if s["complete"]:
        return []
    return [f"INCOMPLETE: stopped after {len(s['claims'])} claim(s) (interrupted, or still running); the claims of "
            "the suite not listed here did not run.", ""]


def _title(s) -> str:
    return f"flowsim reproduction report: {s['suite']}{' (quick preset)' if s['quick'] else ''}"


def _timing(s) -> str:
    return (f"flowsim {s['flowsim_version']}, Python {s['python']}; wall time {s['wall_s']:.1f} s, "
            f"CPU time of this process {s['cpu_s']:.1f} s (JAX threads included).")


def _controls(c) -> str:
    return "; ".join(f"{k['verdict']}" for k in c["controls"]) or "none"


def _cell(x) -> str:
    return str(x).replace("|", "\\|")


def _markdown(s) -> str:
    lines = [f"# {_title(s)}", "", _timing(s), "",
             ("A claim **holds** only when its criterion holds on the claim's setting and *fails* on every negative "
              "control (a setting where the conclusion must not hold); a control that also holds makes it "
              "**inconclusive**. **open**: measured, no prediction to test; **descriptive**: a figure, no test."), "",
             _provenance(s), "", STRENGTH, "", *_incomplete(s),
             "| claim | verdict | strength | controls | why | s |", "|---|---|---|---|---|---|"]
    lines += [f"| {c['id']} | **{c['verdict']}** | {_cell(c['strength'])} | {_controls(c)} | {_cell(c['why'])} | "
              f"{c['wall_s']:.1f} |" for c in s["claims"]]
    for c in s["claims"]:
        lines += ["", f"## {c['id']}: {c['verdict']}", "", f"Paper: {c['paper_statement']}", "",
                  f"Checked: {c['checked_statement']}", "", f"Strength: **{c['strength']}**.", "",
                  f"Setting: {c['setting']}.", "",
                  f"Verdict: **{c['verdict']}** ({c['why']}).", "", "| run | measured |", "|---|---|"]
        lines += [f"| {_cell(m['run'])} | {_cell(m['sentence'])} |" for m in c["measured"]]
        if c["controls"]:
            lines += ["", "| negative control | verdict (must be fails) | measured |", "|---|---|---|"]
            lines += [f"| {_cell(k['setting'])} | **{k['verdict']}** | {_cell(k['why'])} |" for k in c["controls"]]
        if _measured(c):
            lines += ["", "| counterexample to the stated form | stated form | its verdict (must be fails) | measured |",
                      "|---|---|---|---|"]
            lines += [f"| {_cell(k['setting'])} | {_cell(k['statement'])} | **{k['verdict']}** | {_cell(k['why'])} |"
                      for k in _measured(c)]
        if c["searched"]:
            lines += ["", _searched(c)]
            if _hunted(c):
                lines += ["", "| counterexample found (shrunk) | why it fails | reproducer |", "|---|---|---|"]
                lines += [f"| {_cell(k['setting'])} | {_cell(k['why'])} | `{_cell(k['reproducer'])}` |" for k in _hunted(c)]
        if c["figure"]:
            lines += ["", f"![{c['id']}]({c['figure']})"]
    return "\n".join(lines) + "\n"


def _measured(c) -> list:
    return [k for k in c["counterexamples"] if k["found_by"] == "measured"]


def _hunted(c) -> list:
    return [k for k in c["counterexamples"] if k["found_by"] == "hunt"]


def _searched(c) -> str:
    h = c["searched"]
    return (f"Searched for counterexamples: {h['cases']} cases, found {h['found']} (statement: {h['statement']}; "
            f"{h['drawn']} drawn at random, the rest shrinking a failing case; {h['undecided']} undecided; seed "
            f"{h['seed']}, budget {h['budget']}, {h['wall_s']:.1f} s; space: "
            + ", ".join(f"{k} {v}" for k, v in h["space"].items()) + ").")


def _table(rows, head) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _html(s, out: Path) -> str:
    parts = [f"<h1>{html.escape(_title(s))}</h1><p>{html.escape(_timing(s))}</p><p>{html.escape(_provenance(s))}</p>"
             f"<p>{html.escape(STRENGTH)}</p>" + "".join(f"<p><b>{html.escape(x)}</b></p>" for x in _incomplete(s) if x),
             _table([(c["id"], c["verdict"], c["strength"], _controls(c), c["why"]) for c in s["claims"]],
                    ["claim", "verdict", "strength", "controls", "why"])]
    for c in s["claims"]:
        parts += [f"<h2 id='{c['id']}'>{html.escape(c['id'])}: {c['verdict']}</h2>",
                  f"<p><i>Paper:</i> {html.escape(c['paper_statement'])}</p>",
                  f"<p><i>Checked:</i> {html.escape(c['checked_statement'])}</p>",
                  f"<p><i>Strength:</i> <b>{html.escape(c['strength'])}</b></p>",
                  f"<p><i>Setting:</i> {html.escape(c['setting'])}</p>", _table([(m["run"], m["sentence"]) for m in c["measured"]], ["run", "measured"])]
        if c["controls"]:
            parts.append(_table([(k["setting"], k["verdict"], k["why"]) for k in c["controls"]],
                                ["negative control", "verdict (must be fails)", "measured"]))
        if _measured(c):
            parts.append(_table([(k["setting"], k["statement"], k["verdict"], k["why"]) for k in _measured(c)],
                                ["counterexample to the stated form", "stated form", "its verdict (must be fails)",
                                 "measured"]))
        if c["searched"]:
            parts.append(f"<p>{html.escape(_searched(c))}</p>")
            if _hunted(c):
                parts.append(_table([(k["setting"], k["why"], k["reproducer"]) for k in _hunted(c)],
                                    ["counterexample found (shrunk)", "why it fails", "reproducer"]))
        if c["figure"] and (out / c["figure"]).exists():
            data = base64.b64encode((out / c["figure"]).read_bytes()).decode()
            parts.append(f"<img alt='{c['id']}' src='data:image/png;base64,{data}' style='max-width:100%'>")
    style = "body{font-family:sans-serif;max-width:1200px;margin:auto}td,th{border:1px solid #ccc;padding:3px;font-size:13px}" \
            "table{border-collapse:collapse;margin:8px 0}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(_title(s))}</title>" \
           f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n"
