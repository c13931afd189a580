"""Classes that carry envelopes, made at run time (no monkey-patching of verl); and the recipe's own workers.

Ray pickles an importable class by reference, so a class attribute set on one at run time never reaches a
worker. A class *created* at run time is pickled by value, with its attributes: that is how envelopes (plain
types, or store references) travel inside the actor definitions verl builds. ``carrying`` is that one
mechanism; worker classes, trainers and TaskRunners all use it:

* a ``TrainingWorker`` subclass (critic; the actor's and ref's inner workers) gets a constructor that adds
  its role's envelope to ``config.extra_context["verl_ctx"]`` before the class's own constructor runs;
* an ``ActorRolloutRefWorker`` subclass gets bound ``actor_worker_cls`` / ``ref_worker_cls`` (verl's own
  override points, read by ``ActorRolloutRefWorker.init_model``), so the ``TrainingWorkerConfig`` built
  inside the worker carries the actor's or ref's envelope;
* any other class just carries its envelopes; ``decode(self, Schema)`` reads them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any

from ..._wire.envelope import attach
from ..._wire.sources import ENVELOPES_ATTR
from ...errors import ConfigError, LaunchError

__all__ = [
    "actor_class",
    "HOSTED_ROLES",
    "WORKER_CLASS_ROLES",
    "bind_role_worker_mapping",
    "bind_worker_cls",
    "bound_envelopes",
    "carrying",
    "check_delivery",
    "is_bound",
    "resolve_worker_classes",
    "slot_name",
]

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

#: The inner workers of verl's ActorRolloutRefWorker that a recipe may replace, by context role.
INNER_WORKER_ATTRS = {"actor": "actor_worker_cls", "ref": "ref_worker_cls"}

#: The hybrid worker's two slots: a runner registers ``actor_rollout`` when no reference policy runs (or the actor
#: computes reference log-probs itself), ``actor_rollout_ref`` otherwise; a recipe's hybrid worker serves either.
HYBRID_SLOTS = ("actor_rollout_ref", "actor_rollout")

#: verl's ``Role`` member names, as a recipe may spell a slot (``Role.ActorRolloutRef``).
_ROLE_NAMES = {
    "Actor": "actor",
    "Rollout": "rollout",
    "ActorRollout": "actor_rollout",
    "ActorRolloutRef": "actor_rollout_ref",
    "RefPolicy": "ref",
    "Critic": "critic",
}

#: What each slot's worker class must derive from (verl's engine workers), by the slot.
_SLOT_BASES: dict[str, tuple[str, ...]] = {
    "critic": ("TrainingWorker",),
    "actor": ("TrainingWorker", "ActorRolloutRefWorker"),  # the hybrid worker's inner one, or a separate role
    "ref": ("TrainingWorker", "ActorRolloutRefWorker"),
    "actor_rollout": ("ActorRolloutRefWorker",),
    "actor_rollout_ref": ("ActorRolloutRefWorker",),
    "rollout": ("ActorRolloutRefWorker",),
}


#: The registered slots a ``--worker`` slot's class can serve: a hybrid worker either hybrid slot; an inner actor
#: worker the hybrid one (or a separate actor role); an inner ref worker only a hybrid one that hosts the ref.
_SERVED_BY: dict[str, tuple[str, ...]] = {
    "actor_rollout_ref": HYBRID_SLOTS,
    "actor_rollout": HYBRID_SLOTS,
    "actor": ("actor", *HYBRID_SLOTS),
    "ref": ("ref", "actor_rollout_ref"),
}


def slot_name(slot: object) -> str:
    """A slot as ``role_worker_mapping`` keys print it: ``Role.ActorRolloutRef`` or ``ActorRolloutRef`` -> its value."""
    text = str(slot).removeprefix("Role.")
    return _ROLE_NAMES.get(text, text)


def _chosen(workers: Mapping[str, Any], slot: str) -> Any:
    """The recipe's worker for a registered slot; a hybrid worker given for either hybrid slot serves both."""
    if slot in workers:
        return workers[slot]
    if slot in HYBRID_SLOTS:
        return next((workers[s] for s in HYBRID_SLOTS if s in workers), None)
    return None


def carrying(
    cls: type, envelopes: Mapping[str, Mapping[str, Any]], *, mixins: tuple[type, ...] = (), **attrs: Any
) -> type:
    """A subclass of ``cls`` made now, carrying ``envelopes``; Ray and cloudpickle send it by value.

    It keeps ``cls``'s name and module (verl and logs show the recipe's class), and gets a ``<locals>``
    qualname, which is what makes cloudpickle copy the class instead of importing it by name.
    """
    namespace = {ENVELOPES_ATTR: {r: dict(e) for r, e in envelopes.items()}, "__module__": cls.__module__, **attrs}
    made = type(cls.__name__, (*mixins, cls), namespace)
    made.__qualname__ = f"carrying.<locals>.{cls.__qualname__}"
    return made


def is_bound(cls: type) -> bool:
    """Whether ``cls`` is, or derives from, a class ``carrying`` made (a rehearsal's probe of one included)."""
    return any(ENVELOPES_ATTR in vars(k) for k in cls.__mro__)


def bound_envelopes(cls: type) -> dict[str, dict[str, Any]]:
    """The envelopes a class made by ``carrying`` holds, by role (empty for any other class)."""
    found = getattr(cls, ENVELOPES_ATTR, None)
    return dict(found) if isinstance(found, Mapping) else {}


class _InjectsExtraContext:
    """Mixin for TrainingWorker classes: put this class's envelopes into ``config.extra_context`` first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        config = kwargs["config"] if "config" in kwargs else (args[0] if args else None)
        extra = getattr(config, "extra_context", None)
        if isinstance(extra, MutableMapping):
            attach(extra, *bound_envelopes(type(self)).values())  # references stay references: read lazily
        super().__init__(*args, **kwargs)


def bind_worker_cls(
    worker_cls: type, envelopes: Mapping[str, Mapping[str, Any]], *, inner: Mapping[str, type] | None = None
) -> type:
    """A subclass of ``worker_cls`` carrying ``envelopes`` (role -> envelope), made for the roles it hosts.

    For an ``ActorRolloutRefWorker``, ``inner`` gives the recipe's ``TrainingWorker`` subclass for ``"actor"``
    and ``"ref"`` (default: the class's own ``actor_worker_cls`` / ``ref_worker_cls``).
    """
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    attrs: dict[str, Any] = {}
    mixins: tuple[type, ...] = ()
    if issubclass(worker_cls, TrainingWorker) and not issubclass(worker_cls, _InjectsExtraContext):
        mixins = (_InjectsExtraContext,)
    elif issubclass(worker_cls, ActorRolloutRefWorker):
        for role, attr in INNER_WORKER_ATTRS.items():
            cls = (inner or {}).get(role) or getattr(worker_cls, attr)
            attrs[attr] = bind_worker_cls(cls, {role: envelopes[role]}) if role in envelopes else cls
    return carrying(worker_cls, envelopes, mixins=mixins, **attrs)


def bind_role_worker_mapping(
    role_worker_mapping: MutableMapping[Any, Any],
    envelopes: Mapping[str, Mapping[str, Any]],
    *,
    workers: Mapping[str, type] | None = None,
) -> MutableMapping[Any, Any]:
    """Put the recipe's ``workers`` into verl's ``role_worker_mapping``, then bind each class to its envelopes.

    ``workers`` maps a verl Role (``"critic"``, ``"actor_rollout_ref"``, ...) to the recipe's worker class for
    it; a ``TrainingWorker`` subclass given for ``"actor"`` or ``"ref"`` becomes the hybrid worker's
    ``actor_worker_cls`` / ``ref_worker_cls``. Each worker gets only the envelopes of the roles it hosts
    (``HOSTED_ROLES``); the mapping is changed in place and returned. Entries are ``ray.remote`` classes, as
    verl's TaskRunners and trainers make them.
    """
    import ray
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    workers = {slot_name(s): c for s, c in (workers or {}).items()}
    inner = {r: c for r, c in workers.items() if r in INNER_WORKER_ATTRS and issubclass(c, TrainingWorker)}
    for verl_role, remote_cls in list(role_worker_mapping.items()):
        worker_cls = getattr(remote_cls, "__ray_actor_class__", remote_cls)
        if is_bound(worker_cls):
            continue  # bound already (or a rehearsal's probe of a bound class): registered again, or re-read
        slot = slot_name(verl_role)
        chosen = _chosen(workers, slot)
        if chosen is not None and chosen is not inner.get(slot):
            worker_cls = chosen
        hosted = HOSTED_ROLES.get(slot, ())
        envs = {role: envelopes[role] for role in hosted if role in envelopes}
        if envs or chosen is not None or (inner and issubclass(worker_cls, ActorRolloutRefWorker)):
            role_worker_mapping[verl_role] = ray.remote(bind_worker_cls(worker_cls, envs, inner=inner))
    return role_worker_mapping


def check_delivery(
    role_worker_mapping: Mapping[Any, Any], envelopes: Mapping[str, Any], workers: Mapping[str, Any], config: Any
) -> None:
    """Refuse a launch where a context or a recipe worker would go unused: after the runner registered its roles,
    before any worker starts.

    Every context of a role this run starts (verl's rules, ``inactive_roles``) must ride in a slot the runner
    registered, and every ``--worker`` slot must be one it registered (either hybrid slot serves a hybrid worker).
    """
    from ..._driver.roles import inactive_roles

    registered = sorted({slot_name(r) for r in role_worker_mapping})
    inactive = inactive_roles(config, list(envelopes)) if config is not None else {}
    problems = []
    for role in sorted(envelopes):
        if role not in inactive and not any(role in HOSTED_ROLES.get(slot, ()) for slot in registered):
            problems.append(f"the {role} context has no slot to ride in: no registered slot hosts the {role} role")
    for slot in sorted(slot_name(s) for s in workers):
        if not set(_SERVED_BY.get(slot, (slot,))) & set(registered):
            problems.append(f"the recipe's worker for {slot} has no slot: the runner registered no {slot}")
    if problems:
        raise LaunchError(
            "contexts or recipe workers would go unused, so nothing was started: "
            + "; ".join(problems)
            + f". The runner registered: {', '.join(registered) or 'nothing'}. Give --worker for a registered slot, "
            "or register the role in the runner (verl's BaseTaskRunner.add_* methods)",
            cause="unbound " + ", ".join(problems),
            key=None,
        )


def resolve_worker_classes(specs: Mapping[str, str]) -> dict[str, type]:
    """``{"critic": "my_recipe.workers:CriticWorker"}`` -> the classes, checked against what each slot takes."""
    if not specs:
        return {}  # verl's worker module imports torch: not for a launch that names no recipe worker
    from verl.workers import engine_workers

    out: dict[str, type] = {}
    for given, spec in specs.items():
        slot = slot_name(given)
        if slot not in HOSTED_ROLES:
            raise ConfigError(
                f"--worker {slot}=...: unknown slot; use one of {', '.join(sorted(HOSTED_ROLES))} (verl's roles)"
            )
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"--worker {slot}={spec}: expected MODULE:CLASS, e.g. my_recipe.workers:CriticWorker")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except ImportError as e:
            raise ConfigError(f"--worker {slot}={spec}: cannot import {module_name}: {e}") from None
        except AttributeError:
            raise ConfigError(f"--worker {slot}={spec}: {module_name} has no {attr}") from None
        bases = _SLOT_BASES[slot]
        if not (isinstance(obj, type) and issubclass(obj, tuple(getattr(engine_workers, b) for b in bases))):
            raise ConfigError(
                f"--worker {slot}={spec}: the {slot} slot runs a subclass of verl's "
                + " or ".join(f"verl.workers.engine_workers.{b}" for b in bases)
                + f"; {attr} is {_worker_kind(obj, engine_workers)}"
                + (
                    ". A TrainingWorker for the hybrid worker's actor or ref goes in --worker actor=... / ref=..."
                    if bases == ("ActorRolloutRefWorker",)
                    else ""
                )
            )
        out[slot] = obj
    return out


def _worker_kind(obj: object, engine_workers: Any) -> str:
    """What a ``--worker`` class is, in the words of the slots (for the error that refuses it)."""
    if not isinstance(obj, type):
        return f"not a class ({type(obj).__name__})"
    for name in ("TrainingWorker", "ActorRolloutRefWorker"):
        if issubclass(obj, getattr(engine_workers, name)):
            return f"a {name}"
    return "neither a TrainingWorker nor an ActorRolloutRefWorker"


def actor_class(remote: Any) -> Any:
    """The class a Ray actor class (``@ray.remote class ...``) runs; anything else as it is.

    That is Ray's ``__ray_actor_class__``, except for a class derived from another actor's class (reward_queue's
    ``@ray.remote class TaskRunner(FullyAsyncTaskRunner.__ray_metadata__.modified_class)``): it inherits the
    attribute, naming its base, and Ray leaves it unmodified, so ``__ray_metadata__.modified_class`` is the class.
    """
    plain = getattr(remote, "__ray_actor_class__", None)
    if plain is None:
        return remote
    modified = getattr(getattr(remote, "__ray_metadata__", None), "modified_class", None)
    if isinstance(modified, type) and "__ray_actor_class__" not in vars(modified):
        return modified
    return plain
