"""Rollout on an inference pool started outside the job: typed routing, the client, the trainer, weights in step.

* ``ExternalRolloutContext`` is the base of a rollout context with a ``routing: ExternalRouting`` (servers,
  policy, faults, ``weight_sync``, ``max_staleness``), validated before launch like any context;
* ``ExternalLLMServerClient`` is verl's ``LLMServerClient`` routing by it (or verl's own load balancer);
* ``ExternalPoolTrainer`` (module ``TRAINER_MODULE``, registered as ``trainer.v1.trainer_mode=external_pool``)
  is verl's v1 trainer with no local inference engine, handing out that client and keeping the pool's
  weights in step;
* ``Router`` is the routing policy alone; ``check_external_pool`` checks a config before launch;
* ``PoolWeightSync`` / ``PoolState`` / ``load_on_servers`` are the weight-sync pieces the trainer uses, for a
  recipe that drives them itself.

The client and the trainer import verl's rollout stack: they load on first use. See docs/external-servers.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._checks import TRAINER_MODE, check_external_pool, routing_from
from ._pool_state import PoolState, start_pool_state
from ._router import Router
from ._routing import ExternalRolloutContext, ExternalRouting, ServerRef, WeightSync
from ._weight_sync import PoolWeightSync, SyncReport, load_on_servers, weights_path

#: Import this module inside verl's TaskRunner (``verl-ctx run --import``) to register ``ExternalPoolTrainer``.
TRAINER_MODULE = "verl_ctx.integrations.verl.external.trainer"

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers; nothing is imported at run time
    from ._llm_client import ExternalLLMServerClient
    from .trainer import ExternalPoolTrainer


def __getattr__(name: str) -> object:
    # verl's LLMServerClient and PPOTrainer modules pull its rollout and training stacks: import on first use.
    if name == "ExternalLLMServerClient":
        from ._llm_client import ExternalLLMServerClient

        return ExternalLLMServerClient
    if name == "ExternalPoolTrainer":
        from .trainer import ExternalPoolTrainer

        return ExternalPoolTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TRAINER_MODE",
    "TRAINER_MODULE",
    "ExternalLLMServerClient",
    "ExternalPoolTrainer",
    "ExternalRolloutContext",
    "ExternalRouting",
    "PoolState",
    "PoolWeightSync",
    "Router",
    "ServerRef",
    "SyncReport",
    "WeightSync",
    "check_external_pool",
    "load_on_servers",
    "routing_from",
    "start_pool_state",
    "weights_path",
]
