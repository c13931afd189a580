"""No run of the suite hangs: a stuck test fails by name, a worker that no signal reaches is ended and named, a crashed
worker's module goes on elsewhere, and a run past its deadline is ended naming what was running (tests/hang_guard.py).

Each test runs pytest on a few small test files in a process of its own, under this project's pytest options with
the limits made short.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_BLOCKED = """
import signal, time

def test_blocked():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])  # pytest-timeout's signal cannot reach this test
    time.sleep(300)

def test_after_blocked():
    pass
"""


def _pytest(tmp_path: Path, files: dict[str, str], *options: str, limit: float = 120) -> tuple[int, str, float]:
    """Run pytest over ``files`` (written to ``tmp_path``) with the project's options; (exit code, output, seconds)."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    command = [
        sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
        "-p", "tests.hang_guard", "-p", "no:cacheprovider", *options, *files,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    start = time.monotonic()
    out = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=limit, check=False)
    return out.returncode, out.stdout + out.stderr, time.monotonic() - start


def test_the_suite_runs_under_all_three_limits(pytestconfig: pytest.Config) -> None:
    """This very run has a per-test timeout, a hard backstop that ends the worker, and a whole-run deadline."""
    limits = ("timeout", "faulthandler_timeout", "suite_deadline")
    timeout, backstop, deadline = (float(pytestconfig.getini(name)) for name in limits)
    assert 0 < timeout < backstop < deadline <= 60 * 60  # CI allows 90 minutes for every stage together
    assert pytestconfig.getini("timeout_method") == "signal"
    assert pytestconfig.getini("faulthandler_exit_on_timeout") is True
    assert (REPO / "conftest.py").read_text().count('"tests.hang_guard"') == 1


def test_a_stuck_test_fails_by_name_with_its_stack_and_the_next_test_runs(tmp_path: Path) -> None:
    """A test that outlives ``timeout`` fails, named, with where it was stuck; the run goes on and ends."""
    stuck = "import time\n\ndef test_stuck():\n    time.sleep(300)\n\ndef test_after():\n    pass\n"
    code, output, seconds = _pytest(tmp_path, {"test_stuck.py": stuck}, "-o", "timeout=2")
    assert code == 1, output
    assert "FAILED test_stuck.py::test_stuck - Failed: Timeout" in output
    assert "time.sleep(300)" in output  # the stack of the stuck test
    assert "1 failed, 1 passed" in output
    assert seconds < 60


def test_a_test_no_signal_reaches_ends_its_worker_and_the_run_goes_on_without_it(tmp_path: Path) -> None:
    """One xdist worker, three modules; the second's first test blocks the timeout's signal and sleeps: faulthandler
    ends the worker, xdist names the test, and a new worker runs what was left (stock xdist 3.8 hung here for good)."""
    files = {
        "test_m1.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n\ndef test_c():\n    pass\n",
        "test_m2.py": _BLOCKED,
        "test_m3.py": "def test_last():\n    pass\n",
    }
    code, output, seconds = _pytest(
        tmp_path, files, "-n", "1", "--dist", "loadscope", "-o", "timeout=2", "-o", "faulthandler_timeout=4",
        "-o", "suite_deadline=90",
    )  # fmt: skip
    assert code == 1, output
    assert "Timeout (0:00:04)!" in output  # faulthandler's dump, before it ended the worker
    assert "worker 'gw0' crashed while running 'test_m2.py::test_blocked'" in output
    assert "1 failed, 5 passed" in output  # the crashed test is not run again; every other test is
    assert "suite_deadline" not in output
    assert seconds < 60


def test_a_run_past_its_deadline_is_ended_naming_the_tests_still_running_and_those_that_failed(tmp_path: Path) -> None:
    """The controller's deadline ends a run that nothing else would, and names what was running when it did and
    what had failed by then (pytest's own summary, which would name them, is never reached)."""
    files = {
        "test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(300)\n",
        # test_broken is not its worker's last test: xdist runs a worker's last test only once the run's end is known
        "test_quick.py": "def test_broken():\n    assert False\n\ndef test_quick():\n    pass\n",
    }
    # 20 s: the two workers start and run the quick module well within it even on a loaded 2-core machine
    code, output, seconds = _pytest(tmp_path, files, "-n", "2", "-o", "timeout=0", "-o", "suite_deadline=20")
    assert code == 1, output
    assert "suite_deadline: the run passed its limit of 20 s after 1 test(s) finished" in output
    assert "test_slow.py::test_slow  (running for" in output
    assert "Tests that failed before the deadline (1):\n  FAILED test_quick.py::test_broken" in output
    assert seconds < 60


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["plain", "xdist"])
def test_a_run_within_its_deadline_is_untouched(tmp_path: Path, workers: list[str]) -> None:
    """The deadline's thread stops with the run: a run that finishes in time exits as pytest decides."""
    quick = {"test_ok.py": "def test_ok():\n    pass\n"}
    code, output, _ = _pytest(tmp_path, quick, *workers, "-o", "suite_deadline=60")
    assert code == 0, output
    assert "1 passed" in output
