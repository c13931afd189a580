"""``verl-ctx demo``: typed contexts reach every verl role in real Ray workers, on this machine's CPUs.

1. compose verl's own ``ppo_trainer`` config with the demo's overrides, and validate every role's context;
2. start a local Ray cluster and spawn real verl worker groups (``RayWorkerGroup`` over
   ``create_colocated_worker_cls``, the path ``init_workers`` takes), with the worker classes bound;
3. print the typed context each role decoded, and in which process;
4. validate a deliberately bad override through the real CLI and show the error and its exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

DEMO_OVERRIDES: tuple[str, ...] = (
    "algorithm.adv_estimator=gae",  # a critic runs
    "actor_rollout_ref.actor.use_kl_loss=True",  # a reference policy runs
    "+extra_context.actor.entropy_bonus=0.01",
    "+extra_context.ref.kl_temperature=0.7",
    "+extra_context.critic.value_clip=0.3",
    "+extra_context.critic.shaping=length_penalty",
    "+extra_context.rollout.max_tool_calls=2",
    "+extra_context.reward.judge.url=http://judge.internal:8000",
    "+extra_context.reward.judge.api_key=not-shown-anywhere",
)
BAD_OVERRIDE = "+extra_context.critic.value_clip=-1"  # replaces the demo's good value_clip
SCHEMA_MODULE = "verl_ctx.demo.contexts"


def run_demo(overrides: Sequence[str] = DEMO_OVERRIDES, *, num_cpus: int = 4) -> int:
    """Run the demo; returns the process exit code (0 when every role decoded its context)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from verl_ctx import validate
    from verl_ctx.cli._load import compose_config, import_schema_modules

    started = time.perf_counter()
    import_schema_modules([SCHEMA_MODULE])
    config = compose_config(config_file=None, config_path=None, config_name=None, overrides=overrides)
    contexts = validate(config, overrides=overrides)
    click.echo(
        click.style("1. validated", bold=True) + f" {len(contexts)} role contexts against verl's "
        f"ppo_trainer config in {time.perf_counter() - started:.2f} s (overrides: {' '.join(overrides)})"
    )

    rows = _spawn_and_report(config, contexts, num_cpus=num_cpus)
    click.echo(click.style("\n2. typed context decoded inside each verl worker process", bold=True))
    from verl_ctx.cli._render import table

    click.echo(table(["role", "verl worker", "pid", "decoded context"], rows))
    roles_seen = {r[0] for r in rows}
    missing = set(contexts) - roles_seen
    click.echo(click.style("\n3. a bad override is refused before launch", bold=True) + f": {BAD_OVERRIDE}")
    key = BAD_OVERRIDE.split("=", 1)[0]
    bad_overrides = [o for o in overrides if o.split("=", 1)[0] != key] + [BAD_OVERRIDE]
    cmd = [sys.executable, "-m", "verl_ctx.cli", "validate", "-s", SCHEMA_MODULE, *bad_overrides]
    bad = subprocess.run(cmd, capture_output=True, text=True, check=False)
    click.echo((bad.stdout + bad.stderr).rstrip())
    click.echo(f"exit code: {bad.returncode}")
    if missing or bad.returncode != 1:
        click.echo(click.style(f"demo failed: roles without a decoded context: {sorted(missing)}", fg="red"))
        return 1
    click.echo(click.style(f"\ndemo done in {time.perf_counter() - started:.1f} s", fg="green"))
    return 0


def _spawn_and_report(config: Any, contexts: Any, *, num_cpus: int) -> list[list[str]]:
    import ray
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.single_controller.ray.base import create_colocated_worker_cls
    from verl.trainer.ppo.utils import Role
    from verl.workers.config import TrainingWorkerConfig

    from verl_ctx.demo.workers import BoundaryActorRolloutRefWorker, BoundaryTrainingWorker, ConfigReaderWorker
    from verl_ctx.integrations.verl import bind_config, bind_role_worker_mapping

    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        envelopes = contexts.envelopes()
        bind_config(config, envelopes)
        # What a TaskRunner registers, then binds (verl-ctx run does this inside the TaskRunner).
        mapping: dict[Any, Any] = {
            Role.ActorRolloutRef: ray.remote(BoundaryActorRolloutRefWorker),
            Role.Critic: ray.remote(BoundaryTrainingWorker),
        }
        bind_role_worker_mapping(mapping, envelopes)
        class_dict = {
            "actor_rollout_ref": RayClassWithInitArgs(
                cls=mapping[Role.ActorRolloutRef], config=config.actor_rollout_ref, role="actor_rollout_ref"
            ),
            # The v1 trainer builds the critic's TrainingWorkerConfig without extra_context (trainer_base.py).
            "critic": RayClassWithInitArgs(
                cls=mapping[Role.Critic], config=TrainingWorkerConfig(model_type="value_model")
            ),
        }
        pool = RayResourcePool(process_on_nodes=[2], use_gpu=False, max_colocate_count=1)
        group = RayWorkerGroup(
            resource_pool=pool, ray_cls_with_init=create_colocated_worker_cls(class_dict), device_name="cpu"
        )
        spawned = group.spawn(prefix_set=class_dict.keys())
        rows: list[list[str]] = []
        for report in spawned["actor_rollout_ref"].build_inner_workers()[:1]:
            for role, decoded in sorted(report["decoded"].items()):
                rows.append([role, "ActorRolloutRefWorker", str(report["pid"]), decoded[role]])
        for report in spawned["critic"].report()[:1]:
            rows.append(["critic", "TrainingWorker", str(report["pid"]), report["decoded"]["critic"]])

        reader_pool = RayResourcePool(process_on_nodes=[1], use_gpu=False, max_colocate_count=1)
        reader = RayWorkerGroup(
            resource_pool=reader_pool,
            ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(ConfigReaderWorker), config=config),
            device_name="cpu",
        )
        report = reader.report("reward")[0]
        rows.append(["reward", "reward loop (Hydra config)", str(report["pid"]), report["decoded"]["reward"]])
        return rows
    finally:
        ray.shutdown()
