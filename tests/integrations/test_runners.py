"""Both trainer paths bind the worker classes verl itself registers, inside a real TaskRunner process."""

from __future__ import annotations

from typing import Any

import pytest

from verl_ctx import ContextSet, decode, validate
from verl_ctx.integrations.verl import bound_trainer_cls, make_task_runner

from .contexts import REGISTRY, SCHEMAS, DemoCriticContext
from .probes import V1ProbeRunner, legacy_probe_base, v1_probe_base

pytestmark = pytest.mark.ray

SECTION = {"actor": {"entropy_bonus": 0.5}, "ref": {"kl_temperature": 2.0}, "critic": {"value_clip": 0.75}}


@pytest.fixture(scope="module")
def contexts() -> ContextSet:
    return validate({"extra_context": SECTION}, registry=REGISTRY)


def _worker_envelopes(contexts: ContextSet) -> dict[str, Any]:
    return {r: e for r, e in contexts.envelopes().items() if r in ("actor", "ref", "critic")}


def _expect(role: str) -> str:
    return repr(SCHEMAS[role].model_validate(SECTION.get(role, {})))


def test_legacy_task_runner_binds_verls_own_registrations(
    ray_cluster: None, verl_config: Any, contexts: ContextSet
) -> None:
    """BaseTaskRunner.add_actor_rollout_worker / add_critic_worker register verl's classes; we bind them."""
    import ray

    runner_cls = make_task_runner(_worker_envelopes(contexts), use_v1=False, base=legacy_probe_base())
    runner = runner_cls.remote()
    mapping = ray.get(runner.run.remote(verl_config))
    ray.kill(runner)
    hybrid, critic = mapping["actor_rollout_ref"], mapping["critic"]
    assert hybrid["class"] == "ActorRolloutRefWorker"
    assert hybrid["actor_worker_cls"] == ["actor"]
    assert hybrid["ref_worker_cls"] == ["ref"]
    assert hybrid["decoded"] == {"actor": _expect("actor"), "ref": _expect("ref")}
    assert critic["class"] == "TrainingWorker"
    assert critic["decoded"] == {"critic": _expect("critic")}


def test_v1_task_runner_registers_a_bound_trainer(ray_cluster: None, verl_config: Any, contexts: ContextSet) -> None:
    """The v1 path runs the configured trainer's own _init_resource_pool_mgr, then binds its mapping."""
    import ray

    runner_cls = make_task_runner(_worker_envelopes(contexts), use_v1=True, base=v1_probe_base(V1ProbeRunner))
    runner = runner_cls.remote()
    result = ray.get(runner.run.remote(verl_config))
    ray.kill(runner)
    assert result["trainer_mode"].endswith("+verl_ctx")
    mapping = result["mapping"]
    assert mapping["actor_rollout_ref"]["actor_worker_cls"] == ["actor"]
    assert mapping["actor_rollout_ref"]["ref_worker_cls"] == ["ref"]
    assert mapping["critic"]["decoded"] == {"critic": _expect("critic")}


def test_legacy_trainer_fills_verls_critic_extra_context(contexts: ContextSet) -> None:
    """A legacy RayPPOTrainer bound by us supplies _critic_extra_context, verl's own extension point."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    trainer_cls = bound_trainer_cls(RayPPOTrainer, _worker_envelopes(contexts))
    trainer: object = object.__new__(trainer_cls)  # RayPPOTrainer.__init__ needs a tokenizer and datasets
    extra = getattr(trainer, "_critic_extra_context", {})  # exactly how ray_trainer.py:831 reads it
    assert decode(extra, DemoCriticContext) == DemoCriticContext(value_clip=0.75)
    assert set(extra["verl_ctx"]) == {"critic"}


def test_legacy_trainer_keeps_the_recipes_own_critic_extra_context(contexts: ContextSet) -> None:
    """What a recipe assigns to _critic_extra_context stays beside our envelope; risky values are warned about."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from verl_ctx.errors import PayloadWarning

    trainer: Any = object.__new__(bound_trainer_cls(RayPPOTrainer, _worker_envelopes(contexts)))  # verl: untyped
    trainer._critic_extra_context = {"my_state": {"step": 3}}
    extra = trainer._critic_extra_context
    assert extra["my_state"] == {"step": 3}
    assert decode(extra, DemoCriticContext).value_clip == 0.75

    class DefinedInAFunction:
        pass

    trainer._critic_extra_context = {"obj": DefinedInAFunction()}
    with pytest.warns(PayloadWarning, match=r"extra_context\['obj'\] holds a .*DefinedInAFunction"):
        assert "verl_ctx" in trainer._critic_extra_context


@pytest.mark.parametrize("offload_bytes", [8 * 1024 * 1024, 0], ids=["inline", "object-store"])
def test_prepare_binds_config_and_task_runner(ray_cluster: None, verl_config: Any, offload_bytes: int) -> None:
    """What `verl-ctx run` does before run_ppo: config-channel roles into the config, worker roles into the
    TaskRunner; with a zero threshold every envelope goes through the object store and still decodes."""
    import ray

    from verl_ctx.integrations.verl import prepare

    from .contexts import DemoRolloutContext

    config = verl_config.copy()
    full = validate({"extra_context": {**SECTION, "rollout": {"max_tool_calls": 1}}}, registry=REGISTRY)
    prepared = prepare(config, full, offload_threshold=offload_bytes, task_runner_base=v1_probe_base(V1ProbeRunner))
    assert set(config.actor_rollout_ref.rollout.custom.verl_ctx) == {"rollout"}
    assert set(config.verl_ctx) == {"reward"}
    by_reference = {role for role, channel in prepared.channels.items() if "by reference" in channel}
    assert by_reference == (set(full) if offload_bytes == 0 else set())
    runner = prepared.task_runner.remote()
    result = ray.get(runner.run.remote(config))
    ray.kill(runner)
    assert result["mapping"]["critic"]["decoded"] == {"critic": _expect("critic")}
    assert result["mapping"]["actor_rollout_ref"]["decoded"] == {"actor": _expect("actor"), "ref": _expect("ref")}
    assert decode(config, DemoRolloutContext).max_tool_calls == 1
