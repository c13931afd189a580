"""``ExternalPoolTrainer``: verl's v1 PPO trainer with rollout on an inference pool started outside the job.

Importing this module registers it as ``trainer.v1.trainer_mode=external_pool`` (``@register_trainer``). verl
looks trainers up inside its TaskRunner process, so import it there: ``verl-ctx run --import
verl_ctx.integrations.verl.external.trainer`` (or ``launch(..., imports=[TRAINER_MODULE])``).

What it changes in verl's v1 ``PPOTrainer`` (read from verl 0.9.1's ``trainer_base.PPOTrainer``):

* **no local inference engine**: ``_enable_hybrid_replicas = False`` is verl's own switch. ``PPOTrainer.
  _init_resource_pool_mgr`` then maps ``Role.Actor`` (``ActorRolloutRefWorker(role="actor")``, which builds no
  rollout engine) plus a separate ``Role.RefPolicy`` worker, and ``_setup`` calls
  ``LLMServerManager.create_empty`` (no replica, an empty load balancer) instead of ``LLMServerManager.create``;
  ``CheckpointEngineManager`` gets no replicas. verl 0.9.0 has no such switch: the trainer refuses to start there;
* **the LLM client** verl asks for (``get_llm_client``: the agent loop, hence training rollouts and validation)
  is an ``ExternalLLMServerClient`` routing by the rollout context's ``routing``. Teacher models
  (``get_teacher_client``) stay verl's own: on-policy distillation teachers are not routed to the pool;
* **weights in step** (``routing.weight_sync``): at start and after every ``every_n_steps``-th step the actor
  writes its weights (checkpoint-engine backend ``verl_ctx_disk``) and every server loads them
  (``load_weights(path, version)``); failed servers are reported and routed around (``PoolWeightSync``). Every
  step the trainer's version goes to the clients (``PoolState``), which judge each output's
  ``extra_fields["global_steps"]`` against ``max_staleness``; stale events become step metrics;
* the schedule is verl's ``sync`` one (rollout with version N, train, sync N+1), whatever the mode is called.

There is no legacy-trainer (``trainer.use_v1=false``) equivalent: verl's ``RayPPOTrainer.init_workers`` asserts
``hybrid_engine`` and always starts rollout replicas inside the training workers, with no switch to leave them
out, and the legacy TaskRunner hard-codes ``RayPPOTrainer``. Replacing both would fork the deprecated path.
"""

from __future__ import annotations

from typing import Any, ClassVar

import ray
from omegaconf import open_dict
from verl.trainer.ppo.v1.trainer_base import PPOTrainer, register_trainer
from verl.utils.debug import marked_timer

from ...._model.role_context import RoleContext
from ...._secrets.redact import logger as redacted_logger
from ....errors import ConfigError, MissingContextError
from ._checks import DISK_BACKEND, DISK_ENGINE_MODULE, TRAINER_MODE, check_external_pool, routing_from
from ._llm_client import ExternalLLMServerClient
from ._pool_state import start_pool_state
from ._routing import ExternalRouting
from ._weight_sync import PoolWeightSync, SyncReport

__all__ = ["ExternalPoolTrainer", "NoLocalReplica"]

logger = redacted_logger("verl_ctx.external")


class NoLocalReplica:
    """Stands in verl's rollout-replica registry when the engine is not installed where the trainer runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError(
            "the external_pool trainer starts no local rollout replica, and this rollout engine is not installed "
            "in the trainer's process; something else (a reward model or teacher with local servers) asked for one"
        )


def _ensure_replica_class(config: Any) -> None:
    """``LLMServerManager.create_empty`` resolves ``rollout.name``'s replica class (importing vLLM / SGLang).

    A trainer image for an external pool need not have the engine (loading it raises ``ImportError``, or verl's
    ``ValueError`` for a missing vLLM): then the name maps to ``NoLocalReplica``
    in this process (verl's public ``RolloutReplicaRegistry.register``), which nothing here constructs.
    """
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    name = str(config.actor_rollout_ref.rollout.name)
    if name not in getattr(RolloutReplicaRegistry, "_registry", {}):
        return  # an unknown name: verl's own lookup says which names exist
    try:
        RolloutReplicaRegistry.get(name)
    except Exception as e:  # noqa: BLE001  # ImportError, or verl's ValueError when vllm's version is missing
        logger.info("rollout engine %r not loadable here (%s): no local replica is needed", name, e)
        RolloutReplicaRegistry.register(name, lambda: NoLocalReplica)


def _prepare_config(config: Any, routing: ExternalRouting) -> None:
    """Settings verl reads later in the trainer and its workers, set before any worker is built."""
    rollout = config.actor_rollout_ref.rollout
    with open_dict(config):
        # LLMServerManager asserts nnodes > 0 for a manager without a worker group (create_empty); no rollout
        # resources are requested from it.
        if not rollout.get("nnodes"):
            rollout.nnodes = 1
        sync = routing.weight_sync
        if sync.mode == "reload_from_checkpoint":
            engine = rollout.checkpoint_engine
            engine.backend = DISK_BACKEND
            engine.custom_backend_module = DISK_ENGINE_MODULE
            if engine.get("engine_kwargs") is None:
                engine.engine_kwargs = {}
            model_path = config.actor_rollout_ref.model.get("path")
            engine.engine_kwargs[DISK_BACKEND] = {
                "directory": sync.directory,
                "keep_last": sync.keep_last,
                "model_dir": str(model_path) if model_path else None,
            }


@register_trainer(TRAINER_MODE)
class ExternalPoolTrainer(PPOTrainer):  # type: ignore[misc]
    """verl's synchronous v1 PPO trainer, rolling out on an external pool kept on the trainer's weights."""

    #: The rollout schema to read ``routing`` from; default: the schema registered for role "rollout".
    context_schema: ClassVar[type[RoleContext] | None] = None
    #: The client handed to verl; a subclass of ``ExternalLLMServerClient``.
    client_cls: ClassVar[type[ExternalLLMServerClient]] = ExternalLLMServerClient

    def __init__(self, config: Any) -> None:
        from verl.workers.rollout.llm_server import LLMServerManager

        if not hasattr(LLMServerManager, "create_empty"):
            raise ConfigError(
                "the external_pool trainer needs verl >= 0.9.1: this verl's PPOTrainer._setup always starts "
                "rollout replicas on the training GPUs (no LLMServerManager.create_empty, no "
                "_enable_hybrid_replicas switch). Upgrade verl"
            )
        routing = routing_from(config, self.context_schema)
        if routing is None:
            raise MissingContextError(
                "the external_pool trainer needs the rollout context's routing: declare "
                '`class RolloutContext(ExternalRolloutContext, role="rollout")` in a schema module (-s), set '
                "extra_context.rollout.routing (servers, weight_sync) and launch with `verl-ctx run`",
                role="rollout",
            )
        check_external_pool(config, routing)
        _prepare_config(config, routing)
        self.routing = routing
        self.pool_state: Any = None
        self.weight_sync: PoolWeightSync | None = None
        # verl's switch (PPOTrainer._init_resource_pool_mgr and _setup): Role.Actor workers without a rollout
        # engine, and LLMServerManager.create_empty instead of replicas on the training GPUs.
        self._enable_hybrid_replicas = False
        super().__init__(config)

    def _build_replay_buffer(self) -> Any:
        # verl picks the synchronous replay buffer (and the sync dataloader and checkpoint paths) by the mode's
        # name, which is ours ("external_pool", "external_pool+verl_ctx"); the schedule is verl's sync one.
        self.trainer_mode = "sync"
        return super()._build_replay_buffer()

    def _setup(self) -> None:
        _ensure_replica_class(self.config)
        super()._setup()
        self.pool_state = start_pool_state(self.global_steps)
        self.weight_sync = PoolWeightSync(self.routing, self.pool_state, self._write_weights)

    def get_llm_client(self) -> ExternalLLMServerClient:
        """The client verl's agent loop uses for training rollouts and validation: routed to the pool."""
        return self.client_cls(self.config, routing=self.routing, pool_state=self.pool_state)

    def _write_weights(self, version: int, path: str) -> None:
        """The actor writes the weights a sync would send (the ``verl_ctx_disk`` engine, on rank 0) to ``path``."""
        ray.get(self.actor_rollout_wg.update_weights(global_steps=version, mode=DISK_BACKEND))

    def sync_weights(self, *, force: bool = False) -> SyncReport | None:
        """Tell the clients the trainer's version; push the weights when ``weight_sync`` says it is time."""
        if self.pool_state is None or self.weight_sync is None:
            raise RuntimeError("sync_weights() runs after init(): the pool state starts in _setup()")
        version = int(self.global_steps)
        sync = self.routing.weight_sync
        metrics: dict[str, float] = {"verl_ctx/pool/trainer_version": float(version)}
        report = None
        if sync.mode == "reload_from_checkpoint" and (force or version % sync.every_n_steps == 0):
            report = self.weight_sync.push(version)
            metrics.update(report.metrics())
        else:
            ray.get(self.pool_state.publish.remote(version))
        stats = ray.get(self.pool_state.take_stats.remote())
        metrics["verl_ctx/pool/stale_outputs"] = float(stats["stale_outputs"])
        metrics["verl_ctx/pool/worst_staleness"] = float(stats["worst"])
        # verl merges these into the step's metrics (PPOTrainer._consume_sync_metrics)
        self._pending_sync_metrics = {**(getattr(self, "_pending_sync_metrics", None) or {}), **metrics}
        return report

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        """verl's ``fit``; when it fails after a client found no server (stale or down), that error is raised.

        The client raises in an agent-loop worker; verl's loop catches it there and the driver would see only its
        consequence (the replay buffer's "no materializable trajectories"). The client records the error in the
        pool state first; this re-raises it, verl's error chained as the consequence.
        """
        try:
            return super().fit(*args, **kwargs)
        except Exception as e:
            cause = self.pool_failure()
            if cause is None or cause is e:
                raise
            raise cause from e

    def pool_failure(self) -> BaseException | None:
        """The first ``ServerUnavailableError`` (``StaleOutputError`` included) a client of this trainer raised."""
        if self.pool_state is None:
            return None
        found: BaseException | None = ray.get(self.pool_state.failure.remote(), timeout=30)
        return found

    # ------------------------------------------------------------------ verl's hooks

    def on_init_end(self) -> None:
        """After a fresh start or a resume, the pool loads the trainer's weights before the first rollout."""
        self.sync_weights(force=True)

    def on_step_end(self) -> None:
        with marked_timer("update_weights", self.timing_raw, color="red"):
            self.sync_weights()

    def on_sample_end(self) -> None:
        """External servers are never put to sleep: they keep their memory and serve others meanwhile."""
