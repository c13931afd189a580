"""Contexts that travel by reference through Ray's object store: the large ones and every one holding a secret.

verl embeds worker init arguments in the actor class definition, and Ray warns past 10**7 bytes and refuses
past 10**8; verl's Hydra config is printed and sent to trackers. So an envelope whose payload is above a
threshold (default 8 MiB), or whose context holds a secret, is kept by a small named actor started on the
driver (``verl_ctx_store_<12 hex>``), and workers and configs carry only a reference::

    {"verl_ctx_remote": 1, "role": "critic", "store": "verl_ctx_store_0123456789ab", "namespace": "<ns>",
     "bytes": 33554432}

``fetch_envelope`` (registered with the core reader for references) turns one back into the envelope inside
the worker. It contacts only an actor of this module's store class whose name follows that scheme, expects
MessagePack bytes back (checked by type before decoding), waits at most ``FETCH_TIMEOUT_S``, and never starts
Ray in a process that is not connected to a cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..._envelope import REF_KEY, check_envelope, check_ref
from ...errors import EnvelopeError, MissingContextError

__all__ = ["DEFAULT_OFFLOAD_BYTES", "FETCH_TIMEOUT_S", "fetch_envelope", "offload"]

DEFAULT_OFFLOAD_BYTES = 8 * 1024 * 1024
FETCH_TIMEOUT_S = 300.0

# The store actors this process started, kept so they live as long as the driver (a named actor dies with
# its owner's last handle). At most one per launch; a driver launches a handful of runs at most.
_stores: list[Any] = []


class EnvelopeStore:
    """Holds the envelopes of one launch as MessagePack bytes; ``get`` returns one through the object store."""

    def __init__(self) -> None:
        self._envelopes: dict[str, bytes] = {}

    def put(self, role: str, packed: bytes) -> int:
        self._envelopes[role] = packed
        return len(packed)

    def get(self, role: str) -> bytes | None:
        return self._envelopes.get(role)


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
    ray.get([store.put.remote(role, msgspec.msgpack.encode(dict(env))) for role, env in moved.items()])
    for role, env in moved.items():
        out[role] = {REF_KEY: 1, "role": role, "store": name, "namespace": namespace, "bytes": len(env["payload"])}
    return out


def fetch_envelope(ref: dict[str, Any]) -> dict[str, Any]:
    """The envelope a checked reference names, fetched from its store (the reader's resolver for format 1)."""
    import ray

    ref = check_ref(ref)
    role, name, namespace = ref["role"], ref["store"], ref["namespace"]
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
    # Only our own store class: Ray unpickles whatever an actor returns, so never call an impostor.
    descriptor = getattr(store, "_ray_actor_creation_function_descriptor", None)
    made_by = (getattr(descriptor, "module_name", None), getattr(descriptor, "class_name", None))
    if made_by != (__name__, EnvelopeStore.__name__):
        raise EnvelopeError(f"[{role}] actor '{name}' is not a verl-ctx store (it is {made_by[0]}.{made_by[1]})")
    try:
        packed = ray.get(store.get.remote(role), timeout=FETCH_TIMEOUT_S)
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
