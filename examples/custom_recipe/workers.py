"""Where each role's code reads its typed context. Register these classes as your recipe's workers."""

from __future__ import annotations

from typing import Any

from verl.workers.config import TrainingWorkerConfig
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from verl_ctx import decode
from verl_ctx.integrations.verl import config_context, worker_context

from .contexts import ActorContext, CriticContext, RewardContext, RolloutContext


class CriticWorker(TrainingWorker):
    """The critic: its TrainingWorkerConfig carries the critic's envelope (both trainer paths)."""

    def __init__(self, config: TrainingWorkerConfig) -> None:
        self.ctx = decode(config, CriticContext)  # frozen, typed, validated; checked against the driver's schema
        super().__init__(config)


class ActorTrainingWorker(TrainingWorker):
    """The actor's inner training worker, built by ActorRolloutRefWorker.init_model."""

    def __init__(self, config: TrainingWorkerConfig) -> None:
        self.ctx = decode(config, ActorContext)
        super().__init__(config)


class HybridWorker(ActorRolloutRefWorker):
    """verl's actor/rollout/ref worker, with the recipe's actor worker class."""

    actor_worker_cls = ActorTrainingWorker

    def actor_settings(self) -> ActorContext:
        return worker_context(self, ActorContext)  # the outer worker reads the same envelope


def reward_fn_context(config: Any) -> RewardContext:
    """A reward manager or reward-loop worker gets the whole Hydra config."""
    return config_context(config, RewardContext)


def agent_loop_context(rollout_config: Any) -> RolloutContext:
    """An agent loop or rollout server gets the rollout config (RolloutConfig.custom carries the context)."""
    return config_context(rollout_config, RolloutContext)
