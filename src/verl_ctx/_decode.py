"""``decode``: the worker side. Find the envelope, shake hands on the schema, migrate, validate."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from pydantic import ValidationError

from ._codec import GC_PAUSE_BYTES, decode_payload, paused_gc
from ._envelope import DEFAULT_MAX_BYTES, check_fields, find_envelope
from ._errors import ContextValidationError, EnvelopeError, SchemaMismatchError, SchemaSkewWarning
from ._pydantic_errors import field_errors
from ._schema import Migration, RoleContext, SchemaInfo, cached_info, schema_info

__all__ = ["decode"]

_C = TypeVar("_C", bound=RoleContext)


def decode(
    source: object,
    schema: type[_C],
    *,
    role: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> _C:
    """A validated, frozen ``schema`` instance from the envelope in ``source``.

    ``source`` is an envelope, its text form, an ``extra_context`` mapping that holds one, or any object
    with an ``extra_context`` attribute (verl's ``TrainingWorkerConfig``). The schema always comes from the
    caller: nothing named in the payload is imported, and nothing is unpickled.

    Raises ``MissingContextError`` when no envelope for the schema's role is there, ``EnvelopeError`` for
    a corrupt, oversize or unknown-format one, and ``SchemaMismatchError`` when the driver's schema differs
    from ``schema`` in a way the payload cannot survive. A same-version payload whose fingerprint differs but
    which still validates is returned with a ``SchemaSkewWarning`` naming the differing fields.
    """
    info = cached_info(schema) or schema_info(schema)
    roles = info.roles
    if role is not None:
        if role not in roles:
            raise EnvelopeError(f"{info.schema_id} serves roles {', '.join(roles)}, not '{role}'")
        roles = (role,)
    env = find_envelope(source, roles, max_bytes=max_bytes)
    env_role = env["role"]
    if env_role not in roles:
        raise EnvelopeError(
            f"this envelope carries role '{env_role}', but {info.schema_id} reads "
            f"{' / '.join(roles)}; pass the schema of role '{env_role}'"
        )
    payload: bytes = env["payload"]
    if len(payload) > max_bytes:
        raise EnvelopeError(
            f"[{env_role}] payload is {len(payload)} bytes, over the {max_bytes}-byte limit; "
            "raise max_bytes= if this size is intended"
        )
    if len(payload) > GC_PAUSE_BYTES:
        # One pause over parsing and validation: re-enabling the collector in between would make the next
        # allocation traverse every row just parsed.
        with paused_gc():
            instance = _build(env, info, schema, payload)
    else:
        instance = _build(env, info, schema, payload)
    if env["schema_version"] == info.version and env["fingerprint"] != info.fingerprint:
        _warn_skew(env, info)
    return instance


def _build(env: Mapping[str, Any], info: SchemaInfo, schema: type[_C], payload: bytes) -> _C:
    """Parse the payload, migrate it if the driver's schema is older, validate it into ``schema``."""
    role = env["role"]
    try:
        data = decode_payload(payload)
    except (msgspec.DecodeError, ValueError, OverflowError) as e:
        raise EnvelopeError(f"[{role}] corrupt payload: {e}") from None
    except RecursionError:
        raise EnvelopeError(f"[{role}] corrupt payload: nested too deeply to decode") from None
    if not isinstance(data, dict):
        raise EnvelopeError(f"[{role}] corrupt payload: expected a map of field values, got {type(data).__name__}")

    same_shape = env["schema_version"] == info.version and env["fingerprint"] == info.fingerprint
    if not same_shape:
        data = _upgrade(env, info, data, schema.__verl_ctx_migrations__)
    try:
        # Lax and by field name: the driver validated these values already; the worker re-checks them
        # against its own schema and rebuilds exact types (tuples, enums, UUIDs) from msgpack's plain ones.
        return schema.__pydantic_validator__.validate_python(data, strict=False, by_name=True)  # type: ignore[no-any-return]
    except ValidationError as e:
        errors = field_errors(e, role=role, schema=schema, secret_names=info.secret_fields)
        if same_shape:
            # Same fingerprint and the payload still fails: the bytes were edited, not the code.
            raise ContextValidationError(
                errors, summary=f"[{role}] payload does not validate against {info.schema_id}"
            ) from None
        raise _mismatch(
            env,
            info,
            "and the payload does not validate against the worker's schema:\n"
            + "\n".join(f"  {err}" for err in errors),
        ) from None
    except RecursionError:
        raise EnvelopeError(f"[{role}] corrupt payload: nested too deeply to validate") from None


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
    if version == info.version:
        return data
    while version < info.version:
        step = migrations.get(version)
        if step is None:
            raise _mismatch(
                env,
                info,
                f"no migration from version {version} to {version + 1}; add "
                f"`@migration(from_version={version})` to the schema",
            )
        try:
            upgraded = step(dict(data))
        except Exception as e:
            raise _mismatch(env, info, f"the migration from version {version} failed: {type(e).__name__}: {e}") from e
        if not isinstance(upgraded, dict):
            raise _mismatch(
                env,
                info,
                f"the migration from version {version} returned "
                f"{type(upgraded).__name__}, not the dict of version {version + 1}",
            )
        data, version = upgraded, version + 1
    return data


def _differing(env: Mapping[str, Any], info: SchemaInfo) -> list[str]:
    theirs = check_fields(env)
    ours = info.field_digests
    return sorted(name for name in set(theirs) | set(ours) if theirs.get(name) != ours.get(name))


def _describe_diff(env: Mapping[str, Any], info: SchemaInfo) -> str:
    theirs = check_fields(env)
    ours = info.field_digests
    parts = []
    for name in _differing(env, info):
        if name not in ours:
            parts.append(f"{name} (only in the driver's schema)")
        elif name not in theirs:
            parts.append(f"{name} (only in the worker's schema)")
        else:
            parts.append(f"{name} (type or constraints differ)")
    return ", ".join(parts) or "none by field (the schema's own settings differ)"


def _mismatch(env: Mapping[str, Any], info: SchemaInfo, why: str) -> SchemaMismatchError:
    role = env["role"]
    return SchemaMismatchError(
        f"[{role}] the driver's schema {env['schema_id']} v{env['schema_version']} "
        f"(fingerprint {env['fingerprint'][:12]}) differs from the worker's {info.schema_id} v{info.version} "
        f"(fingerprint {info.fingerprint[:12]}); differing fields: {_describe_diff(env, info)}; {why}",
        role=role,
        driver_fingerprint=env["fingerprint"],
        worker_fingerprint=info.fingerprint,
        driver_version=env["schema_version"],
        worker_version=info.version,
        differing_fields=_differing(env, info),
    )


def _warn_skew(env: Mapping[str, Any], info: SchemaInfo) -> None:
    warnings.warn(
        SchemaSkewWarning(
            f"[{env['role']}] driver and worker both use {info.schema_id} v{info.version} but their schemas differ "
            f"(fingerprint {env['fingerprint'][:12]} vs {info.fingerprint[:12]}); differing fields: "
            f"{_describe_diff(env, info)}. The payload validated, so decoding went on; deploy the same code "
            "to driver and workers, or bump version= with a migration"
        ),
        stacklevel=3,
    )
