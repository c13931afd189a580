"""The skew receipt: what a worker whose schema is not the driver's (same name and version, another fingerprint) may
decode. Only provably lossless skew decodes (every value the driver sent reads back the same, fields it did not send
filled by their defaults), with a ``SchemaSkewWarning``; anything else is a ``SchemaMismatchError`` naming the
fields, validators and config that differ, never a value."""

from __future__ import annotations

import datetime as dt
import math
import warnings
from collections.abc import Mapping
from typing import Any

import msgspec
from pydantic import BaseModel

from .._analysis.kinds import KIND_KEY, input_names, kept_untyped, reads_alike, renamed_to
from .._model.fingerprint import (
    CONFIG_KEY,
    SETTING_KEY,
    SETTINGS_RECORDED,
    SchemaInfo,
)
from .._model.role_context import RoleContext
from .._wire.codec import decode_payload, encode_payload
from .._wire.envelope import (
    check_fields,
)
from ..errors import SchemaMismatchError, SchemaSkewWarning

__all__ = ["check_skew", "mismatch", "read_as"]


def check_skew(
    env: Mapping[str, Any], info: SchemaInfo, schema: type[RoleContext], instance: RoleContext, data: Any
) -> None:
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
            raise mismatch(
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


def mismatch(env: Mapping[str, Any], info: SchemaInfo, why: str) -> SchemaMismatchError:
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
