"""Where each role's code reads its typed context: the recipe's own worker classes.

``verl-ctx run --worker critic=examples.custom_recipe.workers:CriticWorker
--worker actor_rollout_ref=examples.custom_recipe.workers:HybridWorker`` makes verl build these; verl-ctx binds
each to its roles' contexts. Every read is one call, ``decode(<what the code holds>, Schema)``.
"""

from __future__ import annotations

from typing import Any

from verl.workers.config import TrainingWorkerConfig
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from verl_ctx import decode

from .contexts import ActorContext, CriticContext, RefContext, RewardContext, RolloutContext


class CriticWorker(TrainingWorker):
    """The critic: its TrainingWorkerConfig carries the critic's context (v1 and legacy trainers)."""

    def __init__(self, config: TrainingWorkerConfig) -> None:
        self.ctx = decode(config, CriticContext)  # frozen, typed, validated; checked against the driver's schema
        super().__init__(config)


class ActorWorker(TrainingWorker):
    """The actor's training worker, built by ActorRolloutRefWorker.init_model."""

    def __init__(self, config: TrainingWorkerConfig) -> None:
        self.ctx = decode(config, ActorContext)
        super().__init__(config)


class RefWorker(TrainingWorker):
    """The reference policy's worker, built by ActorRolloutRefWorker.init_model."""

    def __init__(self, config: TrainingWorkerConfig) -> None:
        self.ctx = decode(config, RefContext)
        super().__init__(config)


class HybridWorker(ActorRolloutRefWorker):
    """verl's actor/rollout/ref worker with the recipe's inner workers; the rollout side reads its context too."""

    actor_worker_cls = ActorWorker
    ref_worker_cls = RefWorker

    def __init__(self, config: Any, role: str, **kwargs: Any) -> None:
        super().__init__(config, role, **kwargs)
        if "rollout" in self.role:
            self.rollout_ctx = decode(self.config, RolloutContext)  # actor_rollout_ref.rollout.custom


def reward_settings(config: Any) -> RewardContext:
    """A reward manager or reward-loop worker is handed the whole Hydra config."""
    return decode(config, RewardContext)


def agent_loop_settings(rollout_config: Any) -> RolloutContext:
    """An agent loop is handed the rollout config (RolloutConfig, or its DictConfig)."""
    return decode(rollout_config, RolloutContext)
