"""The suite's guard against hangs: every run ends, in bounded time, with the stuck or crashed test named.

Three layers, each catching what the one before cannot (the limits are in pyproject.toml's pytest options):

1. ``timeout`` (pytest-timeout, signal method): a test that runs too long fails by name, with every thread's stack,
   and its fixtures are torn down. A test blocked where no Python signal handler runs is not reached by this...
2. ``faulthandler_timeout`` with ``faulthandler_exit_on_timeout`` (pytest's own): ...so faulthandler's C thread dumps
   the stacks and ends that worker process. xdist reports the crashed test by name and starts a new worker, which
   the scheduler below makes safe.
3. ``suite_deadline`` (this module, in the xdist controller or a plain run): past it, the tests still running are
   named, the run's processes are killed (Ray clusters, rehearsals, xdist workers) and pytest exits 1. It catches
   what no test owns: a controller waiting for workers that wait for it.

The scheduler: pytest-xdist 3.8's ``LoadScopeScheduling.remove_node`` puts a crashed worker's whole workload back on
the queue, completed modules included. A completed module is later sent to a worker as an empty unit, which never
reports back, so no worker is given more work, and the run hangs with both workers idle (pytest-xdist issues #1378,
#1323; fixed on its main branch by PRs #1324/#1363, unreleased as of 3.8.0). It also re-queues the test the worker
crashed on, which may crash the new worker too (#1371), and a new worker handed one single-test module waits for a
second test that never comes (#1327). ``CrashSafeLoadScope`` re-queues only the crashed worker's pending tests,
without the one it crashed on, and gives a worker at least two tests. Drop it when a released pytest-xdist has
those fixes.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

_EXIT_CODE = 1


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "suite_deadline",
        "seconds the whole run may take; past it, the running tests are named and the run is ended (0: no limit)",
        default="0",
    )


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class SuiteDeadline:
    """A daemon thread that ends the run at the deadline, naming the tests that were running."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.running: dict[str, float] = {}  # nodeid -> when it started (this process's clock)
        self.failed: list[str] = []  # nodeid (and phase) of each test that failed so far: named at the deadline
        self.finished = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="suite-deadline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()

    @pytest.hookimpl
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self._lock:
            self.running[nodeid] = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            with self._lock:
                self.failed.append(report.nodeid if report.when == "call" else f"{report.nodeid} (in {report.when})")

    @pytest.hookimpl
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self._lock:
            self.running.pop(nodeid, None)
            self.finished += 1

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        now = time.monotonic()
        with self._lock:
            running = sorted(self.running.items(), key=lambda item: item[1])
            finished, failed = self.finished, list(self.failed)
        lines = [
            "",
            f"suite_deadline: the run passed its limit of {self.seconds:.0f} s after {finished} test(s) finished; "
            "ending it.",
        ]
        if failed:  # the summary pytest would print is never reached: the failures so far, named here
            lines.append(f"Tests that failed before the deadline ({len(failed)}):")
            lines += [f"  FAILED {nodeid}" for nodeid in failed]
        if running:
            lines.append("Tests still running (these did not finish):")
            lines += [f"  {nodeid}  (running for {now - since:.0f} s)" for nodeid, since in running]
        else:
            lines.append("No test was running: the workers were waiting for work that never came (a scheduler hang).")
        lines.append("This process's threads:")
        os.write(2, ("\n".join(lines) + "\n").encode())
        faulthandler.dump_traceback(file=sys.__stderr__ or sys.stderr, all_threads=True)
        _kill_descendants(os.getpid())
        os._exit(_EXIT_CODE)


def _children_of() -> dict[int, list[int]]:
    """Every process's children, read from /proc (Linux; elsewhere an empty map)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces or parentheses, so split after its last ')'
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile, or not a process's stat
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    return children


def _kill_descendants(pid: int) -> None:
    """SIGKILL every process below ``pid``: xdist workers, the Ray clusters they started, rehearsal subprocesses."""
    tree = _children_of()
    pending, seen = list(tree.get(pid, [])), []
    while pending:
        child = pending.pop()
        seen.append(child)
        pending += tree.get(child, [])
    for child in seen:
        with contextlib.suppress(OSError):  # gone already
            os.kill(child, signal.SIGKILL)


def pytest_configure(config: pytest.Config) -> None:
    seconds = float(config.getini("suite_deadline") or 0)
    if seconds > 0 and not _is_xdist_worker(config) and not config.option.collectonly:
        deadline = SuiteDeadline(seconds)
        config.pluginmanager.register(deadline, "suite-deadline")
        deadline.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    deadline = config.pluginmanager.get_plugin("suite-deadline")
    if isinstance(deadline, SuiteDeadline):
        deadline.stop()


def _crash_safe_loadscope() -> type[Any]:
    from xdist.scheduler import LoadScopeScheduling

    class CrashSafeLoadScope(LoadScopeScheduling):  # type: ignore[misc]
        """``--dist loadscope`` that survives a crashed worker (see the module docstring)."""

        def remove_node(self, node: Any) -> str | None:
            workload: dict[str, dict[str, bool]] = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            crashitem = pending[0]  # a worker runs its tests in order: the first pending one is the one it died on
            for scope, unit in workload.items():
                rest = {nodeid: False for nodeid, done in unit.items() if not done and nodeid != crashitem}
                if rest:
                    self.workqueue[scope] = rest
                    self.workqueue.move_to_end(scope, last=False)  # the interrupted module first: it is half done
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

        def _reschedule(self, node: Any) -> None:
            super()._reschedule(node)
            # A worker runs a test only once it holds the next one (or is told to shut down). A new worker, given one
            # module of one test, waited forever for a second (pytest-xdist #1327): give it two tests' worth.
            while self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)

    return CrashSafeLoadScope


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadscope":
        return _crash_safe_loadscope()(config, log)
    return None
