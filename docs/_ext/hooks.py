"""MkDocs hook (not part of the package): the notebooks in notebooks/ (outside docs/) become the
Gallery pages notebooks/<name>.py, rendered by mkdocs-jupyter (jupytext reads the percent format). The
pages are static, so the notebooks are told (FLOWSIM_NB_STATIC=1) to draw instead of making widgets:
notebook 01's ``ipywidgets.interact`` executed headless left nbclient waiting on an idle kernel (twice in
~40 builds, once for CI's whole time limit). And nbconvert reads jupyter/ here: nbclient waits at most 10
minutes for a cell (for ever by default; the notebooks take ~1 minute in all), then fails the build with
CellTimeoutError, or, where it was left waiting on an idle kernel, goes on (seen once: the build passed).

Maths is rendered here, at build time, to MathML (latex2mathml), which browsers draw themselves: the site
shows its formulas offline, with no script fetched from a CDN. A formula latex2mathml cannot read fails the
build, naming the page and the formula."""

import html
import os
import re
from pathlib import Path

import latex2mathml.converter
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


#: pymdownx.arithmatex's generic output (theory.md, the API reference): \\( \\) inline, \\[ \\] as a block
ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">\s*\\([\(\[])(.*?)\\[\)\]]\s*</\1>', re.S)
#: the LaTeX outputs of executed notebooks (sympy's display): $$ $$ or $ $ inside a rendered-LaTeX block
NOTEBOOK_LATEX = re.compile(r'(<div class="[^"]*jp-RenderedLatex[^"]*"[^>]*>)(.*?)(</div>)', re.S)
DOLLARS = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
#: the MathJax that mkdocs-jupyter's template loads from a CDN, and its configuration
MATHJAX_SCRIPTS = re.compile(r'<script[^>]*(?:mathjax[^>]*>|type="text/x-mathjax-config"[^>]*>).*?</script>', re.S | re.I)


def on_post_page(output, page, config):
    def mathml(tex, block):
        try:
            return latex2mathml.converter.convert(html.unescape(tex).strip(), display="block" if block else "inline")
        except Exception as err:  # latex2mathml raises its own errors and plain ones
            raise ValueError(f"{page.file.src_uri}: the formula {tex.strip()!r} is not one latex2mathml "
                             f"reads ({err}); write it another way") from None

    output = ARITHMATEX.sub(lambda m: mathml(m[3], m[2] == "["), output)
    output = NOTEBOOK_LATEX.sub(lambda m: m[1] + DOLLARS.sub(
        lambda d: mathml(d[1] if d[1] is not None else d[2], d[1] is not None), m[2]) + m[3], output)
    return MATHJAX_SCRIPTS.sub("", output)
