"""CLI via typer's runner, saved runs (round trip, atomic write), and the reproduce machinery."""

import json
import os
import re

import numpy as np
import pytest
from typer.testing import CliRunner

import flowsim as fs
from flowsim import io
from flowsim.cli import app
from flowsim.testing import interrupt

runner = CliRunner()

CONFIG = """
loss = "logistic"
init = 0.3
t1 = 1e20
saves = 30
[data]
X = [[1.0, 2.0]]
y = [1]
[model]
form = "product"
depth = 2
[flow]
name = "sam"
rho = 0.05
"""


def test_save_load_round_trip_is_bit_identical(tmp_path, one_sample):
    sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05)), one_sample, 0.3, t1=1e30, saves=25)
    path = io.save(sol, tmp_path / "run.nc")
    ds = io.load(path)
    for name, arr in [("beta", sol.beta), ("params", sol.params), ("log_loss", sol.log_loss), ("tau", sol.tau),
                      ("margins", sol.margins)]:
        assert np.array_equal(ds[name].values, arr), name
    assert np.array_equal(ds["log10_t"].values, sol.log10_t)
    assert ds.attrs["status"] == "completed" and r"\tilde{w}_{1}" in ds.attrs["equations_latex"]
    assert "diffrax" in ds.attrs["versions"] and ds.attrs["git_revision"]


def test_interrupted_save_leaves_the_old_run_intact(tmp_path, one_sample, monkeypatch):
    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), one_sample, 0.1, t1=1e10, saves=10)
    path = io.save(sol, tmp_path / "run.nc")
    before = path.read_bytes()
    import xarray as xr

    def crash(self, target, *a, **k):
        with open(target, "wb") as f:
            f.write(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", crash)
    with pytest.raises(KeyboardInterrupt):
        io.save(sol, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.nc"]  # no temporary file left behind


def test_cli_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("flowsim ") and fs.__version__ in r.output


def test_cli_run_plot_derive(tmp_path):
    cfg = tmp_path / "exp.toml"
    cfg.write_text(CONFIG)
    out = tmp_path / "run.nc"
    r = runner.invoke(app, ["run", str(cfg), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "completed" in r.output
    ds = io.load(out)
    direct = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05)), fs.Dataset([[1.0, 2.0]], [1]), 0.3,
                      t1=1e20, saves=30)
    np.testing.assert_array_equal(ds["beta"].values, direct.beta)  # same code path as the API
    r = runner.invoke(app, ["plot", str(out)])  # the figure is named after the run by default
    assert r.exit_code == 0 and (tmp_path / "run.png").stat().st_size > 1000 and "run.png" in r.output
    r = runner.invoke(app, ["derive", "--model", "tied", "--flow", "sam", "--rho", "0.1", "--latex"])
    assert r.exit_code == 0 and r"\tilde{w}" in r.output


def test_config_builds_your_own_model_loss_and_flow(tmp_path):
    text = CONFIG.replace('form = "product"\ndepth = 2', 'beta = "w1*w2**2"').replace(
        'name = "sam"\nrho = 0.05', 'name = "asam"\nrho = 0.05\neta = 0.1')
    text = text.replace('loss = "logistic"', "") + '\n[loss]\nexpr = "exp(-m) + exp(-2*m)"\nname = "two"\n'
    cfg = tmp_path / "own.toml"
    cfg.write_text(text)
    import tomllib

    from flowsim.config import build, parse

    system, data, init, kw = build(parse(tomllib.loads(text)))
    assert system.model == fs.Parametrization("w1*w2**2", 2, lambda a, b: a * b**2)
    assert system.flow == fs.ASAM(0.05, 2, 0.1) and system.loss.tail_rate == pytest.approx(1.0, rel=1e-6)
    r = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "own.nc")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["derive", "--beta", "w1*w2**2", "--loss", "exp(-m)+exp(-2*m)", "--flow", "steepest",
                            "--norm", "3"])
    assert r.exit_code == 0 and "beta = w1*w2**2" in r.output and "logsumexp" in r.output, r.output


@pytest.mark.parametrize(
    "text, message",
    [("t1 = 10\n", "missing key 'data' (a table [data]"),
     (CONFIG.replace('name = "sam"', 'name = "adamw"'), "key 'flow.name': Input should be 'gd', 'sam', 'usam'"),
     (CONFIG.replace('form = "product"\ndepth = 2', 'beta = "w1*w2**"'), "beta = 'w1*w2**' is refused: 'w1*w2**' is not a formula (invalid syntax)"),
     (CONFIG.replace('depth = 2', 'depth = 2\nbeta = "a*b"'), "beta defines the model; drop form and depth"),
     (CONFIG.replace('loss = "logistic"\n', "") + '[loss]\nexpr = "exp(m)"\n', "must be > 0 for every margin"),
     (CONFIG.replace('rho = 0.05', 'rho = 0.05\nbatch = 2'), "name = 'sam' takes rho, norm, eps; drop batch"),
     # a built-in loss written as a table: the fix is named, not only the missing key
     (CONFIG.replace('loss = "logistic"\n', "") + '[loss]\nname = "square"\n',
      "missing key 'loss.expr' (a [loss] table is a loss of your own, expr = 'log(1 + exp(-m))'; a built-in one is "
      "named at the top level, before any table: loss = 'logistic'"),
     # a misspelt table was reported as the missing one
     (CONFIG.replace("[data]", "[dta]"), "unknown key 'dta'; did you mean 'data'?"),
     (CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", "X = [[1.0, 2.0], [1.0]]\ny = [1, 1]"),
      "X must be an array of numbers, every row of the same length"),
     # a [loss] table's stray key was reported as the name branch's "should be 'logistic' or 'exponential'"
     (CONFIG.replace('loss = "logistic"\n', "") + '[loss]\nexpr = "exp(-m)"\nnmae = "e"\n',
      "unknown key 'loss.nmae'; did you mean 'loss.name'?"),
     (CONFIG.replace('loss = "logistic"\n', "") + '[loss]\nexpr = "exp(-m)"\nrtol = 1e-9\n',
      "unknown key 'loss.rtol': 'rtol' is a top-level key; in TOML it must come before the first [table]"),
     # SAM without rho ran as SAM with rho = 0 (gradient flow under SAM's name)
     (CONFIG.replace("rho = 0.05\n", ""), "flow 'sam' needs rho"),
     (CONFIG.replace("t1 = 1e20", "t1 = 1e20\nhorizon = 3"), "unknown key 'horizon'"),
     (CONFIG.replace("rho = 0.05", "rh0 = 0.1"), "unknown key 'flow.rh0'; did you mean 'flow.rho'?"),
     # keys that begin like pydantic's type names ('int', 'float') are still keys
     (CONFIG.replace("init = 0.3", "intial = 0.3"), "unknown key 'intial'; did you mean 'init'?"),
     (CONFIG.replace("t1 = 1e20", "t1 = 1e20\nfloatx = 1"), "unknown key 'floatx'"),
     (CONFIG.replace("rho = 0.05", "rho = 0.05\nintegrator = 'x'"), "unknown key 'flow.integrator'"),
     (CONFIG.replace("depth = 2", "depth = 2.7"), "key 'model.depth': Input should be a valid integer; got 2.7"),
     (CONFIG.replace("depth = 2", 'depth = "two"'), "key 'model.depth'"),
     ("model = 3\n" + CONFIG.replace('[model]\nform = "product"\ndepth = 2\n', ""), "key 'model'"),
     (CONFIG.replace("init = 0.3", 'init = "big"'), "key 'init'"),
     (CONFIG.replace("init = 0.3", "init = [0.3, 0.3, 0.3]"), "init"),
     (CONFIG.replace("saves = 30", 'saves = "many"'), "key 'saves'"),
     (CONFIG.replace("saves = 30", "saves = 10000000"), "saves must be an integer in [2, 1,000,000]"),
     (CONFIG.replace("rho = 0.05", "rho = -1.0"), "key 'flow.rho'"),
     (CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", "X = [[1.0], [1.0]]\ny = [1, -1]"), "allow_nonseparable"),
     (CONFIG.replace("t1 = 1e20\n", ""), "give exactly one of t1"),
     ("rho = 0.1\n" + CONFIG, "did you mean 'rho' in the table [flow]?"),
     (CONFIG.replace('name = "sam"', 'name = "gd"'), "name = 'gd' takes no other keys; drop rho"),
     (CONFIG.replace("t1 = 1e20", "t1 = inf"), "key 't1'"),
     # a MemoryError, "negative dimensions are not allowed", a class against itself, an int iterated (tracebacks
     # or words that named no key), a run that failed with NaNs
     (CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", "gaussian = {n = 1, d = 100000000000}"), "data.gaussian: n x d"),
     (CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", "gaussian = {n = 3, d = 2, seed = -1}"), "data.gaussian: seed"),
     (CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'builtin = "scaled_rademacher"\noptions = {n = -3}'),
      "data.options: n must be an integer >= 1"),
     (CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'builtin = "digits"\noptions = {a = 0, b = 0}'),
      "data.options: a and b must be two different digits"),
     (CONFIG.replace('form = "product"\ndepth = 2', 'beta = "w1*w2"\nlayers = 3'),
      "does not depend on layer(s) ['w3']"),
     (CONFIG.replace("t1 = 1e20", "t1 = 1e20\nrtol = 1e-300"), "rtol must be in"),
     (CONFIG.replace("t1 = 1e20", "t1 = 1e20\nmax_steps = 0"), "max_steps must be a positive integer"),
     (CONFIG.replace("init = 0.3", "init = [[0.1, 0.2], [0.1]]"), "key 'init': init's rows must have the same length"),
     (CONFIG.replace("init = 0.3", "init = [0.1, 1e400]"), "init contains NaN or inf")],
)
def test_cli_bad_config_names_the_key(tmp_path, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    r = runner.invoke(app, ["run", str(cfg)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("flowsim: error:")]
    assert len(lines) == 1 and message in lines[0], r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)  # no traceback


def test_config_files_as_editors_write_them(tmp_path):
    """A byte-order mark is read past ("Invalid statement (line 1, column 1)"); bytes that are not UTF-8 are one
    line (a bare codec error); max_steps is a key (a failure's message tells the user to raise it)."""
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(b"\xef\xbb\xbf" + CONFIG.replace("t1 = 1e20", "t1 = 1e20\nmax_steps = 3").encode())
    r = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "r.nc")])
    assert r.exit_code == 1 and "max_steps" in r.output and io.load(tmp_path / "r.nc").attrs["status"] == "max_steps"
    cfg.write_bytes(b"init = 0.3\xff\n")
    r = runner.invoke(app, ["run", str(cfg)])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "is not UTF-8 text" in lines[0], r.output


def test_an_out_path_below_a_file_is_one_line_before_the_run(tmp_path, monkeypatch):
    """A finished run was lost to a FileExistsError traceback at the save; a figure the same way."""
    import flowsim

    (tmp_path / "afile").write_text("x")
    monkeypatch.setattr(flowsim, "solve", lambda *a, **k: pytest.fail("ran before the out path was checked"))
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    for args in (["run", str(cfg), "--out", str(tmp_path / "afile" / "r.nc")],
                 ["plot", str(cfg), "--out", str(tmp_path / "afile" / "r.png")]):
        r = runner.invoke(app, args)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and "is a file, not a folder" in lines[0], r.output


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("command", ["run", "sweep", "iterate"])
def test_an_out_folder_that_takes_no_files_is_one_line_before_the_run(tmp_path, monkeypatch, command):
    """/proc (and /sys) refuse new files even to root, whom os.access lets write anywhere: the run finished, then
    "could not write ...; the result is not saved"."""
    import flowsim

    for name in ("solve", "sweep", "iterate"):
        monkeypatch.setattr(flowsim, name, lambda *a, **k: pytest.fail("ran before the out path was checked"))
    cfg = tmp_path / "c.toml"
    cfg.write_text({"run": CONFIG, "sweep": SWEEP, "iterate": ITERATE}[command])
    r = runner.invoke(app, [command, str(cfg), "--out", "/proc/flowsim-nope/r.nc"])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "/proc does not take new files" in lines[0], r.output


def test_plot_of_a_netcdf_file_that_is_not_a_whole_run_is_one_line(tmp_path, one_sample):
    import xarray as xr

    sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), one_sample, 0.1, t1=1e3, saves=5)
    path = io.save(sol, tmp_path / "ok.nc")
    ds = xr.open_dataset(path).load()
    ds.drop_vars("tau").to_netcdf(tmp_path / "notau.nc")
    ds.copy(deep=True).assign_attrs(config="{bad").to_netcdf(tmp_path / "badconfig.nc")
    ds.copy(deep=True).assign_attrs(system_spec='{"model": 1}').to_netcdf(tmp_path / "badspec.nc")
    ds.attrs["system_spec"] = "{bad"
    ds.to_netcdf(tmp_path / "badjson.nc")
    for name, message in (("notau.nc", "notau.nc is not a whole saved run: it has no variable 'tau'"),
                          ("badjson.nc", "badjson.nc: its attribute 'system_spec' is not valid JSON"),
                          ("badconfig.nc", "badconfig.nc: its attribute 'config' is not valid JSON"),
                          ("badspec.nc", "badspec.nc: its system_spec does not rebuild a system")):
        r = runner.invoke(app, ["plot", str(tmp_path / name), "--out", str(tmp_path / "x.png")])
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output


@pytest.mark.parametrize("command", ["run", "sweep", "iterate"])
def test_a_missing_config_file_is_one_line(tmp_path, command):
    for path in (tmp_path / "nope.toml", tmp_path):
        r = runner.invoke(app, [command, str(path)])
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and "no config file at" in lines[0], r.output


@pytest.mark.parametrize("command, text", [("run", "CONFIG"), ("sweep", "SWEEP"), ("iterate", "ITERATE")])
def test_an_out_file_not_named_as_netcdf_is_one_line_before_the_run(tmp_path, monkeypatch, command, text):
    """--out run.png wrote netCDF under a figure's name; it is refused before anything runs."""
    cfg = tmp_path / "exp.toml"
    cfg.write_text(globals()[text])
    ran = []
    for name in ("solve", "sweep", "iterate"):
        monkeypatch.setattr(fs, name, lambda *a, **k: ran.append(1))
    for out, hint in (("run.png", "flowsim plot run.nc --out run.png"), ("run", "no extension")):
        r = runner.invoke(app, [command, str(cfg), "--out", str(tmp_path / out)])
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1, r.output
        assert "name the file with .nc" in lines[0] and hint in lines[0], r.output
    assert not ran and sorted(p.name for p in tmp_path.iterdir()) == ["exp.toml"]


def test_plot_of_a_missing_run_is_one_line(tmp_path):
    for path, message in ((tmp_path / "nope.nc", "no saved run at"), (tmp_path, "is a folder")):
        r = runner.invoke(app, ["plot", str(path), "--out", str(tmp_path / "x.png")])
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output


@pytest.mark.parametrize("flow", ["sam", "usam", "asam"])
def test_derive_without_a_radius_keeps_rho_a_symbol(flow):
    """The equations are symbolic in rho: ``derive --flow sam`` demanded --rho, whose value it never showed."""
    r = runner.invoke(app, ["derive", "--flow", flow])
    assert r.exit_code == 0 and "rho" in r.output and "1.0" not in r.output, r.output
    r = runner.invoke(app, ["derive", "--flow", flow, "--latex"])
    header = r.output.splitlines()[0]
    assert r.exit_code == 0 and "(rho" in header and "rho=" not in header, header
    r = runner.invoke(app, ["derive", "--flow", flow, "--rho", "0.3", "--latex"])
    assert "rho=0.3" in r.output.splitlines()[0], r.output


@pytest.mark.parametrize("flow", ["sam", "normalized_gd", "sign", "adam_proxy", "steepest"])
def test_derive_says_what_every_symbol_stands_for(flow):
    """Plain ``derive`` printed r, r~, S~, N, P~, tau and sigma with no word of what they are."""
    r = runner.invoke(app, ["derive", "--flow", flow])
    equations, _, legend = r.output.partition("\nwhere ")
    name = r"[A-Za-z_][A-Za-z_0-9]*~?"
    right = " ".join(line.split(" = ", 1)[1] for line in equations.splitlines())
    used = {re.sub(r"_w\d+$", "_w", x) for x in re.findall(name, right)} - {"Derivative", "softplus", "sign", "sqrt", "exp", "log", "Abs", "tau", "t"}
    defined = {re.sub(r"_[ij]$", "", x) for x in re.findall(name, legend)}
    layer = re.compile(r"w\d+~?$")
    assert {u for u in used if not layer.match(u)} <= defined, (used - defined, r.output)


@pytest.mark.parametrize("args, message", [
    (["--beta", "Q"], "names of numpy or sympy"),                 # sympy's assumptions object: an AttributeError
    (["--beta", "1e400*w"], "the number 1e400 overflows float64"),  # an OverflowError in the generated code
    (["--beta", "1e-400*w + v"], "constants float64 can hold"),    # would read as 0
    (["--beta", "nan*w"], "names of numpy or sympy"),              # "layers ... got ()"
    (["--beta", "zoo*w"], "names of numpy or sympy"),              # a contract message about a limit
    (["--beta", "w1.real*w2"], "'w1.real' is not allowed"),       # an attribute: sympify ran it
    (["--beta", "w1*w2", "--depth", "3"], "drop --model and --depth"),  # --depth was ignored
])
def test_derive_of_a_bad_formula_is_one_line(args, message):
    r = runner.invoke(app, ["derive", *args])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output


def test_reproduce_quick_preset(tmp_path):
    """The main job end to end: every claim holds with every control failing (depth 3 is open), and
    the three reports agree."""
    import json

    r = runner.invoke(app, ["reproduce", "all", "--out", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "report.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in summary["claims"]}
    assert verdicts.pop("000-depth3") == verdicts.pop("000-depthL-map") == "open"
    assert set(verdicts.values()) == {"holds"}, verdicts
    for c in summary["claims"]:
        if c["verdict"] == "holds":
            assert c["controls"] and all(k["verdict"] == "fails" for k in c["controls"]), c["id"]
        assert c["figure"] is None or (tmp_path / c["figure"]).exists()
        for row in c["measured"] + c["controls"]:  # every measurement also as numbers with a key and a unit
            assert row["numbers"] and all(set(n) == {"key", "value", "unit"} and n["unit"] for n in row["numbers"]), row
    assert summary["quick"] and summary["wall_s"] > 0 and summary["flowsim_version"] and summary["complete"] is True
    report = (tmp_path / "report.md").read_text()
    assert all(f"| {c} | **{v}** |" in report for c, v in verdicts.items())
    assert "e_None" not in report and "data:image/png;base64," in (tmp_path / "report.html").read_text()
    assert not any(bad in report for bad in ("e_0", "np.float64", "(layer, 1-based coordinate)", "= _gaussian("))
    assert runner.invoke(app, ["reproduce", "nonsense", "--out", str(tmp_path)]).exit_code != 0


def test_cli_help_imports_neither_jax_nor_sympy_and_arrays_are_float64():
    """`flowsim --help` stays fast because the package imports its parts on first use; and whichever
    way jax gets imported afterwards (or before), flowsim's arrays are float64."""
    import subprocess
    import sys

    probe = ("import sys, flowsim.cli; heavy = [m for m in ('jax', 'sympy', 'scipy', 'diffrax') if m in sys.modules]; "
             "import jax.numpy as jnp, flowsim as fs; print(heavy, jnp.array(1.0).dtype, fs.SAM(0.1))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "JAX_ENABLE_X64": "0"}).stdout
    assert out.split("\n")[0] == "[] float64 SAM(rho=0.1, norm=2)", out
    first_jax = "import jax, flowsim as fs, jax.numpy as jnp; print(jnp.array(1.0).dtype)"
    assert subprocess.run([sys.executable, "-c", first_jax], capture_output=True, text=True, check=True).stdout.strip() == "float64"


SWEEP = CONFIG + "[sweep]\nalpha = [0.05, 0.3]\nrho = [0.05, 0.2]\n"
ITERATE = """
init = 0.3
steps = 2000
records = 20
[data]
X = [[1.0, 2.0]]
y = [1]
[optimizer]
name = "sam"
lr = 0.1
rho = 0.05
"""


def test_cli_run_tracks_leader_switches_as_python_does(tmp_path):
    """`track` was an unknown key: a CLI run could not give event-located switch times."""
    cfg, out = tmp_path / "c.toml", tmp_path / "r.nc"
    readme = CONFIG.replace("init = 0.3", "init = 0.05").replace("[[1.0, 2.0]]", "[[1.0, 2.0, 3.0]]")
    readme = readme.replace("rho = 0.05", "rho = 0.1")
    cfg.write_text(readme.replace("saves = 30\n", 'saves = 30\ntrack = ["magnitude"]\n'))
    assert runner.invoke(app, ["run", str(cfg), "--out", str(out)]).exit_code == 0
    direct = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.1)), fs.Dataset([[1.0, 2.0, 3.0]], [1]), 0.05,
                      t1=1e20, saves=30, track=("magnitude",))
    assert fs.switch_times(io.load(out, as_solution=True)) == fs.switch_times(direct) != []
    cfg.write_text(SWEEP.replace("saves = 30\n", 'saves = 30\ntrack = ["magnitude"]\n'))
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s.nc")])
    assert r.exit_code == 2 and "track is for flowsim run" in r.output, r.output


def test_cli_sweep_writes_the_same_sweep_as_python(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s.nc")])
    assert r.exit_code == 0, r.output
    ds = io.load(tmp_path / "s.nc")
    direct = fs.sweep(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05)), fs.Dataset([[1.0, 2.0]], [1]),
                      {"alpha": [0.05, 0.3], "rho": [0.05, 0.2]}, init=0.3, t1=1e20, saves=30)
    np.testing.assert_array_equal(ds["beta"].values, direct["beta"].values)
    assert "4 points" in r.output
    # what the grid replaces is said (it was silent): the flow's rho, the init
    assert "warning: [sweep] rho replaces [flow] rho = 0.05 at every point" in r.stderr
    assert "warning: [sweep] alpha replaces init at every point" in r.stderr
    # the rho axis alone gives the flow its radius; without the axis, SAM without rho is one line
    cfg.write_text(SWEEP.replace("[flow]\nname = \"sam\"\nrho = 0.05\n", "[flow]\nname = \"sam\"\n"))
    assert "rho = 0.05" not in cfg.read_text()
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s2.nc")])
    assert r.exit_code == 0, r.output
    assert "replaces [flow] rho" not in r.stderr
    np.testing.assert_array_equal(io.load(tmp_path / "s2.nc")["beta"].values, direct["beta"].values)
    cfg.write_text(cfg.read_text().replace("rho = [0.05, 0.2]\n", ""))
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s3.nc")])
    assert r.exit_code == 2 and "flow 'sam' needs rho" in r.output, r.output


def test_cli_iterate_runs_a_discrete_optimizer(tmp_path):
    cfg = tmp_path / "it.toml"
    cfg.write_text(ITERATE)
    r = runner.invoke(app, ["iterate", str(cfg), "--out", str(tmp_path / "i.nc")])
    assert r.exit_code == 0, r.output
    ds = io.load(tmp_path / "i.nc")
    direct = fs.iterate(fs.optimizers.sam(0.1, 0.05), fs.DiagonalNet(2), "logistic", fs.Dataset([[1.0, 2.0]], [1]),
                        2000, 0.3, records=20)
    np.testing.assert_array_equal(ds["beta"].values, direct.beta)
    assert ds["step"].values[-1] == 2000 and ds.attrs["status"] == "completed"
    with pytest.raises(ValueError, match="holds a discrete run"):
        io.load(tmp_path / "i.nc", as_solution=True)


def test_cli_iterate_takes_random_mini_batches_and_bias_correction(tmp_path):
    """["shuffle", b] (what AdamProxy(batch=b) idealises) was refused in a config, bias_correction unknown."""
    cfg = tmp_path / "it.toml"
    data = "[data]\ngaussian = {n = 6, d = 3, seed = 1}\n"
    cfg.write_text(ITERATE.split("[data]")[0] + data + '[optimizer]\nname = "adam"\nlr = 0.1\n'
                   'batch = ["shuffle", 2]\nbias_correction = true\n')
    r = runner.invoke(app, ["iterate", str(cfg), "--out", str(tmp_path / "i.nc")])
    assert r.exit_code == 0, r.output
    direct = fs.iterate(fs.optimizers.adam(0.1, batch=("shuffle", 2), bias_correction=True), fs.DiagonalNet(2),
                        "logistic", fs.datasets.iid_gaussian(6, 3, seed=1), 2000, 0.3, records=20)
    np.testing.assert_array_equal(io.load(tmp_path / "i.nc")["beta"].values, direct.beta)


def test_data_from_npz_csv_and_builtin_sets(tmp_path):
    from flowsim.config import Data

    X, y = np.array([[1.0, 2.0, -1.0], [0.5, -1.0, 2.0]]), np.array([1.0, -1.0])
    np.savez(tmp_path / "d.npz", X=X, y=y)
    np.savetxt(tmp_path / "d.csv", np.c_[X, y], delimiter=",", header="x1,x2,x3,y", comments="")
    np.savetxt(tmp_path / "plain.csv", np.c_[X, y], delimiter=",")
    for name in ("d.npz", "d.csv", "plain.csv"):
        data = Data(file=name).load(tmp_path)
        np.testing.assert_array_equal(data.X, X)
        np.testing.assert_array_equal(data.y, y)
    ref = fs.datasets.scaled_rademacher(n=4, d=3, seed=2)
    np.testing.assert_array_equal(Data(builtin="scaled_rademacher", options={"n": 4, "d": 3, "seed": 2}).load(tmp_path).X, ref.X)
    cfg = tmp_path / "file.toml"  # a relative file is read next to the config, wherever flowsim runs
    cfg.write_text(CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'file = "d.npz"').replace("depth = 2", "depth = 1"))
    r = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "f.nc")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(io.load(tmp_path / "f.nc")["X"].values, X)


@pytest.mark.parametrize("command, text, message", [
    ("iterate", "steps = 10\n[data]\nX = [[1.0]]\ny = [1]\n", "missing key 'optimizer' (a table [optimizer] with name"),
    ("run", "t1 = 1e10\n[data]\nX = []\ny = []\n", "got an empty X"),                     # "got shape (1, 0)"
    ("run", 't1 = 1e10\n[data]\nX = [[1.0]]\ny = [1]\n[loss]\nexpr = "exp(-m"\n', "write e.g. 'log(1 + exp(-m))'"),
])
def test_config_messages_give_examples_of_their_own_kind(tmp_path, command, text, message):
    """A broken loss was told "write e.g. 'w1*w2**2'" (a model), a missing [optimizer] had no example."""
    (tmp_path / "c.toml").write_text(text)
    r = runner.invoke(app, [command, str(tmp_path / "c.toml"), "--out", str(tmp_path / "o.nc")])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output


def test_data_files_that_are_not_data_say_so(tmp_path):
    """An empty CSV was an IndexError traceback; a text file named .npz got numpy's advice to load it with
    allow_pickle=True (unsafe, and wrong: it is no archive)."""
    from flowsim.config import Data

    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "text.npz").write_text("not a zip")
    with open(tmp_path / "one.npz", "wb") as f:
        np.save(f, np.ones(3))
    for name, match in (("empty.csv", "empty.csv is empty"), ("text.npz", "text.npz is not a NumPy .npz archive"),
                        ("one.npz", "one.npz holds one array")):
        with pytest.raises(ValueError, match=match):
            Data(file=name).load(tmp_path)


@pytest.mark.parametrize("command, text, message", [
    ("run", CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'file = "nowhere.npz"'), "data.file: no file"),
    ("run", CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'file = "exp.toml"'), "neither .npz"),
    ("run", CONFIG.replace("y = [1]", 'y = [1]\nbuiltin = "digits"'), "give one source of data"),
    ("run", CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'builtin = "digits"\noptions = {n = 3}'), "data.options"),
    ("run", CONFIG.replace("X = [[1.0, 2.0]]\ny = [1]", 'builtin = "mnist"'), "key 'data.builtin'"),
    ("run", CONFIG.replace("saves = 30", "saves = 30\nsave_at_t = [1.0, 2.0]"), "only one of saves"),
    ("run", CONFIG.replace("saves = 30", "save_at_log10_t = [3.0, 2.0]"), "strictly increasing"),
    ("run", CONFIG.replace("saves = 30", "save_at_t = [0.0, 2.0]"), "times t > 0"),
    ("run", CONFIG.replace("saves = 30", "save_at = [1.0, 2.0]"), "save_at does not say its unit: give save_at_t"),
    ("sweep", CONFIG, "missing key 'sweep'"),
    ("sweep", CONFIG + "[sweep]\nalpah = [0.1]\n", "did you mean 'sweep.alpha'?"),
    ("run", CONFIG.replace("t1 = 1e20", "tl = 1e20"), "unknown key 'tl'; did you mean 't1'?"),  # (difflib: 'rtol')
    ("sweep", CONFIG + "[sweep]\nchunk_size = 2\n", "needs at least one axis"),
    ("sweep", CONFIG + "[sweep]\nrho = []\n", "key 'sweep.rho': List should have at least 1 item"),
    ("run", CONFIG.replace("rho = 0.05", "rho = 0.05\nnorm = \"inf\""), "write it without quotes, norm = inf"),
    ("sweep", CONFIG + "[sweep]\nrho = [0.1, 0.1]\n", "grid['rho'] repeats values"),
    ("sweep", CONFIG + "[sweep]\nrho = [0.1, -0.2]\n", "key 'sweep.rho': Input should be greater than or equal to 0"),
    # (refused by the sweep, after the warning that it replaces the flow's rho)
    ("sweep", CONFIG + "[sweep]\nrho = [inf]\n", "key 'sweep.rho': Input should be a finite number"),
    ("sweep", "[model\nform = 1\n", "exp.toml is not valid TOML: Expected ']'"),
    ("run", CONFIG + "backend = \"scipy:BDF\"\n", "'backend' is a top-level key; in TOML it must come before the first"),
    ("iterate", ITERATE.replace("lr = 0.1", "lr = 0.1\nb1 = 0.9"), "name = 'sam' takes lr, rho, norm, decay, batch; drop b1"),
    ("iterate", ITERATE.replace("rho = 0.05\n", ""), "needs rho"),
    ("iterate", ITERATE.replace("steps = 2000", "steps = 2000.5"), "key 'steps'"),
    ("iterate", ITERATE.replace("lr = 0.1", "lr = 0.1\nlr_decay = 1"), "did you mean 'optimizer.decay'?"),
    ("iterate", ITERATE.replace('name = "sam"', 'name = "lion"'), "key 'optimizer.name'"),
    ("iterate", ITERATE.replace("X = [[1.0, 2.0]]\ny = [1]", "X = [[1.0, 2.0], [1.0, 2.0]]\ny = [1, -1]"),
     "allow_nonseparable = true"),
    ("iterate", ITERATE.replace("steps = 2000", "steps = 2000\nseed = 1180591620717411303424"), "key 'seed'"),
    ("iterate", ITERATE.replace("steps = 2000", "steps = 2000\nseed = -1"), "key 'seed'"),
])
def test_cli_sweep_and_iterate_bad_configs(tmp_path, command, text, message):
    (tmp_path / "exp.toml").write_text(text)
    r = runner.invoke(app, [command, str(tmp_path / "exp.toml"), "--out", str(tmp_path / "o.nc")])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("flowsim: error:")]
    assert len(lines) == 1 and message in lines[0], r.output


def test_progress_outside_a_terminal_is_plain_lines(one_sample):
    import io as stdio

    from flowsim.integrate.run import ProgressBar
    from flowsim.integrate.timeline import u_of

    out = stdio.StringIO()
    bar = ProgressBar(100.0, u_of(np.array([-12.0, -3.0, 100.0])), file=out)
    for x in (1.0, 50.0, 100.0):
        bar.to_u(u_of(x))
    bar.close()
    text = out.getvalue()
    assert "\r" not in text and text.endswith("s elapsed\n") and "100%" in text and "log10 t = 100" in text


def test_plain_progress_ends_in_one_line_at_the_total():
    """The last update and close each printed the same line, and log10 t summed over steps read 102.999/103."""
    import io as stdio

    from flowsim import progress

    out = stdio.StringIO()
    bar = progress.LineProgress(103.0, "decades", "solve", out, every=0.0)  # a line at every update
    bar.update(102.9994)
    bar.close()
    assert out.getvalue().count("\n") == 1 and "(103/103 decades)" in out.getvalue()
    out = stdio.StringIO()
    bar = progress.LineProgress(320, "cells", "phase", out, every=0.0)
    bar.update(71)
    bar.close()
    assert "(71/320 cells)" in out.getvalue(), out.getvalue()


def test_a_terminal_bar_writes_counts_as_people_do():
    """The bar showed tqdm's raw floats: ``581.9649999999997/1000003.0 decades``."""
    import io as stdio

    from flowsim import progress

    class Terminal(stdio.StringIO):
        def isatty(self):
            return True

    shown = {}
    for total, done, unit in ((99.699, 58.19649999999997, "decades"), (1000003.0, 581.9649999999997, "decades"),
                              (10**9, 31622777, "steps")):
        out = Terminal()
        bar = progress.progress_bar(total, unit, file=out)
        bar.update(done)
        bar.close()
        shown[total] = out.getvalue().split("\r")[-1]
    assert "58.20/99.70 decades" in shown[99.699] and "582/1.00M decades" in shown[1000003.0], shown
    assert "31.6M/1.00G steps" in shown[10**9], shown
    assert not any("9999" in line for line in shown.values()), shown


def test_in_a_jupyter_kernel_the_bar_is_the_widget(monkeypatch):
    """A kernel's stderr is no terminal: its progress came as plain lines, never as tqdm's notebook widget."""
    import IPython

    from flowsim import progress

    class Kernel:
        kernel = object()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Kernel())
    bar = progress.progress_bar(10, "steps")
    try:
        assert type(bar).__module__ == "tqdm.notebook", type(bar)
    finally:
        bar.close()
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert isinstance(progress.progress_bar(10, "steps"), progress.LineProgress)


def test_progress_of_a_balanced_solve_counts_the_asked_for_time(one_sample, capsys):
    """A balanced product runs as the tied net, 2x faster (its own u is log10 2 behind): the bar still
    ends at the horizon asked for."""
    sol = fs.solve(fs.derive(fs.DiagonalNet(2), "logistic", fs.SAM(0.05)), one_sample, 0.3, t1=1e100, progress=True)
    shown = capsys.readouterr().err  # (the bar's stream: no terminal here, so plain lines)
    assert "integrated_as" in sol.config and "log10 t = 100" in shown and "99.699" not in shown


@pytest.mark.parametrize("command, text, message", [
    ("iterate", CONFIG, "unknown key 't1': it is a key of `flowsim run` configs; this one is read by `flowsim "
                        "iterate`"),  # was "did you mean 'b1' in the table [optimizer]?"
    ("run", ITERATE, "unknown key 'steps': it is a key of `flowsim iterate` configs"),
    ("sweep", CONFIG, "missing key 'sweep' (a table [sweep] with alpha"),
])
def test_a_config_for_another_command_says_so(tmp_path, command, text, message):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    r = runner.invoke(app, [command, str(cfg)])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output


def test_cli_sweep_interrupted_saves_what_it_has_and_exits_130(tmp_path):
    """A Ctrl-C during a CLI sweep (here, in its second chunk): the file holds the chunk done and the
    points not run as 'interrupted', and the exit code is 130, the shell's own for a Ctrl-C (it was 1, as
    for a failed point)."""
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP.replace("[sweep]\n", "[sweep]\nchunk_size = 2\n"))
    with interrupt("sweep chunk", nth=2):  # the second chunk of two (on a thread of its own or after the first)
        r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s.nc")])
    assert r.exit_code == 130 and "'interrupted': 2" in r.output, r.output
    status = io.load(tmp_path / "s.nc")["status"].values.ravel().tolist()
    assert status.count("interrupted") == 2 and len(status) == 4


def test_cli_sweep_with_failed_points_exits_1_and_says_how_many(tmp_path):
    """A sweep whose points run out of steps was saved with exit code 0: a script took the grid as whole."""
    cfg, out = tmp_path / "sweep.toml", tmp_path / "s.nc"
    cfg.write_text(SWEEP.replace("saves = 30\n", "saves = 30\nmax_steps = 4\n"))
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(out)])
    assert r.exit_code == 1 and "4 of 4 points did not reach an outcome ({" in r.output, r.output
    assert set(io.load(out)["status"].values.ravel()) <= set(fs.FAILURES)
    cfg.write_text(SWEEP)
    assert runner.invoke(app, ["sweep", str(cfg), "--out", str(out)]).exit_code == 0


@pytest.mark.parametrize("command", ["run", "iterate"])
def test_an_interrupted_run_or_iterate_is_saved_and_exits_130(tmp_path, monkeypatch, command):
    """They exited 1, as a failed solve does, where reproduce (and the shell) say 130 for a Ctrl-C."""
    import dataclasses

    import flowsim

    name = "solve" if command == "run" else "iterate"
    real = getattr(flowsim, name)

    def interrupted(*args, **kwargs):
        out = real(*args, **kwargs)
        if command == "run":
            return dataclasses.replace(out, status="interrupted")
        return out._replace(status="interrupted")

    monkeypatch.setattr(flowsim, name, interrupted)
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG if command == "run" else ITERATE)
    r = runner.invoke(app, [command, str(cfg), "--out", str(tmp_path / "r.nc")])
    assert r.exit_code == 130 and io.load(tmp_path / "r.nc").attrs["status"] == "interrupted", r.output


def test_a_ctrl_c_while_the_file_is_written_lands_once_it_is_whole(tmp_path, monkeypatch):
    """A Ctrl-C just as a run or sweep finishes lands in the save: the file is still written whole, and
    the exit code is 130 (the interrupt had dropped the file)."""
    import os
    import signal

    real = io.save

    def save(result, out):
        os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C while the file is written
        return real(result, out)

    monkeypatch.setattr(io, "save", save)
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s.nc")])
    assert r.exit_code == 130 and "interrupted;" in r.output and "saved" in r.output, r.output
    assert io.load(tmp_path / "s.nc")["status"].size == 4


def test_a_ctrl_c_stops_the_reproduction_and_keeps_the_finished_claims(tmp_path):
    """A Ctrl-C in a solve of the second claim stops the suite there: the report holds the first claim, marked
    incomplete. It was kept as an 'interrupted' run, and the suite went on, judged claims on partial runs (a
    verdict changed) and exited 0. Outside the suite the same Ctrl-C is still a result to keep."""
    import contextlib
    import json

    from flowsim.reproduce import report
    from flowsim.testing import interrupt

    said = []
    with contextlib.ExitStack() as later:
        def judged(line):  # the first claim is judged: the user presses Ctrl-C in the next solve
            said.append(line)
            later.enter_context(interrupt("segment"))

        with pytest.raises(report.Interrupted) as stop:
            report.reproduce("classics", tmp_path, quick=True, progress=judged)
    summary = json.loads((tmp_path / "report.json").read_text())
    assert stop.value.finished == 1 and len(said) == 1 and summary["complete"] is False
    assert [c["id"] for c in summary["claims"]] == ["soudry2018-l2"]
    assert "INCOMPLETE" in (tmp_path / "report.md").read_text()
    with interrupt("segment"):
        sol = fs.solve(fs.derive(fs.Linear(), "logistic", fs.GD()), fs.Dataset([[1.0, 2.0]], [1]), 0.1, t1=1e3,
                       throw=False)
    assert sol.status == "interrupted"
    # on the command line: the claims judged before the first solve, then one line and exit code 130
    with interrupt("segment"):
        r = runner.invoke(app, ["reproduce", "adam", "--out", str(tmp_path / "cli"), "--quick"])
    last = [ln for ln in r.output.splitlines() if ln.strip()][-1]
    finished = len(json.loads((tmp_path / "cli" / "report.json").read_text())["claims"])
    assert r.exit_code == 130 and "Traceback" not in r.output, r.output
    assert last == f"flowsim: interrupted; {tmp_path / 'cli' / 'report.md'} holds the {finished} claim(s) that finished"


@pytest.mark.parametrize("below", ["", "below"])
def test_reproduce_into_a_file_is_one_line(tmp_path, below):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / below if below else tmp_path / "afile"
    r = runner.invoke(app, ["reproduce", "sam", "--out", str(out), "--quick"])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "out: cannot make the folder" in lines[0], r.output


def test_a_ctrl_c_as_a_sweep_assembles_its_points_keeps_them(tmp_path):
    """Every point done, the user presses Ctrl-C while the sweep builds its dataset: the sweep is returned whole
    and saved (it was lost: exit code 130, no file, no word)."""
    import signal

    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    with interrupt("sweep assembly", signum=signal.SIGINT):
        r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "s.nc")])
    assert r.exit_code == 0 and "saved" in r.output and "Ctrl-C as the last points were assembled" in r.output
    assert "interrupted" not in io.load(tmp_path / "s.nc")["status"].values and "4 points" in r.output


def test_a_formula_model_takes_its_layers_in_natural_order():
    """Sorted as strings, w10 came before w2: an init's row 2 went to w10 at 10 or more layers."""
    from flowsim.config import make_model

    beta = "*".join(f"w{k}" for k in range(1, 11)) + "*w11**2"
    assert make_model("product", 2, beta, None).layers == tuple(f"w{k}" for k in range(1, 12))


def test_a_sweep_warns_once_before_its_work(tmp_path):
    """Every point of a sweep the model cannot separate from its start warns the same: the command line said it
    once per point, after the work (12 copies of a 700-character warning)."""
    cfg = tmp_path / "reach.toml"
    cfg.write_text('init = 0.1\nt1 = 1e5\n[data]\nX = [[1.0, -2.0], [-1.0, -1.0]]\ny = [1, 1]\n[model]\nform = "tied"\n'
                   "depth = 2\n[sweep]\nalpha = [0.05, 0.1, 0.2]\n")
    r = runner.invoke(app, ["sweep", str(cfg), "--out", str(tmp_path / "r.nc")])
    lines = r.output.splitlines()
    said = [i for i, ln in enumerate(lines) if "keeps beta_1 >= 0" in ln]
    done = [i for i, ln in enumerate(lines) if "points:" in ln]
    assert r.exit_code == 0 and len(said) == 1 and said[0] < done[0], r.output


def test_only_the_flowsim_name_is_installed_and_a_users_analysis_py_is_never_imported(tmp_path):
    """The wheel installed a top-level package ``analysis``: a user's own analysis.py shadowed (or was
    shadowed by) it. The reproduction lives in flowsim.reproduce."""
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    assert tomllib.loads((root / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"][
        "packages"] == ["flowsim"]
    (tmp_path / "analysis.py").write_text("raise SystemExit('the user analysis.py was imported')\n")
    r = subprocess.run([sys.executable, "-c", "import flowsim.cli, flowsim.reproduce.report"], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr


def test_reproduce_usage_lists_the_suites():
    """Usage read ``reproduce [OPTIONS] {suite}`` with no word of the choices."""
    from flowsim.cli import SUITE_CHOICES
    from flowsim.reproduce.report import GROUPS, SUITES

    r = runner.invoke(app, ["reproduce", "--help"])
    assert r.exit_code == 0 and "{" + SUITE_CHOICES + "}" in r.output.splitlines()[0], r.output
    assert SUITE_CHOICES == "|".join([*SUITES, *GROUPS])


@pytest.mark.parametrize("args, message", [
    (["hunt", "000-nope"], "claim-id must be one with a hunt: 000-thm3.1"),
    (["hunt", "000-thm3.1", "--budget", "0"], "--budget must be a whole number >= 1"),
    (["hunt", "000-thm3.1", "--seed", "-1"], "--seed must be a whole number >= 0"),
])
def test_hunt_refuses_bad_input_in_one_line_with_exit_code_2(args, message):
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_hunt_exit_code_says_whether_a_counterexample_was_found(tmp_path):
    """The false statement's hunt finds one (exit 1; hunt.json lists it with its reproducer); the true one's small
    hunt finds none (exit 0)."""
    r = runner.invoke(app, ["hunt", "000-thm3.1-false-l1", "--budget", "8", "--out", str(tmp_path)])
    assert r.exit_code == 1, r.output
    assert "found" in r.output and "rerun: python -c" in r.output
    saved = json.loads((tmp_path / "hunt.json").read_text())
    assert saved["searched"]["found"] == len(saved["counterexamples"]) >= 1
    assert saved["counterexamples"][0]["reproducer"].startswith('python -c "from flowsim.reproduce.hunts import')
    r = runner.invoke(app, ["hunt", "000-thm3.2", "--budget", "5", "--seed", "4"])
    assert r.exit_code == 0 and "5 cases" in r.output and "found 0" in r.output


def test_reproduce_refuses_a_bad_hunt_budget_before_running(tmp_path):
    r = runner.invoke(app, ["reproduce", "sam", "--quick", "--hunt-budget", "0", "--out", str(tmp_path / "r")])
    assert r.exit_code == 2 and "hunt_budget must be a whole number >= 1" in r.output
    assert not (tmp_path / "r").exists()


REGRESSION = """
loss = "square"
init = 0.0
t1 = 1e8
[data]
X = [[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]
y = [0.5, -1.5]
task = "regression"
[model]
form = "difference"
depth = 1
[flow]
name = "gd"
"""
REGRESSION_X = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]])


def test_a_regression_config_runs_to_the_minimum_norm_interpolator(tmp_path):
    """u - v from 0 under GD is linear GD from 0: its limit is pinv(X) y, the loss table's task is the data's."""
    expected = np.linalg.pinv(REGRESSION_X) @ [0.5, -1.5]
    log_cosh = REGRESSION.replace('loss = "square"\n', "").replace('name = "gd"', 'name = "gd"\n[loss]\nexpr = "log(cosh(m))"')
    for name, text in (("square", REGRESSION), ("log_cosh", log_cosh)):
        (tmp_path / f"{name}.toml").write_text(text)
        r = runner.invoke(app, ["run", str(tmp_path / f"{name}.toml"), "--out", str(tmp_path / f"{name}.nc")])
        assert r.exit_code == 0 and "converged to an interpolating global minimum" in r.output, r.output
        np.testing.assert_allclose(io.load(tmp_path / f"{name}.nc")["beta"].values[-1], expected, rtol=0, atol=1e-9)


def test_regression_targets_from_a_file_are_read_as_such(tmp_path):
    np.savez(tmp_path / "d.npz", X=REGRESSION_X, y=[0.5, -1.5])
    text = REGRESSION.replace("X = [[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]\ny = [0.5, -1.5]", 'file = "d.npz"')
    (tmp_path / "f.toml").write_text(text)
    r = runner.invoke(app, ["run", str(tmp_path / "f.toml"), "--out", str(tmp_path / "f.nc")])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(io.load(tmp_path / "f.nc")["beta"].values[-1],
                               np.linalg.pinv(REGRESSION_X) @ [0.5, -1.5], rtol=0, atol=1e-9)


def test_iterate_runs_a_regression_config_as_the_least_squares_iteration(tmp_path):
    """u - v from 0 under GD(lr) is beta <- beta - 2 lr X^T (X beta - y) / n."""
    text = REGRESSION.replace("t1 = 1e8\n", "steps = 10\n").replace('[flow]\nname = "gd"', '[optimizer]\nname = "gd"\nlr = 0.1')
    (tmp_path / "c.toml").write_text(text)
    r = runner.invoke(app, ["iterate", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o.nc")])
    assert r.exit_code == 0, r.output
    beta = np.zeros(3)
    for _ in range(10):
        beta = beta - 2 * 0.1 * REGRESSION_X.T @ (REGRESSION_X @ beta - [0.5, -1.5]) / 2
    np.testing.assert_allclose(io.load(tmp_path / "o.nc")["beta"].values[-1], beta, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("command, text, message", [
    ("run", REGRESSION.replace('task = "regression"\n', ""), "for regression add task = 'regression' to [data]"),
    ("run", REGRESSION.replace('name = "gd"', 'name = "sign"'), "SignFlow(lr=1, decay=1) on a regression"),
    ("run", REGRESSION.replace('loss = "square"', 'loss = "logistic"'), "the data are a regression"),
    ("run", REGRESSION.replace('task = "regression"\n', "").replace("y = [0.5, -1.5]", "y = [1, -1]"),
     "'square' is a regression loss"),
    ("run", REGRESSION.replace("y = [0.5, -1.5]", "y = [1, -1]").replace('task = "regression"', 'task = "classification"'),
     "a margin loss"),
    ("run", REGRESSION.replace('loss = "square"\n', "").replace('name = "gd"', 'name = "gd"\n[loss]\nexpr = "exp(-m)"'),
     "loss.expr: loss 'custom': a regression loss"),
    ("run", REGRESSION.replace("X = [[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]\ny = [0.5, -1.5]", "gaussian = {n = 3, d = 2}"),
     "gaussian and builtin data are classification sets: drop task"),
    ("sweep", REGRESSION + "[sweep]\nalpha = [0.1, 0.2]\n", "regression"),
])
def test_regression_configs_the_engine_cannot_run_are_one_line(tmp_path, command, text, message):
    (tmp_path / "c.toml").write_text(text)
    r = runner.invoke(app, [command, str(tmp_path / "c.toml"), "--out", str(tmp_path / "o.nc")])
    lines = [ln for ln in r.output.splitlines() if ln.startswith("flowsim: error:")]
    assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_exact_sam_on_a_regression_config_runs_to_the_minima_and_says_why_it_stops_there(tmp_path):
    """Two samples in R^3: exact SAM reaches the interpolating minima, where its slide is not unique; the run
    ends there (exit 1: a failure status), saved, with the reason on the status line."""
    (tmp_path / "c.toml").write_text(REGRESSION.replace('name = "gd"', 'name = "sam"\nrho = 0.05')
                                     .replace("depth = 1", "depth = 2").replace("init = 0.0", "init = 0.3"))
    r = runner.invoke(app, ["run", str(tmp_path / "c.toml"), "--out", str(tmp_path / "o.nc")])
    assert r.exit_code == 1 and "chattering" in r.output and "not unique" in r.output, r.output
    ds = io.load(tmp_path / "o.nc")
    assert ds.attrs["status"] == "chattering"
    np.testing.assert_allclose(REGRESSION_X @ ds["beta"].values[-1], [0.5, -1.5], atol=1e-8)
