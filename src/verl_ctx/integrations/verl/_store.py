"""Contexts that travel by reference through Ray's object store: the large ones and every one holding a secret.

verl embeds worker init arguments in the actor class definition, and Ray warns past 10**7 bytes and refuses
past 10**8; verl's Hydra config is printed and sent to trackers. So an envelope whose payload is above a
threshold (default 8 MiB), or whose context holds a secret, is kept by a small named actor started on the
driver (``verl_ctx_store_<12 hex>``), and workers and configs carry only a reference::

    {"verl_ctx_remote": 1, "role": "critic", "store": "verl_ctx_store_0123456789ab", "namespace": "<ns>",
     "bytes": 33554432, "actor_id": "<32 hex>"}

``fetch_envelope`` (registered with the core reader for references) turns one back into the envelope inside
the worker. It asks nothing of an actor before its identity is established from Ray's own records (never from
what the actor or the reference claims): the actor now holding the name must be the very actor the reference
records (a re-created name is another actor), created by this Ray job (a reference written by anyone else names an
actor of another job), of this module's store class. Then the reply is read as bytes only: Ray unpickles any other
reply (an object, an exception), so the reader takes it from Ray's object store as Ray holds it and refuses, without
deserializing, whatever is not bytes (``_reply_bytes``); and a reply longer than the reader's limit is refused before
it is copied. The reference's size is checked against that limit before anything is asked, and the store itself
refuses to send an envelope over it (it answers with the size instead). It waits at most ``FETCH_TIMEOUT_S`` and
never starts Ray in a process that is not connected to a cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..._wire.envelope import DEFAULT_MAX_BYTES, REF_KEY, check_envelope, check_ref
from ...errors import EnvelopeError, MissingContextError

__all__ = ["DEFAULT_OFFLOAD_BYTES", "FETCH_TIMEOUT_S", "fetch_envelope", "offload"]

DEFAULT_OFFLOAD_BYTES = 8 * 1024 * 1024
#: Seconds a reader waits for its store (a live store answers in milliseconds; a hung one should not hold a
#: worker's start for minutes).
FETCH_TIMEOUT_S = 30.0

#: The key of a store's answer that a payload is over the reader's limit (its size, not the payload).
TOO_LARGE = "verl_ctx_too_large"
# Bytes an envelope holds besides its payload (role, schema id, fingerprint, field digests): a RAW reply longer than
# the reader's limit plus this is refused before it is copied out of Ray's object store.
_ENVELOPE_OVERHEAD = 1 << 20

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

    def get(self, role: str, limit: int | None = None) -> bytes:
        """The packed envelope of ``role``; ``{TOO_LARGE: size}`` packed when its payload is over ``limit`` (nothing
        large is sent to a reader that would refuse it); empty bytes when the store holds none for ``role``.

        Always bytes: Ray hands a reader bytes as they are (its ``RAW`` objects), anything else through pickle, so a
        reader accepts bytes only and never unpickles a reply (``_raw_reply``)."""
        held = self._envelopes.get(role)
        if held is None:
            return b""
        packed, payload_bytes = held
        if limit is not None and payload_bytes > limit:
            return msgspec.msgpack.encode({TOO_LARGE: payload_bytes})
        return packed


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
        packed = _reply_bytes(store.get.remote(role, max_bytes), role, name, max_bytes)
    except ray.exceptions.GetTimeoutError:
        raise MissingContextError(
            f"[{role}] store '{name}' did not answer within {FETCH_TIMEOUT_S:.0f} s", role=role
        ) from None
    except ray.exceptions.RayActorError:
        raise MissingContextError(
            f"[{role}] store actor '{name}' died before it answered (killed, or its node was lost); relaunch the run",
            role=role,
        ) from None
    if not packed:
        raise MissingContextError(f"[{role}] store '{name}' holds no context for this role", role=role)
    try:
        env = msgspec.msgpack.decode(packed)
    except (msgspec.DecodeError, ValueError, RecursionError) as e:
        raise EnvelopeError(f"[{role}] store '{name}' answered with a corrupt envelope: {e}") from None
    if isinstance(env, dict) and set(env) == {TOO_LARGE}:
        raise EnvelopeError(
            f"[{role}] the context in store '{name}' is {env[TOO_LARGE]} bytes, over the {max_bytes}-byte limit "
            "(not fetched); raise max_bytes= if this size is intended"
        )
    env = check_envelope(env)
    if env["role"] != role:
        raise EnvelopeError(f"[{role}] store '{name}' answered with the envelope of role '{env['role']}'")
    return env


def _reply_bytes(reply: Any, role: str, name: str, max_bytes: int) -> bytes:
    """The store's answer as bytes, read from Ray's object store as Ray holds it, never deserialized: Ray unpickles
    any reply that is not bytes (an actor's object, its exception), and an actor that passed ``_check_identity`` is
    still code this reader did not write. A reply longer than the limit is refused before it is copied.

    Ray's raw read (its core worker's ``get_objects``, what ``ray.get`` runs before deserializing) is internal: where
    this Ray has no such call, ``ray.get`` reads the reply, and the identity checks are the guard."""
    import ray

    raw = _raw_reply(reply)
    if raw is None:
        answer = ray.get(reply, timeout=FETCH_TIMEOUT_S)
        if type(answer) is not bytes:
            raise EnvelopeError(f"[{role}] store '{name}' answered with {type(answer).__name__}, not envelope bytes")
        return answer
    data, metadata = raw
    kind = bytes(metadata or b"").split(b",")[0]
    if kind != b"RAW":
        error = _ray_error_name(kind) if kind.isdigit() else None
        if error == "ACTOR_DIED":
            raise ray.exceptions.RayActorError()
        what = f"an error ({error})" if error else "a serialized Python object"
        raise EnvelopeError(
            f"[{role}] store '{name}' answered with {what}, not envelope bytes; refused without deserializing it"
        )
    size = 0 if data is None else len(data)
    if size > max_bytes + _ENVELOPE_OVERHEAD:
        raise EnvelopeError(
            f"[{role}] store '{name}' answered with {size} bytes, over the {max_bytes}-byte limit (not copied)"
        )
    return b"" if data is None else bytes(data.to_pybytes())


def _raw_reply(reply: Any) -> tuple[Any, Any] | None:
    """``(data buffer, metadata)`` of a reply as Ray holds it, waiting up to ``FETCH_TIMEOUT_S``; None where this
    Ray's core worker has no raw read."""
    import ray

    try:
        from ray._private.worker import global_worker

        read = global_worker.core_worker.get_objects
    except (ImportError, AttributeError):  # pragma: no cover - a Ray without the internal read
        return None
    ready, _ = ray.wait([reply], timeout=FETCH_TIMEOUT_S)
    if not ready:
        raise ray.exceptions.GetTimeoutError()
    try:
        found = read([reply], int(FETCH_TIMEOUT_S * 1000))
        data, metadata = found[0][0], found[0][1]
    except (TypeError, IndexError):  # pragma: no cover - another signature or shape in another Ray release
        return None
    return data, metadata


def _ray_error_name(kind: bytes) -> str:
    """The name of one of Ray's error types (the metadata of a failed task's reply), or its number."""
    try:
        from ray.core.generated.common_pb2 import ErrorType

        return str(ErrorType.Name(int(kind)))
    except (ImportError, ValueError):  # pragma: no cover - an error type this Ray does not name
        return f"Ray error type {kind.decode()}"


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
