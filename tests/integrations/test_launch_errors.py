"""When verl itself refuses a launch, `verl-ctx run` says why in one line, exits 1, and keeps the traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

CTX = "from verl_ctx import RoleContext\nclass C(RoleContext, role='critic'):\n    value_clip: float = 0.2\n"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "launch_ctx.py").write_text(CTX)
    return subprocess.run(
        [str(Path(sys.executable).with_name("verl-ctx")), "run", "-s", "launch_ctx", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={
            **os.environ,
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
            "RAY_AUTH_MODE": "disabled",
            "NO_COLOR": "1",
            "HF_HUB_OFFLINE": "1",
        },
    )


def test_verls_pre_launch_check_is_one_line_with_cause_and_key(tmp_path: Path) -> None:
    """verl's validate_config failing (no micro batch size) prints verl's cause and config key, no traceback."""
    out = _run(tmp_path)
    assert out.returncode == 1
    assert "verl's pre-launch check failed: AssertionError: [actor] Please set at least one of" in out.stderr
    assert "(config key: actor_rollout_ref.actor)" in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) < 6
    assert "Started a local Ray instance" not in out.stdout + out.stderr


def test_traceback_flag_shows_verls_whole_error(tmp_path: Path) -> None:
    """--traceback prints the exception verl raised, whole."""
    out = _run(tmp_path, "--traceback")
    assert out.returncode == 1
    assert "Traceback" in out.stderr
    assert "InstantiationException" in out.stderr


@pytest.mark.ray
def test_no_gpu_inside_the_task_runner_is_one_line_and_a_kept_traceback(tmp_path: Path) -> None:
    """verl's GPU check, which fails inside the TaskRunner process, comes back as one line and a log file."""
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    args = tiny_run_args(tiny_model(tmp_path / "model"), tiny_dataset(tmp_path / "data"))
    out = _run(
        tmp_path,
        *args,
        "ray_kwargs.ray_init.num_cpus=6",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "trainer.logger=[console]",
    )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "verl stopped the run: ValueError: Total available GPUs 0 is less than total desired GPUs 1" in out.stderr
    log = re.search(r"Full traceback: (\S+\.log)", out.stderr)
    assert log is not None
    assert "Traceback" in Path(log.group(1)).read_text()
    assert "Traceback" not in out.stderr


def test_a_rehearsal_ray_could_not_schedule_is_refused_naming_the_cpus_needed(tmp_path: Path) -> None:
    """Too few logical CPUs for a rehearsal: one line naming how many are needed, before Ray starts (no hang)."""
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    tiny = tiny_run_args(tiny_model(tmp_path / "model"), tiny_dataset(tmp_path / "data"))
    out = _run(tmp_path, "--rehearse", *tiny, "ray_kwargs.ray_init.num_cpus=2")
    assert out.returncode == 1, out.stderr[-2000:]
    assert "a rehearsal needs 4 logical CPUs in Ray" in out.stderr
    assert "ray_kwargs.ray_init.num_cpus=4" in out.stderr
    assert "Started a local Ray instance" not in out.stdout + out.stderr
