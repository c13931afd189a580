"""Comparing contexts: a checkpoint's with a launch's (what a resume checks) or with another checkpoint's
(``verl-ctx diff``), every change named, secrets compared sealed and never shown."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...._model.fingerprint import schema_info
from ...._model.registry import qualified_name
from ...._model.role_context import RoleContext
from ...._secrets.redact import MASK
from ...._wire.codec import decode_payload
from ...._worker.decode import decode
from ....errors import ContextError, SchemaSkewWarning
from .sealing import is_sealed, sealed_payload, shown
from .snapshot import Snapshot

_ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "<absent>"})()

_ROLE = "<role>"

_SCHEMA = "<schema>"

_LISTED = 40  # changes listed in an error message

#: Changes kept per comparison (a rewritten 100,000-row table is one decision, not 100,000 lines).
MAX_CHANGES = 1000


@dataclass(frozen=True)
class ContextChange:
    """One difference: ``old`` -> ``new`` at ``path`` of ``role``'s context, both shown redacted."""

    role: str
    path: str
    old: Any
    new: Any
    note: str = ""

    def __str__(self) -> str:
        line = f"[{self.role}] {self.path}: {_text(self.old)} -> {_text(self.new)}"
        return line + (f" ({self.note})" if self.note else "")

    def as_dict(self) -> dict[str, Any]:
        absent = (self.old is _ABSENT, self.new is _ABSENT)
        return {
            "role": self.role,
            "path": self.path,
            "old": None if absent[0] else self.old,
            "new": None if absent[1] else self.new,
            "note": self.note,
        }


def _text(value: Any, limit: int = 120) -> str:
    if value is _ABSENT:
        return "<absent>"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Comparison:
    """Saved contexts against others: the changes, the roles migrated to a newer version, other notes."""

    changes: tuple[ContextChange, ...] = ()
    migrated: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    omitted: int = 0  # changes found beyond MAX_CHANGES, not kept

    @property
    def same(self) -> bool:
        return not self.changes

    def listing(self, limit: int = _LISTED) -> list[str]:
        lines = [str(c) for c in self.changes[:limit]]
        more = len(self.changes) - len(lines) + self.omitted
        return lines + ([f"... and {more} more"] if more else [])


class _Collector:
    def __init__(self) -> None:
        self.changes: list[ContextChange] = []
        self.migrated: list[str] = []
        self.notes: list[str] = []
        self.omitted = 0

    def add(self, change: ContextChange) -> None:
        if len(self.changes) < MAX_CHANGES:
            self.changes.append(change)
        else:
            self.omitted += 1

    def result(self) -> Comparison:
        return Comparison(tuple(self.changes), tuple(self.migrated), tuple(self.notes), self.omitted)


def header(schema_id: str, version: int, fingerprint: str) -> str:
    return f"{schema_id} v{version} ({fingerprint[:12]})"


def _env_header(env: Mapping[str, Any]) -> str:
    return header(env["schema_id"], env["schema_version"], env["fingerprint"])


def _in_shape(
    role: str, env: dict[str, Any], schema: type[RoleContext], salt: bytes, out: _Collector, *, which: str = ""
) -> Any:
    """A saved envelope's data as ``schema`` reads it (migrated if older); ``None`` when it cannot be read.

    ``which`` names the checkpoint in its notes when two are compared."""
    info = schema_info(schema)
    here = header(info.schema_id, info.version, info.fingerprint)
    if env["schema_version"] == info.version and env["fingerprint"] == info.fingerprint:
        if env["schema_id"] != info.schema_id:
            out.notes.append(f"[{role}] schema renamed: {env['schema_id']} -> {info.schema_id} (same fields and rules)")
        return decode_payload(env["payload"])
    if env["schema_version"] > info.version:
        out.add(
            ContextChange(
                role, _SCHEMA, _env_header(env), here, "newer than this code's schema: it cannot be migrated down"
            )
        )
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SchemaSkewWarning)  # the skew is reported below, as a change
            instance = decode(env, schema, role=role)
    except ContextError as e:
        reason = str(e).splitlines()[0]
        out.add(
            ContextChange(role, _SCHEMA, _env_header(env), here, f"cannot be read with this code's schema: {reason}")
        )
        return None
    if env["schema_version"] < info.version:
        out.migrated.append(f"{which + ': ' if which else ''}[{role}] {_env_header(env)} migrated to {here}")
    else:
        # Another schema at the same version, which decode accepted: by the handshake's rule (a worker's, and what
        # `schema check` judges for every value) every saved value reads unchanged, so the schema is no change in
        # itself: the values are compared below (a field added since is its default against the launch's value).
        out.notes.append(
            f"{which + ': ' if which else ''}[{role}] schema changed at the same version ({_env_header(env)} -> "
            f"{here}); the checkpoint's values read unchanged"
        )
    return decode_payload(sealed_payload(instance, salt))


def _diff(role: str, old: Any, new: Any, out: _Collector, *, secrets_comparable: bool = True) -> None:
    """Record every leaf where ``new`` differs from ``old`` (both sealed data of one role)."""
    skipped = False
    stack: list[tuple[str, Any, Any]] = [("", old, new)]
    while stack:
        path, a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            keys = [*a, *(k for k in b if k not in a)]
            for key in reversed(keys):
                sub = f"{path}.{key}" if path else str(key)
                stack.append((sub, a.get(key, _ABSENT), b.get(key, _ABSENT)))
            continue
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            stack.extend((f"{path}[{i}]", a[i], b[i]) for i in reversed(range(len(a))))
            continue
        if _same(a, b):
            continue
        if is_sealed(a) and is_sealed(b) and not secrets_comparable:
            skipped = True
            continue
        secret = is_sealed(a) or is_sealed(b)
        note = "secret changed" if secret else ""
        if a is _ABSENT or b is _ABSENT:
            note = "field only in the checkpoint" if b is _ABSENT else "field not in the checkpoint"
        # A path that holds a secret on either side shows neither: the other side's value (saved before the field
        # became secret, or by a schema that did not declare it) is what the field keeps secret.
        show = (lambda v: MASK) if secret else shown
        out.add(
            ContextChange(role, path or _ROLE, a if a is _ABSENT else show(a), b if b is _ABSENT else show(b), note)
        )
    if skipped:
        out.notes.append(f"[{role}] secret values not compared: the two checkpoints come from different runs (salts)")


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    return bool(a == b) or (isinstance(a, float) and a != a and b != b)


def compare_with_launch(saved: Snapshot, contexts: Mapping[str, RoleContext]) -> Comparison:
    """The saved contexts against a launch's (typed, validated); secrets compared by their sealed digests."""
    out = _Collector()
    for role in sorted(set(saved.envelopes) | set(contexts)):
        if role not in contexts:
            out.add(ContextChange(role, _ROLE, saved.envelopes[role]["schema_id"], _ABSENT, "role not in this launch"))
            continue
        ctx = contexts[role]
        if role not in saved.envelopes:
            out.add(ContextChange(role, _ROLE, _ABSENT, qualified_name(type(ctx)), "role not in the checkpoint"))
            continue
        old = _in_shape(role, saved.envelopes[role], type(ctx), saved.salt, out)
        if old is not None:
            _diff(role, old, decode_payload(sealed_payload(ctx, saved.salt)), out)
    return out.result()


def compare_snapshots(
    old: Snapshot, new: Snapshot, schemas: Mapping[str, type[RoleContext]] | None = None
) -> Comparison:
    """Two checkpoints' contexts; a role whose schema is in ``schemas`` is compared after migrating both sides."""
    out = _Collector()
    comparable = old.salt == new.salt
    for role in sorted(set(old.envelopes) | set(new.envelopes)):
        a, b = old.envelopes.get(role), new.envelopes.get(role)
        if a is None or b is None:
            note = "role only in the second checkpoint" if a is None else "role only in the first checkpoint"
            out.add(
                ContextChange(
                    role,
                    _ROLE,
                    _ABSENT if a is None else a["schema_id"],
                    _ABSENT if b is None else b["schema_id"],
                    note,
                )
            )
            continue
        schema = (schemas or {}).get(role)
        if schema is None:
            # Without today's schema the two payloads are read as saved: another schema makes them incomparable.
            if (a["schema_version"], a["fingerprint"]) != (b["schema_version"], b["fingerprint"]):
                out.add(ContextChange(role, _SCHEMA, _env_header(a), _env_header(b), "schema differs"))
            data_a, data_b = decode_payload(a["payload"]), decode_payload(b["payload"])
        else:
            # Both read as today's schema reads them (migrated when older), as a resume compares: a version that
            # migrates is a note, not a change, so this form and the config form give one verdict.
            data_a = _in_shape(role, a, schema, old.salt, out, which="first checkpoint")
            data_b = _in_shape(role, b, schema, new.salt, out, which="second checkpoint")
            if data_a is None or data_b is None:
                continue
        _diff(role, data_a, data_b, out, secrets_comparable=comparable)
    return out.result()
