"""A launch rehearsed on CPU, up to the model engine: ``verl-ctx run --rehearse``.

Everything ``verl-ctx run`` does happens for real — the config is composed and checked by verl, Ray starts
as ``run_ppo`` starts it, verl's TaskRunner and trainer classes run, the recipe's worker classes are bound and
constructed in Ray worker processes with the ``TrainingWorkerConfig`` verl builds — until the point where a
``TrainingWorker`` would start a process group and load weights. There, ``EngineBoundary`` takes over:

* each ``TrainingWorker`` class (the recipe's critic, the hybrid worker's actor and ref) gets
  ``EngineBoundary`` inserted between it and ``TrainingWorker`` (``type(name, (Bound, EngineBoundary), {})``;
  C3 puts it right after the recipe's class), so the recipe's ``__init__`` runs, decodes its context, and its
  ``super().__init__(config)`` records what the worker holds instead of building an engine;
* the hybrid worker's ``init_model`` runs verl's own code up to the inner workers, records the outer worker,
  and the last worker group to start ends the rehearsal with ``RehearsalComplete``;
* resource pools ask Ray for CPUs, one process per pool (``create_resource_pool`` hard-codes GPUs).

The trainer still reads the tokenizer and model config at ``actor_rollout_ref.model.path`` and the data files:
point them at small local copies (``verl_ctx.testing.tiny_model`` / ``tiny_dataset``) on a machine without them.
Records are JSON files in one directory, so a rehearsal runs on one machine.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.single_controller.ray import RayResourcePool
from verl.trainer.ppo.ray_trainer import ResourcePoolManager
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from ..._model.registry import default_registry
from ..._model.role_context import RoleContext
from ..._wire.sources import ENVELOPES_ATTR

__all__ = [
    "CpuResourcePoolManager",
    "EngineBoundary",
    "RehearsalComplete",
    "cpu_pools",
    "record_config_roles",
    "rehearsal_pool_manager",
    "rehearse_mapping",
]


class RehearsalComplete(Exception):
    """Raised by the last worker group to start: every role's worker was built; the rehearsal is over."""


class _InnerWorkerBuilt(Exception):
    """Ends ``init_model`` right after its last inner worker, before the rollout engine would start."""


def _write(directory: str, record: dict[str, Any]) -> None:
    path = Path(directory) / f"{record['role']}.{os.getpid()}.json"
    path.write_text(json.dumps(record, indent=2, default=str))


def _held_contexts(obj: object) -> dict[str, str]:
    """``repr`` of every typed context the recipe's code stored on ``obj`` (what it decoded)."""
    return {name: repr(value) for name, value in vars(obj).items() if isinstance(value, RoleContext)}


def _held_roles(obj: object) -> list[str]:
    """The roles of the typed contexts the recipe's code stored on ``obj``."""
    held = {role for value in vars(obj).values() if isinstance(value, RoleContext) for role in value.__verl_ctx_roles__}
    return sorted(held)


#: Set on every class a rehearsal made, so a class is probed once however often its mapping is sealed.
PROBE_ATTR = "__verl_ctx_probe__"


def _recipe_class(cls: type) -> str:
    """The first class in the MRO that is neither made by verl-ctx nor verl's own: the recipe's; else verl's."""
    for klass in cls.__mro__:
        if ENVELOPES_ATTR in vars(klass) or PROBE_ATTR in vars(klass) or klass.__module__ == "builtins":
            continue
        if klass.__module__.startswith(("verl_ctx.", "verl.")):
            continue
        return f"{klass.__module__}.{klass.__qualname__}"
    verl_own = next(k for k in cls.__mro__ if k.__module__.startswith("verl.") and PROBE_ATTR not in vars(k))
    return f"{verl_own.__module__}.{verl_own.__qualname__} (verl's own)"


class EngineBoundary(TrainingWorker):
    """Stands where ``TrainingWorker.__init__`` would start a process group and an engine; records instead."""

    _rehearsal_role = "?"
    _rehearsal_dir = ""
    _rehearsal_last = False

    def __init__(self, config: Any) -> None:
        Worker.__init__(self)
        self.config = config
        self._register_dispatch_collect_info(mesh_name="train", dp_rank=self.rank, is_collect=True)
        extra = getattr(config, "extra_context", None) or {}
        _write(
            self._rehearsal_dir,
            {
                "role": self._rehearsal_role,
                "worker": _recipe_class(type(self)),
                "pid": os.getpid(),
                "node": socket.gethostname(),
                "config": type(config).__qualname__,
                "contexts_delivered": sorted(extra.get("verl_ctx", {})),
                "decoded": _held_contexts(self),
                "decoded_roles": _held_roles(self),
            },
        )
        if self._rehearsal_last:
            raise _InnerWorkerBuilt(self._rehearsal_role)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def reset(self) -> None:
        """No engine to reset."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def set_loss_fn(self, loss_fn: Any) -> None:
        self.loss_fn = loss_fn


def _probe(cls: type, role: str, directory: str, *, last: bool) -> type:
    attrs = {
        "_rehearsal_role": role,
        "_rehearsal_dir": directory,
        "_rehearsal_last": last,
        "__module__": cls.__module__,
        PROBE_ATTR: True,
    }
    # C3 puts EngineBoundary right after cls's own classes, before TrainingWorker (verl's class itself: alone).
    bases = (EngineBoundary,) if cls is TrainingWorker else (cls, EngineBoundary)
    probe = type(cls.__name__, bases, attrs)
    probe.__qualname__ = f"rehearsal.<locals>.{cls.__qualname__}"
    return probe


def _probe_hybrid(cls: Any, verl_role: str, directory: str, *, ends: bool) -> type:
    """The hybrid worker with probed inner workers; ``init_model`` stops after them (and ends the run if last)."""

    @functools.wraps(ActorRolloutRefWorker.init_model)  # keeps verl's @register dispatch information
    def init_model(self: Any) -> None:
        # This function is pickled by value (its class is made at run time): it refers to no module global, only
        # to the module-level helper below, which is pickled by reference.
        with contextlib.suppress(_InnerWorkerBuilt):
            super(probe, self).init_model()
        _outer_built(self, verl_role, directory, ends=ends)

    attrs: dict[str, Any] = {"init_model": init_model, "__module__": cls.__module__, PROBE_ATTR: True}
    # The actor is built after the ref, so its boundary ends init_model; a ref-only worker ends at the ref.
    attrs["actor_worker_cls"] = _probe(cls.actor_worker_cls, "actor", directory, last=True)
    attrs["ref_worker_cls"] = _probe(cls.ref_worker_cls, "ref", directory, last=verl_role == "ref")
    probe: Any = type(cls.__name__, (cls,), attrs)
    probe.__qualname__ = f"rehearsal.<locals>.{cls.__qualname__}"
    return probe  # type: ignore[no-any-return]


def _outer_built(worker: Any, verl_role: str, directory: str, *, ends: bool) -> None:
    """Record the hybrid worker once its inner workers exist; end the rehearsal if it is the last group."""
    decoded = _held_contexts(worker)
    rollout = default_registry.get("rollout")
    if "rollout" in worker.role and rollout is not None and not decoded:
        from ..._worker.decode import decode

        decoded["read by verl-ctx from the rollout config"] = repr(decode(worker.config, rollout))
    _write(
        directory,
        {
            "role": f"{verl_role} (outer worker)",
            "worker": _recipe_class(type(worker)),
            "pid": os.getpid(),
            "node": socket.gethostname(),
            "config": type(worker.config).__qualname__,
            "decoded": decoded,
            "decoded_roles": _held_roles(worker),
        },
    )
    if ends:
        raise RehearsalComplete(f"every worker was built; the last was {verl_role} in process {os.getpid()}")


def rehearse_mapping(role_worker_mapping: MutableMapping[Any, Any], directory: str) -> None:
    """Put engine boundaries into every worker class of a bound ``role_worker_mapping`` (in place)."""
    import ray

    roles = {str(r) for r in role_worker_mapping}
    # The last group verl starts: a separate ref worker (after the actor), else the actor-bearing one.
    last = (
        "ref"
        if "ref" in roles
        else next((r for r in ("actor", "actor_rollout_ref", "actor_rollout") if r in roles), "")
    )
    for verl_role, remote_cls in list(role_worker_mapping.items()):
        cls = getattr(remote_cls, "__ray_actor_class__", remote_cls)
        name = str(verl_role)
        if PROBE_ATTR in vars(cls):
            continue
        if issubclass(cls, ActorRolloutRefWorker):
            role_worker_mapping[verl_role] = ray.remote(_probe_hybrid(cls, name, directory, ends=name == last))
        elif issubclass(cls, TrainingWorker):
            role_worker_mapping[verl_role] = ray.remote(_probe(cls, name, directory, last=False))


class CpuResourcePoolManager(ResourcePoolManager):
    """A ``ResourcePoolManager`` whose pools take one CPU process each, no GPU (verl's hard-codes ``use_gpu=True``)."""

    def create_resource_pool(self) -> None:
        for name in self.resource_pool_spec:
            self.resource_pool_dict[name] = RayResourcePool(
                process_on_nodes=[1], use_gpu=False, max_colocate_count=1, name_prefix=name
            )


def rehearsal_pool_manager(manager: Any) -> Any:
    """A ``ResourcePoolManager`` like ``manager`` whose pools take one CPU process each, no GPU."""
    return CpuResourcePoolManager(resource_pool_spec=dict(manager.resource_pool_spec), mapping=dict(manager.mapping))


def cpu_pools(manager: Any) -> None:
    """``manager`` itself made a ``CpuResourcePoolManager`` (a runner's own object, already handed to its trainer).

    Only its class changes (same dataclass fields, one method overridden): safe, and only in a rehearsal.
    """
    if not isinstance(manager, ResourcePoolManager):
        from ...errors import LaunchError

        raise LaunchError(
            f"bind_workers: resource_pool_manager is a {type(manager).__qualname__}, expected verl's "
            "ResourcePoolManager (the one the runner hands its trainer)",
            cause=f"not a ResourcePoolManager: {type(manager).__qualname__}",
            key=None,
        )
    if not isinstance(manager, CpuResourcePoolManager):
        manager.__class__ = CpuResourcePoolManager


def record_config_roles(config: Any, directory: str, where: str) -> None:
    """Record the config-channel roles (reward, custom): the reward context as the recipe's reward function decodes
    it when it is handed one (``_rehearse_reward``), else decoded on behalf of a reward manager, from the config."""
    from ..._worker.decode import decode
    from ._binding import WORKER_CLASS_ROLES
    from ._rehearse_reward import call_reward_function

    slot: Mapping[str, Any] = config.get("verl_ctx") or {}
    for role in sorted(slot):
        schema = default_registry.get(str(role))
        if schema is None or role in WORKER_CLASS_ROLES:
            continue
        record = {"role": str(role), "pid": os.getpid(), "node": socket.gethostname()}
        called = call_reward_function(config, str(role))
        if called is not None and called["decoded_roles"]:
            _write(directory, {**record, **called, "config": "reward_kwargs (verl's reward function loader)"})
            continue
        read = "read by verl-ctx from the Hydra config"
        if called is not None:
            read += f" ({called['worker']} was handed it and did not decode it; it {called['after']})"
        _write(
            directory,
            {
                **record,
                "worker": where,
                "config": type(config).__qualname__,
                "decoded": {read: repr(decode(config, schema))},
            },
        )
