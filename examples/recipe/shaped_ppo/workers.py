"""The recipe's worker classes; each reads its role's typed context with one ``decode`` call."""

from __future__ import annotations

from typing import Any

from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from verl_ctx import decode

from .contexts import ActorContext, CriticContext, RefContext, RolloutContext


class ShapedCriticWorker(TrainingWorker):
    def __init__(self, config: Any) -> None:
        self.ctx = decode(config, CriticContext)
        super().__init__(config)


class ShapedActorWorker(TrainingWorker):
    def __init__(self, config: Any) -> None:
        self.ctx = decode(config, ActorContext)
        super().__init__(config)


class ShapedRefWorker(TrainingWorker):
    def __init__(self, config: Any) -> None:
        self.ctx = decode(config, RefContext)
        super().__init__(config)


class ShapedHybridWorker(ActorRolloutRefWorker):
    actor_worker_cls = ShapedActorWorker
    ref_worker_cls = ShapedRefWorker

    def __init__(self, config: Any, role: str, **kwargs: Any) -> None:
        super().__init__(config, role, **kwargs)
        self.rollout_ctx = decode(self.config, RolloutContext)
