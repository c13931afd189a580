"""`decode(obj, Schema)` reads every object a verl worker holds, built with verl's real classes; never a bare error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from verl_ctx import ContextRegistry, RoleContext, attach, decode, encode
from verl_ctx.envelope import to_text
from verl_ctx.errors import ContextError, MissingContextError
from verl_ctx.testing import bound_worker, hydra_config, worker_config

REG = ContextRegistry("reader")


class CriticContext(RoleContext, role="critic", registry=REG):
    value_clip: float = Field(0.2, gt=0)


class RolloutContext(RoleContext, role="rollout", registry=REG):
    max_tool_calls: int = 4


class RewardContext(RoleContext, role="reward", registry=REG):
    scale: float = 1.0


class ActorContext(RoleContext, role="actor", registry=REG):
    entropy_bonus: float = 0.0


CRITIC = CriticContext(value_clip=0.3)


def test_training_worker_config_the_readme_way() -> None:
    """The README's `decode(config, CriticContext)` on verl's real TrainingWorkerConfig (a Mapping over getattr)."""
    from verl.workers.config import TrainingWorkerConfig

    config = TrainingWorkerConfig(model_type="value_model", extra_context=attach({}, CRITIC))
    assert decode(config, CriticContext) == CRITIC


def test_training_worker_config_without_a_context_says_where_it_looked() -> None:
    """No context in a real TrainingWorkerConfig: MissingContextError naming the places, not AttributeError."""
    from verl.workers.config import TrainingWorkerConfig

    with pytest.raises(MissingContextError, match="TrainingWorkerConfig") as info:
        decode(TrainingWorkerConfig(model_type="value_model"), CriticContext)
    assert "extra_context.verl_ctx" in str(info.value)


def test_envelope_text_and_extra_context_mapping() -> None:
    """An envelope, its text, and an extra_context dict holding it."""
    env = encode(CRITIC)
    for source in (env, to_text(env), attach({"recipe_state": 1}, CRITIC)):
        assert decode(source, CriticContext) == CRITIC


def test_rollout_config_custom() -> None:
    """verl's RolloutConfig dataclass, whose `custom` extension point carries the rollout context."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    config = hydra_config(RolloutContext(max_tool_calls=1), overrides=["actor_rollout_ref.rollout.name=vllm"])
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    assert type(rollout).__name__ == "RolloutConfig"
    assert decode(rollout, RolloutContext).max_tool_calls == 1
    assert OmegaConf.is_config(config.actor_rollout_ref.rollout)


@pytest.mark.parametrize(
    "part", ["", "actor_rollout_ref", "actor_rollout_ref.rollout"], ids=["whole", "arr", "rollout"]
)
def test_hydra_dictconfig_whole_or_any_part(part: str) -> None:
    """The composed DictConfig, its actor_rollout_ref part (hybrid worker) or its rollout part (agent loop)."""
    from omegaconf import OmegaConf

    config = hydra_config(RolloutContext(max_tool_calls=2), RewardContext(scale=2.0))
    node: Any = OmegaConf.select(config, part) if part else config
    assert decode(node, RolloutContext).max_tool_calls == 2
    if not part:
        assert decode(config, RewardContext).scale == 2.0


def test_a_bound_worker_reads_its_class_and_its_config() -> None:
    """A hybrid worker bound by verl-ctx reads the actor context from its class, the rollout one from its config."""
    from verl.workers.engine_workers import ActorRolloutRefWorker

    config = hydra_config(RolloutContext(max_tool_calls=3))
    worker = bound_worker(ActorRolloutRefWorker, ActorContext(entropy_bonus=0.1), config=config.actor_rollout_ref)
    assert decode(worker, ActorContext).entropy_bonus == 0.1
    assert decode(worker, RolloutContext).max_tool_calls == 3
    assert decode(worker.actor_worker_cls, ActorContext).entropy_bonus == 0.1


def test_a_bound_training_worker_puts_its_context_into_the_config_it_is_given() -> None:
    """The bound critic class adds its envelope to the TrainingWorkerConfig verl hands its constructor."""
    from verl.workers.engine_workers import TrainingWorker

    class Stop(Exception):
        pass

    class RecipeCritic(TrainingWorker):
        def __init__(self, config: Any) -> None:
            self.ctx = decode(config, CriticContext)
            raise Stop  # the engine would start here

    cls = type(bound_worker(RecipeCritic, CRITIC))
    config = worker_config()
    with pytest.raises(Stop):
        cls(config=config)
    assert decode(config, CriticContext) == CRITIC


@pytest.mark.parametrize(
    "obj",
    [None, 3, "not a context", b"bytes", [1, 2], {"verl_ctx": 5}, {"verl_ctx": {"critic": 5}}, object()],
    ids=["None", "int", "str", "bytes", "list", "slot-int", "entry-int", "object"],
)
def test_anything_else_is_a_context_error(obj: object) -> None:
    """Whatever else comes, the error is a ContextError saying what came."""
    with pytest.raises(ContextError):
        decode(obj, CriticContext)
