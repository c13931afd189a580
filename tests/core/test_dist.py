"""The installed distribution: one version named everywhere, and ``verl_ctx`` imported from where it is installed.

``make wheel-test`` runs this suite against the built wheel installed in a venv of its own, with
``VERL_CTX_TEST_INSTALL=wheel``: then ``verl_ctx`` must be the wheel's copy in site-packages, never ``src/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from importlib.metadata import distribution, version
from pathlib import Path
from urllib.parse import unquote, urlparse

import verl_ctx

ROOT = Path(__file__).resolve().parents[2]


def _top_changelog_version() -> str:
    """The version of CHANGELOG.md's top entry (``## 0.2.0 (unreleased)`` names 0.2.0)."""
    heading = next(line for line in (ROOT / "CHANGELOG.md").read_text().splitlines() if line.startswith("## "))
    match = re.fullmatch(r"## (\S+)(?: \(.*\))?", heading)
    assert match, f"CHANGELOG.md's top entry does not start with a version: {heading!r}"
    return match.group(1)


def _pyproject_version() -> str:
    """pyproject.toml's ``[project] version`` (read as text: tomllib is not in Python 3.10)."""
    project = (ROOT / "pyproject.toml").read_text().split("\n[project]\n", 1)[1].split("\n[", 1)[0]
    match = re.search(r'^version = "([^"]+)"$', project, re.MULTILINE)
    assert match, "pyproject.toml's [project] table has no static version"
    return match.group(1)


def test_one_version_in_metadata_cli_changelog_and_pyproject() -> None:
    """The installed metadata, `verl-ctx --version`, CHANGELOG's top entry and pyproject.toml name one version.

    pyproject.toml is the one source; a mismatch with the metadata means a stale install (reinstall, or rebuild
    the wheel), a mismatch with the CHANGELOG a release without its entry.
    """
    installed = version("verl-ctx")
    script = Path(sys.executable).parent / "verl-ctx"  # this environment's console script
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"verl-ctx, version {installed}"
    assert verl_ctx.__version__ == installed
    assert _top_changelog_version() == installed
    assert _pyproject_version() == installed


def test_verl_ctx_is_imported_from_its_installed_distribution() -> None:
    """The verl_ctx under test is the installed one: the wheel's file in site-packages, or (an editable install)
    the src/ of the checkout it was installed from."""
    dist = distribution("verl-ctx")
    imported = Path(verl_ctx.__file__).resolve()
    init = next((f for f in dist.files or [] if f.as_posix() == "verl_ctx/__init__.py"), None)
    if os.environ.get("VERL_CTX_TEST_INSTALL") == "wheel":
        assert init is not None, "VERL_CTX_TEST_INSTALL=wheel, but verl-ctx is not installed from a wheel"
        assert imported.is_relative_to(Path(sysconfig.get_path("purelib")).resolve())
    if init is not None:
        assert Path(str(dist.locate_file(init))).resolve() == imported
    else:
        direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
        assert direct_url.get("dir_info", {}).get("editable"), f"neither a wheel nor an editable install: {direct_url}"
        source = Path(unquote(urlparse(direct_url["url"]).path)).resolve()
        assert imported == source / "src" / "verl_ctx" / "__init__.py"
