"""What Ray's own daemons logged as trouble: the cause a one-line Ray error on the driver leaves out.

A node that dies (the OOM killer, a raylet that missed its health checks) reaches the driver as
``ActorUnavailableError ... Socket closed`` or ``ActorDiedError``; "Raylet is terminated" or "Health check failed" is
only in the session's ``logs/raylet.out`` and ``logs/gcs_server.out``. A rehearsal that fails names the last such
line and the folder; the test suite shows them under a failed Ray test.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

__all__ = ["TROUBLE", "session_logs", "trouble_lines"]

#: A Ray log line at level E or F ("[2026-12-06 20:28:35,825 E 2789 2789] (raylet) ..."), or one of the lines that
#: name a node's death at level I or W.
TROUBLE = re.compile(
    r"^\[[\d-]+ [\d:,]+ [EF] |Health check failed|marked dead|Node is dead|Raylet is terminated|out of memory"
)
_DAEMON_LOGS = ("raylet.out", "raylet.err", "gcs_server.out", "gcs_server.err")


def session_logs() -> Path | None:
    """The logs folder of the Ray session this process is connected to, or None (Ray not started here)."""
    with contextlib.suppress(Exception):  # a Ray without this private attribute, or one shut down: no folder
        import ray

        node = getattr(ray._private.worker, "_global_node", None)
        if node is not None:
            return Path(node.get_session_dir_path()) / "logs"
    return None


def trouble_lines(logs: Path, *, since: float = 0.0) -> dict[Path, list[str]]:
    """The trouble lines of each daemon log in ``logs`` written to since ``since`` (epoch seconds), by file."""
    found: dict[Path, list[str]] = {}
    for log in sorted(logs.glob("*")):
        if log.name not in _DAEMON_LOGS:
            continue
        with contextlib.suppress(OSError):
            if log.stat().st_mtime < since:
                continue
            bad = [line for line in log.read_text(errors="replace").splitlines() if TROUBLE.search(line)]
            if bad:
                found[log] = bad
    return found
