"""The envelope: one role's context as plain types; its store reference; and their one text form.

Format version 1 (a ``dict``; every value a ``str``, ``int``, ``bytes`` or a ``dict`` of ``str``)::

    {
        "verl_ctx_format": 1,                 # this layout's version; a decoder refuses one it does not know
        "role": "critic",
        "schema_id": "my_recipe.ctx:CriticContext",
        "schema_version": 2,                  # RoleContext version=
        "fingerprint": "<sha256 hex>",        # of the schema's canonical form (see _model.fingerprint)
        "fields": {"value_clip": "<12 hex>"}, # per-field digests, to name the fields that differ on skew
        "payload": b"...",                    # MessagePack of the field values (see _wire.codec)
    }

A context too large for an actor definition, or holding a secret, travels as a *store reference* instead:
``{"verl_ctx_remote": 1, "role", "store", "namespace", "bytes", "actor_id"}`` names the Ray actor that holds
the envelope and records its Ray actor id (``integrations.verl._store``); readers fetch it through Ray's object
store, from that very actor only.

In a ``TrainingWorkerConfig.extra_context`` envelopes sit under one reserved key, by role:
``extra_context["verl_ctx"]["critic"] = envelope``; every other key is left alone. Where only JSON-safe
text may go (verl's Hydra config is printed, resolved and tracked) either travels as ``to_text(...)``:
``"verl-ctx:1:" + base64(MessagePack(envelope or reference))``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import msgspec

from .._model.fingerprint import cached_info, roles_for, schema_info
from .._model.role_context import RoleContext
from ..errors import EnvelopeError
from .codec import encode_payload
from .compiled import encoder_for
from .msgpack import UnencodableError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENVELOPE_FORMAT",
    "ENVELOPE_KEYS",
    "FORMAT_KEY",
    "REF_KEY",
    "RESERVED_KEY",
    "STORE_NAME_RE",
    "EnvelopeV1",
    "StoreRefV1",
    "attach",
    "check_envelope",
    "check_fields",
    "check_ref",
    "encode",
    "envelope_json_schema",
    "from_text",
    "is_ref",
    "kind_of",
    "to_text",
]

ENVELOPE_FORMAT = 1
FORMAT_KEY = "verl_ctx_format"
#: The key that marks a store reference (its value is the reference format, 1).
REF_KEY = "verl_ctx_remote"
#: The one key of ``extra_context``, ``RolloutConfig.custom`` and the Hydra config that verl-ctx owns.
RESERVED_KEY = "verl_ctx"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
TEXT_PREFIX = f"verl-ctx:{ENVELOPE_FORMAT}:"
#: Store actors are named by verl-ctx alone; a reference naming any other actor is refused unread.
STORE_NAME_RE = re.compile(r"^verl_ctx_store_[0-9a-f]{12}$")
#: A Ray actor id in hex (16 bytes in Ray 2.x; a little room either way for other Ray versions).
ACTOR_ID_RE = re.compile(r"^[0-9a-f]{16,64}$")


class EnvelopeV1(msgspec.Struct, frozen=True):
    """Format 1, as a type: checks envelopes (``check_envelope``) and generates the envelope's JSON Schema."""

    verl_ctx_format: int
    role: str
    schema_id: str
    schema_version: int
    fingerprint: str
    fields: dict[str, str]
    payload: bytes


class StoreRefV1(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A reference to an envelope held by a verl-ctx store actor: its name, and its Ray actor id (identity)."""

    verl_ctx_remote: int
    role: str
    store: str
    namespace: str
    bytes: int
    actor_id: str


_TOO_DEEP = (
    "a value is nested too deeply to encode (hundreds of levels, in an `Any` or recursive field); flatten it, "
    "or send it as text"
)
_FIELDS = EnvelopeV1.__struct_fields__
ENVELOPE_KEYS = len(_FIELDS)


def envelope_json_schema() -> dict[str, Any]:
    """JSON Schema of the envelope (``payload`` shown base64-encoded, as in JSON)."""
    schema: dict[str, Any] = msgspec.json.schema(EnvelopeV1)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"verl-ctx envelope, format {ENVELOPE_FORMAT}"
    return schema


# class -> its envelope with every key but the payload filled in, for the schema's only role, and its payload
# encoder: encode() copies the envelope (a dict copy is one memcpy) instead of looking up the schema and building
# seven keys on every call. One entry per RoleContext class encoded, like the SchemaInfo it is made from.
_templates: dict[type, tuple[dict[str, Any], Callable[[Any], bytes]]] = {}


def encode(ctx: RoleContext, *, role: str | None = None) -> dict[str, Any]:
    """The envelope of ``ctx``: plain types only, nothing pickled.

    ``role`` picks one role of a schema shared by several (``role=("actor", "ref")``); it defaults to the
    schema's only role.
    """
    cls = type(ctx)
    if role is None and cls in _templates:  # the hot path
        template, payload_of = _templates[cls]
        env: dict[str, Any] = template.copy()
        env["payload"] = _payload(payload_of, ctx, env)
        return env
    info = cached_info(cls)  # a dict hit first: pydantic's metaclass makes isinstance() slow
    if info is None:
        if not isinstance(ctx, RoleContext):
            raise EnvelopeError(
                f"encode() takes a RoleContext instance; got {cls.__qualname__}. "
                "Declare `class MyContext(RoleContext, role=...)` and pass MyContext(...)"
            )
        info = schema_info(cls)
    reusable = role is None
    roles = roles_for(info, role)
    if len(roles) > 1:
        raise EnvelopeError(f"{info.schema_id} serves roles {', '.join(roles)}; pass role= to say which one")
    role = roles[0]
    env = {
        FORMAT_KEY: ENVELOPE_FORMAT,
        "role": role,
        "schema_id": info.schema_id,
        "schema_version": info.version,
        "fingerprint": info.fingerprint,
        # Shared, never copied: envelopes are read-only data, and this runs on every encode.
        "fields": info.field_digests,
        "payload": b"",
    }
    if reusable:
        _templates[cls] = (env.copy(), encoder_for(cls) or encode_payload)
    env["payload"] = _payload(encode_payload, ctx, env)
    return env


def _payload(payload_of: Callable[[Any], bytes], ctx: RoleContext, env: Mapping[str, Any]) -> bytes:
    """``payload_of(ctx)``, or the ``EnvelopeError`` naming the envelope's role and schema and why it failed."""
    try:
        return payload_of(ctx)
    except UnencodableError as e:
        raise EnvelopeError(f"[{env['role']}] cannot encode {env['schema_id']}: {e}") from None
    except RecursionError:
        raise EnvelopeError(f"[{env['role']}] cannot encode {env['schema_id']}: {_TOO_DEEP}") from None


def attach(
    extra_context: MutableMapping[str, Any], *items: RoleContext | Mapping[str, Any]
) -> MutableMapping[str, Any]:
    """Put envelopes (or contexts, encoded here) under ``extra_context["verl_ctx"][role]``; returns it.

    Other keys of ``extra_context`` are left untouched, so a recipe can keep its own entries beside ours.
    Store references are accepted as well as envelopes.
    """
    slot = extra_context.get(RESERVED_KEY)
    if slot is None:
        slot = extra_context[RESERVED_KEY] = {}
    elif not isinstance(slot, MutableMapping):
        raise EnvelopeError(
            f"extra_context['{RESERVED_KEY}'] is reserved for verl-ctx envelopes; it holds {kind_of(slot)}. "
            "Move that value to another key"
        )
    for item in items:
        if isinstance(item, RoleContext):
            env = encode(item)
        elif is_ref(item):
            env = check_ref(item)
        else:
            env = check_envelope(item)
        slot[env["role"]] = env
    return extra_context


# --- checks ---------------------------------------------------------------------------------------------


def check_envelope(env: object) -> dict[str, Any]:
    """``env`` itself when it is a well-formed envelope of a known format, else ``EnvelopeError``."""
    # Fast path, taken by every envelope verl_ctx.encode made: exact types, no copy. This runs on every decode
    # in every worker, so it avoids msgspec.convert (which costs more than the S payload's decode) and reads by
    # subscript (cheaper than .get; a missing key means the full check below). decode()'s own hot path checks the
    # same of the envelope of its own schema before it gets here.
    try:
        if (
            type(env) is dict
            and len(env) == ENVELOPE_KEYS
            and env[FORMAT_KEY] == ENVELOPE_FORMAT
            and type(env["payload"]) is bytes
            and type(env["role"]) is str
            and type(env["fingerprint"]) is str
            and type(env["schema_id"]) is str
            and type(env["schema_version"]) is int
            and type(env["fields"]) is dict
        ):
            return env
    except KeyError:
        pass
    return _check_slowly(env)


def _check_slowly(env: object) -> dict[str, Any]:
    """The full check, with a message that says what is wrong."""
    if not isinstance(env, Mapping) or FORMAT_KEY not in env:
        raise EnvelopeError(
            f"not a verl-ctx envelope: expected a mapping with a '{FORMAT_KEY}' key (made by verl_ctx.encode); "
            f"got {kind_of(env)}"
        )
    version = env[FORMAT_KEY]
    if version != ENVELOPE_FORMAT or isinstance(version, bool):
        raise EnvelopeError(
            f"envelope format {short(version)} is not one this verl-ctx reads (format {ENVELOPE_FORMAT}); "
            "install the same verl-ctx version on the driver and the workers"
        )
    if not isinstance(env.get("payload"), bytes):
        # msgspec.convert would read a str as base64; an envelope's payload is bytes, nothing else.
        raise EnvelopeError(f"corrupt envelope: 'payload' should be bytes; got {kind_of(env.get('payload'))}")
    try:
        checked = msgspec.convert(dict(env), EnvelopeV1, strict=True)
    except msgspec.ValidationError as e:
        raise EnvelopeError(f"corrupt envelope: {e}") from None
    return msgspec.structs.asdict(checked)


def check_fields(env: Mapping[str, Any]) -> Mapping[str, str]:
    """The per-field digests of an envelope, checked (read only when driver and worker schemas differ)."""
    fields = env["fields"]
    if not all(type(k) is str and type(v) is str for k, v in fields.items()):
        raise EnvelopeError("corrupt envelope: 'fields' should map field names to digests (str -> str)")
    return fields  # type: ignore[no-any-return]


def is_ref(value: object) -> bool:
    """Whether ``value`` claims to be a store reference (checked by ``check_ref``)."""
    return isinstance(value, Mapping) and REF_KEY in value


def check_ref(ref: object) -> dict[str, Any]:
    """A well-formed store reference naming a verl-ctx store, else ``EnvelopeError`` (nothing is contacted)."""
    try:
        checked = msgspec.convert(ref, StoreRefV1, strict=True)
    except (msgspec.ValidationError, TypeError) as e:
        raise EnvelopeError(
            f"corrupt verl-ctx store reference: {e}; expected keys {', '.join(StoreRefV1.__struct_fields__)}"
        ) from None
    if checked.verl_ctx_remote != 1:
        raise EnvelopeError(f"store reference format {checked.verl_ctx_remote} is not one this verl-ctx reads (1)")
    if not STORE_NAME_RE.match(checked.store):
        raise EnvelopeError(
            f"store reference names actor {short(checked.store)}, which is not a verl-ctx store "
            "(names are verl_ctx_store_<12 hex>); refusing to contact it"
        )
    if not ACTOR_ID_RE.match(checked.actor_id):
        raise EnvelopeError(
            f"store reference holds actor id {short(checked.actor_id)}, which is not a Ray actor id (hex); "
            "refusing to contact it"
        )
    if checked.bytes < 0:
        raise EnvelopeError(f"store reference claims {checked.bytes} payload bytes; refusing to contact it")
    return msgspec.structs.asdict(checked)


# --- text -----------------------------------------------------------------------------------------------


def to_text(envelope_or_ref: Mapping[str, Any]) -> str:
    """JSON-safe text of an envelope or a store reference, for places that are printed or logged as JSON.

    The payload is only base64-encoded, so never put the text of a context holding a secret where people
    can read it; verl-ctx's own delivery sends such contexts by store reference.
    """
    checked = check_ref(envelope_or_ref) if is_ref(envelope_or_ref) else check_envelope(envelope_or_ref)
    return TEXT_PREFIX + base64.b64encode(msgspec.msgpack.encode(checked)).decode("ascii")


def from_text(text: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The envelope, or store reference, in a ``to_text`` string."""
    if not text.startswith(TEXT_PREFIX):
        head = text[: len(TEXT_PREFIX)]
        if head.startswith("verl-ctx"):
            raise EnvelopeError(
                f"envelope text is of format {short(head)}, this verl-ctx reads '{TEXT_PREFIX}'; "
                "install the same verl-ctx version on the driver and the workers"
            )
        raise EnvelopeError(f"not verl-ctx envelope text: expected it to start with '{TEXT_PREFIX}'")
    # base64 is 4/3 of the bytes: refuse oversize text before copying or decoding any of it.
    size = (len(text) - len(TEXT_PREFIX)) * 3 // 4
    if size > max_bytes + 4096:
        raise EnvelopeError(
            f"envelope text holds about {size} bytes, over the {max_bytes}-byte limit; "
            "raise max_bytes= if this size is intended"
        )
    try:
        raw = base64.b64decode(text[len(TEXT_PREFIX) :], validate=True)
        obj = msgspec.msgpack.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError, RecursionError) as e:
        raise EnvelopeError(f"corrupt envelope text: {e}") from None
    return check_ref(obj) if is_ref(obj) else check_envelope(obj)


# --- messages -------------------------------------------------------------------------------------------


def short(value: object, limit: int = 60) -> str:
    """A short repr for messages about envelope structure (never payload values, which may be secret)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: object) -> str:
    """What a value is, for messages: its type, and for a mapping its first keys."""
    if isinstance(value, Mapping) and type(value).__module__ in ("builtins", "omegaconf.dictconfig"):
        try:
            keys = sorted(map(str, value))[:8]
        except Exception:  # noqa: BLE001 - a broken mapping still gets a message
            keys = []
        return f"a {type(value).__name__} with keys {keys}"
    return f"a {type(value).__module__}.{type(value).__qualname__}"
