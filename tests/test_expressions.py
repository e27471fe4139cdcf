"""Expressions read from text (configs, the command line, saved runs, the API) are parsed by a whitelist,
never evaluated: each attacker's payload is refused with one line and runs nothing, and every formula
flowsim itself writes or documents reads back to the same expression."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import xarray as xr
from typer.testing import CliRunner

import flowsim as fs
from flowsim import io
from flowsim.cli import app
from flowsim.symbolic.expression import ExpressionError, dump, load, parse
from flowsim.symbolic.spec import parts_from_spec, spec

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def payload(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}')"


def one_line_exit_2(result):
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("text, token", [
    ("__import__('os').system('touch X') + w1*w2", "__import__('os').system"),
    ("exp(-m) + 0*__import__('os').system('touch X')", "__import__('os').system"),
    ("m.__class__", "m.__class__"),
    ("(lambda: 1)()", "lambda: 1"),
    ("[x for x in (1,)][0]", "[x for x in (1,)][0]"),
    ("exp(m)[0]", "exp(m)[0]"),
    ("exp(x=m)", "exp(...) takes plain arguments"),
    ("__builtins__", "'__builtins__'"),
    ("'text'", "'text'"),
    ("1e400 * m", "1e400"),
    ("exp", "a function: call it"),
    ("eval('1')", "'eval'"),
])
def test_the_parser_refuses_everything_but_formulas_and_names_the_token(text, token):
    with pytest.raises(ExpressionError) as e:
        parse(text)
    assert token in str(e.value) and "\n" not in str(e.value)


def test_the_parser_builds_what_sympy_would():
    m, w1, w2 = sp.symbols("m w1 w2")
    for text, expected in [("exp(-m) + exp(-2*m)", sp.exp(-m) + sp.exp(-2 * m)),
                           ("log(1 + exp(-m))", sp.log(1 + sp.exp(-m))),
                           ("w1*w2**2 - w1/3", w1 * w2**2 - w1 / 3),
                           ("Piecewise((m, m > 0), (0, True))", sp.Piecewise((m, m > 0), (0, True))),
                           ("Max(m, -m) + Abs(m) + sqrt(2)*pi + E**m", sp.Max(m, -m) + sp.Abs(m) + sp.sqrt(2) * sp.pi
                            + sp.exp(m))]:
        assert parse(text) == expected
    assert parse("0.1*m", rational=True) == m / 10 and parse("0.1*m") == sp.Float(0.1) * m
    with pytest.raises(ExpressionError, match="unknown name 'v'"):
        parse("w1 * v", {"w1": w1})


def test_config_payloads_are_refused_and_run_nothing(tmp_path):
    marker = tmp_path / "X"
    base = '{}init = 0.3\nt1 = 1e5\nsaves = 5\n[data]\nX = [[1.0, 2.0]]\ny = [1]\n[flow]\nname = "gd"\n{}'
    beta = base.format('loss = "logistic"\n', f'[model]\nbeta = "{payload(marker)} + w1*w2"\n')
    loss = base.format("", f'[loss]\nexpr = "exp(-m) + 0*{payload(marker)}"\nname = "evil"\n[model]\nform = "product"\n')
    for name, text in (("beta", beta), ("loss", loss)):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(text)
        line = one_line_exit_2(runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "r.nc")]))
        assert "refused" in line and "__import__" in line
    assert not marker.exists()


def test_cli_derive_payloads_are_refused(tmp_path):
    marker = tmp_path / "X"
    for option in (["--loss", f"exp(-m)+0*{payload(marker)}"], ["--beta", f"w1*w2 + 0*{payload(marker)}"]):
        line = one_line_exit_2(runner.invoke(app, ["derive", *option]))
        assert "__import__" in line
    assert not marker.exists()


def test_api_payloads_are_refused(tmp_path):
    marker = tmp_path / "X"
    with pytest.raises(ValueError, match="beta: .*__import__"):
        fs.Parametrization("evil", 2, f"w1*w2 + 0*{payload(marker)}")
    with pytest.raises(ValueError, match="__import__"):
        fs.Loss("evil", f"exp(-m) + 0*{payload(marker)}")
    with pytest.raises(ValueError, match="weight must be an expression in w.*__import__"):
        fs.directions.Preconditioned("evil", f"1 + w**2 + 0*{payload(marker)}")
    assert not marker.exists()
    # formulas as text still work, and mean what the sympy form means
    w1, w2 = sp.symbols("w1 w2", real=True)
    assert fs.Parametrization("p", 2, "w1*w2**2").beta == w1 * w2**2


@pytest.fixture()
def saved_run(tmp_path):
    system = fs.derive(fs.Parametrization("w1 w2", 2, "w1*w2"), "logistic", fs.GD())
    sol = fs.solve(system, fs.Dataset([[1.0, 2.0]], [1]), 0.3, t1=1e3, saves=5)
    return io.save(sol, tmp_path / "ok.nc")


@pytest.mark.parametrize("where", ["beta", "loss", "weight"])
def test_a_saved_run_carrying_code_is_refused_on_load_and_plot(tmp_path, saved_run, where):
    marker = tmp_path / "X"
    ds = xr.open_dataset(saved_run).load()
    data = json.loads(ds.attrs["system_spec"])
    evil = {"text": f"w1*w2 + 0*{payload(marker)}", "symbols": {"w1": {"real": True}, "w2": {"real": True}}}
    if where == "beta":
        data["model"]["beta"] = evil
    elif where == "loss":
        data["loss"]["expr"] = f"Add(exp(-Symbol('m')), {payload(marker)})"  # the srepr form older files held
    else:
        data["flow"]["direction"] = {"class": "Preconditioned", "fields": {"name": "p", "weight": {"sympy": evil}}}
    ds.attrs["system_spec"] = json.dumps(data)
    path = tmp_path / "evil.nc"
    ds.to_netcdf(path)
    with pytest.raises(ValueError, match="refused|not one flowsim writes"):
        io.load(path, as_solution=True)
    line = one_line_exit_2(runner.invoke(app, ["plot", str(path), "--out", str(tmp_path / "x.png")]))
    assert "refused" in line or "not one flowsim writes" in line
    assert not marker.exists()


M = sp.Symbol("m", real=True)
MODELS = [fs.Linear(), fs.DiagonalNet(2), fs.DiagonalNet(3, "difference"), fs.DiagonalNet(2, "tied"),
          fs.Parametrization("w1 w2^2", 2, lambda a, b: a * b**2), fs.Parametrization("p", ("u", "v"), "u*v - v**3/7")]
LOSSES = ["logistic", "exponential", fs.Loss("two exponentials", sp.exp(-M) + sp.exp(-2 * M)),
          fs.Loss("float", sp.Float(0.30000000000000004) * sp.exp(-M) + sp.exp(-M / 3)),
          fs.Loss("piecewise", sp.Piecewise((sp.exp(-M), M > 0), (1 - M, True)))]
FLOWS = [fs.GD(), fs.SAM(0.1), fs.SAM(0.1, np.inf), fs.USAM(0.1), fs.ASAM(0.1, 2, 0.01), fs.SteepestDescent(3),
         fs.NormalizedGD(), fs.SignFlow(), fs.AdamProxy(batch=2),
         fs.Flow(fs.points.Here(), fs.directions.Preconditioned("p", "1 + w**2"))]


@pytest.mark.parametrize("part", range(max(len(MODELS), len(LOSSES), len(FLOWS))))
def test_every_builtin_and_documented_formula_round_trips_through_a_spec(part):
    """Each built-in model, loss and flow (and the formulas of the docs) is written as text the parser
    reads back to equal parts."""
    parts = (MODELS[part % len(MODELS)], LOSSES[part % len(LOSSES)], FLOWS[part % len(FLOWS)])
    system = fs.derive(*parts)
    data = spec(system)
    assert data is not None, parts
    assert parts_from_spec(json.loads(json.dumps(data))) == (system.model, system.loss, system.flow)


def test_the_formulas_of_the_docs_and_notebooks_parse():
    """Every formula string the docs, README and notebooks write (configs, --beta, --loss) parses."""
    found = []
    for path in [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("notebooks/*.py")]:
        text = path.read_text()
        found += re.findall(r'\b(?:beta|expr)\s*=\s*"([^"]+)"', text)  # config keys
        found += re.findall(r"--(?:beta|loss) '([^']+)'", text)  # command lines
        found += re.findall(r"`'([^'`]+)'`", text)  # option values in the text
    assert len(found) >= 3, found
    for text in found:
        if text not in ("logistic", "exponential"):
            assert isinstance(parse(text), sp.Expr), text


def test_dump_refuses_what_would_not_read_back():
    with pytest.raises(TypeError, match="precision"):
        dump(sp.Float("0.1", 30) * M)
    with pytest.raises(TypeError):
        dump(sp.Symbol("not an identifier") + 1)
    with pytest.raises(ExpressionError):
        load({"text": "m", "symbols": {"m": {"commutative": "__import__"}}})
