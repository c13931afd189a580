"""The envelope: one role's context as plain types, and where it sits in ``extra_context`` or a config.

Format version 1 (a ``dict``; every value a ``str``, ``int``, ``bytes`` or a ``dict`` of ``str``)::

    {
        "verl_ctx_format": 1,                 # this layout's version; a decoder refuses one it does not know
        "role": "critic",
        "schema_id": "my_recipe.ctx:CriticContext",
        "schema_version": 2,                  # RoleContext version=
        "fingerprint": "<sha256 hex>",        # of the schema's canonical JSON Schema (docs stripped)
        "fields": {"value_clip": "<12 hex>"}, # per-field digests, to name the fields that differ on skew
        "payload": b"...",                    # MessagePack of the field values (see _codec)
    }

In a ``TrainingWorkerConfig.extra_context`` envelopes sit under one reserved key, by role:
``extra_context["verl_ctx"]["critic"] = envelope``; every other key is left alone. Where only JSON-safe
text may go (verl's main Hydra config is printed, resolved and sent to trackers) an envelope travels as
``to_text(envelope)``: ``"verl-ctx:1:" + base64(MessagePack(envelope))``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, MutableMapping
from typing import Any

import msgspec

from ._codec import UnencodableError, encode_payload
from ._errors import EnvelopeError, MissingContextError
from ._schema import RoleContext, cached_info, schema_info

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENVELOPE_FORMAT",
    "RESERVED_KEY",
    "attach",
    "EnvelopeV1",
    "check_envelope",
    "check_fields",
    "encode",
    "envelope_json_schema",
    "find_envelope",
    "from_text",
    "to_text",
]

ENVELOPE_FORMAT = 1
FORMAT_KEY = "verl_ctx_format"
#: The one key of ``extra_context`` (and of ``RolloutConfig.custom``) that verl-ctx owns.
RESERVED_KEY = "verl_ctx"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
TEXT_PREFIX = f"verl-ctx:{ENVELOPE_FORMAT}:"


class EnvelopeV1(msgspec.Struct, frozen=True):
    """Format 1, as a type: checks envelopes (``check_envelope``) and generates the envelope's JSON Schema."""

    verl_ctx_format: int
    role: str
    schema_id: str
    schema_version: int
    fingerprint: str
    fields: dict[str, str]
    payload: bytes


_FIELDS = EnvelopeV1.__struct_fields__


def envelope_json_schema() -> dict[str, Any]:
    """JSON Schema of the envelope (``payload`` shown base64-encoded, as in JSON)."""
    schema: dict[str, Any] = msgspec.json.schema(EnvelopeV1)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"verl-ctx envelope, format {ENVELOPE_FORMAT}"
    return schema


def encode(ctx: RoleContext, *, role: str | None = None) -> dict[str, Any]:
    """The envelope of ``ctx``: plain types only, nothing pickled.

    ``role`` picks one role of a schema shared by several (``role=("actor", "ref")``); it defaults to the
    schema's only role.
    """
    info = cached_info(type(ctx))  # a dict hit first: pydantic's metaclass makes isinstance() slow
    if info is None:
        if not isinstance(ctx, RoleContext):
            raise EnvelopeError(
                f"encode() takes a RoleContext instance; got {type(ctx).__qualname__}. "
                "Declare `class MyContext(RoleContext, role=...)` and pass MyContext(...)"
            )
        info = schema_info(type(ctx))
    role = _pick_role(info.roles, role, info.schema_id)
    try:
        payload = encode_payload(ctx)
    except UnencodableError as e:
        raise EnvelopeError(f"[{role}] cannot encode {info.schema_id}: {e}") from None
    return {
        FORMAT_KEY: ENVELOPE_FORMAT,
        "role": role,
        "schema_id": info.schema_id,
        "schema_version": info.version,
        "fingerprint": info.fingerprint,
        "fields": info.field_digests.copy(),
        "payload": payload,
    }


def _pick_role(roles: tuple[str, ...], role: str | None, schema_id: str) -> str:
    if role is None:
        if len(roles) == 1:
            return roles[0]
        raise EnvelopeError(f"{schema_id} serves roles {', '.join(roles)}; pass role= to say which one")
    if role not in roles:
        raise EnvelopeError(f"{schema_id} serves roles {', '.join(roles)}, not '{role}'")
    return role


def attach(
    extra_context: MutableMapping[str, Any], *items: RoleContext | Mapping[str, Any]
) -> MutableMapping[str, Any]:
    """Put envelopes (or contexts, encoded here) under ``extra_context["verl_ctx"][role]``; returns it.

    Other keys of ``extra_context`` are left untouched, so a recipe can keep its own entries beside ours.
    """
    slot = extra_context.get(RESERVED_KEY)
    if slot is None:
        slot = extra_context[RESERVED_KEY] = {}
    elif not isinstance(slot, MutableMapping):
        raise EnvelopeError(
            f"extra_context['{RESERVED_KEY}'] is reserved for verl-ctx envelopes; it holds a "
            f"{type(slot).__qualname__}. Move that value to another key"
        )
    for item in items:
        env = encode(item) if isinstance(item, RoleContext) else check_envelope(item)
        slot[env["role"]] = env
    return extra_context


def to_text(envelope: Mapping[str, Any]) -> str:
    """JSON-safe text form of an envelope, for places that are printed, resolved or logged as JSON."""
    raw = msgspec.msgpack.encode(dict(check_envelope(envelope)))
    return TEXT_PREFIX + base64.b64encode(raw).decode("ascii")


def from_text(text: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The envelope in a ``to_text`` string."""
    if not text.startswith(TEXT_PREFIX):
        head = text[: len(TEXT_PREFIX)]
        if head.startswith("verl-ctx:"):
            raise EnvelopeError(
                f"envelope text is of format '{head}', this verl-ctx reads '{TEXT_PREFIX}'; "
                "install the same verl-ctx version on the driver and the workers"
            )
        raise EnvelopeError(f"not verl-ctx envelope text: expected it to start with '{TEXT_PREFIX}'")
    body = text[len(TEXT_PREFIX) :]
    # base64 is 4/3 of the bytes: refuse oversize text before decoding any of it.
    if len(body) * 3 // 4 > max_bytes + 4096:
        raise EnvelopeError(
            f"envelope text holds about {len(body) * 3 // 4} bytes, over the {max_bytes}-byte limit; "
            "raise max_bytes= if this size is intended"
        )
    try:
        raw = base64.b64decode(body, validate=True)
        env = msgspec.msgpack.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError, RecursionError) as e:
        raise EnvelopeError(f"corrupt envelope text: {e}") from None
    return check_envelope(env)


def check_envelope(env: object) -> dict[str, Any]:
    """``env`` itself when it is a well-formed envelope of a known format, else ``EnvelopeError``."""
    # Fast path, taken by every envelope verl_ctx.encode made: exact types, no copy. This runs on every
    # decode in every worker, so it avoids msgspec.convert (which costs more than the S payload's decode).
    if (
        type(env) is dict
        and env.get(FORMAT_KEY) == ENVELOPE_FORMAT
        and type(env.get("payload")) is bytes
        and type(env.get("role")) is str
        and type(env.get("fingerprint")) is str
        and type(env.get("schema_id")) is str
        and type(env.get("schema_version")) is int
        and type(env.get("fields")) is dict
        and len(env) == len(_FIELDS)
    ):
        return env
    return _check_slowly(env)


def _check_slowly(env: object) -> dict[str, Any]:
    """The full check, with a message that says what is wrong."""
    if not isinstance(env, Mapping) or FORMAT_KEY not in env:
        raise EnvelopeError(
            f"not a verl-ctx envelope: expected a mapping with a '{FORMAT_KEY}' key (made by verl_ctx.encode); "
            f"got {_kind(env)}"
        )
    version = env[FORMAT_KEY]
    if version != ENVELOPE_FORMAT or isinstance(version, bool):
        raise EnvelopeError(
            f"envelope format {version!r} is not one this verl-ctx reads (format {ENVELOPE_FORMAT}); "
            "install the same verl-ctx version on the driver and the workers"
        )
    if not isinstance(env.get("payload"), bytes):
        # msgspec.convert would read a str as base64; an envelope's payload is bytes, nothing else.
        raise EnvelopeError(f"corrupt envelope: 'payload' should be bytes; got {_kind(env.get('payload'))}")
    try:
        checked = msgspec.convert(env, EnvelopeV1, strict=True)
    except msgspec.ValidationError as e:
        raise EnvelopeError(f"corrupt envelope: {e}") from None
    return msgspec.structs.asdict(checked)


def check_fields(env: Mapping[str, Any]) -> Mapping[str, str]:
    """The per-field digests of an envelope, checked (read only when driver and worker schemas differ)."""
    fields = env["fields"]
    if not all(type(k) is str and type(v) is str for k, v in fields.items()):
        raise EnvelopeError("corrupt envelope: 'fields' should map field names to digests (str -> str)")
    return fields  # type: ignore[no-any-return]


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return f"a {type(value).__name__} with keys {sorted(map(str, value))[:8]}"
    return f"a {type(value).__name__}"


def find_envelope(source: object, roles: tuple[str, ...], *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The envelope for one of ``roles`` in ``source``.

    ``source`` is an envelope, its text, an ``extra_context``-like mapping holding ``verl_ctx``, or any
    object with an ``extra_context`` attribute (verl's ``TrainingWorkerConfig``).
    """
    if type(source) is dict and FORMAT_KEY in source:
        return check_envelope(source)  # the hot path: an envelope itself (isinstance(Mapping) is slow)
    if isinstance(source, str):
        return from_text(source, max_bytes=max_bytes)
    if not isinstance(source, Mapping):
        holder = getattr(source, "extra_context", None)
        if holder is not None:
            source = holder
    if not isinstance(source, Mapping):
        raise EnvelopeError(
            "decode() reads an envelope, its text, an extra_context mapping, or an object with an "
            f"extra_context attribute; got {_kind(source)}"
        )
    if FORMAT_KEY in source:
        return check_envelope(source)
    slot = source.get(RESERVED_KEY)
    if slot is None:
        raise MissingContextError(
            f"no verl-ctx context for role {' / '.join(roles)}: this mapping has no '{RESERVED_KEY}' key "
            f"(keys: {sorted(map(str, source))[:8]}). On the driver, validate and bind the contexts "
            "(verl_ctx.integrations.verl) or put one there with verl_ctx.attach(extra_context, ctx)",
            role=roles[0],
        )
    if not isinstance(slot, Mapping):
        raise EnvelopeError(f"'{RESERVED_KEY}' should map role names to envelopes; got {_kind(slot)}")
    present = [r for r in roles if r in slot]
    if not present:
        raise MissingContextError(
            f"no verl-ctx context for role {' / '.join(roles)}; this worker received contexts for "
            f"{sorted(map(str, slot)) or 'no role'}. Give the role a section under extra_context in the config "
            "(extra_context.<role>.<field>=...) or attach one on the driver",
            role=roles[0],
        )
    if len(present) > 1:
        raise EnvelopeError(
            f"contexts for several roles this schema serves are here ({', '.join(present)}); "
            "pass role= to decode() to say which one"
        )
    found = slot[present[0]]
    return from_text(found, max_bytes=max_bytes) if isinstance(found, str) else check_envelope(found)
