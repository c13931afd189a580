"""Compare a schema with its exported copy and name each change with a rule id (``RULES``, the one table
that docs/schema-evolution.md is checked against)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._fingerprint import inline_refs, strip_docs

__all__ = ["BREAKING_RULES", "RULES", "Change", "Rule", "diff_schemas"]


@dataclass(frozen=True)
class Rule:
    """One kind of change: its id, whether it breaks old payloads, and why."""

    id: str
    breaking: bool
    why: str


#: Every rule, in the order the docs list them. A breaking change is one after which a payload valid under
#: the old schema can fail, or be read differently, under the new one.
RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("FIELD_REMOVED", True, 'old payloads carry the field; `extra="forbid"` refuses it'),
        Rule("REQUIRED_FIELD_ADDED", True, "old payloads lack it"),
        Rule("FIELD_MADE_REQUIRED", True, "a field lost its default; payloads that relied on it fail"),
        Rule("FIELD_TYPE_CHANGED", True, "old values may not validate, or may be read as something else"),
        Rule("ENUM_VALUE_REMOVED", True, "a `Literal` / `Enum` value old payloads may hold is gone"),
        Rule("CONSTRAINT_TIGHTENED", True, "a bound, length, pattern or `multipleOf` accepts less than before"),
        Rule(
            "DEFAULT_CHANGED",
            False,
            "payloads always carry every value, so decoding is unaffected; listed because new launches change "
            "behaviour",
        ),
        Rule("FIELD_ADDED", False, "a new field with a default"),
        Rule("ENUM_VALUE_ADDED", False, "one more accepted value"),
        Rule("CONSTRAINT_LOOSENED", False, "accepts more than before"),
    )
}
BREAKING_RULES = frozenset(r.id for r in RULES.values() if r.breaking)
# JSON Schema keyword -> True when a larger value accepts more.
_BOUNDS = {
    "minimum": False,
    "exclusiveMinimum": False,
    "minLength": False,
    "minItems": False,
    "minProperties": False,
    "maximum": True,
    "exclusiveMaximum": True,
    "maxLength": True,
    "maxItems": True,
    "maxProperties": True,
}
_SHAPE_IGNORED = frozenset({"default", "enum", "const", "pattern", "multipleOf", *_BOUNDS, "readOnly", "writeOnly"})


@dataclass(frozen=True)
class Change:
    rule: str
    path: str
    detail: str

    @property
    def breaking(self) -> bool:
        return self.rule in BREAKING_RULES

    def __str__(self) -> str:
        return f"{self.rule:<22} {self.path}: {self.detail}"


def diff_schemas(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every change from ``old`` to ``new`` (two JSON Schemas of a model), nested models included."""
    old_c, new_c = strip_docs(dict(old)), strip_docs(dict(new))
    old_i = inline_refs(old_c, old_c.get("$defs", {}), ())
    new_i = inline_refs(new_c, new_c.get("$defs", {}), ())
    changes: list[Change] = []
    _diff_object(old_i, new_i, "", changes)
    return changes


def _diff_object(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str, out: list[Change]) -> None:
    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    old_req, new_req = set(old.get("required", ())), set(new.get("required", ()))
    for name in old_props:
        path = f"{prefix}{name}"
        if name not in new_props:
            out.append(Change("FIELD_REMOVED", path, "old payloads carry it and will be refused"))
            continue
        if name in new_req and name not in old_req:
            out.append(Change("FIELD_MADE_REQUIRED", path, "it no longer has a default"))
        _diff_field(old_props[name], new_props[name], path, out)
    for name in new_props:
        if name not in old_props:
            path = f"{prefix}{name}"
            if name in new_req:
                out.append(Change("REQUIRED_FIELD_ADDED", path, "old payloads lack it; give it a default"))
            else:
                default = new_props[name].get("default")
                out.append(Change("FIELD_ADDED", path, f"default {default!r}"))


def _diff_field(old: Mapping[str, Any], new: Mapping[str, Any], path: str, out: list[Change]) -> None:
    if "default" in old and "default" in new and old["default"] != new["default"]:
        out.append(Change("DEFAULT_CHANGED", path, f"{old['default']!r} -> {new['default']!r}"))
    old_vals, new_vals = _values(old), _values(new)
    if old_vals is not None and new_vals is not None:
        gone = [v for v in old_vals if v not in new_vals]
        added = [v for v in new_vals if v not in old_vals]
        if gone:
            out.append(Change("ENUM_VALUE_REMOVED", path, f"no longer accepts {', '.join(map(repr, gone))}"))
        if added:
            out.append(Change("ENUM_VALUE_ADDED", path, f"now accepts {', '.join(map(repr, added))}"))
    elif (old_vals is None) != (new_vals is None):
        out.append(Change("FIELD_TYPE_CHANGED", path, f"{_type_name(old)} -> {_type_name(new)}"))
        return
    if old.get("type") == "object" and new.get("type") == "object" and "properties" in old and "properties" in new:
        _diff_object(old, new, f"{path}.", out)
        return
    if _shape(old) != _shape(new):
        out.append(Change("FIELD_TYPE_CHANGED", path, f"{_type_name(old)} -> {_type_name(new)}"))
        return
    _diff_constraints(old, new, path, out)


def _diff_constraints(old: Mapping[str, Any], new: Mapping[str, Any], path: str, out: list[Change]) -> None:
    for key, larger_accepts_more in _BOUNDS.items():
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if a is None:
            tightened = True  # a new bound
        elif b is None:
            tightened = False  # a bound removed
        else:
            tightened = (b < a) if larger_accepts_more else (b > a)
        rule = "CONSTRAINT_TIGHTENED" if tightened else "CONSTRAINT_LOOSENED"
        out.append(Change(rule, path, f"{key} {a!r} -> {b!r}"))
    for key in ("pattern", "multipleOf"):
        a, b = old.get(key), new.get(key)
        if a != b:
            rule = "CONSTRAINT_LOOSENED" if b is None else "CONSTRAINT_TIGHTENED"
            out.append(Change(rule, path, f"{key} {a!r} -> {b!r}"))


def _values(node: Mapping[str, Any]) -> list[Any] | None:
    if "enum" in node:
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    return None


def _shape(node: Any) -> Any:
    """The part of a schema that says what type a value has, without bounds, defaults or enum values."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items() if k not in _SHAPE_IGNORED}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return node


def _type_name(node: Mapping[str, Any]) -> str:
    if "type" in node:
        return str(node["type"])
    if "anyOf" in node:
        return " | ".join(_type_name(n) for n in node["anyOf"])
    if "enum" in node or "const" in node:
        return f"one of {_values(node)}"
    return "object" if "properties" in node else "schema"
