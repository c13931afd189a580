"""TaskRunners and trainers that bind contexts and the recipe's own workers, on both verl trainer paths.

verl's TaskRunners are ``@ray.remote`` classes (subclassing them raises ``ActorClassInheritanceException``),
so we subclass their ``__ray_actor_class__`` at run time (``_binding.carrying``): Ray pickles it by value into
the TaskRunner's definition with the envelopes, the recipe's worker choices (``module:Class`` text) and the
modules to import. Inside the TaskRunner process, before verl looks anything up, those modules are imported
(a recipe's ``@register_trainer`` becomes visible there) and the worker classes resolved.

* legacy (``trainer.use_v1=false``): ``BaseTaskRunner.add_actor_rollout_worker`` / ``add_critic_worker``
  fill ``role_worker_mapping``; we put the recipe's workers in and bind it right after. A custom
  ``RayPPOTrainer`` can mix in ``ContextTrainerMixin`` to fill verl's own ``_critic_extra_context``.
* v1 (default): the trainer builds ``role_worker_mapping`` in ``PPOTrainer._init_resource_pool_mgr``; we
  register (``@register_trainer``) a subclass of the trainer that ``trainer.v1.trainer_mode`` names, which
  binds it, and point ``trainer_mode`` at it.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping, Sequence
from typing import Any

from ..._envelope import attach
from ..._lint import lint_extra_context
from ._binding import bind_role_worker_mapping, bound_envelopes, carrying, resolve_worker_classes
from ._checkpoint import ContextCheckpointMixin

__all__ = [
    "ContextTaskRunnerMixin",
    "ContextTaskRunnerV1Mixin",
    "ContextTrainerMixin",
    "bound_trainer_cls",
    "make_task_runner",
]

TRAINER_SUFFIX = "+verl_ctx"
WORKERS_ATTR = "__verl_ctx_workers__"
IMPORTS_ATTR = "__verl_ctx_imports__"
#: ``{"dir": ...}`` on a TaskRunner or trainer that rehearses (``_rehearsal``), else absent.
REHEARSAL_ATTR = "__verl_ctx_rehearsal__"
#: The name ``main_ppo_v0.TaskRunner.run`` builds its trainer by (verl 0.9.1, main_ppo_v0.py:218).
LEGACY_TRAINER = "RayPPOTrainer"


class ContextTrainerMixin:
    """Mix into a ``RayPPOTrainer`` subclass (legacy path) whose class carries envelopes.

    verl's legacy ``init_workers`` builds the critic's ``TrainingWorkerConfig`` with
    ``extra_context=getattr(self, "_critic_extra_context", {})``; this property supplies it. Whatever the
    recipe assigns to ``self._critic_extra_context`` is kept beside the critic's envelope, and linted for
    values that will not travel to a Ray worker safely.
    """

    _USER_KEY = "_verl_ctx_user_critic_extra_context"

    @property
    def _critic_extra_context(self) -> dict[str, Any]:
        extra: dict[str, Any] = dict(self.__dict__.get(self._USER_KEY, {}))
        lint_extra_context(extra)
        envs = bound_envelopes(type(self))
        if "critic" in envs:
            attach(extra, envs["critic"])
        return extra

    @_critic_extra_context.setter
    def _critic_extra_context(self, value: Mapping[str, Any]) -> None:
        self.__dict__[self._USER_KEY] = dict(value)


def _workers(obj: object) -> dict[str, type]:
    """The recipe's worker classes this TaskRunner or trainer was made with, imported here."""
    return resolve_worker_classes(getattr(type(obj), WORKERS_ATTR, {}))


def _import_recipe_modules(obj: object) -> None:
    for name in getattr(type(obj), IMPORTS_ATTR, ()):
        importlib.import_module(name)


class ContextTaskRunnerMixin:
    """Mix into a ``BaseTaskRunner`` subclass (legacy path): binds the worker classes it registers."""

    role_worker_mapping: dict[Any, Any]

    def run(self, config: Any) -> Any:
        _import_recipe_modules(self)
        return super().run(config)  # type: ignore[misc]

    def add_actor_rollout_worker(self, config: Any) -> Any:
        result = super().add_actor_rollout_worker(config)  # type: ignore[misc]
        bind_role_worker_mapping(self.role_worker_mapping, bound_envelopes(type(self)), workers=_workers(self))
        return result

    def add_critic_worker(self, config: Any) -> Any:
        result = super().add_critic_worker(config)  # type: ignore[misc]
        bind_role_worker_mapping(self.role_worker_mapping, bound_envelopes(type(self)), workers=_workers(self))
        return result

    def init_resource_pool_mgr(self, config: Any) -> Any:
        manager = super().init_resource_pool_mgr(config)  # type: ignore[misc]
        rehearsal = getattr(type(self), REHEARSAL_ATTR, None)
        if rehearsal is None:
            return manager
        from ._rehearsal import record_config_roles, rehearsal_pool_manager, rehearse_mapping

        # The legacy runner registers every worker before this step and builds the trainer right after it.
        rehearse_mapping(self.role_worker_mapping, rehearsal["dir"])
        record_config_roles(config, rehearsal["dir"], "TaskRunner (the config the reward manager gets)")
        return rehearsal_pool_manager(manager)


class ContextTaskRunnerV1Mixin:
    """Mix into a ``TaskRunnerV1.__ray_actor_class__`` subclass: runs the configured trainer, bound."""

    def run(self, config: Any) -> Any:
        from omegaconf import open_dict
        from verl.trainer.ppo.v1 import get_trainer_cls
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

        _import_recipe_modules(self)
        mode = str(config.trainer.v1.trainer_mode)
        if not mode.endswith(TRAINER_SUFFIX):
            name = mode + TRAINER_SUFFIX
            if name not in TRAINER_REGISTRY:
                trainer = bound_trainer_cls(
                    get_trainer_cls(mode),
                    bound_envelopes(type(self)),
                    workers=getattr(type(self), WORKERS_ATTR, {}),
                    rehearsal=getattr(type(self), REHEARSAL_ATTR, None),
                )
                register_trainer(name)(trainer)
            with open_dict(config):
                config.trainer.v1.trainer_mode = name
        return super().run(config)  # type: ignore[misc]


def bound_trainer_cls(
    trainer_cls: type,
    envelopes: Mapping[str, Mapping[str, Any]],
    *,
    workers: Mapping[str, str] | None = None,
    rehearsal: Mapping[str, Any] | None = None,
) -> type:
    """A subclass of a verl trainer carrying ``envelopes`` and the recipe's ``workers`` (``module:Class`` text).

    On a v1 ``PPOTrainer`` it binds ``role_worker_mapping`` once ``_init_resource_pool_mgr`` has built it;
    on a legacy ``RayPPOTrainer`` it supplies ``_critic_extra_context`` (``ContextTrainerMixin``).
    """
    attrs: dict[str, Any] = {WORKERS_ATTR: dict(workers or {})}
    if rehearsal is not None:
        attrs[REHEARSAL_ATTR] = dict(rehearsal)
    if hasattr(trainer_cls, "_init_resource_pool_mgr"):

        def _init_resource_pool_mgr(self: Any) -> None:
            trainer_cls._init_resource_pool_mgr(self)
            bind_role_worker_mapping(self.role_worker_mapping, bound_envelopes(type(self)), workers=_workers(self))
            plan = getattr(type(self), REHEARSAL_ATTR, None)
            if plan is not None:
                from ._rehearsal import record_config_roles, rehearsal_pool_manager, rehearse_mapping

                rehearse_mapping(self.role_worker_mapping, plan["dir"])
                record_config_roles(self.config, plan["dir"], "trainer (the config the reward manager gets)")
                self.resource_pool_manager = rehearsal_pool_manager(self.resource_pool_manager)

        attrs["_init_resource_pool_mgr"] = _init_resource_pool_mgr
    return carrying(trainer_cls, envelopes, mixins=(ContextTrainerMixin, ContextCheckpointMixin), **attrs)


def _legacy_task_runner() -> type:
    """verl's legacy ``TaskRunner``, as a plain ``BaseTaskRunner`` subclass that can be extended.

    ``main_ppo_v0.TaskRunner`` is a ``ray.remote`` class, so its plain class is not importable by name and a
    subclass of it would be pickled with a copy of it; its ``run`` uses no ``super()``, so we borrow it instead.
    That ``run`` builds ``RayPPOTrainer(...)`` by its module-global name and offers no way to choose the class,
    so it runs with that one name bound to our trainer subclass (in a copy of its globals: verl's module is
    left untouched), which saves and checks contexts with checkpoints.
    """
    from verl.trainer.main_ppo_v0 import BaseTaskRunner

    class LegacyTaskRunner(BaseTaskRunner):  # type: ignore[misc]
        def run(self, config: Any) -> Any:
            return self._verl_run()(self, config)

        def _verl_run(self) -> Any:
            from verl.trainer.main_ppo_v0 import TaskRunner

            verl_run = TaskRunner.__ray_actor_class__.run
            trainer = bound_trainer_cls(verl_run.__globals__[LEGACY_TRAINER], bound_envelopes(type(self)))
            rebound = {**verl_run.__globals__, LEGACY_TRAINER: trainer}
            return types.FunctionType(
                verl_run.__code__, rebound, verl_run.__name__, verl_run.__defaults__, verl_run.__closure__
            )

    return LegacyTaskRunner


def make_task_runner(
    envelopes: Mapping[str, Mapping[str, Any]],
    *,
    use_v1: bool,
    base: type | None = None,
    workers: Mapping[str, str] | None = None,
    imports: Sequence[str] = (),
    rehearsal: Mapping[str, Any] | None = None,
) -> Any:
    """A ``ray.remote`` TaskRunner class carrying ``envelopes``, for ``run_ppo(config, task_runner_class=...)``.

    ``base`` is the TaskRunner to extend (its plain class, not the ``ray.remote`` one); by default verl's
    ``TaskRunnerV1`` or legacy ``TaskRunner``. ``workers`` names the recipe's worker classes by slot
    (``{"critic": "my_recipe.workers:CriticWorker"}``, see ``bind_role_worker_mapping``); ``imports`` are
    modules imported inside the TaskRunner process before verl builds its trainer. ``rehearsal``
    (``{"dir": ...}``) stops every worker at the engine boundary (``_rehearsal``).
    """
    import ray

    if base is None:
        if use_v1:
            from verl.trainer.main_ppo import TaskRunnerV1

            base = TaskRunnerV1
        else:
            base = _legacy_task_runner()
    base = getattr(base, "__ray_actor_class__", base)
    mixin = ContextTaskRunnerV1Mixin if use_v1 else ContextTaskRunnerMixin
    attrs: dict[str, Any] = {WORKERS_ATTR: dict(workers or {}), IMPORTS_ATTR: tuple(imports)}
    if rehearsal is not None:
        attrs[REHEARSAL_ATTR] = dict(rehearsal)
    return ray.remote(carrying(base, envelopes, mixins=(mixin,), **attrs))
