"""When verl itself refuses a launch, `verl-ctx run` says why in one line, exits 1, and keeps the traceback."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from verl_ctx.errors import LaunchError
from verl_ctx.integrations.verl._preflight import _shortfall, check_resources, resource_pools

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
def test_a_cpu_only_run_stops_at_preflight_within_seconds_naming_gpus_and_keys(tmp_path: Path) -> None:
    """A run (no --rehearse) on a machine without the GPUs it asks for stops right after ray.init, before the
    TaskRunner starts: one line-group naming the GPUs needed, the cluster's count and the keys.

    That it stops before the TaskRunner is read from the output (no line of a TaskRunner process, whose start and
    verl's own check cost a minute more), not from the clock: beside another worker's rehearsal on two cores the
    run took 27 s (12-19 s alone). The clock only bounds a wait for resources Ray can never grant."""
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    args = tiny_run_args(tiny_model(tmp_path / "model"), tiny_dataset(tmp_path / "data"))
    started = time.monotonic()
    out = _run(tmp_path, *args)
    took = time.monotonic() - started
    assert out.returncode == 1, out.stderr[-2000:]
    assert "preflight: the Ray cluster cannot hold this run" in out.stderr
    assert "this run needs 1 GPU(s) (global_pool: trainer.n_gpus_per_node=1 x trainer.nnodes=1)" in out.stderr
    assert "the Ray cluster has 0" in out.stderr
    assert "Total available GPUs" not in out.stderr, "verl's own check, inside the TaskRunner, was never reached"
    assert "Traceback" not in out.stderr
    assert not re.search(r"\(TaskRunner\w* pid=", out.stdout + out.stderr), "a TaskRunner process started"
    assert took < 120, f"{took:.0f} s"


def _pool_config(*overrides: str) -> Any:
    from verl_ctx.integrations.verl import compose_config

    return compose_config(["actor_rollout_ref.rollout.tensor_model_parallel_size=1", *overrides])


def test_preflight_adds_every_pool_and_names_its_keys() -> None:
    """The training, reward and teacher pools are added up as verl's trainers build them; each pool is named with
    its two keys, and the total is set against the cluster's."""
    config = _pool_config(
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=2",
        "reward.reward_model.enable_resource_pool=true",
        "reward.reward_model.n_gpus_per_node=2",
        "reward.reward_model.nnodes=1",
        "distillation.enabled=true",
        "distillation.n_gpus_per_node=1",
        "distillation.nnodes=1",
    )
    assert [(p.name, p.total) for p in resource_pools(config)] == [
        ("global_pool", 16),
        ("reward_pool", 2),
        ("teacher_pool", 1),
    ]
    (problem,) = check_resources(config, 16, [8, 8])
    assert problem.startswith("this run needs 19 GPU(s) (global_pool: trainer.n_gpus_per_node=8 x trainer.nnodes=2; ")
    assert "reward_pool: reward.reward_model.n_gpus_per_node=2 x reward.reward_model.nnodes=1" in problem
    assert "teacher_pool: distillation.n_gpus_per_node=1 x distillation.nnodes=1" in problem
    assert problem.endswith("and the Ray cluster has 16")
    assert check_resources(config, 19, [8, 8, 3]) == []


def test_preflight_refuses_a_pool_no_node_can_hold_and_a_replica_wider_than_the_pool() -> None:
    """Enough GPUs in total but none on one node for a pool's placement group is refused (Ray would wait forever);
    so is a rollout replica wider than the training GPUs (verl would start none), except with no local replica."""
    config = _pool_config("trainer.n_gpus_per_node=8", "trainer.nnodes=1")
    (problem,) = check_resources(config, 8, [4, 4])
    assert "global_pool: trainer.n_gpus_per_node=8 x trainer.nnodes=1 needs 1 node(s) with 8 GPU(s) each" in problem
    assert "has 0 (its nodes have 4, 4)" in problem

    wide = _pool_config("trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.tensor_model_parallel_size=2")
    (problem,) = check_resources(wide, 1, [1])
    assert "one rollout replica needs 2 GPU(s) (actor_rollout_ref.rollout.tensor_model_parallel_size=2" in problem
    assert "the global_pool it is carved from has 1 (trainer.n_gpus_per_node x trainer.nnodes)" in problem
    pool = _pool_config(
        "trainer.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "trainer.v1.trainer_mode=external_pool",
    )
    assert check_resources(pool, 1, [1]) == []
    standalone = _pool_config(
        "trainer.n_gpus_per_node=1",
        "trainer.v1.trainer_mode=separate_async",
        "actor_rollout_ref.hybrid_engine=false",
        "actor_rollout_ref.rollout.n_gpus_per_node=2",
        "actor_rollout_ref.rollout.nnodes=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
    )
    (problem,) = check_resources(standalone, 3, [3])  # the training pool holds no replica with hybrid_engine=false
    assert "one rollout replica needs 4 GPU(s)" in problem
    assert "the standalone rollout it is carved from has 2 (actor_rollout_ref.rollout.n_gpus_per_node x " in problem


def test_a_preflight_shortfall_is_one_pickling_launch_error_with_cause_and_key() -> None:
    """The shortfall is a LaunchError whose cause is the first problem and whose key is the first key named."""
    needs = "this run needs 4 GPU(s) (global_pool: trainer.n_gpus_per_node=4 x trainer.nnodes=1)"
    error = _shortfall([f"{needs} and the Ray cluster has 0"], "GPU")
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, LaunchError)
    assert (again.key, again.cause) == ("trainer.n_gpus_per_node", error.cause)
    assert "--rehearse" in str(again)


def test_a_rehearsal_ray_could_not_schedule_is_refused_naming_the_cpus_needed(tmp_path: Path) -> None:
    """Too few logical CPUs for a rehearsal: one line naming how many are needed, before Ray starts (no hang)."""
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    tiny = tiny_run_args(tiny_model(tmp_path / "model"), tiny_dataset(tmp_path / "data"))
    out = _run(tmp_path, "--rehearse", *tiny, "ray_kwargs.ray_init.num_cpus=2")
    assert out.returncode == 1, out.stderr[-2000:]
    assert "a rehearsal needs 4 logical CPUs in Ray" in out.stderr
    assert "ray_kwargs.ray_init.num_cpus=4" in out.stderr
    assert "Started a local Ray instance" not in out.stdout + out.stderr
