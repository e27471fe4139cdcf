"""MkDocs hook (not part of the package): the notebooks in notebooks/ (outside docs/) become the
Gallery pages notebooks/<name>.py, rendered by mkdocs-jupyter (jupytext reads the percent format). The
pages are static, so the notebooks are told (FLOWSIM_NB_STATIC=1) to draw instead of making widgets:
notebook 01's ``ipywidgets.interact`` executed headless left nbclient waiting on an idle kernel (twice in
~40 builds, once for CI's whole time limit). And nbconvert reads jupyter/ here: nbclient waits at most 10
minutes for a cell (for ever by default; the notebooks take ~1 minute in all), then fails the build with
CellTimeoutError, or, where it was left waiting on an idle kernel, goes on (seen once: the build passed)."""

import os
from pathlib import Path

import mkdocs.plugins
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
os.environ["FLOWSIM_NB_STATIC"] = "1"  # (the kernels inherit it)
os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
    [str(Path(__file__).parent / "jupyter"), *filter(None, [os.environ.get("JUPYTER_CONFIG_PATH")])])


@mkdocs.plugins.event_priority(100)  # before mkdocs-jupyter's on_files, which wraps them as notebook pages
def on_files(files, config):
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        # a real source dir (not File.generated): mkdocs-jupyter's wrapper finds the file through src_dir
        files.append(File(f"notebooks/{path.name}", str(ROOT), config.site_dir, config.use_directory_urls))
    return files
