"""CLI via typer's runner, saved runs (round trip, atomic write), and the reproduce machinery."""

import numpy as np
import pytest
from typer.testing import CliRunner

import flowsim as fs
from flowsim import io
from flowsim.cli import app

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
    r = runner.invoke(app, ["plot", str(out), "--out", str(tmp_path / "run.png")])
    assert r.exit_code == 0 and (tmp_path / "run.png").stat().st_size > 1000
    r = runner.invoke(app, ["derive", "--model", "tied", "--flow", "sam", "--rho", "0.1", "--latex"])
    assert r.exit_code == 0 and r"\tilde{w}" in r.output


@pytest.mark.parametrize(
    "text, message",
    [("t1 = 10\n", "missing table [data]"),
     (CONFIG.replace('name = "sam"', 'name = "adamw"'), "unknown flow 'adamw'"),
     (CONFIG.replace("t1 = 1e20", "t1 = 1e20\nhorizon = 3"), "unknown key(s) ['horizon']"),
     (CONFIG.replace("depth = 2", 'depth = "two"'), "key 'model.depth' must be int"),
     (CONFIG.replace("t1 = 1e20\n", ""), "give t1")],
)
def test_cli_bad_config_names_the_key(tmp_path, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    r = runner.invoke(app, ["run", str(cfg)])
    assert r.exit_code != 0
    assert message in " ".join(r.output.split())


def test_reproduce_quick_preset(tmp_path):
    r = runner.invoke(app, ["reproduce", "all", "--out", str(tmp_path), "--quick"])
    assert r.exit_code == 0, r.output
    report = (tmp_path / "report.md").read_text()
    for claim in ["000-thm3.1", "000-thm3.2", "000-cor3.5", "000-thm4.2", "000-thm4.4", "000-thm4.5", "000-gauss", "000-discrete",
                  "000-digits"]:
        assert f"| {claim} | **holds** |" in report, claim
    for claim in ["002-thm3.3/4.8", "002-prop4.1", "002-thm5.1", "002-batch5", "002-metric"]:
        assert f"| {claim} | **holds** |" in report, claim
    assert (tmp_path / "adam_cosines.png").exists()
    assert (tmp_path / "sam_linf.png").exists() and (tmp_path / "sam_amplification.png").exists()
    assert (tmp_path / "sam_linf_phase.png").exists()
    assert runner.invoke(app, ["reproduce", "nonsense", "--out", str(tmp_path)]).exit_code != 0
