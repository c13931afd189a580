"""One version, one place: pyproject.toml's, read by `verl-ctx --version` and `verl_ctx.__version__` from the
installed metadata, and named by the CHANGELOG's top entry."""

from __future__ import annotations

import re

from .conftest import REPO, Run


def _declared() -> str:
    found = re.search(r'^\[project\]$.*?^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M | re.S)
    assert found, "pyproject.toml's [project] declares no version"
    return found.group(1)


def test_version_comes_from_pyproject_and_the_changelog_names_it(run_cli: Run) -> None:
    """The command, the package and the CHANGELOG's newest entry all say pyproject's version (a mismatch with an
    installed copy means: reinstall; with the CHANGELOG: add its entry)."""
    import verl_ctx

    version = _declared()
    res = run_cli("--version")
    assert res.code == 0, res.err
    assert res.out.strip() == f"verl-ctx, version {version}"
    assert verl_ctx.__version__ == version
    top = re.search(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert top, "CHANGELOG.md has no `## <version>` entry"
    assert top.group(1) == version
