"""Exported schemas: one JSON Schema per role schema, a config-file schema, and a lock file; and the check
of today's schemas against an export (``verl-ctx schema export`` / ``schema check``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, RootModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

from .._analysis.kinds import KIND_KEY, input_names, model_named, reads_alike, renamed_to
from .._driver.validate import SECTION
from .._model.fingerprint import CONFIG_KEY, SETTING_KEY, SETTINGS_RECORDED, schema_info
from .._model.registry import ContextRegistry
from .._model.role_context import RoleContext
from .._secrets.plan import field_holds_secret
from .._worker.skew import read_as
from ..errors import ConfigError
from .evolution import Change, diff_schemas

__all__ = ["LOCK_FILE", "CheckReport", "check_export", "export_schemas", "render_json"]

LOCK_FILE = "verl-ctx.lock.json"
CONFIG_SCHEMA_FILE = "config.schema.json"
LOCK_FORMAT = 1
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def render_json(obj: Any) -> str:
    """Deterministic text, so a committed export diffs cleanly and a stale one is detected."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schema_file_name(schema: type[RoleContext]) -> str:
    return "+".join(schema_info(schema).roles) + ".schema.json"


def role_json_schema(schema: type[RoleContext]) -> dict[str, Any]:
    info = schema_info(schema)
    out: dict[str, Any] = schema.model_json_schema()
    out["$schema"] = _DRAFT
    out["$comment"] = f"verl-ctx schema {info.schema_id} version {info.version}; fingerprint {info.fingerprint}"
    return out


def config_json_schema(schemas: Sequence[type[RoleContext]]) -> dict[str, Any]:
    """A schema for a whole verl config file: checks its ``extra_context`` section, allows every other key.

    This is the file an editor (yaml-language-server) points at. Each role's schema is in it (``$defs``), as
    ``<role>.schema.json`` has it, except that no field that can hold a secret is required: the recommended layout
    gives a secret by a Hydra override or ``${oc.env:...}``, never in the file, and an editor would flag that file
    invalid. ``<role>.schema.json`` stays the schema's exact record (``schema check`` compares with it).
    """
    keys, top = models_json_schema([(s, "validation") for s in schemas], schema_generator=_EditorJsonSchema)
    roles: dict[str, Any] = {}
    for schema in schemas:
        for role in schema_info(schema).roles:
            roles[role] = dict(keys[(schema, "validation")])
    out: dict[str, Any] = {
        "$schema": _DRAFT,
        "title": "verl config with verl-ctx contexts",
        "$comment": "secret fields are optional here: give them by override or ${oc.env:...} (docs/editor.md)",
        "type": "object",
        "properties": {
            SECTION: {
                "type": "object",
                "description": "One section per role, checked against that role's verl-ctx schema.",
                "properties": roles,
                "additionalProperties": False,
            }
        },
        "additionalProperties": True,
    }
    if top.get("$defs"):
        out["$defs"] = top["$defs"]
    return out


class _EditorJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema, with every field that can hold a secret optional (at any depth)."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        return super().field_is_required(field, total) and not field_holds_secret(field["schema"])

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        """pydantic's, with unknown keys refused in a nested model that would ignore them, as ``validate`` refuses
        them there (``_driver.unknown_keys``): pydantic states ``additionalProperties: false`` only for
        ``extra="forbid"``, so an editor would let ``judge.timout_s`` pass that ``validate`` rejects."""
        out = super().model_schema(schema)
        cls = schema["cls"]
        if not issubclass(cls, RootModel) and cls.model_config.get("extra") in (None, "ignore"):
            out.setdefault("additionalProperties", False)
        return out


def export_schemas(registry: ContextRegistry, out_dir: Path) -> list[Path]:
    """Write every registered schema, the config schema and the lock file into ``out_dir``."""
    try:
        return _export_schemas(registry, out_dir)
    except OSError as e:  # a directory that cannot be made or written: the user's to fix
        where = e.filename if e.filename is not None else out_dir
        raise ConfigError(
            f"cannot write the export to {out_dir}: {e.strerror or e} ({where}); give a directory you can write to"
        ) from None


def _export_schemas(registry: ContextRegistry, out_dir: Path) -> list[Path]:
    schemas = registry.schemas()
    if not schemas:
        raise ConfigError("no RoleContext schemas are registered; pass the module that defines them with -s")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    lock = {"format": LOCK_FORMAT, "schemas": []}
    for schema in schemas:
        info = schema_info(schema)
        path = out_dir / schema_file_name(schema)
        path.write_text(render_json(role_json_schema(schema)))
        written.append(path)
        lock["schemas"].append(  # type: ignore[attr-defined]
            {
                "roles": list(info.roles),
                "schema_id": info.schema_id,
                "version": info.version,
                "fingerprint": info.fingerprint,
                # per field, validator, serializer and config: lets `schema check` name what JSON Schema hides
                "fields": info.field_digests,
                "file": path.name,
            }
        )
    for path, obj in ((out_dir / CONFIG_SCHEMA_FILE, config_json_schema(schemas)), (out_dir / LOCK_FILE, lock)):
        path.write_text(render_json(obj))
        written.append(path)
    return written


@dataclass
class SchemaReport:
    schema_id: str
    roles: list[str]
    old_version: int | None
    new_version: int | None
    changes: list[Change] = field(default_factory=list)
    problem: str | None = None


@dataclass
class CheckReport:
    reports: list[SchemaReport]

    @property
    def ok(self) -> bool:
        return all(r.problem is None for r in self.reports)


def check_export(registry: ContextRegistry, export_dir: Path) -> CheckReport:
    """Today's schemas against the export in ``export_dir``: every change, and whether it is allowed."""
    lock_path = export_dir / LOCK_FILE
    try:
        text = lock_path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{export_dir} holds no {LOCK_FILE}; create it with `verl-ctx schema export`") from None
    except (OSError, ValueError) as e:  # unreadable, or a path the OS refuses (a NUL byte)
        raise ConfigError(f"cannot read {str(lock_path)!r}: {e}") from None
    try:
        lock = json.loads(text)
        entries = lock["schemas"]
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{lock_path} is not a verl-ctx lock file: {e}") from None

    reports = []
    seen: set[type[RoleContext]] = set()
    for entry in entries:
        roles = list(entry["roles"])
        current = next((registry.get(r) for r in roles if registry.get(r) is not None), None)
        if current is None:
            reports.append(
                SchemaReport(
                    entry["schema_id"],
                    roles,
                    entry["version"],
                    None,
                    problem="SCHEMA_REMOVED: no schema serves these roles any more (breaking for running jobs)",
                )
            )
            continue
        seen.add(current)
        old_schema = json.loads((export_dir / entry["file"]).read_text())
        changes = diff_schemas(old_schema, current.model_json_schema())
        changes += _behaviour_changes(entry, current, changes)
        reports.append(_judge(current, entry, changes))
    for schema in registry.schemas():
        if schema not in seen:
            info = schema_info(schema)
            reports.append(SchemaReport(info.schema_id, list(info.roles), None, info.version))
    return CheckReport(reports)


def _behaviour_changes(entry: dict[str, Any], schema: type[RoleContext], changes: list[Change]) -> list[Change]:
    """What changed that JSON Schema cannot show (validators, serializers, config, list vs tuple), from the lock."""
    info = schema_info(schema)
    if entry.get("fingerprint") == info.fingerprint:
        return []
    old = entry.get("fields")
    if not isinstance(old, dict):
        if changes:
            return []
        return [
            Change(
                "BEHAVIOUR_CHANGED",
                "<root>",
                "the fingerprint changed with no JSON Schema change (a validator, serializer, config or Python-only "
                "type); this export predates per-field digests, so re-export to name them next time",
            )
        ]
    new = info.field_digests
    settings_known = SETTINGS_RECORDED in old  # an older lock's missing setting entries tell nothing
    core = schema.__pydantic_core_schema__
    code: list[Change] = []
    fields: list[Change] = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key.startswith(CONFIG_KEY):
            code += config_changes(key.removeprefix(CONFIG_KEY), before, after)
        elif key.startswith(KIND_KEY):
            # An added or removed field has its own rule; a widening (to an optional, a union, Any) reads every old
            # value as the same typed value, as the handshake judges it.
            renamed = renamed_to(core, key) if isinstance(before, str) and after is None else None
            if renamed is not None and new.get(renamed) != before and not reads_alike(core, renamed, str(before)):
                # renamed with its old name as alias: old payloads are read into the new field, of another kind
                code.append(
                    Change(
                        "FIELD_TYPE_CHANGED",
                        key.removeprefix(KIND_KEY),
                        f"{before} -> {new.get(renamed)} (read as {renamed.rpartition('.')[2]}, by its alias): kinds "
                        "the wire carries alike, so old values would be read as another kind of value; workers "
                        "refuse them as a mismatch",
                    )
                )
            elif before is not None and after is None:
                code += _wire_name_gone(core, key.removeprefix(KIND_KEY), changes)
            elif before is None and after is not None:
                code += _wire_name_required(core, key.removeprefix(KIND_KEY), old, changes)
            elif before is not None and after is not None and not reads_alike(core, key, before):
                code.append(
                    Change(
                        "FIELD_TYPE_CHANGED",
                        key.removeprefix(KIND_KEY),
                        f"{before} -> {after}: kinds the wire carries alike, so old values would be read as another "
                        "kind of value; workers refuse them as a mismatch",
                    )
                )
        elif key == SETTINGS_RECORDED:
            continue
        elif key.startswith(SETTING_KEY):
            if settings_known:
                code += setting_changes(key.removeprefix(SETTING_KEY), before, after)
        elif key.startswith("@"):
            what, _, where = key[1:].rpartition(" on ")
            status = "added" if before is None else "removed" if after is None else "code changed"
            # What runs while a payload validates can change its values; what only serializes or fills a default
            # cannot (payloads carry every field's value).
            rule = "BEHAVIOUR_CHANGED" if what.startswith(_VALUE_SAFE) else "CODE_CHANGED"
            code.append(Change(rule, where or what, f"{what} {status}"))
        elif before is not None and after is not None and not any(_under(c.path, key) for c in changes):
            fields.append(
                Change(
                    "BEHAVIOUR_CHANGED",
                    key,
                    "changed in a way JSON Schema does not show (strict mode, list / tuple, dict key type, ...)",
                )
            )
    if code or fields or changes:
        return code or fields
    return [Change("BEHAVIOUR_CHANGED", "<root>", "the fingerprint changed, but no field, validator or config did")]


def _wire_name_gone(core: Any, where: str, changes: list[Change]) -> list[Change]:
    """A field of a model (``Model.name``) that old payloads carry by its *name*, which the new model no longer reads.

    JSON Schema names properties by alias, payloads carry field names: a field renamed with its old name as alias is
    the same property to JSON Schema and reads old payloads (compatible); a field whose old name became an alias of
    nothing (``t`` with ``alias="s"`` renamed back to ``s``) is the same property too, but old payloads carry ``t``.
    """
    model, _, name = where.rpartition(".")
    cls = model_named(core, model)
    if cls is None or not isinstance(cls, type) or not issubclass(cls, BaseModel) or name in cls.model_fields:
        return []
    if read_as(cls, name) or any(
        c.rule == "FIELD_REMOVED" and (c.path == name or c.path.endswith(f".{name}")) for c in changes
    ):
        return []  # read by an alias, or already named by the JSON Schema's comparison
    return [
        Change(
            "FIELD_REMOVED",
            where,
            f"old payloads carry the field by its name {name!r} (payloads do not use aliases); no field of {model} "
            "reads that name any more: give the field `alias` or `validation_alias` that name",
        )
    ]


def _wire_name_required(core: Any, where: str, old: Mapping[str, Any], changes: list[Change]) -> list[Change]:
    """A required field of a model (``Model.name``) that old payloads, carrying the old field names, do not hold: one
    JSON Schema cannot show when its name is another field's alias (two fields, one property)."""
    model, _, name = where.rpartition(".")
    cls = model_named(core, model)
    spec = cls.model_fields.get(name) if isinstance(cls, type) and issubclass(cls, BaseModel) else None
    if spec is None or not spec.is_required():
        return []
    entries = (k.removeprefix(KIND_KEY).rpartition(".") for k in old if k.startswith(KIND_KEY))
    old_names = {field for owner, _, field in entries if owner == model}
    if not old_names or any(n in old_names for n in [name, *input_names(spec)]):
        return []  # a model new as a whole has its own rule; an old name read by alias is the old field
    if any(c.rule == "REQUIRED_FIELD_ADDED" and (c.path == name or c.path.endswith(f".{name}")) for c in changes):
        return []
    return [Change("REQUIRED_FIELD_ADDED", where, "old payloads lack it (they carry field names); give it a default")]


def setting_changes(where: str, before: str | None, after: str | None) -> list[Change]:
    """Each validation setting JSON Schema leaves out (``SETTINGS``) that changed at ``where``, judged by what an
    old-valid value (a payload, or a config section's raw input) does under the new one: fail (tightened), read as
    another value (a changed transform or union mode: breaking, as a changed validator is), or nothing (loosened)."""
    old, new = json.loads(before or "{}"), json.loads(after or "{}")
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        shown = f"{key} {'unset' if a is None else json.dumps(a)} -> {'unset' if b is None else json.dumps(b)}"
        out += _judged(where, shown, _setting_verdict(key, a, b))
    return out


def _judged(where: str, shown: str, verdict: str) -> list[Change]:
    """The change a setting's verdict makes: none when it was set to its default."""
    if verdict == "same":
        return []
    if verdict == "tighter":
        return [Change("CONSTRAINT_TIGHTENED", where, f"{shown}: values valid before may now fail")]
    if verdict == "looser":
        return [Change("CONSTRAINT_LOOSENED", where, f"{shown}: accepts more, each old value read as before")]
    return [Change("CODE_CHANGED", where, f"{shown}: the same input may validate to another value")]


# Model-config keys (pydantic-core's names) judged as the type-level setting of the same effect; the serialization
# settings change no decoded value.
_CONFIG_AS_SETTING = {
    "strict": "strict",
    "allow_inf_nan": "allow_inf_nan",
    "coerce_numbers_to_str": "coerce_numbers_to_str",
    "str_strip_whitespace": "strip_whitespace",
    "str_to_lower": "to_lower",
    "str_to_upper": "to_upper",
    "regex_engine": "regex_engine",
}
_SERIALIZATION_ONLY = ("ser_json_", "cache_strings", "hide_input_in_errors")


def config_changes(model: str, before: str | None, after: str | None) -> list[Change]:
    """A model config's changes (its lock entry, ``k=v, ...``), each judged by what an old-valid value does: the
    settings a type can set too as ``setting_changes`` judges them, serialization settings as changing no value,
    anything else (or an entry that does not read back) as code that may read a value otherwise."""
    old, new = _config_items(before), _config_items(after)
    if old is None or new is None:
        return [Change("CODE_CHANGED", model, f"model config {before or 'defaults'} -> {after or 'defaults'}")]
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        shown = f"model config {key} {a or 'default'} -> {b or 'default'}"
        if key.startswith(_SERIALIZATION_ONLY):
            out.append(Change("BEHAVIOUR_CHANGED", model, f"{shown}: serialization only"))
            continue
        setting = _CONFIG_AS_SETTING.get(key)
        out += _judged(model, shown, _setting_verdict(setting, _config_value(a), _config_value(b)) if setting else "")
    return out


def _config_items(text: str | None) -> dict[str, str] | None:
    """``k=v, k2=v2`` (a config lock entry) as a mapping; None when it does not read back as one."""
    if not text:
        return {}
    items = [part.partition("=") for part in text.split(", ")]
    if any(not sep or not key.isidentifier() for key, sep, _ in items):
        return None
    return {key: value for key, _, value in items}


def _config_value(text: str | None) -> Any:
    return {"True": True, "False": False, None: None}.get(text, text)


def _setting_verdict(key: str, old: Any, new: Any) -> str:
    """``tighter``, ``looser``, ``same`` (set to its default) or ``other`` (the same input may read as another value)
    for one setting's change."""
    if key in ("strict", "allow_inf_nan", "coerce_numbers_to_str"):
        # strict on, inf/nan refused, numbers no longer taken as text: fewer inputs pass; the reverse, more.
        on = {"strict": True, "allow_inf_nan": False, "coerce_numbers_to_str": False}[key]
        default = {"strict": False, "allow_inf_nan": True, "coerce_numbers_to_str": False}[key]
        was, now = default if old is None else old, default if new is None else new
        return "same" if was == now else "tighter" if now == on else "looser"
    if key in ("max_digits", "decimal_places"):
        return "tighter" if new is not None and (old is None or new < old) else "looser"
    if key in ("tz_constraint", "now_op", "now_utc_offset"):
        return "looser" if new is None else "tighter"
    return "other"  # strip_whitespace, to_lower, to_upper, a union's mode, microseconds_precision, regex_engine


# Field-digest entries (``@<kind> <name> on <where>``) whose change leaves every decoded value as it was.
_VALUE_SAFE = ("serializer ", "wrap-serializer ", "default-factory ", "computed-field ")


def _under(path: str, field_name: str) -> bool:
    return path == field_name or path.startswith((f"{field_name}.", f"{field_name}[", f"{field_name}{{"))


def _judge(schema: type[RoleContext], entry: dict[str, Any], changes: list[Change]) -> SchemaReport:
    info = schema_info(schema)
    old_version: int = entry["version"]
    report = SchemaReport(info.schema_id, list(info.roles), old_version, info.version, changes)
    breaking = [c for c in changes if c.breaking]
    if info.version < old_version:
        report.problem = f"version went down ({old_version} -> {info.version}); versions only grow"
    elif breaking and info.version == old_version:
        report.problem = (
            f"{len(breaking)} breaking change(s) without a version bump: set version={old_version + 1} and add "
            f"`@migration(from_version={old_version})` that turns a v{old_version} payload into v{old_version + 1}"
        )
    elif info.version > old_version:
        missing = [v for v in range(old_version, info.version) if v not in schema.__verl_ctx_migrations__]
        if missing:
            report.problem = (
                f"version {old_version} -> {info.version} needs a migration from each older version; "
                f"missing: {', '.join(f'@migration(from_version={v})' for v in missing)}"
            )
    return report
