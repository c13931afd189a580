"""Read the routing context from a verl config, and check the config the ``external_pool`` trainer will run.

No verl import: ``check_external_pool`` runs wherever the composed config is, the driver included, before
anything starts. ``ExternalPoolTrainer`` runs it again inside the TaskRunner before it builds any worker.
"""

from __future__ import annotations

from typing import Any

from ...._decode import decode
from ...._registry import default_registry
from ...._schema import RoleContext
from ....errors import ConfigError, MissingContextError
from ._routing import ExternalRouting

__all__ = ["DISK_BACKEND", "DISK_ENGINE_MODULE", "TRAINER_MODE", "check_external_pool", "routing_from"]

#: ``trainer.v1.trainer_mode`` that selects ``ExternalPoolTrainer``.
TRAINER_MODE = "external_pool"
#: The checkpoint-engine backend that writes the actor's weights for ``reload_from_checkpoint``.
DISK_BACKEND = "verl_ctx_disk"
#: The module registering it; verl imports ``rollout.checkpoint_engine.custom_backend_module`` in every worker.
DISK_ENGINE_MODULE = "verl_ctx.integrations.verl.external.disk_engine"


def routing_from(config: Any, schema: type[RoleContext] | None = None) -> ExternalRouting | None:
    """The ``ExternalRouting`` in the rollout context carried by ``config``; ``None`` when there is none."""
    schema = schema or default_registry.get("rollout")
    if schema is None:
        return None
    try:
        ctx = decode(config, schema)
    except MissingContextError:
        return None
    routing = getattr(ctx, "routing", None)
    if not isinstance(routing, ExternalRouting):
        raise MissingContextError(
            f"the rollout context {type(ctx).__qualname__} has no `routing: ExternalRouting` field; declare it "
            'as `class RolloutContext(ExternalRolloutContext, role="rollout")`',
            role="rollout",
        )
    return routing


def _get(config: Any, dotted: str, default: Any = None) -> Any:
    node = config
    for part in dotted.split("."):
        if node is None:
            return default
        node = node.get(part) if hasattr(node, "get") else getattr(node, part, None)
    return default if node is None else node


def check_external_pool(config: Any, routing: ExternalRouting) -> None:
    """Raise ``ConfigError`` naming every setting the ``external_pool`` trainer cannot run with, and the fix."""
    problems = []
    if not _get(config, "trainer.use_v1", True):
        problems.append(
            "trainer.use_v1=false: the external_pool trainer is a v1 trainer. verl's legacy RayPPOTrainer always "
            "starts rollout replicas on the training GPUs (init_workers asserts hybrid_engine) and has no switch "
            "to leave them out; set trainer.use_v1=true"
        )
    if _get(config, "reward.reward_model.enable", False) and not _get(
        config, "reward.reward_model.enable_resource_pool", False
    ):
        problems.append(
            "reward.reward_model.enable_resource_pool=false: a colocated reward model makes verl sleep and "
            "re-sync local rollout replicas, which this trainer does not have; set "
            "reward.reward_model.enable_resource_pool=true (a reward pool of its own)"
        )
    if _get(config, "actor_rollout_ref.rollout.disaggregation.enabled", False):
        problems.append(
            "actor_rollout_ref.rollout.disaggregation.enabled=true: prefill/decode disaggregation is a local "
            "replica feature; configure it in the pool's own servers"
        )
    if routing.weight_sync.mode == "reload_from_checkpoint":
        backend = _get(config, "actor_rollout_ref.rollout.checkpoint_engine.backend", "naive")
        if backend not in ("naive", DISK_BACKEND):
            problems.append(
                f"actor_rollout_ref.rollout.checkpoint_engine.backend={backend}: weight_sync reload_from_checkpoint "
                f"writes the weights with the {DISK_BACKEND} backend; leave the backend at its default (naive)"
            )
        module = _get(config, "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module")
        if module not in (None, "", DISK_ENGINE_MODULE):
            problems.append(
                f"actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module={module}: verl imports one "
                f"module there and weight_sync needs {DISK_ENGINE_MODULE}; import yours from a recipe module instead"
            )
        lora = _get(config, "actor_rollout_ref.model.lora.rank", 0) or _get(
            config, "actor_rollout_ref.model.lora_rank", 0
        )
        adapter = _get(config, "actor_rollout_ref.model.lora_adapter_path")
        if (lora or adapter) and not _get(config, "actor_rollout_ref.model.lora.merge", False):
            problems.append(
                "LoRA without actor_rollout_ref.model.lora.merge=true: the actor would hand over adapter tensors, "
                "not a model the servers can load; set actor_rollout_ref.model.lora.merge=true"
            )
    if problems:
        raise ConfigError(
            "the external_pool trainer cannot run this config:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + "\nNothing was started."
        )
