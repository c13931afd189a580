"""``decode``: the worker side. Find the envelope, shake hands on the schema, migrate, validate.

The handshake, by what the envelope says against the worker's schema:

* same version, same fingerprint: check the payload against the schema's types and constraints and build it
  without running the user's validators again (``_trusted``: the driver's validated values are the worker's); a
  payload that fails was edited: ``EnvelopeError``;
* same version, other fingerprint: validate, then prove nothing changed: the decoded context, encoded again,
  must give back the driver's values exactly (same types, nothing dropped or coerced). Proven: a
  ``SchemaSkewWarning`` naming the differing fields. Not proven: ``SchemaMismatchError``;
* older version: run the migrations up to the worker's version, then validate (``SchemaMismatchError`` if
  a step is missing, fails, or the result does not validate); newer version: ``SchemaMismatchError``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import msgspec
from pydantic import BaseModel, ValidationError

from ._budget import PayloadCostError, check_decode_cost
from ._codec import (
    GC_PAUSE_BYTES,
    decode_payload,
    encode_payload,
    fail_fast_validator,
    paused_gc,
    with_fail_fast,
    without_excess_keys,
)
from ._compiled import Refused, decoder_for, decoders
from ._envelope import (
    DEFAULT_MAX_BYTES,
    ENVELOPE_FORMAT,
    ENVELOPE_KEYS,
    FORMAT_KEY,
    RESERVED_KEY,
    check_fields,
)
from ._field_errors import MAX_ERRORS, field_errors
from ._fingerprint import CONFIG_KEY, SETTING_KEY, SETTINGS_RECORDED, SchemaInfo, cached_info, roles_for, schema_info
from ._kinds import KIND_KEY, input_names, kept_untyped, reads_alike, renamed_to
from ._redact import learn_context
from ._schema import Migration, RoleContext
from ._secret_schema import secret_plan
from ._sources import find_envelope
from ._trusted import replay_post_init, trusted_validator
from .errors import EnvelopeError, FieldError, SchemaMismatchError, SchemaSkewWarning

__all__ = ["decode"]

_C = TypeVar("_C", bound=RoleContext)

# Above this payload size validation stops at the first bad item of each list or dict: a hostile payload of
# millions of bad items must not cost millions of error records (time, memory, and a message nobody reads).
FAIL_FAST_BYTES = 64 * 1024

# Called with every context this process decodes on the general path, while ``watching_decodes`` holds them: how a
# rehearsal sees that code with nothing to store it on (a reward function) decoded its context. Empty outside a
# rehearsal. The compiled fast path in ``decode`` (a dict envelope of the very schema) is not watched: it is every
# worker's hot path, and what a reward function is handed (text inside verl's config) never takes it.
_watchers: list[Callable[[RoleContext], None]] = []


@contextlib.contextmanager
def watching_decodes(watcher: Callable[[RoleContext], None]) -> Iterator[None]:
    """While the block runs, ``watcher`` is called with each context ``decode`` builds on its general path in this
    process (every envelope given as text or inside a config; see ``_watchers``)."""
    _watchers.append(watcher)
    try:
        yield
    finally:
        _watchers.remove(watcher)


def decode(
    source: object,
    schema: type[_C],
    *,
    role: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> _C:
    """A validated, frozen ``schema`` instance from the context found in ``source``.

    ``source`` is whatever a verl worker holds: an envelope or its text, an ``extra_context`` mapping,
    verl's ``TrainingWorkerConfig``, ``RolloutConfig`` or another config object, the Hydra config (a
    ``DictConfig``, or its ``actor_rollout_ref`` / rollout part), or a worker object (``self``) whose config or
    class carries the context; see ``verl_ctx._sources`` for the order. The schema always comes from the caller:
    nothing named in the payload is imported, and nothing is unpickled.

    Raises ``MissingContextError`` when no context for the schema's role is there (saying where it looked),
    ``EnvelopeError`` for a corrupt, oversize or unknown-format one, and ``SchemaMismatchError`` when the
    driver's schema differs from ``schema`` in a way that could change a value.
    """
    info = cached_info(schema) or schema_info(schema)
    roles = info.roles if role is None else roles_for(info, role)
    refused = False  # by the compiled decoder on the hot path: pydantic decides, without a second try
    if type(source) is dict:
        # Every worker's hot path, without a call before the compiled decoder: an envelope of this very schema
        # (its role, fingerprint, id and version) given as itself or in an extra_context dict under the one role
        # read, small enough to build with the collector on. It is checked as check_envelope's fast path checks
        # it; anything else, and anything the compiled decoder refuses, takes the general path below.
        env: Any = source
        if FORMAT_KEY not in env:
            slot = env.get(RESERVED_KEY)
            env = slot.get(roles[0]) if type(slot) is dict and len(roles) == 1 else None
        if (
            type(env) is dict
            and len(env) == ENVELOPE_KEYS
            and env.get(FORMAT_KEY) == ENVELOPE_FORMAT
            and env.get("fingerprint") == info.fingerprint
            and env.get("schema_id") == info.schema_id
            and env.get("role") in roles
            and type(env.get("schema_version")) is int
            and env["schema_version"] == info.version
            and type(env.get("fields")) is dict
            and type(payload := env.get("payload")) is bytes
            and len(payload) <= GC_PAUSE_BYTES
            and len(payload) <= max_bytes
            and (compiled := decoders.get(schema)) is not None  # set by the first decode, on the general path
        ):
            try:
                return compiled(payload)  # type: ignore[no-any-return]
            except Refused:
                refused = True
    env = find_envelope(source, roles, role_given=role is not None, max_bytes=max_bytes)
    payload = env["payload"]
    if env["role"] not in roles:
        raise EnvelopeError(
            f"this envelope carries role '{env['role']}', but {info.schema_id} reads "
            f"{' / '.join(roles)}; pass the schema of role '{env['role']}'"
        )
    if len(payload) > max_bytes:
        raise EnvelopeError(
            f"[{env['role']}] payload is {len(payload)} bytes, over the {max_bytes}-byte limit; "
            "raise max_bytes= if this size is intended"
        )
    if len(payload) > GC_PAUSE_BYTES:
        # One pause over parsing and validation: re-enabling the collector in between would make the next
        # allocation traverse every row just parsed.
        with paused_gc():
            instance, data = _build(env, info, schema, payload, refused)
    else:
        instance, data = _build(env, info, schema, payload, refused)
    if secret_plan(schema).paths:  # this worker's messages from now on mask the secrets it was given
        learn_context(instance)
    if env["fingerprint"] != info.fingerprint or env["schema_id"] != info.schema_id:
        _check_skew(env, info, schema, instance, data)
    if _watchers:
        _told(instance)
    return instance


def _told(instance: RoleContext) -> None:
    for watcher in tuple(_watchers):
        watcher(instance)


def _build(
    env: Mapping[str, Any], info: SchemaInfo, schema: type[_C], payload: bytes, refused: bool = False
) -> tuple[_C, Any]:
    """Parse the payload, migrate it if the driver's schema is older, validate it into ``schema``.

    ``refused``: the compiled decoder refused this payload already.
    """
    if not refused and env["fingerprint"] == info.fingerprint and env["schema_version"] == info.version:
        compiled = decoders[schema] if schema in decoders else decoder_for(schema)
        if compiled is not None and env["schema_id"] == info.schema_id:
            _check_cost(env, payload, typed=True)  # the compiled decoder parses too: typed, its maps and arrays bounded
            try:
                # msgspec checks in C what pydantic would (verl_ctx._compiled); what it refuses, pydantic decides.
                return compiled(payload), None
            except Refused:
                pass
    role = env["role"]
    try:
        data = decode_payload(payload)
    except PayloadCostError as e:
        raise EnvelopeError(f"[{role}] payload refused: {e}") from None
    except (msgspec.DecodeError, ValueError, OverflowError) as e:
        raise EnvelopeError(f"[{role}] corrupt payload: {e}") from None
    except RecursionError:
        raise EnvelopeError(f"[{role}] corrupt payload: nested too deeply to decode") from None
    if not isinstance(data, dict):
        raise EnvelopeError(f"[{role}] corrupt payload: expected a map of field values, got {type(data).__name__}")

    same_shape = env["schema_version"] == info.version and env["fingerprint"] == info.fingerprint
    if env["schema_version"] != info.version:
        data = _upgrade(env, info, data, schema.__verl_ctx_migrations__)
    validator, checked, dropped = schema.__pydantic_validator__, data, 0
    fail_fast = len(payload) > FAIL_FAST_BYTES
    if fail_fast:
        # Bounded errors for hostile payloads: containers stop at their first bad item, and unknown keys past the
        # first MAX_ERRORS are only counted (pydantic would build an error record for each).
        validator = fail_fast_validator(schema)
        checked, dropped = without_excess_keys(data, schema, MAX_ERRORS)
    post_init: frozenset[type] = frozenset()
    core = with_fail_fast(schema.__pydantic_core_schema__) if fail_fast else schema.__pydantic_core_schema__
    if same_shape:
        # The driver's own schema: its validators ran there, and their results are the payload. Checked against
        # the schema's types and constraints, built without running them (or model_post_init) a second time.
        validator, post_init = trusted_validator(schema, core)
    elif env["schema_version"] == info.version:
        # Skew: the validators whose code is the driver's ran there already; only the others run here (the values
        # they change are then refused by the skew check). Their code is the same only where nothing they could
        # read changed: no model's class state or config differs.
        shared, replay = _shared_code(env, info)
        validator, post_init = trusted_validator(schema, core, shared, replay)
    # Errors are turned into ours outside the except block: pydantic's error holds the input values (secrets
    # too), and an exception raised inside the block would keep it as __context__.
    failure: list[FieldError] | None = None
    omitted = 0
    try:
        # Lax and by field name: the driver validated these values already; the worker re-checks them
        # against its own schema and rebuilds exact types (tuples, enums, UUIDs) from msgpack's plain ones.
        instance = validator.validate_python(checked, strict=False, by_name=True)
        if post_init:
            replay_post_init(instance, post_init)
        return instance, data
    except ValidationError as e:
        try:
            # Another schema's payload (skewed or migrated): where the driver's held a secret, the worker's type may
            # not say so, so no input of it is shown.
            failure, omitted = field_errors(e, role=role, schema=schema, withhold=not same_shape)
            omitted += dropped
        except RecursionError:
            failure = None
    except RecursionError:
        failure = None
    if failure is None:
        raise EnvelopeError(f"[{role}] corrupt payload: nested too deeply to validate")
    listing = "\n".join(f"  {err}" for err in failure) + (f"\n  ... and {omitted} more" if omitted else "")
    if same_shape:
        # Same fingerprint and the payload still fails: the bytes were edited, not the code.
        raise EnvelopeError(
            f"[{role}] corrupt payload: it does not validate against {info.schema_id}, the schema it names:\n{listing}",
            errors=failure,
        )
    raise _mismatch(env, info, "and the payload does not validate against the worker's schema:\n" + listing)


def _check_cost(env: Mapping[str, Any], payload: bytes, *, typed: bool) -> None:
    """Refuse a payload whose decoding would cost far more memory than its size (``_budget``), before parsing."""
    try:
        check_decode_cost(payload, typed=typed)
    except PayloadCostError as e:
        raise EnvelopeError(f"[{env['role']}] payload refused: {e}") from None


def _shared_code(env: Mapping[str, Any], info: SchemaInfo) -> tuple[frozenset[int], bool]:
    """The validators this worker shares with the driver (by id), and whether ``model_post_init`` is shared too."""
    theirs = check_fields(env)
    ours = info.field_digests
    context = (k for k in set(theirs) | set(ours) if k.startswith(("@class ", CONFIG_KEY)))
    if any(theirs.get(k) != ours.get(k) for k in context):
        return frozenset(), False
    shared = frozenset(i for i, key in info.function_entries.items() if theirs.get(key) == ours.get(key))
    inits = (k for k in set(theirs) | set(ours) if k.startswith(("@post-init ", "@custom-init ")))
    return shared, all(theirs.get(k) == ours.get(k) for k in inits)


def _upgrade(
    env: Mapping[str, Any], info: SchemaInfo, data: dict[str, Any], migrations: Mapping[int, Migration]
) -> dict[str, Any]:
    """Run the schema's migrations from the driver's version up to the worker's."""
    version: int = env["schema_version"]
    if version > info.version:
        raise _mismatch(
            env,
            info,
            f"the driver's schema is version {version}, newer than this worker's "
            f"{info.version}; deploy the same code to the workers (a worker cannot downgrade)",
        )
    while version < info.version:
        step = migrations.get(version)
        if step is None:
            raise _mismatch(
                env,
                info,
                f"no migration from version {version} to {version + 1}; add "
                f"`@migration(from_version={version})` to the schema",
            )
        failed = None
        try:
            upgraded = step(dict(data))
        except Exception as e:  # noqa: BLE001 - the user's migration; named, not echoed (values may be secret)
            failed = f"{type(e).__name__} (at {_where(e)})"
        if failed is not None:
            raise _mismatch(env, info, f"the migration from version {version} failed: {failed}")
        if not isinstance(upgraded, dict):
            raise _mismatch(
                env,
                info,
                f"the migration from version {version} returned "
                f"{type(upgraded).__name__}, not the dict of version {version + 1}",
            )
        data, version = upgraded, version + 1
    return data


def _where(e: BaseException) -> str:
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "?"


# --- skew: decoded, but is it the driver's data? -----------------------------------------------------------


def _check_skew(env: Mapping[str, Any], info: SchemaInfo, schema: type[_C], instance: _C, data: Any) -> None:
    if env["schema_version"] != info.version:
        return  # migrated: the migration owns the change
    if env["fingerprint"] != info.fingerprint:
        changed: list[str] = []
        added: list[str] = []
        try:
            sent, again = _differing_fields(env["payload"], encode_payload(instance), data)
        except Exception:  # noqa: BLE001 - cannot re-encode: cannot prove anything
            changed.append("<the whole context: it cannot be encoded again>")
        else:
            _compare(sent, again, instance, "", changed, added)
        changed += _kinds_changed(env, info, schema)
        if changed:
            more = f" and {len(changed) - 20} more" if len(changed) > 20 else ""
            raise _mismatch(
                env,
                info,
                "and decoding with the worker's schema would change these values (coerced, dropped, added or "
                f"collapsed): {', '.join(changed[:20])}{more}",
            )
        filled = f"; filled from the worker's defaults: {', '.join(added[:20])}" if added else ""
        warnings.warn(
            SchemaSkewWarning(
                f"[{env['role']}] driver and worker schemas differ ({env['schema_id']} "
                f"fingerprint {_short(env['fingerprint'], info.fingerprint)} vs {info.schema_id} "
                f"{_short(info.fingerprint, env['fingerprint'])}); differing "
                f"fields: {_describe_diff(env, info)}{filled}. Every value the driver sent decoded unchanged, so "
                "decoding went on; deploy the same code to driver and workers, or bump version= with a migration",
                role=env["role"],
            ),
            stacklevel=3,
        )
    else:
        warnings.warn(
            SchemaSkewWarning(
                f"[{env['role']}] the driver's schema is {env['schema_id']}, the worker's {info.schema_id}: same "
                "fields and rules (equal fingerprints), other names. Decoded; check that both sides import the "
                "same module",
                role=env["role"],
            ),
            stacklevel=3,
        )


_FIELDS_RAW = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])


def _differing_fields(payload: bytes, again: bytes, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The driver's fields and the worker's re-encoded ones, less each field whose bytes are the same on both sides.

    Equal MessagePack bytes are equal values of equal wire types, which is all ``_compare`` checks, so such a field
    needs no walk: the receipt walks only what re-encoded differently (a field whose nested model gained a default,
    a set in another order), not a 100,000-row table next to a field the worker added.
    """
    if payload == again:
        return {}, {}
    theirs, ours = _FIELDS_RAW.decode(payload), _FIELDS_RAW.decode(again)
    same = {k for k, raw in theirs.items() if k in ours and raw == ours[k]}
    return (
        {k: v for k, v in data.items() if k not in same},
        {k: decode_payload(raw) for k, raw in ours.items() if k not in same},
    )


def _kinds_changed(env: Mapping[str, Any], info: SchemaInfo, schema: type[RoleContext]) -> list[str]:
    """The fields whose type changed between kinds the wire carries alike (tuple/list/set, Enum/str/Path/UUID/
    SecretStr, model/dict): equal bytes, another typed value. A widening to an optional or union is not a change;
    a field the worker's model does not declare but keeps as an unknown key (``extra="allow"``) is one unless its
    driver's kind is plain data."""
    theirs = dict(check_fields(env))
    driver_root, worker_root = env["schema_id"].rpartition(":")[2], info.schema_id.rpartition(":")[2]
    if driver_root != worker_root:
        # The schema class renamed: its own fields' entries are the worker's root's (nested models keep their names).
        old = f"{KIND_KEY}{driver_root}."
        theirs = {f"{KIND_KEY}{worker_root}.{k[len(old) :]}" if k.startswith(old) else k: v for k, v in theirs.items()}
    core = schema.__pydantic_core_schema__
    out = []
    for key, digest in info.field_digests.items():
        changed = key.startswith(KIND_KEY) and theirs.get(key, digest) != digest
        if changed and not reads_alike(core, key, theirs[key]):
            out.append(f"{key.removeprefix(KIND_KEY)} (its type: the same bytes, another kind of value)")
    for key, kind in theirs.items():
        if not key.startswith(KIND_KEY) or key in info.field_digests:
            continue
        renamed = renamed_to(core, key)
        if renamed is not None:  # renamed, the old name its alias: the new field reads the value, typed as it is
            if info.field_digests.get(renamed) != kind and not reads_alike(core, renamed, kind):
                new = renamed.removeprefix(KIND_KEY).rpartition(".")[2]
                out.append(f"{key.removeprefix(KIND_KEY)} (its type: the same bytes, read as {new}, another kind)")
        elif kept_untyped(core, key, kind):
            out.append(f"{key.removeprefix(KIND_KEY)} (its type: the same bytes, kept untyped by the worker)")
    return out


def _compare(sent: Any, got: Any, obj: Any, path: str, changed: list[str], added: list[str]) -> None:
    """Record where ``got`` (the worker's instance ``obj``, encoded again) differs from ``sent`` (the driver's).

    Type-exact: ``1`` is not ``True`` or ``1.0``, ``-0.0`` is not ``0.0``, a datetime keeps its UTC offset, a
    map key ``1`` is not ``True``. A key the worker added is allowed only where ``obj`` is a model that filled
    the field from its default (not from a validator); a set is compared as a set (its order is its process's
    hash order), so duplicates the driver sent that collapsed are a change.
    """
    where = path or "<root>"
    if isinstance(obj, (set, frozenset)) and type(sent) is list and type(got) is list:
        if len(sent) != len(got):
            changed.append(f"{where} ({len(sent)} items -> {len(got)} in a set)")
        elif sorted(map(_exact, sent)) != sorted(map(_exact, got)):
            changed.append(where)
    elif type(sent) is not type(got):
        changed.append(f"{where} ({type(sent).__name__} -> {type(got).__name__})")
    elif isinstance(sent, dict):
        _compare_maps(sent, got, obj, path, changed, added)
    elif isinstance(sent, list):
        if len(sent) != len(got):
            changed.append(f"{where} ({len(sent)} items -> {len(got)})")
            return
        items = list(obj) if isinstance(obj, (list, tuple)) and len(obj) == len(got) else [None] * len(got)
        for i, (a, b, o) in enumerate(zip(sent, got, items, strict=True)):
            _compare(a, b, o, f"{path}[{i}]", changed, added)
    elif isinstance(sent, float):
        same = sent == got and math.copysign(1.0, sent) == math.copysign(1.0, got)
        if not (same or (math.isnan(sent) and math.isnan(got))):
            changed.append(where)
    elif isinstance(sent, dt.datetime):
        if sent != got or sent.utcoffset() != got.utcoffset():
            changed.append(where)
    elif sent != got:
        changed.append(where)


def _compare_maps(
    sent: dict[Any, Any], got: dict[Any, Any], obj: Any, path: str, changed: list[str], added: list[str]
) -> None:
    if isinstance(obj, BaseModel):
        values = {**obj.__dict__, **(obj.__pydantic_extra__ or {})}
        children = {k: values.get(k) for k in got}
    elif isinstance(obj, dict) and len(obj) == len(got):
        children = dict(zip(got, obj.values(), strict=True))  # the encoder walked obj in this order
    else:
        children = {}
    by_key = {_exact(k): k for k in got}
    matched = set()
    for key, value in sent.items():
        sub = f"{path}.{key}" if path else str(key)
        theirs = by_key.get(_exact(key))
        if theirs is None and isinstance(obj, BaseModel) and isinstance(key, str):
            # A field renamed with the old name as its alias read the driver's key: its value is the same field's.
            theirs = next((n for n in read_as(type(obj), key) if n in got and n not in sent), None)
        if theirs is None:
            changed.append(f"{sub} (dropped)")
            continue
        matched.add(_exact(theirs))
        _compare(value, got[theirs], children.get(theirs), sub, changed, added)
    for key in got:
        if _exact(key) in matched:
            continue
        sub = f"{path}.{key}" if path else str(key)
        if isinstance(obj, BaseModel) and key in type(obj).model_fields and key not in obj.model_fields_set:
            added.append(sub)
        else:
            changed.append(f"{sub} (added)")


def read_as(model: type[BaseModel], key: str) -> list[str]:
    """The fields of ``model`` that read an input key ``key`` by an alias (``alias=``, a ``validation_alias``
    string or one of its ``AliasChoices`` strings); payloads carry field names, so a field renamed with its old name
    as alias reads an old payload's key."""
    return [name for name, spec in model.model_fields.items() if name != key and key in input_names(spec)]


def _exact(value: Any) -> Any:
    """A hashable key that tells ``1``, ``True`` and ``1.0`` apart, for map keys and set items."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_exact(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((_exact(k), _exact(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, dt.datetime):
        return ("datetime", value.isoformat())
    return (type(value).__name__, value)


def _differing(env: Mapping[str, Any], info: SchemaInfo) -> list[str]:
    """The top-level fields whose digests differ (validator and config entries are named in the message)."""
    theirs = check_fields(env)
    ours = info.field_digests
    names = set(theirs) | set(ours)
    return sorted(n for n in names if not n.startswith("@") and theirs.get(n) != ours.get(n))


def _describe_diff(env: Mapping[str, Any], info: SchemaInfo) -> str:
    theirs = check_fields(env)
    ours = info.field_digests

    def which(key: str, label: str, differs: str) -> str:
        if key not in ours:
            return f"{label} (only in the driver's schema)"
        if key not in theirs:
            return f"{label} (only in the worker's schema)"
        return f"{label} ({differs})"

    parts = [which(name, name, "type, constraints or validators differ") for name in _differing(env, info)]
    code = []
    entries = (k for k in set(theirs) | set(ours) if k.startswith("@") and not k.startswith(KIND_KEY))
    for key in sorted(k for k in entries if theirs.get(k) != ours.get(k)):
        if key.startswith(CONFIG_KEY):
            model = key.removeprefix(CONFIG_KEY)
            code.append(
                f"model config of {model} (driver: {theirs.get(key, 'defaults')}; worker: {ours.get(key, 'defaults')})"
            )
        elif key == SETTINGS_RECORDED:
            continue  # a driver of an older verl-ctx: no entry tells of settings
        elif key.startswith(SETTING_KEY):
            where = key.removeprefix(SETTING_KEY)
            code.append(
                f"validation settings of {where} (driver: {theirs.get(key, '{}')}; worker: {ours.get(key, '{}')})"
            )
        else:
            code.append(which(key, key[1:], "its code differs"))
    text = ", ".join(parts) or "none by field"
    if code:
        text += "; differing validators, serializers and config: " + ", ".join(code)
    return text


def _mismatch(env: Mapping[str, Any], info: SchemaInfo, why: str) -> SchemaMismatchError:
    role = env["role"]
    return SchemaMismatchError(
        f"[{role}] the driver's schema {env['schema_id']} v{env['schema_version']} "
        f"(fingerprint {_short(env['fingerprint'], info.fingerprint)}) differs from the worker's {info.schema_id} "
        f"v{info.version} (fingerprint {_short(info.fingerprint, env['fingerprint'])}); differing fields: "
        f"{_describe_diff(env, info)}; {why}",
        role=role,
        driver_fingerprint=env["fingerprint"],
        worker_fingerprint=info.fingerprint,
        driver_version=env["schema_version"],
        worker_version=info.version,
        differing_fields=_differing(env, info),
    )


def _short(fingerprint: str, other: str) -> str:
    """The first 12 hex digits, or as many more as it takes to tell ``fingerprint`` from ``other``."""
    same = next((i for i, (a, b) in enumerate(zip(fingerprint, other, strict=False)) if a != b), len(fingerprint))
    return fingerprint[: max(12, same + 4)]
