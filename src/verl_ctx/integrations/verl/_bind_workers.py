"""``bind_workers``: the one line that binds a TaskRunner of any shape, written inside the runner itself.

verl-ctx binds a runner derived from verl's ``BaseTaskRunner`` or ``TaskRunnerV1`` from outside (``_runners``): it
knows where such a runner keeps its ``role_worker_mapping``. Most of verl's recipe collection writes runners it
cannot see into: a plain ``@ray.remote class TaskRunner`` with a local mapping, a ``@ray.remote def main_task(config)``
that is the whole job, a plain class the recipe makes remote itself, a fully-async runner. For every one of them the
recipe adds the same line where it has built its mapping and resource pool manager, before its trainer starts a
worker::

    bind_workers(role_worker_mapping, config, resource_pool_manager)

The runner has the Hydra config in every shape, so that is the channel: for a recipe whose runner calls the line,
``verl-ctx run -m`` writes the worker roles' contexts (as text; large or secret-holding ones as store references)
into the config's ``verl_ctx`` slot beside the reward and custom roles', and the launch's plan (the ``--worker``
classes; in a rehearsal, where to record) under ``verl_ctx_binding``. The line binds the mapping in place exactly as a
bound runner's mapping is bound: every context checked to have a slot, the recipe's ``--worker`` classes put in, each
worker class made to carry its roles' contexts; in a rehearsal, the engine boundaries put in and the pools made CPU
pools.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from ..._driver.modules import import_modules
from ..._wire.envelope import RESERVED_KEY, from_text, to_text
from ...errors import LaunchError
from ._binding import WORKER_CLASS_ROLES, actor_class, bind_role_worker_mapping, check_delivery, resolve_worker_classes

__all__ = ["BIND_LINE", "PLAN_KEY", "bind_workers", "calls_bind_workers", "code_names", "plan_in_config"]

#: The top-level config key holding the launch's plan for ``bind_workers`` (``--worker`` classes, rehearsal).
PLAN_KEY = "verl_ctx_binding"

#: What a refusal tells a recipe author to add (docs/recipes.md, "Runners of any shape").
BIND_LINE = (
    "from verl_ctx.integrations.verl import bind_workers\n"
    "    bind_workers(role_worker_mapping, config, resource_pool_manager)"
)


def plan_in_config(
    config: Any,
    envelopes: Mapping[str, Mapping[str, Any]],
    *,
    workers: Mapping[str, str] | None = None,
    imports: Sequence[str] = (),
    rehearsal: Mapping[str, Any] | None = None,
) -> None:
    """Write the worker roles' envelopes and the plan into ``config`` (in place), for ``bind_workers`` to read:
    the ``--worker`` classes, the modules to import in the runner's process (``-s``, ``--import``), and in a
    rehearsal where to record."""
    from omegaconf import open_dict

    with open_dict(config):
        if config.get(RESERVED_KEY) is None:
            config[RESERVED_KEY] = {}
        for role in sorted(envelopes):
            if role in WORKER_CLASS_ROLES:
                config[RESERVED_KEY][role] = to_text(envelopes[role])
        config[PLAN_KEY] = {
            "workers": dict(workers or {}),
            "imports": list(imports),
            "rehearsal_dir": (rehearsal or {}).get("dir"),
        }


def bind_workers(
    role_worker_mapping: MutableMapping[Any, Any], config: Any, resource_pool_manager: Any = None
) -> MutableMapping[Any, Any]:
    """Bind a TaskRunner's ``role_worker_mapping`` to the launch's contexts, in place; returns it.

    Call it in the runner's code (any shape: a plain ``ray.remote`` class, a ``ray.remote`` function, a class the
    recipe makes remote itself), after the mapping and the ``ResourcePoolManager`` are built and before the trainer
    starts a worker. ``config`` is the Hydra config the runner got. Raises ``LaunchError`` when the run was not
    launched by ``verl-ctx run`` (the config has no contexts to bind) or a context has no slot in the mapping.
    """
    plan = config.get(PLAN_KEY)
    if plan is None:
        raise LaunchError(
            "bind_workers: this config carries no contexts (no verl_ctx_binding key): the run was not launched by "
            "verl-ctx, so the workers would start without the contexts they decode. Launch it with `verl-ctx run -s "
            "SCHEMAS -m ENTRY_MODULE <the script's arguments>`",
            cause="no verl-ctx plan in the config",
            key=PLAN_KEY,
        )
    # What a bound runner imports before verl looks anything up (_runners): the schemas and --import modules.
    import_modules([str(m) for m in plan.get("imports") or ()], what="module given to verl-ctx run")
    slot = config.get(RESERVED_KEY) or {}
    envelopes = {str(role): from_text(str(text)) for role, text in slot.items() if role in WORKER_CLASS_ROLES}
    specs = {str(k): str(v) for k, v in (plan.get("workers") or {}).items()}
    check_delivery(role_worker_mapping, envelopes, specs, config)
    bind_role_worker_mapping(role_worker_mapping, envelopes, workers=resolve_worker_classes(specs))
    directory = plan.get("rehearsal_dir")
    if directory:
        _rehearse(role_worker_mapping, config, resource_pool_manager, str(directory))
    return role_worker_mapping


def _rehearse(mapping: MutableMapping[Any, Any], config: Any, manager: Any, directory: str) -> None:
    from ._rehearsal import cpu_pools, record_config_roles, rehearse_mapping

    if manager is None:
        raise LaunchError(
            "bind_workers in a rehearsal needs the runner's ResourcePoolManager (its pools are made CPU pools): "
            "bind_workers(role_worker_mapping, config, resource_pool_manager)",
            cause="no resource pool manager",
            key=None,
        )
    rehearse_mapping(mapping, directory)
    record_config_roles(config, directory, "TaskRunner (the config the reward manager gets)")
    cpu_pools(manager)


def calls_bind_workers(runner: object) -> bool:
    """Whether a runner's code (a class's methods, or a function) refers to ``bind_workers``: bound by that line."""
    plain = getattr(runner, "_function", None) or actor_class(runner)
    functions: list[Any] = []
    if isinstance(plain, type):
        for klass in plain.__mro__:
            # Ray wraps an actor class's methods in its tracing wrappers (functools.wraps): the recipe's code is inside.
            functions += [inspect.unwrap(v) for v in vars(klass).values() if isinstance(v, types.FunctionType)]
    elif isinstance(plain, types.FunctionType):
        functions.append(plain)
    return any("bind_workers" in code_names(f.__code__) for f in functions)


def code_names(code: types.CodeType) -> set[str]:
    """Global and attribute names a function's code (nested functions and classes included) refers to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names
