"""A recipe's own entry point run with its TaskRunners bound: ``verl-ctx run -m recipe.<name>.main_<name>``.

A recipe's ``main_<name>.py`` composes its config with ``@hydra.main``, runs its own pre-launch checks and then
starts its TaskRunner (``run_ppo(config, task_runner_class=TaskRunner)``, or ``TaskRunner.remote()`` in a
function of its own). verl-ctx composes the config exactly as that decorator would (``_compose``), then calls the
decorated function itself with it, in a copy of the module's globals where every TaskRunner class the module
names is replaced by a bound one (``make_task_runner``). So the recipe's own checks and start-up code run,
unchanged, and the recipe's module is never modified: the copy lives only for this call.

Never silent: a module that names no TaskRunner, whose functions never refer to one, or whose runner derives
from neither verl family (``runner_family``) is refused before anything starts.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from ..._modules import import_modules
from ...errors import ConfigError
from ._entry import EntryPoint
from ._runners import runner_family

__all__ = ["recipe_runners", "run_recipe_main"]


def recipe_runners(module: types.ModuleType) -> dict[str, Any]:
    """The TaskRunner classes a module names as globals, by global name.

    A ``ray.remote`` class with a ``run`` method, or a plain subclass of verl's ``BaseTaskRunner`` or
    ``TaskRunnerV1`` defined outside verl (the collection's ``run_ppo(config, ray.remote(num_cpus=1)(TaskRunner))``
    idiom, where the entry point makes it remote itself).
    """
    from ray.actor import ActorClass
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.main_ppo_v0 import BaseTaskRunner

    def is_runner(value: object) -> bool:
        plain = getattr(value, "__ray_actor_class__", None)
        if isinstance(value, ActorClass):
            return isinstance(plain, type) and callable(getattr(plain, "run", None))
        return (
            isinstance(value, type)
            and issubclass(value, (BaseTaskRunner, TaskRunnerV1.__ray_actor_class__))
            and not value.__module__.startswith("verl.")
        )

    found = {name: value for name, value in vars(module).items() if is_runner(value)}
    return found


def _code_names(code: types.CodeType) -> set[str]:
    """Global names a function's code (nested functions and classes included) refers to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def run_recipe_main(entry: EntryPoint, config: Any, bound_runner: Callable[[Any], Any]) -> Any:
    """Call ``entry``'s ``@hydra.main`` function with ``config``, each TaskRunner it names made by ``bound_runner``."""
    import_modules([entry.module], what="entry module")
    module = importlib.import_module(entry.module)
    runners = recipe_runners(module)
    if not runners:
        raise ConfigError(
            f"-m {entry.module}: the module names no TaskRunner (a ray.remote class with a run method) as a global, "
            "so verl-ctx cannot bind the workers it starts. Import or define the runner in that module"
        )
    for runner in runners.values():
        runner_family(runner)  # a ConfigError for a runner of neither family
    namespace = vars(module)
    functions = {
        name: value
        for name, value in namespace.items()
        if isinstance(value, types.FunctionType) and value.__globals__ is namespace
    }
    task = inspect.unwrap(getattr(module, entry.function))
    for cls in _module_classes(module, exclude=runners.values()):
        for method in _functions_of(cls):
            if _code_names(method.__code__) & set(runners):
                raise ConfigError(
                    f"-m {entry.module}: {cls.__qualname__}.{method.__name__} refers to the TaskRunner; verl-ctx binds "
                    "the runners the module's own functions start, not those a class's methods start. Start the "
                    "runner from a module-level function"
                )
    if not any(_code_names(f.__code__) & set(runners) for f in (task, *functions.values())):
        raise ConfigError(
            f"-m {entry.module}: no function of the module refers to its TaskRunner ({', '.join(sorted(runners))}), "
            "so the runner it starts is not one verl-ctx can bind. Start the runner from the entry module"
        )
    rebound: dict[str, Any] = dict(namespace)
    for name, runner in runners.items():
        made = bound_runner(runner)  # ray.remote; a plain runner stays plain, for the entry point to make remote
        rebound[name] = made if hasattr(runner, "__ray_actor_class__") else made.__ray_actor_class__
    rebound.update({name: _with_globals(f, rebound) for name, f in functions.items()})
    return _with_globals(task, rebound)(config)


def _module_classes(module: types.ModuleType, *, exclude: Any) -> list[type]:
    excluded = {id(getattr(c, "__ray_actor_class__", c)) for c in exclude}
    return [
        v
        for v in vars(module).values()
        if isinstance(v, type) and v.__module__ == module.__name__ and id(v) not in excluded
    ]


def _functions_of(cls: type) -> list[types.FunctionType]:
    out = []
    for value in vars(cls).values():
        function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if isinstance(function, types.FunctionType):
            out.append(function)
    return out


def _with_globals(function: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    """``function`` reading its globals from ``namespace`` (shared, so the copies call each other's copies)."""
    made = types.FunctionType(
        function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__
    )
    made.__kwdefaults__ = function.__kwdefaults__
    return made
