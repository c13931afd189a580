"""Worker classes that carry their roles' envelopes, made at run time (no monkey-patching of verl).

Ray pickles an importable class by reference, so a class attribute set on one at run time never reaches a
worker. A class *created* at run time is pickled by value, with its attributes: that is how the envelopes
(plain types only) travel inside the actor definition verl builds with ``create_colocated_worker_cls``.

* a ``TrainingWorker`` subclass (critic; the actor's and ref's inner workers) gets a constructor that adds
  its role's envelope to ``config.extra_context["verl_ctx"]`` before verl's constructor runs;
* an ``ActorRolloutRefWorker`` subclass gets bound ``actor_worker_cls`` / ``ref_worker_cls`` (verl's own
  override points, used at ``engine_workers.py:587/644``), so the ``TrainingWorkerConfig`` that
  ``init_model`` builds inside the worker carries the actor's or ref's envelope;
* any other ``Worker`` subclass just carries its envelopes; ``worker_context(self, Schema)`` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, TypeVar

from ..._decode import decode
from ..._envelope import RESERVED_KEY, attach
from ..._errors import MissingContextError
from ..._schema import RoleContext, schema_info
from ._store import resolve

__all__ = [
    "ENVELOPES_ATTR",
    "HOSTED_ROLES",
    "WORKER_CLASS_ROLES",
    "bind_role_worker_mapping",
    "bind_worker_cls",
    "bound_envelopes",
    "worker_context",
]

_C = TypeVar("_C", bound=RoleContext)

ENVELOPES_ATTR = "__verl_ctx_envelopes__"

#: Roles whose context rides in a worker class; the others go through the Hydra config (_config_channel).
WORKER_CLASS_ROLES = frozenset({"actor", "ref", "critic"})

#: verl ``Role`` (by its string form) -> the context roles a worker of that Role hosts.
HOSTED_ROLES: dict[str, tuple[str, ...]] = {
    "actor": ("actor",),
    "rollout": ("rollout",),
    "actor_rollout": ("actor", "rollout"),
    "actor_rollout_ref": ("actor", "rollout", "ref"),
    "ref": ("ref",),
    "critic": ("critic",),
}


class _InjectsExtraContext:
    """Mixin for TrainingWorker classes: put this class's envelopes into ``config.extra_context`` first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        config = kwargs["config"] if "config" in kwargs else (args[0] if args else None)
        extra = getattr(config, "extra_context", None)
        if isinstance(extra, MutableMapping):
            attach(extra, *(resolve(env) for env in bound_envelopes(type(self)).values()))
        super().__init__(*args, **kwargs)


def bound_envelopes(cls: type) -> dict[str, dict[str, Any]]:
    """The envelopes a bound worker class carries, by role (empty for an unbound class)."""
    found = getattr(cls, ENVELOPES_ATTR, None)
    return dict(found) if isinstance(found, Mapping) else {}


def bind_worker_cls(worker_cls: type, envelopes: Mapping[str, Mapping[str, Any]]) -> type:
    """A subclass of ``worker_cls`` carrying ``envelopes`` (role -> envelope), made for the roles it hosts."""
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    envs = {role: dict(env) for role, env in envelopes.items()}
    namespace: dict[str, Any] = {ENVELOPES_ATTR: envs, "__module__": worker_cls.__module__}
    bases: tuple[type, ...] = (worker_cls,)
    if issubclass(worker_cls, TrainingWorker) and not issubclass(worker_cls, _InjectsExtraContext):
        bases = (_InjectsExtraContext, worker_cls)
    elif issubclass(worker_cls, ActorRolloutRefWorker):
        for role, attr in (("actor", "actor_worker_cls"), ("ref", "ref_worker_cls")):
            if role in envs:
                namespace[attr] = bind_worker_cls(getattr(worker_cls, attr), {role: envs[role]})
    bound = type(worker_cls.__name__, bases, namespace)
    # A qualname with <locals> makes cloudpickle send the class by value, envelopes included.
    bound.__qualname__ = f"bind_worker_cls.<locals>.{worker_cls.__qualname__}"
    return bound


def bind_role_worker_mapping(
    role_worker_mapping: MutableMapping[Any, Any], envelopes: Mapping[str, Mapping[str, Any]]
) -> MutableMapping[Any, Any]:
    """Replace each worker class in verl's ``role_worker_mapping`` with one bound to its roles' envelopes.

    Each worker gets only the envelopes of the roles it hosts (``HOSTED_ROLES``); the mapping is changed in
    place and returned. Entries are ``ray.remote`` classes, as verl's TaskRunners and trainers make them.
    """
    import ray

    for verl_role, remote_cls in list(role_worker_mapping.items()):
        hosted = HOSTED_ROLES.get(str(verl_role), ())
        envs = {role: envelopes[role] for role in hosted if role in envelopes}
        if not envs:
            continue
        worker_cls = getattr(remote_cls, "__ray_actor_class__", remote_cls)
        if ENVELOPES_ATTR in vars(worker_cls):
            continue  # bound already (a TaskRunner binds after each registration step)
        role_worker_mapping[verl_role] = ray.remote(bind_worker_cls(worker_cls, envs))
    return role_worker_mapping


def worker_context(worker: object, schema: type[_C], *, role: str | None = None) -> _C:
    """The typed context of ``schema``'s role, from inside a verl worker.

    Works in a ``TrainingWorker`` subclass (reads ``self.config.extra_context``) and in an
    ``ActorRolloutRefWorker`` or any other bound worker (reads the envelopes its class carries).
    """
    config = getattr(worker, "config", None)
    extra = getattr(config, "extra_context", None)
    if isinstance(extra, Mapping) and RESERVED_KEY in extra:
        return decode(extra, schema, role=role)
    envs = bound_envelopes(type(worker))
    if not envs:
        raise MissingContextError(
            f"{type(worker).__qualname__} carries no verl-ctx contexts: its class was not bound. Launch with "
            "`verl-ctx run`, or bind your role_worker_mapping with bind_role_worker_mapping(...)",
            role=role or "?",
        )
    wanted = (role,) if role is not None else schema_info(schema).roles
    # Fetch only this role's envelope: another role's may be a large one held in the object store.
    return decode({RESERVED_KEY: {r: resolve(e) for r, e in envs.items() if r in wanted}}, schema, role=role)
