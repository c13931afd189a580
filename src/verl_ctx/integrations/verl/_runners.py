"""TaskRunners and trainers that bind contexts, for both verl trainer paths; and ``launch``.

verl's TaskRunners are ``@ray.remote`` classes (subclassing them raises ``ActorClassInheritanceException``),
so we subclass their ``__ray_actor_class__`` and create the subclass at run time with the envelopes as a
class attribute: Ray pickles it by value into the TaskRunner's definition, and the TaskRunner process binds
the worker classes it registers.

* legacy (``trainer.use_v1=false``): ``BaseTaskRunner.add_actor_rollout_worker`` / ``add_critic_worker``
  fill ``role_worker_mapping``; we bind it right after. A custom ``RayPPOTrainer`` can also mix in
  ``ContextTrainerMixin`` to fill verl's own ``_critic_extra_context``.
* v1 (default): the trainer builds ``role_worker_mapping`` in ``PPOTrainer._init_resource_pool_mgr``; we
  register (``@register_trainer``) a subclass of the trainer ``trainer.v1.trainer_mode`` names that binds
  it, and point ``trainer_mode`` at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._envelope import attach
from ..._lint import lint_extra_context
from ._binding import ENVELOPES_ATTR, bind_role_worker_mapping, bound_envelopes
from ._store import resolve

__all__ = [
    "ContextTaskRunnerMixin",
    "ContextTaskRunnerV1Mixin",
    "ContextTrainerMixin",
    "bound_trainer_cls",
    "make_task_runner",
]

TRAINER_SUFFIX = "+verl_ctx"


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
            attach(extra, resolve(envs["critic"]))
        return extra

    @_critic_extra_context.setter
    def _critic_extra_context(self, value: Mapping[str, Any]) -> None:
        self.__dict__[self._USER_KEY] = dict(value)


class ContextTaskRunnerMixin:
    """Mix into a ``BaseTaskRunner`` subclass (legacy path): binds the worker classes it registers."""

    role_worker_mapping: dict[Any, Any]

    def add_actor_rollout_worker(self, config: Any) -> Any:
        result = super().add_actor_rollout_worker(config)  # type: ignore[misc]
        bind_role_worker_mapping(self.role_worker_mapping, bound_envelopes(type(self)))
        return result

    def add_critic_worker(self, config: Any) -> Any:
        result = super().add_critic_worker(config)  # type: ignore[misc]
        bind_role_worker_mapping(self.role_worker_mapping, bound_envelopes(type(self)))
        return result


class ContextTaskRunnerV1Mixin:
    """Mix into a ``TaskRunnerV1.__ray_actor_class__`` subclass: runs the configured trainer, bound."""

    def run(self, config: Any) -> Any:
        from omegaconf import open_dict
        from verl.trainer.ppo.v1 import get_trainer_cls
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

        mode = str(config.trainer.v1.trainer_mode)
        if not mode.endswith(TRAINER_SUFFIX):
            name = mode + TRAINER_SUFFIX
            if name not in TRAINER_REGISTRY:
                register_trainer(name)(bound_trainer_cls(get_trainer_cls(mode), bound_envelopes(type(self))))
            with open_dict(config):
                config.trainer.v1.trainer_mode = name
        return super().run(config)  # type: ignore[misc]


def bound_trainer_cls(trainer_cls: type, envelopes: Mapping[str, Mapping[str, Any]]) -> type:
    """A subclass of a verl trainer carrying ``envelopes``, for either path.

    On a v1 ``PPOTrainer`` it binds ``role_worker_mapping`` once ``_init_resource_pool_mgr`` has built it;
    on a legacy ``RayPPOTrainer`` it supplies ``_critic_extra_context`` (``ContextTrainerMixin``).
    """
    namespace: dict[str, Any] = {
        ENVELOPES_ATTR: {r: dict(e) for r, e in envelopes.items()},
        "__module__": trainer_cls.__module__,
    }
    if hasattr(trainer_cls, "_init_resource_pool_mgr"):

        def _init_resource_pool_mgr(self: Any) -> None:
            trainer_cls._init_resource_pool_mgr(self)
            bind_role_worker_mapping(self.role_worker_mapping, bound_envelopes(type(self)))

        namespace["_init_resource_pool_mgr"] = _init_resource_pool_mgr
    bound = type(trainer_cls.__name__, (ContextTrainerMixin, trainer_cls), namespace)
    bound.__qualname__ = f"bound_trainer_cls.<locals>.{trainer_cls.__qualname__}"
    return bound


def make_task_runner(envelopes: Mapping[str, Mapping[str, Any]], *, use_v1: bool, base: type | None = None) -> Any:
    """A ``ray.remote`` TaskRunner class carrying ``envelopes``, for ``run_ppo(config, task_runner_class=...)``.

    ``base`` is the TaskRunner to extend (its plain class, not the ``ray.remote`` one); by default verl's
    ``TaskRunnerV1`` or legacy ``TaskRunner``.
    """
    import ray

    if base is None:
        if use_v1:
            from verl.trainer.main_ppo import TaskRunnerV1

            base = TaskRunnerV1.__ray_actor_class__
        else:
            from verl.trainer.main_ppo_v0 import TaskRunner

            base = TaskRunner.__ray_actor_class__
    base = getattr(base, "__ray_actor_class__", base)
    mixin = ContextTaskRunnerV1Mixin if use_v1 else ContextTaskRunnerMixin
    runner = type(
        base.__name__,
        (mixin, base),
        {
            ENVELOPES_ATTR: {r: dict(e) for r, e in envelopes.items()},
            "__module__": base.__module__,
        },
    )
    runner.__qualname__ = f"make_task_runner.<locals>.{base.__qualname__}"
    return ray.remote(runner)
