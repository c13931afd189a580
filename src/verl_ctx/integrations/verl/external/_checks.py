"""Read the routing context from a verl config, and check the config the ``external_pool`` trainer will run.

No verl import: ``check_external_pool`` runs wherever the composed config is, the driver included, before
anything starts. ``ExternalPoolTrainer`` runs it again inside the TaskRunner before it builds any worker.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...._model.registry import ContextRegistry, default_registry
from ...._model.role_context import RoleContext
from ...._worker.decode import decode
from ....errors import ConfigError, FieldError, MissingContextError
from ._routing import ExternalRouting

__all__ = [
    "DISK_BACKEND",
    "DISK_ENGINE_MODULE",
    "TRAINER_MODE",
    "check_external_pool",
    "routing_from",
    "unused_routing",
    "verl_has_pool_switch",
]

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
    """``config``'s value at ``dotted``, or ``default`` where the path is absent or cannot be read.

    These checks run beside validation, which names a malformed value itself (an interpolation that does not
    resolve, a list where a section goes), so here such a path reads as absent.
    """
    from omegaconf.errors import OmegaConfBaseException  # only a composed (omegaconf) config raises it

    node = config
    for part in dotted.split("."):
        if node is None:
            return default
        try:
            # A Mapping test, not hasattr(get): an override can make any node a list, and ListConfig.get takes
            # only an index (a KeyValidationError for a key); a list has no keys, so the setting is absent.
            node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
        except OmegaConfBaseException:  # ${no.such.node} and its kin, resolved on access
            return default
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


#: verl's own v1 trainer modes: none of them routes rollout to servers started outside the job.
_VERL_MODES = ("sync", "colocate_async", "separate_async")
_TRAINER_MODULE = "verl_ctx.integrations.verl.external.trainer"


def verl_has_pool_switch() -> bool | None:
    """Whether the installed verl can leave local rollout replicas out (0.9.1's ``LLMServerManager.create_empty``).

    Read from verl's source file, not imported: ``validate`` answers in well under a second, without torch.
    ``None`` when verl is not installed here.
    """
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(next(iter(spec.submodule_search_locations)), "workers", "rollout", "llm_server.py")
    try:
        return "def create_empty" in source.read_text(encoding="utf-8")
    except OSError:
        return None


def _routes_externally(registry: ContextRegistry) -> bool:
    schema = registry.get("rollout")
    field = schema.model_fields.get("routing") if schema is not None else None
    annotation = getattr(field, "annotation", None)
    return isinstance(annotation, type) and issubclass(annotation, ExternalRouting)


def unused_routing(config: Any, *, registry: ContextRegistry | None = None) -> list[FieldError]:
    """The external-pool settings this run would validate and then never use, each naming the key that uses them.

    A rollout context's ``routing`` (servers, ``weight_sync``, ``max_staleness``) is read only by the
    ``external_pool`` trainer; verl's legacy trainer and its own v1 modes start local replicas and route nothing to
    the pool, and verl 0.9.0 cannot leave local replicas out at all. A trainer mode verl-ctx does not know (a
    recipe's own trainer) may read it: not judged. Only a whole verl config (``trainer``, ``actor_rollout_ref``) with
    ``extra_context.rollout.routing`` set is judged.
    """
    registry = default_registry if registry is None else registry
    routing = _get(config, "extra_context.rollout.routing")
    if routing is None or _get(config, "actor_rollout_ref") is None or not _routes_externally(registry):
        return []
    path = "extra_context.rollout.routing"
    use = (
        f"set trainer.use_v1=true and trainer.v1.trainer_mode={TRAINER_MODE} and import its trainer in the "
        f"TaskRunner (`verl-ctx run --import {_TRAINER_MODULE}`), or drop {path}"
    )
    ignored = "this run would validate it and never use it (servers, weight_sync and max_staleness ignored)"
    problems: list[tuple[str, str]] = []
    if not _get(config, "trainer.use_v1", True):
        problems.append(
            (
                f"{ignored}: trainer.use_v1=false runs verl's legacy trainer, which always starts local rollout "
                "replicas and routes nothing to the pool",
                use,
            )
        )
    else:
        mode = str(_get(config, "trainer.v1.trainer_mode", "sync")).split("+", 1)[0]
        if mode in _VERL_MODES:
            problems.append(
                (
                    f"{ignored}: trainer.v1.trainer_mode={mode} is verl's own trainer, which starts local rollout "
                    "replicas and routes nothing to the pool",
                    use,
                )
            )
    if verl_has_pool_switch() is False:
        problems.append(
            (
                f"the {TRAINER_MODE} trainer needs verl >= 0.9.1: this verl always starts rollout replicas on the "
                "training GPUs (no LLMServerManager.create_empty)",
                f"upgrade verl (pip install 'verl>=0.9.1'), or drop {path}",
            )
        )
    return [FieldError(role="rollout", path=path, message=m, hint=h) for m, h in problems]
