"""verl-ctx[verl] installs beside verl's engine extras: pip resolves this checkout's ``verl-ctx[verl]`` together
with ``verl[vllm]`` and with ``verl[sglang]`` of every verl release the project supports, or the test fails.

A cell whose conflict is verl's own (``verl[ENGINE]==V`` alone does not resolve either: verl's and its engine's
pins contradict each other) is an expected failure, shown as such in the table: verl-ctx cannot fix it, and a
conflict that verl-ctx adds to a verl that resolves alone still fails.

Dry runs (``pip install --dry-run --ignore-installed --report``): nothing is installed, but pip fetches metadata,
so this needs the network and takes minutes. It runs with ``make resolve``, outside the default test paths.

The index is PyPI alone, as a user's pip sees it: this machine's pip configuration (its local wheel directory and
indexes, its cap on torch) and constraints.txt (our pins, not published) are left out; only the certificate
setting is kept. The interpreter is the one running the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERL_RELEASES = ["0.9.0", "0.9.1"]  # docs/compatibility.md: the supported range's releases
ENGINES = ["vllm", "sglang"]
TIMEOUT_S = 1200

pytestmark = pytest.mark.resolution


def _pypi_only_env() -> dict[str, str]:
    """The environment, with no pip configuration of this machine's: no config file, no PIP_* but the CA bundle."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _dry_run(requirements: list[str], report: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pip's resolution of the requirements for this interpreter, written to ``report``; nothing installed."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(report)]
    return subprocess.run(
        [*cmd, *requirements], capture_output=True, text=True, env=_pypi_only_env(), cwd=cwd, timeout=TIMEOUT_S
    )


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _cause(output: str) -> str:
    """pip's "The conflict is caused by:" lines (on stdout; the ERROR lines are on stderr)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("The conflict is caused by")), None)
    if start is None:
        return _tail(output)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def _installed(report: dict[str, Any]) -> dict[str, str]:
    """Name to version of what the report would install (names normalized as PyPI does)."""
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in report["install"]}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("verl", VERL_RELEASES)
def test_verl_extra_resolves_with_verl_engine_extra(
    verl: str, engine: str, tmp_path: Path, resolution_dir: Path, resolution_rows: list[dict[str, str]]
) -> None:
    report_path = resolution_dir / f"verl-{verl}-{engine}.json"
    report_path.unlink(missing_ok=True)
    row = {"verl": verl, "engine extra": engine, "resolves": "error (see the test's failure)"}
    resolution_rows.append(row)
    verl_req = f"verl[{engine}]=={verl}"
    proc = _dry_run([f"verl-ctx[verl] @ {ROOT.as_uri()}", verl_req], report_path, tmp_path)
    (resolution_dir / f"verl-{verl}-{engine}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        if "ResolutionImpossible" not in proc.stderr:
            row["resolves"] = f"error (pip exit {proc.returncode})"
            pytest.fail(f"pip failed on verl-ctx[verl] with {verl_req}:\n{_tail(proc.stdout + proc.stderr)}")
        alone = _dry_run([verl_req], tmp_path / "alone.json", tmp_path)
        (resolution_dir / f"verl-{verl}-{engine}-alone.log").write_text(alone.stdout + alone.stderr)
        if alone.returncode == 0:
            row["resolves"] = "**no: conflict with verl-ctx**"
            row["why"] = _cause(proc.stdout + proc.stderr)
            pytest.fail(f"verl-ctx[verl] conflicts with {verl_req}, which resolves alone:\n{row['why']}")
        if "ResolutionImpossible" not in alone.stderr:
            row["resolves"] = f"error (pip exit {alone.returncode}, {verl_req} alone)"
            pytest.fail(f"pip failed on {verl_req} alone:\n{_tail(alone.stdout + alone.stderr)}")
        row["resolves"] = f"no: verl's own conflict ({verl_req} alone does not resolve)"
        row["why"] = _cause(alone.stdout + alone.stderr)
        pytest.xfail(f"{verl_req} does not resolve even without verl-ctx:\n{row['why']}")
    versions = _installed(json.loads(report_path.read_text()))
    row.update(
        resolves="yes",
        torch=versions.get("torch", "(none)"),
        engine=f"{engine} {versions.get(engine, '(none)')}",
        ray=versions.get("ray", "(none)"),
        **{"verl-ctx": versions.get("verl-ctx", "(none)")},
    )
    assert versions.get("verl") == verl
    assert engine in versions, f"verl[{engine}]=={verl} resolved without {engine}"
    assert "verl-ctx" in versions
