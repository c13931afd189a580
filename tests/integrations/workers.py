"""Real verl worker classes that stop at the GPU boundary, for the integration tests.

``TrainingWorker.__init__`` starts a torch process group and a model engine, which cannot run on CPU.
These subclasses do everything up to that point the way a user's worker would: they are built by verl's
own ``RayWorkerGroup`` / ``create_colocated_worker_cls``, receive the same constructor arguments, and decode
their context where a real worker would, then report what they decoded.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.config import TrainingWorkerConfig
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from verl_ctx import decode
from verl_ctx.envelope import RESERVED_KEY

from .contexts import SCHEMAS


def _where() -> dict[str, Any]:
    return {"pid": os.getpid(), "node": socket.gethostname(), "node_id": _node_id()}


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id()) if ray.is_initialized() else ""


def decode_all(extra_context: dict[str, Any]) -> dict[str, str]:
    """``repr`` of each context in ``extra_context``, decoded with the registered schema of its role."""
    return {
        role: repr(decode(extra_context, SCHEMAS[role], role=role))
        for role in sorted(extra_context.get(RESERVED_KEY, {}))
    }


class BoundaryTrainingWorker(TrainingWorker):
    """A ``TrainingWorker`` that decodes its context, then stops before the engine start-up."""

    def __init__(self, config: TrainingWorkerConfig) -> None:
        Worker.__init__(self)  # TrainingWorker.__init__ would start a process group and a model engine here
        self.config = config
        self.decoded = decode_all(config.extra_context)
        self.extra_keys = sorted(config.extra_context)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def report(self) -> dict[str, Any]:
        return {"decoded": self.decoded, "extra_context_keys": self.extra_keys, **_where()}


class BoundaryActorRolloutRefWorker(ActorRolloutRefWorker):
    """verl's hybrid worker; ``build_inner_workers`` builds its actor/ref the way ``init_model`` does."""

    actor_worker_cls = BoundaryTrainingWorker
    ref_worker_cls = BoundaryTrainingWorker

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def build_inner_workers(self) -> dict[str, Any]:
        # as ActorRolloutRefWorker.init_model does: self.ref_worker_cls(config=...), self.actor_worker_cls(...)
        report: dict[str, Any] = {}
        if "ref" in self.role:
            self.ref = self.ref_worker_cls(config=TrainingWorkerConfig(model_type="language_model"))
            report["ref"] = self.ref.decoded
        if "actor" in self.role:
            self.actor = self.actor_worker_cls(config=TrainingWorkerConfig(model_type="language_model"))
            report["actor"] = self.actor.decoded
        if "rollout" in self.role:
            report["rollout"] = {"rollout": repr(decode(self.config.rollout, SCHEMAS["rollout"]))}
        return {"decoded": report, **_where()}

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def outer_context(self, role: str) -> str:
        return repr(decode(self, SCHEMAS[role]))


class ConfigReaderWorker(Worker):
    """Stands for code that is handed the whole Hydra config: reward loop workers, agent loops."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def report(self, role: str) -> dict[str, Any]:
        return {"decoded": {role: repr(decode(self.config, SCHEMAS[role]))}, **_where()}
