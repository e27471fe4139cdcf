"""The notebooks (jupytext percent files in notebooks/) execute top to bottom with small
parameters (FLOWSIM_NB_SMALL=1), so they cannot rot. Their own asserts (tied vs product, field vs
autodiff) run too."""

from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")

#: notebooks whose cells must print no warning
WARNING_FREE = {"01_phase_portraits", "04_adam_side"}
NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.py"))


def test_there_are_six_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch, tmp_path):
    monkeypatch.setenv("FLOWSIM_NB_SMALL", "1")
    nb = jupytext.read(path)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if path.stem in WARNING_FREE:  # nothing leaks to stderr: no RuntimeWarning and the like
        stderr = [o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                  if o.get("output_type") == "stream" and o.get("name") == "stderr"]
        assert not [t for t in stderr if "Warning" in t], stderr
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert images >= 1 or path.stem.startswith("02")  # the figure notebooks draw figures
