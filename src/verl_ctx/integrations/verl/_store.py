"""Contexts that travel by reference through Ray's object store: the large ones and every one holding a secret.

verl embeds worker init arguments in the actor class definition, and Ray warns past 10**7 bytes and refuses
past 10**8; verl's Hydra config is printed and sent to trackers. So an envelope whose payload is above a
threshold (default 8 MiB), or whose context holds a secret, is kept by a small named actor started on the
driver (``verl_ctx_store_<12 hex>``), and workers and configs carry only a reference::

    {"verl_ctx_remote": 1, "role": "critic", "store": "verl_ctx_store_0123456789ab", "namespace": "<ns>",
     "bytes": 33554432, "actor_id": "<32 hex>"}

``fetch_envelope`` (registered with the core reader for references) turns one back into the envelope inside
the worker. Ray unpickles whatever an actor returns, so it asks nothing of an actor before its identity is
established from Ray's own records (never from what the actor or the reference claims): the actor now holding
the name must be the very actor the reference records (a re-created name is another actor), created by this
Ray job (a reference written by anyone else names an actor of another job), of this module's store class. The
reference's size is checked against the reader's limit before anything is fetched, and the store itself
refuses to send an envelope over that limit (it answers with the size instead). It waits at most
``FETCH_TIMEOUT_S`` and never starts Ray in a process that is not connected to a cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..._envelope import DEFAULT_MAX_BYTES, REF_KEY, check_envelope, check_ref
from ...errors import EnvelopeError, MissingContextError

__all__ = ["DEFAULT_OFFLOAD_BYTES", "FETCH_TIMEOUT_S", "fetch_envelope", "offload"]

DEFAULT_OFFLOAD_BYTES = 8 * 1024 * 1024
#: Seconds a reader waits for its store (a live store answers in milliseconds; a hung one should not hold a
#: worker's start for minutes).
FETCH_TIMEOUT_S = 30.0

# The store actors this process started, kept so they live as long as the driver (a named actor dies with
# its owner's last handle). At most one per launch; a driver launches a handful of runs at most.
_stores: list[Any] = []


class EnvelopeStore:
    """Holds the envelopes of one launch as MessagePack bytes; ``get`` returns one through the object store."""

    def __init__(self) -> None:
        self._envelopes: dict[str, tuple[bytes, int]] = {}

    def put(self, role: str, packed: bytes, payload_bytes: int | None = None) -> int:
        self._envelopes[role] = (packed, len(packed) if payload_bytes is None else payload_bytes)
        return len(packed)

    def get(self, role: str, limit: int | None = None) -> bytes | int | None:
        """The packed envelope of ``role``; only its payload's size when that is over ``limit`` (nothing large
        is sent to a reader that would refuse it)."""
        held = self._envelopes.get(role)
        if held is None:
            return None
        packed, payload_bytes = held
        return payload_bytes if limit is not None and payload_bytes > limit else packed


def offload(
    envelopes: Mapping[str, Mapping[str, Any]],
    *,
    threshold: int = DEFAULT_OFFLOAD_BYTES,
    always: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """``envelopes`` with each one above ``threshold`` payload bytes, or whose role is in ``always``, replaced
    by a store reference. Needs a running Ray (``ray.init`` done) when anything is offloaded."""
    import ray

    forced = set(always)
    moved = {r: e for r, e in envelopes.items() if r in forced or len(e["payload"]) > threshold}
    out = {role: dict(env) for role, env in envelopes.items()}
    if not moved:
        return out
    if not ray.is_initialized():
        raise MissingContextError(
            f"contexts of {', '.join(sorted(moved))} must travel through Ray's object store (large, or holding a "
            "secret), but Ray is not running in this process; call ray.init() first (verl_ctx.integrations.verl."
            "launch does)",
            role=sorted(moved)[0],
        )
    name = f"verl_ctx_store_{uuid.uuid4().hex[:12]}"
    namespace = ray.get_runtime_context().namespace
    store_cls: Any = ray.remote(num_cpus=0)(EnvelopeStore)
    store = store_cls.options(name=name).remote()
    _stores.append(store)
    ray.get(
        [store.put.remote(role, msgspec.msgpack.encode(dict(env)), len(env["payload"])) for role, env in moved.items()]
    )
    actor_id = store._actor_id.hex()
    for role, env in moved.items():
        out[role] = {
            REF_KEY: 1,
            "role": role,
            "store": name,
            "namespace": namespace,
            "bytes": len(env["payload"]),
            "actor_id": actor_id,
        }
    return out


def fetch_envelope(ref: dict[str, Any], *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The envelope a checked reference names, fetched from its store (the reader's resolver for format 1)."""
    import ray

    ref = check_ref(ref)
    role, name, namespace = ref["role"], ref["store"], ref["namespace"]
    if ref["bytes"] > max_bytes:
        raise EnvelopeError(
            f"[{role}] the context in store '{name}' is {ref['bytes']} bytes, over the {max_bytes}-byte limit; "
            "raise max_bytes= if this size is intended"
        )
    if not ray.is_initialized():
        raise MissingContextError(
            f"[{role}] the context was sent by reference through Ray's object store, but this process is not "
            "connected to Ray: read it inside a Ray worker (or after ray.init(address=...) on the cluster)",
            role=role,
        )
    try:
        store = ray.get_actor(name, namespace=namespace)
    except ValueError:
        raise MissingContextError(
            f"[{role}] the context was sent by reference through store actor '{name}' in namespace "
            f"'{namespace}', which no longer exists: it lives as long as the driver that launched the run "
            "(or until it was killed). Relaunch the run",
            role=role,
        ) from None
    _check_identity(store, ref)
    try:
        packed = ray.get(store.get.remote(role, max_bytes), timeout=FETCH_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        raise MissingContextError(
            f"[{role}] store '{name}' did not answer within {FETCH_TIMEOUT_S:.0f} s", role=role
        ) from None
    except ray.exceptions.RayActorError:
        raise MissingContextError(
            f"[{role}] store actor '{name}' died before it answered (killed, or its node was lost); relaunch the run",
            role=role,
        ) from None
    if packed is None:
        raise MissingContextError(f"[{role}] store '{name}' holds no context for this role", role=role)
    if type(packed) is int:
        raise EnvelopeError(
            f"[{role}] the context in store '{name}' is {packed} bytes, over the {max_bytes}-byte limit "
            "(not fetched); raise max_bytes= if this size is intended"
        )
    if type(packed) is not bytes:
        raise EnvelopeError(f"[{role}] store '{name}' answered with {type(packed).__name__}, not envelope bytes")
    try:
        env = msgspec.msgpack.decode(packed)
    except (msgspec.DecodeError, ValueError, RecursionError) as e:
        raise EnvelopeError(f"[{role}] store '{name}' answered with a corrupt envelope: {e}") from None
    env = check_envelope(env)
    if env["role"] != role:
        raise EnvelopeError(f"[{role}] store '{name}' answered with the envelope of role '{env['role']}'")
    return env


def _check_identity(store: Any, ref: dict[str, Any]) -> None:
    """Refuse, before anything is asked of it, an actor that is not the store this job created for ``ref``.

    Every fact checked comes from Ray's records of the actor (its id, the job that id belongs to, the class
    its creator registered); nothing comes from the actor itself, which is never called here.
    """
    import ray

    role, name = ref["role"], ref["store"]
    actor_id = store._actor_id
    if actor_id.hex() != ref["actor_id"]:
        raise EnvelopeError(
            f"[{role}] actor '{name}' is not the store the reference records (actor {ref['actor_id']}, found "
            f"{actor_id.hex()}): the name was taken by another actor after the store was gone; refusing to contact "
            "it. Relaunch the run"
        )
    job, ours = actor_id.job_id.hex(), ray.get_runtime_context().get_job_id()
    if job != ours:
        raise EnvelopeError(
            f"[{role}] actor '{name}' was created by Ray job {job}, not by this job ({ours}): only a store this "
            "job's driver started is trusted; refusing to contact it. Launch the run with verl-ctx (or "
            "verl_ctx.integrations.verl.offload in the driver of this job)"
        )
    descriptor = getattr(store, "_ray_actor_creation_function_descriptor", None)
    made_by = (getattr(descriptor, "module_name", None), getattr(descriptor, "class_name", None))
    if made_by != (__name__, EnvelopeStore.__name__):
        raise EnvelopeError(f"[{role}] actor '{name}' is not a verl-ctx store (it is {made_by[0]}.{made_by[1]})")
