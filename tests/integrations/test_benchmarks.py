"""The benchmark sections that break without a sound: run in their quick form so a broken one fails CI.

Only what the numbers come from is checked (each section runs to the end and writes its table); the numbers
themselves are for `make bench` on a quiet machine, never asserted in a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import REPO


def test_startup_section_runs_on_verls_own_launch_scripts(tmp_path: Path) -> None:
    """`python -m benchmarks --quick --only startup`: validate on corpus launches against importing verl."""
    out = tmp_path / "RESULTS.md"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "startup", "--out", str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    text = out.read_text()
    assert text.count("verl-ctx validate, verl's `") == 2  # one launch with its own --config-path, one without
    assert "python -c 'import verl.trainer.main_ppo'" in text
