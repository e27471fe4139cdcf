"""Progress for long work: a tqdm bar with elapsed time and rate on a terminal; elsewhere (a log file,
CI) a plain line every ``LOG_EVERY`` seconds and one at the end, since a bar's carriage returns leave
fragments in a file. Solves count in log10 t, sweeps in chunks (or points, solved one by one), discrete runs
in steps."""

from __future__ import annotations

import sys
import time

LOG_EVERY = 10.0


def progress_bar(total, unit, desc="", file=None, fmt=None):
    """An object with ``update(n)``, ``set_postfix_str(s)`` and ``close()``: tqdm's widget in a Jupyter
    kernel (whose stderr is no terminal), tqdm's bar on a terminal, :class:`LineProgress` elsewhere. Counts
    read as people write them: whole units scaled (``31.6M/1.00G steps``), fractions to two decimals
    (``581.96/1000003.00 decades``)."""
    if file is None and _in_notebook():
        from tqdm.notebook import tqdm as widget

        try:
            return widget(total=total, unit=unit, desc=desc or None, **_counts(total))
        except ImportError:  # (no ipywidgets: tqdm's text bar, which a notebook shows in place)
            pass
    file = file or sys.stderr
    if file is sys.stderr and _in_notebook() or getattr(file, "isatty", lambda: False)():
        from tqdm import tqdm

        counts = "{n_fmt}/{total_fmt}" if float(total).is_integer() else "{n:.2f}/{total:.2f}"
        return tqdm(total=total, unit=unit, desc=desc or None, file=file, **_counts(total), bar_format=fmt or (
            "{l_bar}{bar}| " + counts + " " + unit + " [{elapsed}<{remaining}, {rate_fmt}]{postfix}"))
    return LineProgress(total, unit, desc, file)


def _counts(total):
    """tqdm's settings for the counts: whole numbers scaled with SI prefixes, fractions as they are."""
    return {"unit_scale": True} if float(total).is_integer() else {}


def _in_notebook():
    """Whether this process is a Jupyter kernel (IPython with a kernel attached)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and hasattr(shell, "kernel")


class LineProgress:
    """The non-terminal progress: ``flowsim: <desc> 40% (4/10 chunks), 12.3 s elapsed``, a line at most every
    ``every`` seconds and one at the end."""

    def __init__(self, total, unit, desc, file, every=LOG_EVERY):
        self.total, self.unit, self.desc, self.file, self.every = total, unit, desc, file, every
        self.n, self.postfix, self.printed = 0, "", None
        self.t0 = self.logged = time.perf_counter()

    def update(self, n=1):
        self.n += n
        if time.perf_counter() - self.logged >= self.every:
            self._line()

    def set_postfix_str(self, s):
        self.postfix = s

    def close(self):
        if self.printed != (self.n, self.postfix):  # (the last update's line may already say it all)
            self._line()

    def _line(self):
        self.logged = time.perf_counter()
        self.printed = (self.n, self.postfix)
        share = f"{100 * self.n / self.total:.0f}% " if self.total else ""
        where = f", {self.postfix}" if self.postfix else ""
        # to 0.1% of the total: log10 t summed over steps reads 102.999 of 103 decades at the end
        whole = float(self.n).is_integer() or not self.total  # (counted in whole units: 71 of 320 read 71.04)
        done = self.n if whole else round(self.n * 1000 / self.total) * self.total / 1000
        lead = f"flowsim: {self.desc + ' ' if self.desc else ''}{share}"
        print(f"{lead}({done:.6g}/{self.total:.6g} {self.unit}{where}), {self.logged - self.t0:.1f} s elapsed",
              file=self.file, flush=True)
