"""The process's shared Ray cluster survives a dead node: the next module gets a new cluster, not a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.ray

_CONFTEST = """
import tests.conftest  # noqa: F401  (the suite's Ray settings)
from tests.integrations.conftest import pytest_runtest_makereport, ray_cluster, shared_ray  # noqa: F401
"""

_FIRST_MODULE = """
import ray


def test_uses_the_cluster(ray_cluster):
    assert ray.get(ray.remote(lambda: 1).remote()) == 1
"""

# Between the two modules: the first module's teardown kept the cluster (it left nothing on it), then its raylet dies,
# as the OOM killer, or a node that missed its health checks, would end it.
_NEXT_MODULE = """
import pytest
import ray


@pytest.fixture(scope="module")
def raylet_killed(shared_ray):
    assert shared_ray.up, "the first module's cluster was kept"
    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process
    raylet.kill()
    raylet.wait()


def test_the_next_module_gets_a_working_cluster(raylet_killed, ray_cluster):
    assert ray.get(ray.remote(lambda: 2).remote(), timeout=60) == 2
"""


_DIES_MID_TEST = """
import pytest
import ray

pytestmark = pytest.mark.ray


def test_whose_node_dies(ray_cluster):
    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process
    raylet.kill()
    raylet.wait()
    ray.get(ray.remote(lambda: 3).remote(), timeout=20)
"""


def _pytest(tmp_path: Path, modules: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """pytest over ``modules`` in a process of its own, with the suite's Ray fixtures and options."""
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    for name, text in modules.items():
        (tmp_path / name).write_text(text)
    command = [
        sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
        "-p", "tests.hang_guard", "-p", "no:cacheprovider", *modules,
    ]  # fmt: skip
    ray_tmp = tempfile.mkdtemp(prefix="vc-ray-")  # a short path: Ray's socket paths must fit in 107 bytes
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_TMPDIR": ray_tmp}
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER"):
        env.pop(name, None)
    try:
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400, check=False)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_module_after_the_raylet_died_gets_a_new_cluster(tmp_path: Path) -> None:
    """The cluster module 1 used loses its raylet before module 2 starts; module 2, in the same process, runs on Ray."""
    out = _pytest(tmp_path, {"test_1_first.py": _FIRST_MODULE, "test_2_next.py": _NEXT_MODULE})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "2 passed" in out.stdout


def test_a_ray_test_that_fails_shows_what_rays_daemons_logged(tmp_path: Path) -> None:
    """A test whose node died fails with Ray's own error lines in its report, not only a one-line Ray exception."""
    out = _pytest(tmp_path, {"test_dies.py": _DIES_MID_TEST})
    assert out.returncode == 1, out.stdout[-4000:] + out.stderr[-2000:]
    section = out.stdout.split("Ray's daemons logged errors during this test", 1)[-1]
    assert "Captured" not in section.split("\n", 1)[0], "the section is there"
    assert "/logs/raylet.out" in section or "/logs/gcs_server.out" in section, out.stdout[-4000:]


def test_daemon_trouble_lines_are_errors_and_a_nodes_death_not_routine_lines(tmp_path: Path) -> None:
    """Read from Ray's own log format: E and F lines and the lines that name a node's death; I and W lines else not."""
    from verl_ctx.integrations.verl._ray_logs import trouble_lines

    (tmp_path / "raylet.out").write_text(
        "[2026-12-06 20:28:35,825 I 2789 2789] (raylet) worker_pool.cc:564: Started worker process\n"
        "[2026-12-06 20:28:36,001 E 2789 2789] (raylet) node_manager.cc:99: Failed to start worker\n"
    )
    (tmp_path / "gcs_server.out").write_text(
        "[2026-12-06 20:42:10,044 W 8903 8903] (gcs_server) gcs_health_check_manager.cc:209: Health check failed "
        "for node 47473486, remaining checks 9\n"
        "[2026-12-06 20:42:15,117 W 8903 9204] (gcs_server) open_telemetry_metric_recorder.cc:67: Failed to export\n"
    )
    (tmp_path / "python-core-driver-01.log").write_text("[2026-12-06 20:28:36,001 E 1 1] not a daemon's log\n")
    found = {path.name: lines for path, lines in trouble_lines(tmp_path).items()}
    assert found == {
        "gcs_server.out": [
            "[2026-12-06 20:42:10,044 W 8903 8903] (gcs_server) gcs_health_check_manager.cc:209: Health check failed "
            "for node 47473486, remaining checks 9"
        ],
        "raylet.out": ["[2026-12-06 20:28:36,001 E 2789 2789] (raylet) node_manager.cc:99: Failed to start worker"],
    }


def test_a_rehearsal_stopped_by_rays_infrastructure_names_rays_logs(ray_cluster: None) -> None:
    """A Ray error that means a process went away gets Ray's logs folder (and its last trouble line) in the
    rehearsal's message; an error the recipe's code raised gets nothing added."""
    import ray
    from ray.exceptions import ActorDiedError

    from verl_ctx.integrations.verl._launch import _ray_root_cause

    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    assert f"(logs: {logs})" in _ray_root_cause(ActorDiedError()) or _ray_root_cause(ActorDiedError()).endswith(
        f"Ray's logs: {logs}"
    )
    assert _ray_root_cause(ValueError("reward_scale must be > 0")) == ""
