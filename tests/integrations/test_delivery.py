"""Every role gets its own typed context inside real verl worker processes, spawned by verl's RayWorkerGroup."""

from __future__ import annotations

from typing import Any

import pytest

from verl_ctx import ContextSet, validate
from verl_ctx.integrations.verl import bind_config, bind_role_worker_mapping
from verl_ctx.integrations.verl._binding import bound_envelopes

from .contexts import REGISTRY, SCHEMAS

pytestmark = pytest.mark.ray

SECTION = {
    "actor": {"entropy_bonus": 0.25},
    "ref": {"kl_temperature": 0.5},
    "critic": {"value_clip": 0.125, "shaping": "length_penalty"},
    "rollout": {"max_tool_calls": 7},
    "reward": {"judge": {"url": "http://j:1", "api_key": "k3y"}, "length_penalty": -0.5},
}


@pytest.fixture(scope="module")
def contexts() -> ContextSet:
    return validate({"extra_context": SECTION}, registry=REGISTRY)


def _expected(role: str) -> str:
    return repr(SCHEMAS[role].model_validate(SECTION[role]))


def _mapping(envelopes: dict[str, Any]) -> dict[Any, Any]:
    import ray
    from verl.trainer.ppo.utils import Role

    from .workers import BoundaryActorRolloutRefWorker, BoundaryTrainingWorker

    mapping = {
        Role.ActorRolloutRef: ray.remote(BoundaryActorRolloutRefWorker),
        Role.Critic: ray.remote(BoundaryTrainingWorker),
    }
    return dict(bind_role_worker_mapping(mapping, envelopes))


def _class_dict(mapping: dict[Any, Any], config: Any) -> dict[str, Any]:
    from verl.single_controller.ray import RayClassWithInitArgs
    from verl.trainer.ppo.utils import Role
    from verl.workers.config import TrainingWorkerConfig

    return {
        "actor_rollout_ref": RayClassWithInitArgs(
            cls=mapping[Role.ActorRolloutRef], config=config.actor_rollout_ref, role="actor_rollout_ref"
        ),
        "critic": RayClassWithInitArgs(cls=mapping[Role.Critic], config=TrainingWorkerConfig(model_type="value_model")),
    }


def test_colocated_actor_ref_critic_each_decode_only_their_own(
    ray_cluster: None, pools: Any, verl_config: Any, contexts: ContextSet
) -> None:
    """In one WorkerDict per process, the actor's, ref's and critic's TrainingWorkerConfigs hold one role each."""
    from verl.single_controller.ray.base import create_colocated_worker_cls

    config = verl_config.copy()
    envelopes = contexts.envelopes()
    bind_config(config, envelopes)
    class_dict = _class_dict(_mapping(envelopes), config)
    spawned = pools(create_colocated_worker_cls(class_dict), [2]).spawn(prefix_set=class_dict.keys())

    inner = spawned["actor_rollout_ref"].build_inner_workers()
    critic = spawned["critic"].report()
    assert len(inner) == len(critic) == 2
    for hybrid, crit in zip(inner, critic, strict=True):
        assert hybrid["pid"] == crit["pid"], "colocated: one process hosts both"
        assert hybrid["decoded"]["actor"] == {"actor": _expected("actor")}
        assert hybrid["decoded"]["ref"] == {"ref": _expected("ref")}
        assert hybrid["decoded"]["rollout"] == {"rollout": _expected("rollout")}
        assert crit["decoded"] == {"critic": _expected("critic")}
        assert crit["extra_context_keys"] == ["verl_ctx"]
    outer = spawned["actor_rollout_ref"].outer_context("actor")
    assert outer == [_expected("actor")] * 2


def test_separate_pools_each_decode_their_role(
    ray_cluster: None, pools: Any, verl_config: Any, contexts: ContextSet
) -> None:
    """Actor and critic in their own worker groups and processes each get their own context."""
    envelopes = contexts.envelopes()
    config = verl_config.copy()
    bind_config(config, envelopes)
    class_dict = _class_dict(_mapping(envelopes), config)
    hybrid = pools(class_dict["actor_rollout_ref"], [1])
    critic = pools(class_dict["critic"], [1])
    h, c = hybrid.build_inner_workers()[0], critic.report()[0]
    assert h["pid"] != c["pid"]
    assert h["decoded"]["actor"] == {"actor": _expected("actor")}
    assert c["decoded"] == {"critic": _expected("critic")}


def test_reward_reads_its_context_from_the_hydra_config(
    ray_cluster: None, pools: Any, verl_config: Any, contexts: ContextSet
) -> None:
    """Code handed the whole Hydra config (reward loop, agent loop) decodes its role from it, secrets intact."""
    import json

    import ray
    from omegaconf import OmegaConf
    from verl.single_controller.ray import RayClassWithInitArgs

    from .workers import ConfigReaderWorker

    config = verl_config.copy()
    written = bind_config(config, contexts.envelopes())
    assert sorted(written) == ["actor_rollout_ref.rollout.custom.verl_ctx.rollout", "verl_ctx.reward"]
    json.dumps(OmegaConf.to_container(config, resolve=True))  # what verl does when it logs the config
    group = pools(RayClassWithInitArgs(cls=ray.remote(ConfigReaderWorker), config=config), [1])
    assert group.report("reward")[0]["decoded"] == {"reward": _expected("reward")}
    assert group.report("rollout")[0]["decoded"] == {"rollout": _expected("rollout")}


def test_bound_classes_carry_only_their_roles(contexts: ContextSet) -> None:
    """A critic worker class never carries the actor's envelope, nor the other way round."""
    from verl.trainer.ppo.utils import Role

    mapping = _mapping(contexts.envelopes())
    hybrid = mapping[Role.ActorRolloutRef].__ray_actor_class__
    critic = mapping[Role.Critic].__ray_actor_class__
    assert set(bound_envelopes(critic)) == {"critic"}
    assert set(bound_envelopes(hybrid)) == {"actor", "ref", "rollout"}
    assert set(bound_envelopes(hybrid.actor_worker_cls)) == {"actor"}
    assert set(bound_envelopes(hybrid.ref_worker_cls)) == {"ref"}
