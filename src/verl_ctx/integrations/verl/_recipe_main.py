"""A recipe's own entry point run with its TaskRunners bound: ``verl-ctx run -m recipe.<name>.main_<name>``.

A recipe's ``main_<name>.py`` composes its config with ``@hydra.main``, runs its own pre-launch checks and then
starts its TaskRunner (``run_ppo(config, task_runner_class=TaskRunner)``, or ``TaskRunner.remote()`` in a
function of its own). verl-ctx composes the config exactly as that decorator would (``_compose``), then calls the
decorated function itself with it, in a copy of the module's globals where every TaskRunner class the module
names is replaced by a bound one (``make_task_runner``). So the recipe's own checks and start-up code run,
unchanged, and the recipe's module is never modified: the copy lives only for this call.

A runner of another shape (a plain ``ray.remote`` class, a ``ray.remote`` function, a fully-async runner) binds
itself with one line in its own code, ``bind_workers`` (``_bind_workers``); its main then runs unchanged.

Never silent: a module that names no TaskRunner, whose functions never refer to one, or whose runner derives
from neither verl family and does not call ``bind_workers`` is refused before anything starts, with the line to add.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from ..._driver.modules import import_modules
from ...errors import ConfigError
from ._bind_workers import BIND_LINE, calls_bind_workers, code_names
from ._binding import actor_class
from ._entry import EntryPoint
from ._runners import runner_family

__all__ = ["recipe_runners", "run_recipe_main"]


def recipe_runners(module: types.ModuleType) -> dict[str, Any]:
    """The TaskRunners a module names as globals, by global name.

    A ``ray.remote`` class with a ``run`` method; a plain subclass of verl's ``BaseTaskRunner`` or ``TaskRunnerV1``
    defined outside verl (the collection's ``run_ppo(config, ray.remote(num_cpus=1)(TaskRunner))`` idiom, where the
    entry point makes it remote itself); and, of any shape, a ``ray.remote`` function or a plain class whose code
    calls ``bind_workers`` (it binds itself).
    """
    from ray.actor import ActorClass
    from ray.remote_function import RemoteFunction
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.main_ppo_v0 import BaseTaskRunner

    def is_runner(value: object) -> bool:
        plain = actor_class(value)
        if isinstance(value, ActorClass):
            return isinstance(plain, type) and callable(getattr(plain, "run", None))
        if not isinstance(value, type) or value.__module__.startswith("verl."):
            return False
        return issubclass(value, (BaseTaskRunner, TaskRunnerV1.__ray_actor_class__)) or (
            callable(getattr(value, "run", None)) and calls_bind_workers(value)
        )

    found = {name: value for name, value in vars(module).items() if is_runner(value)}
    # A runner the module imports to derive its own from (verl's FullyAsyncTaskRunner under reward_queue's
    # TaskRunner) is not run: its subclass is.
    plain = {name: actor_class(v) for name, v in found.items()}
    bases = {
        name
        for name, cls in plain.items()
        if any(other is not cls and isinstance(other, type) and cls in other.__mro__ for other in plain.values())
    }
    found = {name: value for name, value in found.items() if name not in bases}
    # A ray.remote function is the runner when it binds itself, or when the module has no runner class (the whole
    # job as one function, prime's shape: refused then, with the line to add); beside a runner class it is a helper.
    functions = {name: value for name, value in vars(module).items() if isinstance(value, RemoteFunction)}
    found.update({name: f for name, f in functions.items() if not found or calls_bind_workers(f)})
    return found


def _binds_itself(module: str, name: str, runner: Any) -> bool:
    """Whether ``runner`` binds itself (``bind_workers``) rather than by the verl family it derives from.

    A runner of a verl family is bound from outside; any other runner must call ``bind_workers`` in its code, or the
    launch is refused here, before anything starts, with the line to add.
    """
    try:
        runner_family(runner)
        return False
    except ConfigError:
        if calls_bind_workers(runner):
            return True
    plain = getattr(runner, "_function", None) or actor_class(runner)
    shape = "a ray.remote function" if isinstance(plain, types.FunctionType) else "a TaskRunner of no verl family"
    raise ConfigError(
        f"-m {module}: {name} is {shape} (it derives from neither verl's BaseTaskRunner nor TaskRunnerV1), so "
        "verl-ctx cannot bind the workers it registers from outside, and their contexts would never reach them. Add "
        "one line to its code, after it builds role_worker_mapping and the ResourcePoolManager and before its "
        f"trainer starts a worker:\n    {BIND_LINE}\n(docs/recipes.md, 'Runners of any shape')"
    )


def run_recipe_main(
    entry: EntryPoint, config: Any, bound_runner: Callable[[Any], Any], plan_in_config: Callable[[], None]
) -> Any:
    """Call ``entry``'s ``@hydra.main`` function with ``config``, each TaskRunner it names made by ``bound_runner``.

    A runner that binds itself (``bind_workers``) is left as it is; ``plan_in_config`` then writes the contexts and
    the launch's plan into ``config`` for that line to read.
    """
    import_modules([entry.module], what="entry module")
    module = importlib.import_module(entry.module)
    runners = recipe_runners(module)
    if not runners:
        raise ConfigError(
            f"-m {entry.module}: the module names no TaskRunner as a global (a ray.remote class with a run method, "
            "a subclass of verl's BaseTaskRunner or TaskRunnerV1, or a runner of any shape that calls bind_workers), "
            "so verl-ctx cannot bind the workers it starts. Import or define the runner in that module; a runner of "
            f"another shape adds\n    {BIND_LINE}\n(docs/recipes.md, 'Runners of any shape')"
        )
    binding_itself = {name for name, runner in runners.items() if _binds_itself(entry.module, name, runner)}
    if binding_itself:
        plan_in_config()
    runners = {name: runner for name, runner in runners.items() if name not in binding_itself}
    task = inspect.unwrap(getattr(module, entry.function))
    if not runners:  # every runner binds itself: the recipe's main runs as it is, on the config it carries
        return task(config)
    namespace = vars(module)
    functions = {
        name: value
        for name, value in namespace.items()
        if isinstance(value, types.FunctionType) and value.__globals__ is namespace
    }
    for cls in _module_classes(module, exclude=runners.values()):
        for method in _functions_of(cls):
            if code_names(method.__code__) & set(runners):
                raise ConfigError(
                    f"-m {entry.module}: {cls.__qualname__}.{method.__name__} refers to the TaskRunner; verl-ctx binds "
                    "the runners the module's own functions start, not those a class's methods start. Start the "
                    "runner from a module-level function"
                )
    if not any(code_names(f.__code__) & set(runners) for f in (task, *functions.values())):
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
    excluded = {id(actor_class(c)) for c in exclude}
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
