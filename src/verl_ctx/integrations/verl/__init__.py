"""Deliver typed contexts to every verl role, on both trainer paths, without monkey-patching verl.

=============  ==========================================================================================
role           how its context arrives (read it with)
=============  ==========================================================================================
actor, ref     the ``TrainingWorkerConfig`` that ``ActorRolloutRefWorker.init_model`` builds, through bound
               ``actor_worker_cls`` / ``ref_worker_cls`` (``decode(self.config, Schema)`` in a
               ``TrainingWorker`` subclass; ``worker_context(self, Schema)`` in the outer worker)
critic         the critic ``TrainingWorker``'s ``config.extra_context``: bound worker class on both paths,
               and verl's ``_critic_extra_context`` for a legacy trainer with ``ContextTrainerMixin``
rollout        ``actor_rollout_ref.rollout.custom.verl_ctx.rollout`` as text (``config_context``)
reward, other  top-level ``verl_ctx.<role>`` of the Hydra config as text (``config_context``)
=============  ==========================================================================================

``ExternalLLMServerClient`` routes rollout requests to LLM servers started outside the job, from a typed
``ExternalRouting`` in the rollout context.

Entry points: ``verl-ctx run`` (``launch``) for the stock TaskRunners; ``make_task_runner``,
``bind_role_worker_mapping``, ``bind_config`` and the mixins for a recipe with its own TaskRunner.
"""

from __future__ import annotations

from ..._require import require

require("verl", "ray", "omegaconf", extra="verl")

from ._binding import (  # noqa: E402
    ENVELOPES_ATTR,
    HOSTED_ROLES,
    bind_role_worker_mapping,
    bind_worker_cls,
    bound_envelopes,
    worker_context,
)
from ._config_channel import bind_config, config_context  # noqa: E402
from ._launch import launch, prepare  # noqa: E402
from ._routing import (  # noqa: E402
    ExternalRolloutContext,
    ExternalRouting,
    Router,
    ServerRef,
    ServerUnavailableError,
)
from ._runners import (  # noqa: E402
    ContextTaskRunnerMixin,
    ContextTaskRunnerV1Mixin,
    ContextTrainerMixin,
    bound_trainer_cls,
    make_task_runner,
)
from ._store import DEFAULT_OFFLOAD_BYTES, offload_large, resolve  # noqa: E402


def __getattr__(name: str) -> object:
    # verl's LLMServerClient module pulls its rollout stack: import the subclass on first use only.
    if name == "ExternalLLMServerClient":
        from ._llm_client import ExternalLLMServerClient

        return ExternalLLMServerClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_OFFLOAD_BYTES",
    "ENVELOPES_ATTR",
    "HOSTED_ROLES",
    "ContextTaskRunnerMixin",
    "ContextTaskRunnerV1Mixin",
    "ContextTrainerMixin",
    "ExternalLLMServerClient",
    "ExternalRolloutContext",
    "ExternalRouting",
    "Router",
    "ServerRef",
    "ServerUnavailableError",
    "bind_config",
    "bind_role_worker_mapping",
    "bind_worker_cls",
    "bound_envelopes",
    "bound_trainer_cls",
    "config_context",
    "launch",
    "make_task_runner",
    "offload_large",
    "prepare",
    "resolve",
    "worker_context",
]
