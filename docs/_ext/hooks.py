"""MkDocs hook (not part of the package): the notebooks in notebooks/ (outside docs/) become the
Gallery pages notebooks/<name>.py, rendered by mkdocs-jupyter (jupytext reads the percent format)."""

from pathlib import Path

import mkdocs.plugins
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]


@mkdocs.plugins.event_priority(100)  # before mkdocs-jupyter's on_files, which wraps them as notebook pages
def on_files(files, config):
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        # a real source dir (not File.generated): mkdocs-jupyter's wrapper finds the file through src_dir
        files.append(File(f"notebooks/{path.name}", str(ROOT), config.site_dir, config.use_directory_urls))
    return files
