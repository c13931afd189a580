"""What differs between the supported verl releases (docs/compatibility.md), checked against verl's own code.

* Ray: ``init_ray`` starts Ray as verl's ``run_ppo`` would for the installed verl. Compared by launching
  ``run_ppo`` twice in fresh processes, once starting Ray itself and once after ``init_ray``, with a TaskRunner
  that records what the TaskRunner and a worker it starts see.
* Separate-async trainer (verl 0.9.1, ``actor_rollout_ref.hybrid_engine=False``): verl builds ``Role.Actor`` and
  ``Role.RefPolicy`` workers separately; each must get only its own role's context.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from verl_ctx import ContextSet, validate
from verl_ctx.errors import ContextError
from verl_ctx.integrations.verl import bind_role_worker_mapping, make_task_runner
from verl_ctx.integrations.verl._rehearsal_settings import REHEARSAL_CPUS

from .conftest import REPO
from .contexts import REGISTRY, SCHEMAS
from .probes import describe_mapping, v1_probe_base

pytestmark = pytest.mark.ray

# What run_ppo sets in the driver before ray.init, for workers to inherit (and TransferQueue's flag).
DRIVER_SET = ("VERL_FULL_DETERMINISM", "VLLM_BATCH_INVARIANT", "PYTHONHASHSEED", "VERL_RL_INSIGHT_ENABLE")
WATCHED = (*DRIVER_SET, "TRANSFER_QUEUE_ENABLE", "VERL_CTX_USER_VAR")
# Both launches use these; a dashboard only costs start-up time here.
COMMON = ["++ray_kwargs.ray_init.include_dashboard=False", "++ray_kwargs.ray_init.num_cpus=2"]
# Every run_ppo branch that touches the driver environment or the runtime env. TransferQueue is left out of
# the launches: verl 0.9.0's run_ppo itself fails (ConfigKeyError) when it is enabled beside a user env var.
LAUNCH = [
    "actor_rollout_ref.rollout.full_determinism=True",
    "actor_rollout_ref.rollout.seed=1234",
    "trainer.logger=[console,rl_insight]",
    "++ray_kwargs.ray_init.runtime_env.env_vars.VERL_CTX_USER_VAR=from-config",
]
EVERYTHING_ON = [*LAUNCH, "transfer_queue.enable=True"]


# --- Ray initialised as run_ppo does ------------------------------------------------------------------------


def _env_reporter(out: str) -> Any:
    """A TaskRunner for ``run_ppo`` that writes what its process and a worker it starts see to ``out``.

    Made inside a function, so Ray sends it by value: nothing from this repository is imported in Ray's workers.
    """
    import ray

    class EnvReporter:
        def run(self, config: Any) -> None:
            import json
            import os

            import ray

            class Worker:
                def env(self, keys: list[str]) -> dict[str, str | None]:
                    return {k: os.environ.get(k) for k in keys}

            runtime_env = dict(ray.get_runtime_context().runtime_env)
            keys = sorted({*WATCHED, *runtime_env.get("env_vars", {})})
            worker = ray.remote(num_cpus=0)(Worker).remote()  # as verl's worker groups are started from here
            report = {
                "runtime_env": runtime_env,
                "task_runner": {k: os.environ.get(k) for k in keys},
                "worker": ray.get(worker.env.remote(keys)),
            }
            with open(out, "w") as f:
                json.dump(report, f, default=str)

    return ray.remote(num_cpus=0)(EnvReporter)


def _launch(how: str, overrides: list[str], out: str) -> None:
    """In this (fresh) process: run_ppo with the reporting TaskRunner; ``how="init_ray"`` calls ours first."""
    from verl.trainer.main_ppo import run_ppo

    from verl_ctx.integrations.verl import compose_config, init_ray

    config = compose_config(overrides=overrides)
    if how == "init_ray":
        assert init_ray(config), "Ray was already running"
    run_ppo(config, task_runner_class=_env_reporter(out))


def _observe(how: str, overrides: list[str], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{how}.json"
    env = {k: v for k, v in os.environ.items() if k not in WATCHED}  # as from a clean shell
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(REPO)) if p)
    env["RAY_AUTH_MODE"] = "disabled"
    code = f"from tests.integrations.test_compat import _launch; _launch({how!r}, {overrides!r}, {str(out)!r})"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_init_ray_starts_ray_as_run_ppo_does(tmp_path: Path) -> None:
    """With full_determinism, rl_insight and a user env var, the TaskRunner and its workers see the same runtime env
    and variables after init_ray as when run_ppo starts Ray itself, the determinism variables included."""
    verl_started = _observe("run_ppo", [*COMMON, *LAUNCH], tmp_path)
    ours = _observe("init_ray", [*COMMON, *LAUNCH], tmp_path)
    want = {"VERL_FULL_DETERMINISM": "1", "VLLM_BATCH_INVARIANT": "1", "PYTHONHASHSEED": "1234"}
    want |= {"VERL_RL_INSIGHT_ENABLE": "1", "VERL_CTX_USER_VAR": "from-config"}
    for launch, seen in (("run_ppo", verl_started), ("init_ray + run_ppo", ours)):
        for where in ("task_runner", "worker"):
            assert {k: seen[where][k] for k in want} == want, f"{launch}: {where}"
    assert ours == verl_started


def test_ray_init_kwargs_are_run_ppos_for_this_config(tmp_path: Path) -> None:
    """ray_init_kwargs merges the config's ray_init over verl's runtime env defaults (plus TransferQueue's flag and
    the driver variables it sets first), as run_ppo's ray.init gets them."""
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    from verl_ctx.integrations.verl import compose_config
    from verl_ctx.integrations.verl._launch import ray_init_kwargs

    saved = dict(os.environ)
    try:
        for key in WATCHED:
            os.environ.pop(key, None)
        config = compose_config(overrides=[*COMMON, *EVERYTHING_ON])
        kwargs = ray_init_kwargs(config)
        defaults = get_ppo_ray_runtime_env(config)  # reads the driver variables ray_init_kwargs has just set
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert kwargs["num_cpus"] == 2
    assert kwargs["include_dashboard"] is False
    assert kwargs["runtime_env"]["env_vars"] == {
        **defaults["env_vars"],
        "TRANSFER_QUEUE_ENABLE": "1",
        "VERL_CTX_USER_VAR": "from-config",
    }
    assert kwargs["runtime_env"]["env_vars"]["PYTHONHASHSEED"] == "1234"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ((), (False, REHEARSAL_CPUS)),
        (("++ray_kwargs.ray_init.include_dashboard=true", "++ray_kwargs.ray_init.num_cpus=3"), (True, 3)),
    ],
    ids=["unset", "set-by-the-launch"],
)
def test_a_rehearsal_starts_ray_without_a_dashboard_unless_the_launch_asks_for_one(
    given: tuple[str, ...], expected: tuple[bool, int]
) -> None:
    """A rehearsal's own settings fill only what verl's config leaves unset, and reach ray.init as run_ppo's do."""
    from verl_ctx.integrations.verl import compose_config
    from verl_ctx.integrations.verl._launch import ray_init_kwargs
    from verl_ctx.integrations.verl._rehearsal_settings import rehearsal_settings

    config = compose_config(overrides=list(given))
    rehearsal_settings(config)
    kwargs = ray_init_kwargs(config)
    assert (kwargs["include_dashboard"], kwargs["num_cpus"]) == expected
    assert config.trainer.logger == ["console"]


# --- separate-async trainer: Role.Actor and Role.RefPolicy ----------------------------------------------------

SECTION = {"actor": {"entropy_bonus": 0.5}, "ref": {"kl_temperature": 2.0}, "critic": {"value_clip": 0.75}}
SEPARATE = ["trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.hybrid_engine=False"]


def _expect(role: str) -> str:
    return repr(SCHEMAS[role].model_validate(SECTION[role]))


@pytest.fixture(scope="module")
def contexts() -> ContextSet:
    return validate({"extra_context": SECTION}, registry=REGISTRY)


@pytest.fixture(scope="module")
def separate_config(verl_config: Any) -> Any:
    """verl's config for the separate-async trainer without hybrid replicas (skips where verl has no such mode)."""
    from omegaconf import open_dict
    from verl.trainer.ppo.v1 import get_trainer_cls

    if not hasattr(get_trainer_cls("separate_async"), "_enable_hybrid_replicas"):
        pytest.skip("this verl's separate-async trainer has no hybrid_engine=False mode (added in verl 0.9.1)")
    config = verl_config.copy()
    with open_dict(config):
        config.trainer.v1.trainer_mode = "separate_async"
        config.actor_rollout_ref.hybrid_engine = False
    return config


def _mapping_of(trainer_cls: type, config: Any) -> dict[Any, Any]:
    """The trainer's own ``role_worker_mapping`` step, as ``PPOTrainer._setup`` runs it."""
    trainer: Any = object.__new__(trainer_cls)  # its __init__ loads a tokenizer and datasets: not on CPU
    trainer.config = config
    # What PPOTrainerSeparateAsync.__init__ sets from the config before anything else.
    trainer._enable_hybrid_replicas = bool(config.actor_rollout_ref.get("hybrid_engine", True))
    trainer._init_resource_pool_mgr()
    return trainer.role_worker_mapping  # type: ignore[no-any-return]


class SeparateAsyncProbeRunner:
    """TaskRunnerV1's trainer step inside a real TaskRunner process: the configured trainer builds its mapping."""

    def run(self, config: Any) -> dict[str, Any]:
        from verl.trainer.ppo.v1 import get_trainer_cls

        trainer_cls = get_trainer_cls(config.trainer.v1.trainer_mode)
        return {
            "trainer_mode": str(config.trainer.v1.trainer_mode),
            "mapping": describe_mapping(_mapping_of(trainer_cls, config)),
        }


def test_separate_async_actor_and_ref_workers_carry_only_their_role(
    ray_cluster: None, separate_config: Any, contexts: ContextSet
) -> None:
    """In the TaskRunner, the bound separate-async trainer's Role.Actor worker carries the actor's context only and
    its Role.RefPolicy worker the ref's only (each a verl DetachActorWorker), decoded there."""
    import ray

    envelopes = {r: e for r, e in contexts.envelopes().items() if r in SECTION}
    runner = make_task_runner(envelopes, use_v1=True, base=v1_probe_base(SeparateAsyncProbeRunner)).remote()
    result = ray.get(runner.run.remote(separate_config))
    ray.kill(runner)
    assert result["trainer_mode"] == "separate_async+verl_ctx"
    mapping = result["mapping"]
    assert set(mapping) == {"actor", "ref", "critic"}
    actor, ref = mapping["actor"], mapping["ref"]
    assert actor["class"] == ref["class"] == "DetachActorWorker"
    assert actor["decoded"] == {"actor": _expect("actor")}
    assert (actor["actor_worker_cls"], actor["ref_worker_cls"]) == (["actor"], [])
    assert ref["decoded"] == {"ref": _expect("ref")}
    assert (ref["actor_worker_cls"], ref["ref_worker_cls"]) == ([], ["ref"])
    assert mapping["critic"]["decoded"] == {"critic": _expect("critic")}


def test_separate_async_actor_and_ref_processes_decode_their_own(
    ray_cluster: None, pools: Any, separate_config: Any, contexts: ContextSet
) -> None:
    """Spawned as the trainer spawns them (role="actor" and role="ref", colocated in verl's WorkerDict), the
    recipe's hybrid workers build their inner workers, and each decodes only its own role's context."""
    from verl.single_controller.ray import RayClassWithInitArgs
    from verl.single_controller.ray.base import create_colocated_worker_cls
    from verl.trainer.ppo.utils import Role
    from verl.trainer.ppo.v1 import get_trainer_cls

    from .workers import BoundaryActorRolloutRefWorker

    config = separate_config
    mapping = _mapping_of(get_trainer_cls("separate_async"), config)
    assert {str(r) for r in mapping} == {"actor", "ref", "critic"}
    recipe = {"actor": BoundaryActorRolloutRefWorker, "ref": BoundaryActorRolloutRefWorker}
    bind_role_worker_mapping(mapping, contexts.envelopes(), workers=recipe)
    # As PPOTrainer._setup builds them for a separate actor and ref (both in the global pool).
    class_dict = {
        "actor": RayClassWithInitArgs(
            cls=mapping[Role.Actor],
            config=config.actor_rollout_ref,
            distillation_config=config.get("distillation"),
            role=str(Role.Actor),
        ),
        "ref": RayClassWithInitArgs(cls=mapping[Role.RefPolicy], config=config.actor_rollout_ref, role="ref"),
    }
    spawned = pools(create_colocated_worker_cls(class_dict), [2]).spawn(prefix_set=class_dict.keys())
    actors, refs = spawned["actor"].build_inner_workers(), spawned["ref"].build_inner_workers()
    assert len(actors) == len(refs) == 2
    assert len({a["pid"] for a in actors}) == 2
    for actor, ref in zip(actors, refs, strict=True):
        assert actor["pid"] == ref["pid"], "colocated: one process hosts both"
        assert actor["decoded"] == {"actor": {"actor": _expect("actor")}}
        assert ref["decoded"] == {"ref": {"ref": _expect("ref")}}
    assert spawned["actor"].outer_context("actor") == [_expect("actor")] * 2
    assert spawned["ref"].outer_context("ref") == [_expect("ref")] * 2
    for worker, other in (("actor", "ref"), ("ref", "actor")):
        with pytest.raises(ContextError, match=re.escape(f"holds contexts for ['{worker}']")):
            spawned[worker].outer_context(other)
