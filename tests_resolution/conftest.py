"""The resolution table: each test adds a row; the run's summary prints it and saves it to build/resolution.md."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "resolution"  # pip's reports; build/ is git-ignored
TABLE = ROOT / "build" / "resolution.md"
COLUMNS = ("verl", "engine extra", "resolves", "torch", "engine", "ray", "verl-ctx")
ROWS = pytest.StashKey[list[dict[str, str]]]()


@pytest.fixture(scope="session")
def resolution_rows(request: pytest.FixtureRequest) -> list[dict[str, str]]:
    """The table's rows, in the order the tests ran."""
    return request.config.stash.setdefault(ROWS, [])


@pytest.fixture(scope="session")
def resolution_dir() -> Path:
    """Where pip's reports and logs go (build/ is git-ignored)."""
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT


def render(rows: list[dict[str, str]]) -> str:
    """A Markdown table, one row per (verl version, engine extra), then pip's cause of each conflict."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(row.get(c, "") for c in COLUMNS) + " |" for row in rows]
    for row in rows:
        if "why" in row:
            lines += ["", f"verl {row['verl']} [{row['engine extra']}]: {row['why']}"]
    return "\n".join(lines) + "\n"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    rows = config.stash.get(ROWS, [])
    if not rows:
        return
    table = render(rows)
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(table)
    terminalreporter.write_sep("=", "pip resolution of verl-ctx[verl] with verl's engine extras (PyPI)")
    terminalreporter.write(table)
    terminalreporter.write_line(f"saved to {TABLE.relative_to(ROOT)}; pip's reports in {OUT.relative_to(ROOT)}/")
