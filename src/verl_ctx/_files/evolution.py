"""Compare a schema with its exported copy: every change at any depth, each named by a rule from ``RULES``.

``RULES`` is the one table of rules; docs/schema-evolution.md is checked against it by a test.

A change is **breaking** when some value valid under the old schema fails, or decodes to something else,
under the new one. Values are what ``encode`` sends (every field present) and config sections (where
defaulted fields may be left out). "Something else" is exact: ``1`` read as ``1.0`` or ``True`` is a change.

Paths name where a change is: ``table[].bonus`` (a field of the model a list holds), ``pair[0]`` (a tuple
position), ``weights{}`` / ``weights{key}`` (a dict's values / keys), ``tools[search].index`` (the member of a
discriminated union tagged ``search``), ``shape[Circle]`` (a model in a plain union of several models).

JSON Schema cannot show validators, strictness, ``list`` vs ``tuple`` or a dict's int keys; the fingerprint
does, and ``decode`` refuses any skew that would change a value (see docs/schema-evolution.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from . import json_nodes as nodes

__all__ = ["BREAKING_RULES", "RULES", "Change", "Rule", "diff_schemas"]


@dataclass(frozen=True)
class Rule:
    """One kind of change: its id, whether it breaks old payloads, and why."""

    id: str
    breaking: bool
    why: str


# Rule id -> why, breaking rules first, in the order the docs list them.
_BREAKING_WHY = {
    "FIELD_REMOVED": 'old payloads carry the field: refused at the top (`extra="forbid"`), silently dropped in a '
    "nested model",
    "REQUIRED_FIELD_ADDED": "old payloads lack it",
    "FIELD_MADE_REQUIRED": "a field lost its default; config sections that left it out fail",
    "FIELD_TYPE_CHANGED": "old values may fail, or be read as another type (`int` -> `float` reads 1 as 1.0); also "
    "a new model next to another in a plain union, which may take the other's values",
    "UNION_MEMBER_REMOVED": "a kind of value old payloads may hold is gone (`Optional[int]` -> `int`)",
    "ENUM_VALUE_REMOVED": "a `Literal` / `Enum` value old payloads may hold is gone",
    "CONSTRAINT_TIGHTENED": "a bound, length, pattern, `multipleOf`, uniqueness (list -> set collapses duplicates) "
    "or extra-field policy accepts less than before",
    "CODE_CHANGED": "a validator, `model_post_init`, custom `__init__`, model config, method or class attribute of a "
    "model changed, appeared or went: the same input may validate to other values, which JSON Schema cannot show "
    "and no check can prove otherwise; a skewed worker decodes only values it re-derives unchanged. Bump the version "
    "(a migration that returns its input is enough when old payloads stay valid) or deploy the same code everywhere",
}
_SAFE_WHY = {
    "DEFAULT_CHANGED": "payloads always carry every value, so decoding is unaffected; listed because new launches "
    "change behaviour",
    "DEFAULT_ADDED": "a required field got a default",
    "FIELD_ADDED": "a new field with a default",
    "UNION_MEMBER_ADDED": "one more kind of value is accepted (`int` -> `Optional[int]`)",
    "ENUM_VALUE_ADDED": "one more accepted value",
    "CONSTRAINT_LOOSENED": "accepts more than before, each old value unchanged (a wider bound, `Literal` -> its base "
    "type, a type -> `Any`)",
    "BEHAVIOUR_CHANGED": "a serializer, default factory or computed field changed (payloads carry field values, "
    "so decoding is unaffected), or a Python-only detail JSON Schema cannot show; a skewed worker decodes only when "
    "no value changes, else `SchemaMismatchError`",
}
#: Every rule, in the order the docs list them.
RULES: dict[str, Rule] = {
    **{rule: Rule(rule, True, why) for rule, why in _BREAKING_WHY.items()},
    **{rule: Rule(rule, False, why) for rule, why in _SAFE_WHY.items()},
}
BREAKING_RULES = frozenset(r.id for r in RULES.values() if r.breaking)

_Members = list[dict[str, Any]]  # the JSON Schemas of a union's members

# JSON Schema keyword -> True when a larger value accepts more.
_LENGTHS = {
    "minLength": False,
    "maxLength": True,
    "minItems": False,
    "maxItems": True,
    "minProperties": False,
    "maxProperties": True,
}
_SCALARS = frozenset({"integer", "number", "boolean", "null", "string"})
_EXTRA_ORDER = {"forbid": 0, "ignore": 1, "allow": 2}


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
    """Every change from ``old`` to ``new`` (two JSON Schemas of a model), at any depth."""
    walk = _Comparison(old.get("$defs", {}), new.get("$defs", {}))
    walk.value(old, new, "")
    return walk.out


@dataclass
class _Comparison:
    old_defs: Mapping[str, Any]
    new_defs: Mapping[str, Any]
    out: list[Change] = field(default_factory=list)
    # (old definition, new definition) pairs being compared: a recursive model is compared once.
    active: set[tuple[str, str]] = field(default_factory=set)

    def add(self, rule: str, path: str, detail: str) -> None:
        self.out.append(Change(rule, path or "<root>", detail))

    def value(self, old: Any, new: Any, path: str) -> None:
        old, old_ref = nodes.deref(old, self.old_defs)
        new, new_ref = nodes.deref(new, self.new_defs)
        if old_ref is None or new_ref is None:
            self.typed(old, new, path)
            return
        pair = (old_ref, new_ref)
        if pair in self.active:
            return  # a recursive model: this pair is being compared further up the path
        self.active.add(pair)
        try:
            self.typed(old, new, path)
        finally:
            self.active.discard(pair)

    def typed(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_members, new_members = nodes.members_of(old, self.old_defs), nodes.members_of(new, self.new_defs)
        if len(old_members) > 1 or len(new_members) > 1:
            self.union(old, new, old_members, new_members, path)
        else:
            self.single(old_members[0], new_members[0], path)

    # --- one type against another ------------------------------------------------------------------

    def single(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        ko, kn = nodes.kind_of(old), nodes.kind_of(new)
        if ko != kn:
            if ko == "enum" and nodes.base_of(new) in _SCALARS:
                self.enum_to_base(old, new, path)
            elif kn == "enum" and ko in _SCALARS:
                self.add("CONSTRAINT_TIGHTENED", path, f"{nodes.name_of(old)} -> {nodes.name_of(new)}")
            elif kn == "any":
                self.add("CONSTRAINT_LOOSENED", path, f"{nodes.name_of(old)} -> any value")
            else:
                self.add("FIELD_TYPE_CHANGED", path, f"{nodes.name_of(old)} -> {nodes.name_of(new)}")
            return
        if ko == "enum":
            self.enum_values(old, new, path)
        elif ko == "model":
            self.model(old, new, path)
        elif ko == "dict":
            self.mapping(old, new, path)
        elif ko == "array":
            self.value(old.get("items", {}), new.get("items", {}), f"{path}[]")
            self.constraints(old, new, path)
        elif ko == "tuple":
            self.tuple(old, new, path)
        elif ko == "number|string":
            for a, b in zip(old["anyOf"], new["anyOf"], strict=True):
                self.constraints(a, b, path)
        elif ko != "any":
            self.constraints(old, new, path)

    def enum_to_base(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        """``Literal[...]`` / ``Enum`` -> its base type: fine when the base takes every old value as it is."""
        values = nodes.values_of(old)
        if not all(nodes.json_type(v) == nodes.base_of(new) for v in values):
            self.add("FIELD_TYPE_CHANGED", path, f"{nodes.name_of(old)} -> {nodes.name_of(new)}")
            return
        refused = [v for v in values if not nodes.accepts(new, v)]
        if refused:
            self.add("ENUM_VALUE_REMOVED", path, f"no longer accepts {', '.join(map(repr, refused))}")
        else:
            self.add("CONSTRAINT_LOOSENED", path, f"{nodes.name_of(old)} -> {nodes.name_of(new)}")

    def enum_values(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_vals, new_vals = nodes.values_of(old), nodes.values_of(new)
        old_keys, new_keys = {nodes.exact(v) for v in old_vals}, {nodes.exact(v) for v in new_vals}
        gone = [v for v in old_vals if nodes.exact(v) not in new_keys]
        added = [v for v in new_vals if nodes.exact(v) not in old_keys]
        if gone:
            self.add("ENUM_VALUE_REMOVED", path, f"no longer accepts {', '.join(map(repr, gone))}")
        if added:
            self.add("ENUM_VALUE_ADDED", path, f"now accepts {', '.join(map(repr, added))}")

    def model(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        old_req, new_req = set(old.get("required", ())), set(new.get("required", ()))
        new_extra = nodes.extra_of(new)
        for name, old_prop in old_props.items():
            sub = f"{path}.{name}" if path else name
            if name not in new_props:
                fate = "refused" if new_extra == "forbid" else "dropped" if new_extra == "ignore" else "kept untyped"
                self.add("FIELD_REMOVED", sub, f"old payloads carry it; it would be {fate}")
                continue
            new_prop = new_props[name]
            if name in new_req and name not in old_req:
                self.add("FIELD_MADE_REQUIRED", sub, "it no longer has a default")
            elif name in old_req and name not in new_req:
                self.add("DEFAULT_ADDED", sub, nodes.default_text(new_prop))
            old_default, new_default = nodes.default(old_prop), nodes.default(new_prop)
            if old_default is not None and new_default is not None and old_default != new_default:
                self.add("DEFAULT_CHANGED", sub, f"{old_default} -> {new_default}")
            self.value(old_prop, new_prop, sub)
        for name, new_prop in new_props.items():
            if name not in old_props:
                sub = f"{path}.{name}" if path else name
                if name in new_req:
                    self.add("REQUIRED_FIELD_ADDED", sub, "old payloads lack it; give it a default")
                else:
                    self.add("FIELD_ADDED", sub, nodes.default_text(new_prop))
        old_extra = nodes.extra_of(old)
        if old_extra != new_extra:
            rule = (
                "CONSTRAINT_TIGHTENED" if _EXTRA_ORDER[new_extra] < _EXTRA_ORDER[old_extra] else "CONSTRAINT_LOOSENED"
            )
            self.add(rule, path, f'extra="{old_extra}" -> extra="{new_extra}"')

    def mapping(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        self.value(nodes.values_schema(old), nodes.values_schema(new), f"{path}{{}}")
        self.value(nodes.keys_schema(old), nodes.keys_schema(new), f"{path}{{key}}")
        self.constraints(old, new, path)

    def tuple(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_items, new_items = old.get("prefixItems", []), new.get("prefixItems", [])
        if len(old_items) != len(new_items) or ("items" in old) != ("items" in new):
            self.add("FIELD_TYPE_CHANGED", path, f"{nodes.name_of(old)} -> {nodes.name_of(new)}")
            return
        for i, (a, b) in enumerate(zip(old_items, new_items, strict=True)):
            self.value(a, b, f"{path}[{i}]")
        if "items" in old:
            self.value(old["items"], new["items"], f"{path}[]")
        self.constraints(old, new, path)

    # --- unions ------------------------------------------------------------------------------------

    def union(
        self, old: dict[str, Any], new: dict[str, Any], old_members: _Members, new_members: _Members, path: str
    ) -> None:
        old_tag, new_tag = nodes.discriminator(old), nodes.discriminator(new)
        tag = old_tag or new_tag
        # The same discriminator, or one model becoming a tagged union (or back): members match by tag.
        alone = len(old_members) == 1 or len(new_members) == 1
        if tag and (old_tag == new_tag or alone) and all(nodes.tags(m, tag) for m in old_members + new_members):
            self.tagged(old_members, new_members, tag, path)
        elif old_tag and not new_tag and not alone and nodes.told_apart(old_members + new_members, old_tag):
            # The discriminator dropped, each member still a distinct constant at the tag: an old value (which had
            # to carry its tag) validates as its own member only, as before; a config section may now leave the tag
            # out, which the tagged union refused.
            self.tagged(old_members, new_members, old_tag, path)
            self.add("CONSTRAINT_LOOSENED", path, f"discriminator {old_tag!r} dropped; members still told apart by it")
        elif old_tag != new_tag and not alone:
            self.add("FIELD_TYPE_CHANGED", path, f"discriminator {old_tag!r} -> {new_tag!r}")
        else:
            self.plain(old, new, old_members, new_members, path)

    def tagged(self, old_members: _Members, new_members: _Members, tag: str, path: str) -> None:
        old_by = {t: m for m in old_members for t in nodes.tags(m, tag)}
        new_by = {t: m for m in new_members for t in nodes.tags(m, tag)}
        compared: set[tuple[int, int]] = set()
        for value, member in old_by.items():
            sub = nodes.member_path(path, value)
            if value not in new_by:
                self.add("UNION_MEMBER_REMOVED", sub, f"no member is tagged {tag}={value!r} any more")
                continue
            pair = (id(member), id(new_by[value]))
            if pair not in compared:
                compared.add(pair)
                self.value(member, new_by[value], sub)
        for value in new_by:
            if value not in old_by:
                self.add("UNION_MEMBER_ADDED", nodes.member_path(path, value), f"now accepts {tag}={value!r}")

    def plain(
        self, old: dict[str, Any], new: dict[str, Any], old_members: _Members, new_members: _Members, path: str
    ) -> None:
        old_by, new_by = nodes.keyed(old_members), nodes.keyed(new_members)
        several = (
            sum(nodes.base_of(m) == "object" for m in old_members) > 1
            or sum(nodes.base_of(m) == "object" for m in new_members) > 1
        )
        matched: set[str] = set()
        removed = []
        for key, member in old_by.items():
            partner = key if key in new_by else nodes.same_base(member, new_by, matched | set(old_by))
            if partner is None:
                removed.append(member)
                continue
            matched.add(partner)
            sub = f"{path}[{member.get('title', key)}]" if several and nodes.base_of(member) == "object" else path
            self.value(member, new_by[partner], sub)
        if len(old_members) == 1 and removed:  # a type became a union that does not hold it
            self.add("FIELD_TYPE_CHANGED", path, f"{nodes.name_of(old)} -> {nodes.name_of(new)}")
            return
        for member in removed:
            self.add("UNION_MEMBER_REMOVED", path, f"no longer accepts {nodes.name_of(member)}")
        added = [m for k, m in new_by.items() if k not in matched]
        old_objects = any(nodes.base_of(m) == "object" for m in old_members)
        for member in added:
            if nodes.base_of(member) == "object" and old_objects:
                self.add(
                    "FIELD_TYPE_CHANGED",
                    path,
                    f"{nodes.name_of(member)} joins {nodes.name_of(old)}: an old value may now validate as it (or lack "
                    'the tag to be routed); use a discriminated union, Field(discriminator="...")',
                )
            else:
                self.add("UNION_MEMBER_ADDED", path, f"now also accepts {nodes.name_of(member)}")

    # --- constraints -------------------------------------------------------------------------------

    def constraints(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        integer = old.get("type") == "integer" and new.get("type") == "integer"
        for keys, upper in ((nodes.LOWER, False), (nodes.UPPER, True)):
            a, b = nodes.bound_of(old, keys, integer, upper), nodes.bound_of(new, keys, integer, upper)
            if a != b:
                rule = "CONSTRAINT_LOOSENED" if nodes.wider(a, b, upper) else "CONSTRAINT_TIGHTENED"
                self.add(rule, path, f"{nodes.bound_text(a, upper)} -> {nodes.bound_text(b, upper)}")
        for key, larger_accepts_more in _LENGTHS.items():
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            if a is None:
                tightened = True  # a new bound
            elif b is None:
                tightened = False  # a bound removed
            else:
                tightened = (b < a) if larger_accepts_more else (b > a)
            self.add("CONSTRAINT_TIGHTENED" if tightened else "CONSTRAINT_LOOSENED", path, f"{key} {a!r} -> {b!r}")
        a, b = old.get("multipleOf"), new.get("multipleOf")
        if a != b:
            loosened = b is None or (a is not None and (Fraction(str(a)) / Fraction(str(b))).denominator == 1)
            self.add("CONSTRAINT_LOOSENED" if loosened else "CONSTRAINT_TIGHTENED", path, f"multipleOf {a!r} -> {b!r}")
        a, b = old.get("pattern"), new.get("pattern")
        if a != b:
            loosened = b is None or (isinstance(a, str) and isinstance(b, str) and nodes.pattern_wider(a, b))
            self.add("CONSTRAINT_LOOSENED" if loosened else "CONSTRAINT_TIGHTENED", path, f"pattern {a!r} -> {b!r}")
        a, b = bool(old.get("uniqueItems")), bool(new.get("uniqueItems"))
        if a != b:
            if b:
                self.add("CONSTRAINT_TIGHTENED", path, "items must now be unique: duplicates collapse (list -> set)")
            else:
                self.add("CONSTRAINT_LOOSENED", path, "items need not be unique any more (set -> list)")
