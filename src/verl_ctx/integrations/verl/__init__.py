"""Deliver typed contexts to every verl role, on both trainer paths, without monkey-patching verl.

=============  ==========================================================================================
role           how its context arrives (read it with ``decode(obj, Schema)`` wherever the code runs)
=============  ==========================================================================================
actor, ref     the ``TrainingWorkerConfig`` that ``ActorRolloutRefWorker.init_model`` builds, through bound
               ``actor_worker_cls`` / ``ref_worker_cls``; the hybrid worker's class carries them too
critic         the critic ``TrainingWorker``'s ``config.extra_context``: bound worker class on both paths,
               and verl's ``_critic_extra_context`` for a legacy trainer with ``ContextTrainerMixin``
rollout        ``actor_rollout_ref.rollout.custom.verl_ctx.rollout`` as text (``RolloutConfig.custom``)
reward, other  top-level ``verl_ctx.<role>`` of the Hydra config as text
=============  ==========================================================================================

Contexts holding a secret, and large ones, travel by reference through Ray's object store.

Launch: ``compose_config`` (verl's config as ``python -m verl.trainer.main_ppo`` composes it), then
``verl_ctx.validate``, then ``launch`` (= ``check_launch`` + ``init_ray`` + ``preflight`` + ``prepare`` + verl's
``run_ppo``), or
``rehearse`` to stop every worker at the engine boundary on CPU. A recipe with its own TaskRunner uses
``make_task_runner`` / the mixins, ``bind_role_worker_mapping`` and ``bind_config``; a runner of any other shape (a
plain ``ray.remote`` class or function) calls ``bind_workers`` in its own code. Routing to inference
servers started outside the job is in ``verl_ctx.integrations.verl.external``.
"""

from __future__ import annotations

from ..._require import require

require("verl", "ray", "omegaconf", "hydra", extra="verl")

from ..._driver.lint import lint_extra_context  # noqa: E402
from ..._driver.modules import import_modules  # noqa: E402
from ._bind_workers import bind_workers  # noqa: E402
from ._binding import bind_role_worker_mapping, bind_worker_cls  # noqa: E402
from ._compose import compose_config  # noqa: E402
from ._config_channel import bind_config  # noqa: E402
from ._launch import LaunchOptions, Prepared, check_launch, init_ray, launch, prepare, rehearse  # noqa: E402
from ._preflight import preflight  # noqa: E402
from ._runners import (  # noqa: E402
    ContextTaskRunnerMixin,
    ContextTaskRunnerV1Mixin,
    ContextTrainerMixin,
    bound_trainer_cls,
    make_task_runner,
)
from ._store import offload  # noqa: E402

__all__ = [
    "ContextTaskRunnerMixin",
    "ContextTaskRunnerV1Mixin",
    "ContextTrainerMixin",
    "LaunchOptions",
    "Prepared",
    "bind_config",
    "bind_role_worker_mapping",
    "bind_worker_cls",
    "bind_workers",
    "bound_trainer_cls",
    "check_launch",
    "compose_config",
    "import_modules",
    "init_ray",
    "launch",
    "lint_extra_context",
    "make_task_runner",
    "offload",
    "preflight",
    "prepare",
    "rehearse",
]
