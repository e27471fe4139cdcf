"""Faults an operator meets: SIGTERM from a scheduler or ``timeout``, Ctrl-C pressed again and again while a
file is written, a full disk, the temporaries a SIGKILL leaves. Each signal is a real one, sent to a
separate process that runs the command line or the API."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from typer.testing import CliRunner

import flowsim as fs
from flowsim import io
from flowsim.cli import app

runner = CliRunner()

RUN = """
loss = "logistic"
init = 0.05
t1 = 1e100
track = ["magnitude"]
[data]
X = [[1.0, 2.0, 3.0]]
y = [1]
[model]
form = "product"
depth = 2
[flow]
name = "sam"
rho = 0.1
"""

ITERATE = """
loss = "logistic"
init = 0.01
steps = 100000
records = 40
[data]
X = [[1.0, 2.0], [0.5, -1.0]]
y = [1, 1]
[model]
form = "product"
depth = 2
[optimizer]
name = "gd"
lr = 0.1
"""

#: in the child: a real SIGTERM to itself as its second backend call (a solve) starts, or once the fourth call
#: of discrete steps (iterate) has returned
KILLER = """
import contextlib, signal
from flowsim.testing import interrupt
KILLING = contextlib.ExitStack()  # (open for the child's whole life)
KILLING.enter_context(interrupt("segment", 2, signum=signal.SIGTERM))
KILLING.enter_context(interrupt("discrete call", 4, signum=signal.SIGTERM))
"""
#: a child process imports the flowsim under test (from its folder), not whichever one is installed
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(fs.__file__)),
                                                           os.environ.get("PYTHONPATH", "")])}


def _child(script, tmp_path):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(KILLER + script)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=CHILD_ENV)


@pytest.mark.parametrize("command, config", [("run", RUN), ("iterate", ITERATE)])
def test_sigterm_keeps_what_was_computed_saves_it_and_exits_143(tmp_path, command, config):
    """SIGTERM killed the process at once (rc -15) and saved nothing; now it is a Ctrl-C with its own code."""
    (tmp_path / "c.toml").write_text(config)
    out = _child(f"from flowsim.cli import app\napp(['{command}', 'c.toml', '--out', 'r.nc'])", tmp_path)
    assert out.returncode == 143, out.stderr
    ds = io.load(tmp_path / "r.nc")
    assert ds.attrs["status"] == "interrupted" and "terminated (SIGTERM)" in ds.attrs["message"], ds.attrs["message"]
    rows = ds.sizes["step" if command == "iterate" else "log10_t"]
    assert rows >= 2, rows


def test_sigterm_in_a_python_solve_is_a_result():
    script = KILLER + textwrap.dedent("""
        import numpy as np, flowsim as fs
        sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1)), fs.Dataset([[1.0, 2.0, 3.0]], [1]),
                       0.05, t1=1e100, track=("magnitude",), throw=False)
        print(sol.status, len(sol.log10_t), "|", sol.message)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=CHILD_ENV)
    assert out.returncode == 0, out.stderr
    status, rows, _, message = out.stdout.split(maxsplit=3)
    assert status == "interrupted" and int(rows) >= 2 and "terminated (SIGTERM)" in message


def test_sigterm_in_a_loop_of_solves_ends_the_script_at_its_next_solve():
    """The solve under way returns its result 'interrupted' (the loop may save it); the next one the loop starts
    ends the process with exit code 143: a scheduler's SIGTERM stops a script of many solves."""
    script = KILLER + textwrap.dedent("""
        import numpy as np, flowsim as fs
        system, data = fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1)), fs.Dataset([[1.0, 2.0, 3.0]], [1])
        for k in range(3):
            sol = fs.solve(system, data, 0.05, t1=1e100, track=("magnitude",), throw=False)
            print(k, sol.status, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=CHILD_ENV)
    assert out.returncode == 143, out.stderr
    assert out.stdout.split() == ["0", "interrupted"] and "not starting more work" in out.stderr


def test_outside_flowsim_sigterm_keeps_its_default():
    """flowsim installs its handler only while it works, and only where the default was in place."""
    fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset([[1.0, 2.0]]), 0.1, t1=1e3, saves=5)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ctrl_c_pressed_again_and_again_during_the_save_waits_for_the_file(tmp_path, monkeypatch):
    """Two Ctrl-Cs 0.3 s apart inside netCDF's close deadlocked the process (a lock never released); every
    press now waits for the file, which is written whole, and the exit code says interrupted."""
    real = io.save

    def save(result, out):
        for _ in range(3):
            os.kill(os.getpid(), signal.SIGINT)
        return real(result, out)

    monkeypatch.setattr(io, "save", save)
    (tmp_path / "c.toml").write_text(RUN.replace("1e100", "1e5"))
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        r = runner.invoke(app, ["run", str(tmp_path / "c.toml"), "--out", str(tmp_path / "r.nc")])
    finally:
        signal.signal(signal.SIGINT, old)
    assert r.exit_code == 130 and "saved" in r.output, r.output
    assert io.load(tmp_path / "r.nc").attrs["status"] == "completed"


def test_a_full_disk_is_one_line_and_the_run_is_kept_elsewhere(tmp_path, monkeypatch):
    """netCDF reports a full disk as RuntimeError('NetCDF: HDF error'): a 90-line traceback, the run lost."""
    import xarray as xr

    real = xr.Dataset.to_netcdf
    full = tmp_path / "full"

    def to_netcdf(self, path, *a, **k):
        if str(path).startswith(str(full)):
            raise RuntimeError("NetCDF: HDF error")
        return real(self, path, *a, **k)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", to_netcdf)
    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setenv("TMPDIR", str(spare))
    monkeypatch.setattr("tempfile.tempdir", None)
    (tmp_path / "c.toml").write_text(RUN.replace("1e100", "1e5"))
    r = runner.invoke(app, ["run", str(tmp_path / "c.toml"), "--out", str(full / "r.nc")])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 1 and len(lines) == 2 and "could not write" in lines[-1], r.output  # the summary, the error
    kept = list(spare.glob("flowsim-unsaved-*-r.nc"))
    assert "saved at" in lines[-1] and len(kept) == 1 and str(kept[0]) in lines[-1]
    assert io.load(kept[0]).attrs["status"] == "completed"
    assert not list(full.glob("*"))  # no temporary left behind


def test_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    """A SIGKILL mid-write leaves a hidden 0600 temporary that nothing cleaned."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".r.nc.{int(dead.stdout)}.abc123.tmp"
    live = tmp_path / f".r.nc.{os.getpid()}.def456.tmp"
    other = tmp_path / f".s.nc.{int(dead.stdout)}.abc123.tmp"
    for p in (stale, live, other):
        p.write_bytes(b"partial")
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset([[1.0, 2.0]]), 0.1, t1=1e3, saves=5)
    io.save(sol, tmp_path / "r.nc")
    assert not stale.exists() and live.exists() and other.exists()
    assert json.loads(io.load(tmp_path / "r.nc").attrs["config"])["saves"] == 5
    np.testing.assert_array_equal(io.load(tmp_path / "r.nc")["beta"].values, sol.beta)


def test_ctrl_c_in_a_long_iterate_keeps_the_state_it_reached():
    """Records only at steps 0 and 1e12: a Ctrl-C (a real SIGINT, sent after the third short call between the two
    records has returned, so the test depends neither on how long compiling takes nor on how fast the steps run:
    1e9 steps of this 2 x 2 problem took under 6 s on a quiet machine) must keep the state the last short call
    reached (strictly between the two), not wait for the next record or fall back to the one before."""
    script = textwrap.dedent("""
        import signal
        import numpy as np, flowsim as fs
        # a Ctrl-C as a terminal sends it, whatever the test process passed on (an ignored or blocked SIGINT is
        # inherited: once, in a full CI run, this child then ran its 1e12 steps to the timeout)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        data = fs.Dataset([[1.0, 2.0], [0.5, -1.0]], [1, 1])
        with fs.testing.interrupt("discrete call", nth=3, signum=signal.SIGINT):
            run = fs.iterate(fs.optimizers.gd(0.1), fs.DiagonalNet(2), "logistic", data, steps=10**12, records=2,
                             throw=False)
        print(run.status, int(run.steps[-1]), np.isfinite(run.beta[-1]).all(), "|", run.message)
    """)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    status, last, finite, _, message = child.stdout.split(maxsplit=4)
    assert status == "interrupted" and 0 < int(last) < 10**12 and finite == "True", child.stdout
    assert f"after step {last}" in message, message


def test_sigterm_during_the_save_of_a_run_finishes_the_file_and_exits_143(tmp_path):
    """A SIGTERM while io.save wrote the file aborted the write: the run, computed in full, was lost."""
    (tmp_path / "c.toml").write_text(RUN.replace("1e100", "1e5"))
    script = textwrap.dedent("""
        import os, signal
        import xarray as xr
        from flowsim.cli import app
        real = xr.Dataset.to_netcdf
        def write(self, *a, **k):  # the signal inside the write itself
            os.kill(os.getpid(), signal.SIGTERM)
            return real(self, *a, **k)
        xr.Dataset.to_netcdf = write
        app(['run', 'c.toml', '--out', 'r.nc'])
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=CHILD_ENV)
    assert out.returncode == 143, out.stderr
    assert io.load(tmp_path / "r.nc").attrs["status"] == "completed"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_an_interrupt_on_cue_lands_at_its_passage_only_and_names_a_wrong_moment():
    from flowsim.testing import MOMENTS, interrupt, reached

    with interrupt("segment", nth=2):
        reached("segment")
        reached("scipy step")  # another moment: not counted
        with pytest.raises(KeyboardInterrupt):
            reached("segment")
        reached("segment")  # later passages go on
    reached("segment")  # disarmed after the block
    with pytest.raises(ValueError, match="choose one of"):
        interrupt("step").__enter__()
    for nth in (0, 1.5, True):
        with pytest.raises(ValueError, match="nth counts passages"):
            interrupt("segment", nth).__enter__()
    with pytest.raises(ValueError, match="not a signal number"):
        interrupt("segment", signum=12345).__enter__()
    # every moment named is one the work passes: flowsim's source calls reached() with it
    from pathlib import Path

    source = "".join(p.read_text() for p in Path(fs.__file__).parent.rglob("*.py"))
    assert all(f'reached("{m}")' in source for m in MOMENTS)
