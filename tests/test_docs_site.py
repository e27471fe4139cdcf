"""The documentation site's build settings (the build itself runs in CI, strict, with the docs extras)."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_fetches_no_script_from_the_network():
    """Maths came from MathJax on a CDN: offline, no formula showed. The hook renders it to MathML at build."""
    config = (ROOT / "mkdocs.yml").read_text()
    assert not re.search(r"^\s*-\s*https?://", config, re.M), "a remote script or stylesheet in mkdocs.yml"
    hooks = (ROOT / "docs" / "_ext" / "hooks.py").read_text()
    assert "latex2mathml" in hooks and "def on_post_page" in hooks
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert any(e.startswith("latex2mathml") for e in extras), extras


def test_separate_signatures_have_the_formatter_they_need():
    """mkdocstrings formats a separate signature only with Black or Ruff installed; without, one long line."""
    config = (ROOT / "mkdocs.yml").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    if re.search(r"separate_signature:\s*true", config):
        assert any(re.match(r"(ruff|black)\b", e) for e in extras), extras
