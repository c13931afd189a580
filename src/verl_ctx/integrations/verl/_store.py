"""Large envelopes go through Ray's object store, by reference, instead of inside actor definitions.

verl embeds worker init arguments in the actor class definition, and Ray warns past 10**7 bytes and refuses
past 10**8. An envelope whose payload is above a threshold (default 8 MiB) is held by a small named actor
started on the driver; the worker class carries only a reference::

    {"verl_ctx_remote": 1, "role": "critic", "store": "<actor name>", "namespace": "<ns>", "bytes": 33554432}

``resolve`` turns a reference back into the envelope inside the worker (the payload arrives through the
object store), and passes a real envelope through unchanged. A worker that Ray restarts resolves again.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from ..._envelope import TEXT_PREFIX, check_envelope, from_text, to_text
from ..._errors import EnvelopeError, MissingContextError

__all__ = ["DEFAULT_OFFLOAD_BYTES", "REMOTE_KEY", "offload_large", "ref_to_text", "resolve", "resolve_text"]

REMOTE_KEY = "verl_ctx_remote"
REF_TEXT_PREFIX = "verl-ctx-ref:1:"
DEFAULT_OFFLOAD_BYTES = 8 * 1024 * 1024

# Handles of the stores this process started: a named actor lives while its owner holds it.
_stores: list[Any] = []


class _EnvelopeStore:
    """Holds envelopes for the workers of one launch; ``get`` returns one through the object store."""

    def __init__(self) -> None:
        self._envelopes: dict[str, dict[str, Any]] = {}

    def put(self, role: str, envelope: dict[str, Any]) -> int:
        self._envelopes[role] = envelope
        return len(envelope["payload"])

    def get(self, role: str) -> dict[str, Any] | None:
        return self._envelopes.get(role)


def offload_large(
    envelopes: Mapping[str, Mapping[str, Any]], *, threshold: int = DEFAULT_OFFLOAD_BYTES
) -> dict[str, dict[str, Any]]:
    """``envelopes`` with each one above ``threshold`` payload bytes replaced by a store reference.

    Needs a running Ray (``ray.init`` done); small envelopes are returned as they are.
    """
    import ray

    large = {role: env for role, env in envelopes.items() if len(env["payload"]) > threshold}
    out = {role: dict(env) for role, env in envelopes.items()}
    if not large:
        return out
    name = f"verl_ctx_store_{uuid.uuid4().hex[:12]}"
    namespace = ray.get_runtime_context().namespace
    store_cls: Any = ray.remote(num_cpus=0)(_EnvelopeStore)
    store = store_cls.options(name=name).remote()
    _stores.append(store)
    ray.get([store.put.remote(role, dict(env)) for role, env in large.items()])
    for role, env in large.items():
        out[role] = {REMOTE_KEY: 1, "role": role, "store": name, "namespace": namespace, "bytes": len(env["payload"])}
    return out


def is_ref(value: object) -> bool:
    return isinstance(value, Mapping) and REMOTE_KEY in value


def resolve(envelope_or_ref: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope itself, fetching it from its store when given a reference."""
    if not is_ref(envelope_or_ref):
        return dict(envelope_or_ref)
    import ray

    ref = envelope_or_ref
    try:
        store = ray.get_actor(ref["store"], namespace=ref["namespace"])
    except ValueError:
        raise MissingContextError(
            f"[{ref['role']}] the context was sent by reference through store actor '{ref['store']}', which "
            "is gone: the driver that launched this run has exited. Relaunch the run",
            role=ref["role"],
        ) from None
    env = ray.get(store.get.remote(ref["role"]))
    if env is None:
        raise MissingContextError(f"[{ref['role']}] store '{ref['store']}' holds no context", role=ref["role"])
    return check_envelope(env)


def ref_to_text(envelope_or_ref: Mapping[str, Any]) -> str:
    """JSON-safe text of an envelope or of a store reference, for the Hydra config."""
    if not is_ref(envelope_or_ref):
        return to_text(envelope_or_ref)
    return REF_TEXT_PREFIX + base64.b64encode(msgspec.msgpack.encode(dict(envelope_or_ref))).decode("ascii")


def resolve_text(text: str) -> dict[str, Any]:
    """The envelope in ``text`` made by ``ref_to_text``."""
    if text.startswith(REF_TEXT_PREFIX):
        try:
            ref = msgspec.msgpack.decode(base64.b64decode(text[len(REF_TEXT_PREFIX) :], validate=True))
        except Exception as e:
            raise EnvelopeError(f"corrupt verl-ctx reference text: {e}") from None
        if not is_ref(ref):
            raise EnvelopeError("corrupt verl-ctx reference text: not a store reference")
        return resolve(ref)
    if not text.startswith(TEXT_PREFIX):
        raise EnvelopeError(f"not verl-ctx text: expected '{TEXT_PREFIX}' or '{REF_TEXT_PREFIX}'")
    return from_text(text)
