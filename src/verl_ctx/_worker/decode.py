"""``decode``: the worker side. Find the envelope, shake hands on the schema, migrate, validate.

The handshake, by what the envelope says against the worker's schema:

* same version, same fingerprint: check the payload against the schema's types and constraints and build it
  without running the user's validators again (``_analysis.trusted``: the driver's validated values are the worker's); a
  payload that fails was edited: ``EnvelopeError``;
* same version, other fingerprint: validate, then prove nothing changed: the decoded context, encoded again,
  must give back the driver's values exactly (same types, nothing dropped or coerced). Proven: a
  ``SchemaSkewWarning`` naming the differing fields. Not proven: ``SchemaMismatchError``;
* older version: run the migrations up to the worker's version, then validate (``SchemaMismatchError`` if
  a step is missing, fails, or the result does not validate); newer version: ``SchemaMismatchError``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import msgspec
from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

from .._analysis.trusted import replay_post_init, trusted_validator
from .._model.field_errors import MAX_ERRORS, field_errors
from .._model.fingerprint import (
    CONFIG_KEY,
    SchemaInfo,
    cached_info,
    roles_for,
    schema_info,
)
from .._model.role_context import Migration, RoleContext
from .._secrets.plan import secret_plan
from .._secrets.redact import learn_context
from .._wire.budget import PayloadCostError, check_decode_cost
from .._wire.codec import decode_payload
from .._wire.compiled import Refused, decoder_for, decoders
from .._wire.envelope import (
    DEFAULT_MAX_BYTES,
    ENVELOPE_FORMAT,
    ENVELOPE_KEYS,
    FORMAT_KEY,
    RESERVED_KEY,
    check_fields,
)
from .._wire.sources import find_envelope
from ..errors import EnvelopeError, FieldError
from .limits import GC_PAUSE_BYTES, fail_fast_validator, paused_gc, with_fail_fast, without_excess_keys
from .skew import check_skew, mismatch

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
    class carries the context; see ``verl_ctx._wire.sources`` for the order. The schema always comes from the caller:
    nothing named in the payload is imported, and nothing is unpickled.

    Raises ``MissingContextError`` when no context for the schema's role is there (saying where it looked),
    ``EnvelopeError`` for a corrupt, oversize or unknown-format one, and ``SchemaMismatchError`` when the
    driver's schema differs from ``schema`` in a way that could change a value.
    """
    info = cached_info(schema) or schema_info(schema)
    roles = info.roles if role is None else roles_for(info, role)
    refused = False  # by the compiled decoder on the hot path: pydantic decides, without a second try
    payload = _hot_payload(source, info, roles, max_bytes) if type(source) is dict else None
    if payload is not None and (compiled := decoders.get(schema)) is not None:  # set by a first, general decode
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
        check_skew(env, info, schema, instance, data)
    if _watchers:
        _told(instance)
    return instance


def _hot_payload(source: dict[Any, Any], info: SchemaInfo, roles: tuple[str, ...], max_bytes: int) -> bytes | None:
    """The payload of every worker's hot path, or None: an envelope of this very schema (its role, fingerprint, id
    and version) given as itself or in an ``extra_context`` dict under the one role read, small enough to build with
    the collector on. Checked as ``check_envelope``'s fast path checks it, inline (this runs on every decode);
    anything else takes the general path."""
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
    ):
        return payload
    return None


def _told(instance: RoleContext) -> None:
    for watcher in tuple(_watchers):
        watcher(instance)


def _build(
    env: Mapping[str, Any], info: SchemaInfo, schema: type[_C], payload: bytes, refused: bool = False
) -> tuple[_C, Any]:
    """Parse the payload, migrate it if the driver's schema is older, validate it into ``schema``; the instance and
    the plain data it was built from (None from the compiled decoder).

    ``refused``: the compiled decoder refused this payload already.
    """
    if not refused and env["fingerprint"] == info.fingerprint and env["schema_version"] == info.version:
        compiled = decoders[schema] if schema in decoders else decoder_for(schema)
        if compiled is not None and env["schema_id"] == info.schema_id:
            _check_cost(env, payload, typed=True)  # the compiled decoder parses too: typed, its maps and arrays bounded
            try:
                # msgspec checks in C what pydantic would (verl_ctx._wire.compiled); what it refuses, pydantic decides.
                return compiled(payload), None
            except Refused:
                pass
    data = _parse(env["role"], payload)
    if env["schema_version"] != info.version:
        data = _upgrade(env, info, data, schema.__verl_ctx_migrations__)
    checked, dropped, core = data, 0, schema.__pydantic_core_schema__
    if len(payload) > FAIL_FAST_BYTES:
        # Bounded errors for hostile payloads: containers stop at their first bad item, and unknown keys past the
        # first MAX_ERRORS are only counted (pydantic would build an error record for each).
        checked, dropped = without_excess_keys(data, schema, MAX_ERRORS)
        core = with_fail_fast(core)
    validator, post_init = _validator_for(env, info, schema, core, fail_fast=len(payload) > FAIL_FAST_BYTES)
    return _validated(env, info, schema, validator, post_init, checked, dropped), data


def _parse(role: str, payload: bytes) -> dict[Any, Any]:
    """The payload as plain data: a map of field values, or an ``EnvelopeError`` saying why not."""
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
    return data


def _validator_for(
    env: Mapping[str, Any], info: SchemaInfo, schema: type[BaseModel], core: Any, *, fail_fast: bool
) -> tuple[SchemaValidator, frozenset[type]]:
    """Which validator builds the instance, and the classes whose ``model_post_init`` it leaves to be replayed:

    ============================================  ============================================================
    the payload's schema                          validator
    ============================================  ============================================================
    the driver's own (same fingerprint, version)  trusted: types and constraints checked, the user's validators
                                                  not run again (their results are the payload)
    same version, skewed                          trusted, but running the validators whose code is not the
                                                  driver's (what they change is then refused by the skew check)
    an older version, migrated                    the schema's own validator (fail-fast for a large payload)
    ============================================  ============================================================
    """
    if env["schema_version"] != info.version:
        return (fail_fast_validator(schema) if fail_fast else schema.__pydantic_validator__), frozenset()  # type: ignore[return-value]
    if env["fingerprint"] == info.fingerprint:
        return trusted_validator(schema, core)
    # Their code is the same only where nothing they could read changed: no model's class state or config differs.
    shared, replay = _shared_code(env, info)
    return trusted_validator(schema, core, shared, replay)


def _validated(
    env: Mapping[str, Any],
    info: SchemaInfo,
    schema: type[_C],
    validator: SchemaValidator,
    post_init: frozenset[type],
    checked: Any,
    dropped: int,
) -> _C:
    """The instance ``validator`` builds from ``checked``, or the error naming every field that failed (``dropped``:
    unknown keys left out of ``checked``, counted in the listing)."""
    role = env["role"]
    same_shape = env["schema_version"] == info.version and env["fingerprint"] == info.fingerprint
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
        return instance  # type: ignore[no-any-return]
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
    raise mismatch(env, info, "and the payload does not validate against the worker's schema:\n" + listing)


def _check_cost(env: Mapping[str, Any], payload: bytes, *, typed: bool) -> None:
    """Refuse a payload whose decoding would cost far more memory than its size (``_wire.budget``), before parsing."""
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
        raise mismatch(
            env,
            info,
            f"the driver's schema is version {version}, newer than this worker's "
            f"{info.version}; deploy the same code to the workers (a worker cannot downgrade)",
        )
    while version < info.version:
        step = migrations.get(version)
        if step is None:
            raise mismatch(
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
            raise mismatch(env, info, f"the migration from version {version} failed: {failed}")
        if not isinstance(upgraded, dict):
            raise mismatch(
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
