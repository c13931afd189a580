"""TaskRunners and trainers that bind contexts and the recipe's own workers, on both verl trainer paths.

verl's TaskRunners are ``@ray.remote`` classes (subclassing them raises ``ActorClassInheritanceException``),
so we subclass their ``__ray_actor_class__`` at run time (``_binding.carrying``): Ray pickles it by value into
the TaskRunner's definition with the envelopes, the recipe's worker choices (``module:Class`` text) and the
modules to import. Inside the TaskRunner process, before verl looks anything up, those modules are imported
(a recipe's ``@register_trainer`` becomes visible there) and the worker classes resolved.

Which of the two a runner gets is decided by the class it derives from, never by a config flag (a recipe's
legacy runner often runs with verl's default ``trainer.use_v1: true``):

* legacy (``BaseTaskRunner``: verl's ``main_ppo_v0.TaskRunner``, most recipes' runners): the runner fills
  ``role_worker_mapping`` itself, through ``add_*`` or by assignment. Its mapping is a ``_BoundMapping``: each
  class is bound (the recipe's workers put in) as it is registered, and at the first read (the trainer's
  ``init_workers``, before any worker starts) every context is checked to have a slot (``check_delivery``).
  The trainer classes the runner's ``run`` names are bound too (``RayPPOTrainer`` subclasses among its globals,
  in a copy of them: the recipe's and verl's modules are left untouched), so checkpoints carry the contexts and
  verl's own ``_critic_extra_context`` is filled; a trainer of a class ``run`` imports itself is bound when it
  first reads the mapping (``_bind_reading_trainer``).
* v1 (``TaskRunnerV1``): the trainer builds ``role_worker_mapping`` in ``PPOTrainer._init_resource_pool_mgr``;
  we register (``@register_trainer``) a subclass of the trainer that ``trainer.v1.trainer_mode`` names, which
  binds and checks it, and point ``trainer_mode`` at it. A runner that builds another trainer is refused when
  it stores it (``self.trainer = ...``), before ``init`` starts a worker.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping, Sequence
from typing import Any

from ..._driver.lint import lint_extra_context
from ..._wire.envelope import attach
from ...errors import ConfigError, LaunchError
from ._binding import (
    actor_class,
    bind_role_worker_mapping,
    bound_envelopes,
    carrying,
    check_delivery,
    is_bound,
    resolve_worker_classes,
)
from ._checkpoint import ContextCheckpointMixin, checkpoint_methods, early_resume_methods

__all__ = [
    "ContextTaskRunnerMixin",
    "ContextTaskRunnerV1Mixin",
    "ContextTrainerMixin",
    "bound_trainer_cls",
    "make_task_runner",
    "runner_family",
]

TRAINER_SUFFIX = "+verl_ctx"
WORKERS_ATTR = "__verl_ctx_workers__"
IMPORTS_ATTR = "__verl_ctx_imports__"
#: Where a legacy runner keeps the config its ``run`` got (its mapping's delivery check reads it).
_CONFIG_ATTR = "_verl_ctx_config"
#: ``{"dir": ...}`` on a TaskRunner or trainer that rehearses (``_rehearsal``), else absent.
REHEARSAL_ATTR = "__verl_ctx_rehearsal__"


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


class _BoundMapping(dict[Any, Any]):
    """A legacy runner's ``role_worker_mapping``: bound as it is filled, checked and sealed when first read.

    However the runner registers a class (``add_*``, assignment, ``update``), it is bound at once. The first read
    (``mapping[role]``, iteration: the trainer's ``init_workers``, before it starts a worker group) runs
    ``check_delivery`` and, in a rehearsal, puts the engine boundaries in.
    """

    def __init__(self, runner: Any, entries: Mapping[Any, Any]) -> None:
        super().__init__()
        self._runner = runner
        self._busy = False
        self._sealed = False
        self.update(entries)

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if not self._busy:
            self._with_busy(self._bind)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]  # dict's own |= would bypass __setitem__
        self.update(other)
        return self

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return super().__getitem__(key)  # a registration step, not the trainer's read

    def __getitem__(self, key: Any) -> Any:
        self._seal()
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._seal()
        return super().get(key, default)

    def __reduce__(self) -> Any:
        return (dict, (dict(super().items()),))  # a copy sent elsewhere is a plain, already bound mapping

    def __iter__(self) -> Any:
        self._seal()
        return super().__iter__()

    def items(self) -> Any:
        self._seal()
        return super().items()

    def values(self) -> Any:
        self._seal()
        return super().values()

    def _with_busy(self, step: Any) -> None:
        self._busy = True
        try:
            step()
        finally:
            self._busy = False

    def _bind(self) -> None:
        runner = self._runner
        bind_role_worker_mapping(self, bound_envelopes(type(runner)), workers=_workers(runner))
        if self._sealed:  # registered after the first read: rehearsed too
            self._rehearse()

    def _seal(self) -> None:
        if self._sealed or self._busy:
            return
        runner = self._runner
        config = runner.__dict__.get(_CONFIG_ATTR)
        check_delivery(dict(super().items()), bound_envelopes(type(runner)), _worker_specs(runner), config)
        self._sealed = True
        _bind_reading_trainer(self, bound_envelopes(type(runner)))
        self._with_busy(self._rehearse)

    def _rehearse(self) -> None:
        plan = getattr(type(self._runner), REHEARSAL_ATTR, None)
        if plan is None:
            return
        from ._rehearsal import record_config_roles, rehearse_mapping

        rehearse_mapping(self, plan["dir"])
        config = self._runner.__dict__.get(_CONFIG_ATTR)
        if config is not None:
            record_config_roles(config, plan["dir"], "TaskRunner (the config the reward manager gets)")


def _bind_reading_trainer(mapping: _BoundMapping, envelopes: Mapping[str, Any]) -> None:
    """Bind the legacy trainer reading ``mapping`` for the first time (its ``init_workers``), if it is not bound.

    ``ContextTaskRunnerMixin.run`` binds the trainer classes its runner's module names; a recipe that imports its
    trainer inside ``run`` (as DAPO does) builds one nothing bound, whose checkpoints would silently carry no
    contexts. The trainer that reads the mapping is the caller of this first read, a few frames up: it gets a
    bound class of its own (methods only, so its ``__class__`` can change), before it starts any worker.
    """
    import sys

    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    frame: Any = sys._getframe(2)
    for _ in range(4):  # _seal <- __getitem__/items/... <- the trainer's method
        if frame is None:
            return
        reader = frame.f_locals.get("self")
        if isinstance(reader, RayPPOTrainer) and reader.__dict__.get("role_worker_mapping") is mapping:
            if not is_bound(type(reader)):
                reader.__class__ = bound_trainer_cls(type(reader), envelopes, swappable=True)
            return
        frame = frame.f_back


def _worker_specs(obj: object) -> dict[str, str]:
    return dict(getattr(type(obj), WORKERS_ATTR, {}))


def _runner_run(cls: type, mixin: type) -> Any:
    """The ``run`` function of the runner a mixin extends (the recipe's, or verl's): the first after the mixin.

    Classes before the mixin in the MRO may define ``run`` too (Ray wraps an actor's methods in a subclass made
    in the actor's process), and call back into the mixin's.
    """
    mro = cls.__mro__
    for klass in mro[mro.index(mixin) + 1 :]:
        if "run" in vars(klass):
            return vars(klass)["run"]
    raise ConfigError(f"{cls.__qualname__} has no run method: not a TaskRunner")


def _trainers_bound(run: Any, bases: tuple[type, ...], envelopes: Mapping[str, Any], **attrs: Any) -> Any:
    """``run`` with each trainer class it names as a global (subclassing ``bases``) bound, in a copy of its globals."""
    names = run.__globals__
    rebound = {
        name: bound_trainer_cls(value, envelopes, **attrs)
        for name, value in names.items()
        if isinstance(value, type) and issubclass(value, bases) and not is_bound(value)
    }
    if not rebound:
        return run
    made = types.FunctionType(run.__code__, {**names, **rebound}, run.__name__, run.__defaults__, run.__closure__)
    made.__kwdefaults__ = run.__kwdefaults__
    return made


class ContextTaskRunnerMixin:
    """Mix into a ``BaseTaskRunner`` subclass (legacy path): binds every worker class it registers."""

    @property
    def role_worker_mapping(self) -> dict[Any, Any]:
        return self.__dict__.setdefault("_verl_ctx_mapping", _BoundMapping(self, {}))  # type: ignore[no-any-return]

    @role_worker_mapping.setter
    def role_worker_mapping(self, value: Mapping[Any, Any]) -> None:
        self.__dict__["_verl_ctx_mapping"] = value if isinstance(value, _BoundMapping) else _BoundMapping(self, value)

    def run(self, config: Any) -> Any:
        _import_recipe_modules(self)
        self.__dict__[_CONFIG_ATTR] = config
        return self._bound_run()(self, config)

    def _bound_run(self) -> Any:
        """The runner's own ``run`` (the recipe's, or verl's), with the trainer classes it names bound."""
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer

        run = _runner_run(type(self), ContextTaskRunnerMixin)
        return _trainers_bound(run, (RayPPOTrainer,), bound_envelopes(type(self)))

    def init_resource_pool_mgr(self, config: Any) -> Any:
        manager = super().init_resource_pool_mgr(config)  # type: ignore[misc]
        if getattr(type(self), REHEARSAL_ATTR, None) is None:
            return manager
        from ._rehearsal import rehearsal_pool_manager

        return rehearsal_pool_manager(manager)


class ContextTaskRunnerV1Mixin:
    """Mix into a ``TaskRunnerV1.__ray_actor_class__`` subclass: runs the configured trainer, bound."""

    def run(self, config: Any) -> Any:
        from omegaconf import open_dict
        from verl.trainer.ppo.v1 import get_trainer_cls
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer

        _import_recipe_modules(self)
        mode = str(config.trainer.v1.trainer_mode)
        # A mode the recipe's own run registers (after this point) is bound when the runner stores its trainer.
        if not mode.endswith(TRAINER_SUFFIX) and mode in TRAINER_REGISTRY:
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
        from verl.trainer.ppo.v1.trainer_base import PPOTrainer

        run = _runner_run(type(self), ContextTaskRunnerV1Mixin)
        bound = _trainers_bound(
            run,
            (PPOTrainer,),
            bound_envelopes(type(self)),
            workers=_worker_specs(self),
            rehearsal=getattr(type(self), REHEARSAL_ATTR, None),
        )
        return bound(self, config)

    @property
    def trainer(self) -> Any:
        return self.__dict__.get("_verl_ctx_trainer")

    @trainer.setter
    def trainer(self, value: Any) -> None:
        # A runner that builds its trainer itself (its own class, or a trainer_mode registered after our lookup)
        # hands it here before init() builds a worker: it is bound now (its class swapped for a bound subclass of
        # it, which adds methods only), or the launch stops, rather than starting workers without contexts.
        if value is not None and not is_bound(type(value)):
            bound = bound_trainer_cls(
                type(value),
                bound_envelopes(type(self)),
                workers=_worker_specs(self),
                rehearsal=getattr(type(self), REHEARSAL_ATTR, None),
                swappable=True,
            )
            try:
                value.__class__ = bound
            except TypeError as e:
                raise LaunchError(
                    f"the TaskRunner built a {type(value).__module__}.{type(value).__qualname__}, which verl-ctx "
                    f"cannot bind ({e}): its workers would start without their contexts, so nothing was started. "
                    "Register the trainer with @register_trainer and select it with trainer.v1.trainer_mode",
                    cause=f"unbound trainer {type(value).__qualname__}",
                    key="trainer.v1.trainer_mode",
                ) from None
        self.__dict__["_verl_ctx_trainer"] = value


def bound_trainer_cls(
    trainer_cls: type,
    envelopes: Mapping[str, Mapping[str, Any]],
    *,
    workers: Mapping[str, str] | None = None,
    rehearsal: Mapping[str, Any] | None = None,
    swappable: bool = False,
) -> type:
    """A subclass of a verl trainer carrying ``envelopes`` and the recipe's ``workers`` (``module:Class`` text).

    ``swappable``: a class an instance of ``trainer_cls`` can be given (``__class__ = ...``), for a trainer the
    runner already built. CPython allows that only between classes of one layout, and a class whose first base is
    a mixin takes the mixin's, so this one derives from ``trainer_cls`` alone with the checkpoint methods in its
    own namespace (a v1 trainer needs no ``_critic_extra_context``).

    On a v1 ``PPOTrainer`` it binds ``role_worker_mapping`` once ``_init_resource_pool_mgr`` has built it;
    on a legacy ``RayPPOTrainer`` it supplies ``_critic_extra_context`` (``ContextTrainerMixin``).
    """
    attrs: dict[str, Any] = {WORKERS_ATTR: dict(workers or {})}
    if rehearsal is not None:
        attrs[REHEARSAL_ATTR] = dict(rehearsal)
    if hasattr(trainer_cls, "_init_resource_pool_mgr"):

        def _init_resource_pool_mgr(self: Any) -> None:
            trainer_cls._init_resource_pool_mgr(self)
            envelopes = bound_envelopes(type(self))
            check_delivery(self.role_worker_mapping, envelopes, _worker_specs(self), self.config)
            bind_role_worker_mapping(self.role_worker_mapping, envelopes, workers=_workers(self))
            plan = getattr(type(self), REHEARSAL_ATTR, None)
            if plan is not None:
                from ._rehearsal import record_config_roles, rehearsal_pool_manager, rehearse_mapping

                rehearse_mapping(self.role_worker_mapping, plan["dir"])
                record_config_roles(self.config, plan["dir"], "trainer (the config the reward manager gets)")
                self.resource_pool_manager = rehearsal_pool_manager(self.resource_pool_manager)

        attrs["_init_resource_pool_mgr"] = _init_resource_pool_mgr
        if not swappable:  # built by the name ContextTaskRunnerV1Mixin registered: give verl back the user's mode

            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                _restore_trainer_mode(kwargs["config"] if "config" in kwargs else args[0])
                trainer_cls.__init__(self, *args, **kwargs)  # type: ignore[misc]

            attrs["__init__"] = __init__
    if rehearsal is None:  # a rehearsal never resumes: it leaves a checkpoint's history alone
        attrs.update(early_resume_methods(trainer_cls))
    if swappable:
        return carrying(trainer_cls, envelopes, **attrs, **checkpoint_methods(trainer_cls))
    return carrying(trainer_cls, envelopes, mixins=(ContextTrainerMixin, ContextCheckpointMixin), **attrs)


def _restore_trainer_mode(config: Any) -> None:
    """``trainer.v1.trainer_mode`` as the user set it, once the bound trainer registered under it+suffix is found.

    verl's ``PPOTrainer.__init__`` reads the mode into ``self.trainer_mode`` and branches on it (``== "sync"``: the
    replay buffer, refills, checkpoints; ``trainer.v1.<mode>.parameter_sync_step``): it must see the user's mode.
    """
    from omegaconf import open_dict

    mode = str(config.trainer.v1.trainer_mode)
    if mode.endswith(TRAINER_SUFFIX):
        with open_dict(config):
            config.trainer.v1.trainer_mode = mode.removesuffix(TRAINER_SUFFIX)


def _legacy_task_runner() -> type:
    """verl's legacy ``TaskRunner``, as a plain ``BaseTaskRunner`` subclass that can be extended.

    ``main_ppo_v0.TaskRunner`` is a ``ray.remote`` class, so its plain class is not importable by name and a
    subclass of it would be pickled with a copy of it; its ``run`` uses no ``super()``, so we borrow it instead
    (``ContextTaskRunnerMixin.run`` binds the ``RayPPOTrainer`` it builds).
    """
    from verl.trainer.main_ppo_v0 import BaseTaskRunner, TaskRunner

    return type(
        "LegacyTaskRunner", (BaseTaskRunner,), {"run": TaskRunner.__ray_actor_class__.run, "__module__": __name__}
    )


def runner_family(runner: type) -> str:
    """``"legacy"`` for a ``BaseTaskRunner`` (verl's ``main_ppo_v0``), ``"v1"`` for a ``TaskRunnerV1``: by its bases."""
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.main_ppo_v0 import BaseTaskRunner

    plain = actor_class(runner)
    if isinstance(plain, type) and issubclass(plain, BaseTaskRunner):
        return "legacy"
    if isinstance(plain, type) and issubclass(plain, TaskRunnerV1.__ray_actor_class__):
        return "v1"
    raise ConfigError(
        f"TaskRunner {getattr(plain, '__module__', '?')}.{getattr(plain, '__qualname__', plain)} derives from neither "
        "verl.trainer.main_ppo_v0.BaseTaskRunner (legacy) nor verl.trainer.main_ppo.TaskRunnerV1: verl-ctx cannot "
        "see where it registers its workers, so it cannot deliver contexts to them. Derive it from one of the two"
    )


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

    ``base`` is the TaskRunner to extend (plain or ``ray.remote``); by default verl's ``TaskRunnerV1`` or legacy
    ``TaskRunner`` by ``use_v1``, as verl's ``main_ppo`` picks. A given ``base`` is bound as the family it derives
    from (``runner_family``), whatever ``use_v1`` says. ``workers`` names the recipe's worker classes by slot
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
    options = dict(getattr(base, "_default_options", None) or {})  # a recipe's @ray.remote(num_cpus=1), kept
    base = actor_class(base)
    mixin = ContextTaskRunnerV1Mixin if runner_family(base) == "v1" else ContextTaskRunnerMixin
    attrs: dict[str, Any] = {WORKERS_ATTR: dict(workers or {}), IMPORTS_ATTR: tuple(imports)}
    if rehearsal is not None:
        attrs[REHEARSAL_ATTR] = dict(rehearsal)
    made = carrying(base, envelopes, mixins=(mixin,), **attrs)
    return ray.remote(**options)(made) if options else ray.remote(made)
