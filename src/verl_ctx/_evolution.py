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

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

try:  # Python's own regex parser: public as sre_parse up to 3.10, re._parser since 3.11 (sre_parse then warns)
    from re import _parser as _sre  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef,unused-ignore]

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

_LOWER = (("minimum", False), ("exclusiveMinimum", True))
_UPPER = (("maximum", False), ("exclusiveMaximum", True))
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
_EXTRA = {False: "forbid", None: "ignore", True: "allow"}
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
    walk = _Walk(old.get("$defs", {}), new.get("$defs", {}))
    walk.value(old, new, "")
    return walk.out


@dataclass
class _Walk:
    old_defs: Mapping[str, Any]
    new_defs: Mapping[str, Any]
    out: list[Change] = field(default_factory=list)
    # (old definition, new definition) pairs being compared: a recursive model is compared once.
    active: set[tuple[str, str]] = field(default_factory=set)

    def add(self, rule: str, path: str, detail: str) -> None:
        self.out.append(Change(rule, path or "<root>", detail))

    def value(self, old: Any, new: Any, path: str) -> None:
        old, old_ref = _deref(old, self.old_defs)
        new, new_ref = _deref(new, self.new_defs)
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
        old_members, new_members = _members(old, self.old_defs), _members(new, self.new_defs)
        if len(old_members) > 1 or len(new_members) > 1:
            self.union(old, new, old_members, new_members, path)
        else:
            self.single(old_members[0], new_members[0], path)

    # --- one type against another ------------------------------------------------------------------

    def single(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        ko, kn = _kind(old), _kind(new)
        if ko != kn:
            if ko == "enum" and _base(new) in _SCALARS:
                self.enum_to_base(old, new, path)
            elif kn == "enum" and ko in _SCALARS:
                self.add("CONSTRAINT_TIGHTENED", path, f"{_name(old)} -> {_name(new)}")
            elif kn == "any":
                self.add("CONSTRAINT_LOOSENED", path, f"{_name(old)} -> any value")
            else:
                self.add("FIELD_TYPE_CHANGED", path, f"{_name(old)} -> {_name(new)}")
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
        values = _values(old)
        if not all(_json_type(v) == _base(new) for v in values):
            self.add("FIELD_TYPE_CHANGED", path, f"{_name(old)} -> {_name(new)}")
            return
        refused = [v for v in values if not _accepts(new, v)]
        if refused:
            self.add("ENUM_VALUE_REMOVED", path, f"no longer accepts {', '.join(map(repr, refused))}")
        else:
            self.add("CONSTRAINT_LOOSENED", path, f"{_name(old)} -> {_name(new)}")

    def enum_values(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_vals, new_vals = _values(old), _values(new)
        old_keys, new_keys = {_exact(v) for v in old_vals}, {_exact(v) for v in new_vals}
        gone = [v for v in old_vals if _exact(v) not in new_keys]
        added = [v for v in new_vals if _exact(v) not in old_keys]
        if gone:
            self.add("ENUM_VALUE_REMOVED", path, f"no longer accepts {', '.join(map(repr, gone))}")
        if added:
            self.add("ENUM_VALUE_ADDED", path, f"now accepts {', '.join(map(repr, added))}")

    def model(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        old_req, new_req = set(old.get("required", ())), set(new.get("required", ()))
        new_extra = _extra(new)
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
                self.add("DEFAULT_ADDED", sub, _default_text(new_prop))
            old_default, new_default = _default(old_prop), _default(new_prop)
            if old_default is not None and new_default is not None and old_default != new_default:
                self.add("DEFAULT_CHANGED", sub, f"{old_default} -> {new_default}")
            self.value(old_prop, new_prop, sub)
        for name, new_prop in new_props.items():
            if name not in old_props:
                sub = f"{path}.{name}" if path else name
                if name in new_req:
                    self.add("REQUIRED_FIELD_ADDED", sub, "old payloads lack it; give it a default")
                else:
                    self.add("FIELD_ADDED", sub, _default_text(new_prop))
        old_extra = _extra(old)
        if old_extra != new_extra:
            rule = (
                "CONSTRAINT_TIGHTENED" if _EXTRA_ORDER[new_extra] < _EXTRA_ORDER[old_extra] else "CONSTRAINT_LOOSENED"
            )
            self.add(rule, path, f'extra="{old_extra}" -> extra="{new_extra}"')

    def mapping(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        self.value(_values_schema(old), _values_schema(new), f"{path}{{}}")
        self.value(_keys_schema(old), _keys_schema(new), f"{path}{{key}}")
        self.constraints(old, new, path)

    def tuple(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_items, new_items = old.get("prefixItems", []), new.get("prefixItems", [])
        if len(old_items) != len(new_items) or ("items" in old) != ("items" in new):
            self.add("FIELD_TYPE_CHANGED", path, f"{_name(old)} -> {_name(new)}")
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
        old_tag, new_tag = _discriminator(old), _discriminator(new)
        tag = old_tag or new_tag
        # The same discriminator, or one model becoming a tagged union (or back): members match by tag.
        alone = len(old_members) == 1 or len(new_members) == 1
        if tag and (old_tag == new_tag or alone) and all(_tags(m, tag) for m in old_members + new_members):
            self.tagged(old_members, new_members, tag, path)
        elif old_tag and not new_tag and not alone and _told_apart(old_members + new_members, old_tag):
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
        old_by = {t: m for m in old_members for t in _tags(m, tag)}
        new_by = {t: m for m in new_members for t in _tags(m, tag)}
        compared: set[tuple[int, int]] = set()
        for value, member in old_by.items():
            sub = _member_path(path, value)
            if value not in new_by:
                self.add("UNION_MEMBER_REMOVED", sub, f"no member is tagged {tag}={value!r} any more")
                continue
            pair = (id(member), id(new_by[value]))
            if pair not in compared:
                compared.add(pair)
                self.value(member, new_by[value], sub)
        for value in new_by:
            if value not in old_by:
                self.add("UNION_MEMBER_ADDED", _member_path(path, value), f"now accepts {tag}={value!r}")

    def plain(
        self, old: dict[str, Any], new: dict[str, Any], old_members: _Members, new_members: _Members, path: str
    ) -> None:
        old_by, new_by = _keyed(old_members), _keyed(new_members)
        several = (
            sum(_base(m) == "object" for m in old_members) > 1 or sum(_base(m) == "object" for m in new_members) > 1
        )
        matched: set[str] = set()
        removed = []
        for key, member in old_by.items():
            partner = key if key in new_by else _same_base(member, new_by, matched | set(old_by))
            if partner is None:
                removed.append(member)
                continue
            matched.add(partner)
            sub = f"{path}[{member.get('title', key)}]" if several and _base(member) == "object" else path
            self.value(member, new_by[partner], sub)
        if len(old_members) == 1 and removed:  # a type became a union that does not hold it
            self.add("FIELD_TYPE_CHANGED", path, f"{_name(old)} -> {_name(new)}")
            return
        for member in removed:
            self.add("UNION_MEMBER_REMOVED", path, f"no longer accepts {_name(member)}")
        added = [m for k, m in new_by.items() if k not in matched]
        old_objects = any(_base(m) == "object" for m in old_members)
        for member in added:
            if _base(member) == "object" and old_objects:
                self.add(
                    "FIELD_TYPE_CHANGED",
                    path,
                    f"{_name(member)} joins {_name(old)}: an old value may now validate as it (or lack the tag "
                    'to be routed); use a discriminated union, Field(discriminator="...")',
                )
            else:
                self.add("UNION_MEMBER_ADDED", path, f"now also accepts {_name(member)}")

    # --- constraints -------------------------------------------------------------------------------

    def constraints(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        integer = old.get("type") == "integer" and new.get("type") == "integer"
        for keys, upper in ((_LOWER, False), (_UPPER, True)):
            a, b = _bound(old, keys, integer, upper), _bound(new, keys, integer, upper)
            if a != b:
                rule = "CONSTRAINT_LOOSENED" if _wider(a, b, upper) else "CONSTRAINT_TIGHTENED"
                self.add(rule, path, f"{_bound_text(a, upper)} -> {_bound_text(b, upper)}")
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
            loosened = b is None or (isinstance(a, str) and isinstance(b, str) and pattern_wider(a, b))
            self.add("CONSTRAINT_LOOSENED" if loosened else "CONSTRAINT_TIGHTENED", path, f"pattern {a!r} -> {b!r}")
        a, b = bool(old.get("uniqueItems")), bool(new.get("uniqueItems"))
        if a != b:
            if b:
                self.add("CONSTRAINT_TIGHTENED", path, "items must now be unique: duplicates collapse (list -> set)")
            else:
                self.add("CONSTRAINT_LOOSENED", path, "items need not be unique any more (set -> list)")


# --- patterns ------------------------------------------------------------------------------------------


def pattern_wider(old: str, new: str) -> bool:
    """Whether every string ``old`` matches, ``new`` matches too, proven by the two parse trees: the same shape,
    where each node of ``new`` is the same as ``old``'s or accepts more (a character class that holds the old one's
    characters, a repeat with a wider count, a branch with every old alternative). Any string ``old`` matched is then
    matched by ``new`` along the same path, whatever the anchors, lookarounds or group references around it (those
    must be equal). What this cannot prove (another shape, flags, a syntax Python's parser refuses) is not wider."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a bad escape warns in some Pythons; not ours to report
            a, b = _sre.parse(old), _sre.parse(new)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return bool(a.state.flags == b.state.flags and _seq_wider(list(a), list(b), 0))


# sre nodes whose language only grows when their parts' do (a path through the old is one through the new).
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})


def _seq_wider(old: list[Any], new: list[Any], depth: int) -> bool:
    if depth > 50 or len(old) != len(new):
        return False
    return all(_node_wider(a, b, depth + 1) for a, b in zip(old, new, strict=True))


def _node_wider(old: tuple[Any, Any], new: tuple[Any, Any], depth: int) -> bool:
    (op_a, arg_a), (op_b, arg_b) = old, new
    name_a, name_b = str(op_a), str(op_b)
    if name_b == "IN" and name_a in ("IN", "LITERAL"):
        chars_a = _chars(arg_a if name_a == "IN" else [old])
        chars_b = _chars(arg_b)
        return chars_a is not None and chars_b is not None and chars_a <= chars_b
    if name_b in _REPEATS and name_a not in _REPEATS:  # one x -> x?, x*, x{1,3}: once is one of its counts
        lo_b, hi_b, sub_b = arg_b
        return bool(lo_b <= 1 <= hi_b and len(sub_b) == 1 and _node_wider(old, sub_b[0], depth + 1))
    if name_a != name_b:
        return False
    if name_a in _REPEATS:
        (lo_a, hi_a, sub_a), (lo_b, hi_b, sub_b) = arg_a, arg_b
        return bool(lo_b <= lo_a and hi_b >= hi_a and _seq_wider(list(sub_a), list(sub_b), depth))
    if name_a == "SUBPATTERN":
        return bool(arg_a[:3] == arg_b[:3] and _seq_wider(list(arg_a[3]), list(arg_b[3]), depth))
    if name_a == "BRANCH":
        return all(any(_seq_wider(list(x), list(y), depth) for y in arg_b[1]) for x in arg_a[1])
    return bool(_plain(old) == _plain(new))


def _plain(node: Any) -> Any:
    """A parse tree as tuples and lists (sre's SubPattern compares by identity)."""
    if isinstance(node, (list, tuple)) or type(node).__name__ == "SubPattern":
        return [_plain(n) for n in node]
    return str(node) if type(node).__name__ == "_NamedIntConstant" else node


def _chars(items: list[tuple[Any, Any]]) -> frozenset[tuple[str, int]] | None:
    """A character class as a set of ``("c", code)`` and ``("cat", category)`` tokens; ``None`` where a negated class
    or a range too large to list makes a plain subset test unsound."""
    out: set[tuple[str, Any]] = set()
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.add(("c", arg))
        elif name == "RANGE" and arg[1] - arg[0] <= 0x10000:
            out.update(("c", c) for c in range(arg[0], arg[1] + 1))
        elif name == "CATEGORY":
            out.add(("cat", str(arg)))
        else:
            return None
    return frozenset(out)


# --- reading JSON Schema nodes ---------------------------------------------------------------------------


def _deref(node: Any, defs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``node`` with its ``$ref`` resolved (keys next to it, like a default, kept) and the definition's name."""
    if not isinstance(node, dict):
        return ({} if node is True else {"not": {}}), None
    name = None
    for _ in range(64):  # a chain of references to references; a cycle of them is not a type
        ref = node.get("$ref")
        if not isinstance(ref, str):
            break
        name = ref.rsplit("/", 1)[-1]
        node = {**defs.get(name, {}), **{k: v for k, v in node.items() if k != "$ref"}}
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:  # older pydantic: a ref with siblings
        inner, inner_name = _deref(node["allOf"][0], defs)
        node = {**inner, **{k: v for k, v in node.items() if k != "allOf"}}
        name = name or inner_name
    return node, name


def _members(node: dict[str, Any], defs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The members of a union (nested unions flattened); ``[node]`` for anything else."""
    kind = _kind(node)
    if kind == "union":
        out = []
        for member in node.get("anyOf") or node.get("oneOf") or []:
            out.extend(_members(_deref(member, defs)[0], defs))
        return out
    if kind == "types":  # {"type": ["integer", "null"]}
        return [{**node, "type": t} for t in node["type"]]
    return [node]


def _kind(node: Mapping[str, Any]) -> str:
    if "anyOf" in node or "oneOf" in node:
        members = node.get("anyOf") or node.get("oneOf") or []
        # Decimal's schema: a number or a numeric string. `float | str` looks the same; both are one opaque kind.
        plain = all(set(m) <= {"type", "pattern", *_LOWER_UPPER_KEYS} for m in members)
        if len(members) == 2 and [m.get("type") for m in members] == ["number", "string"] and plain:
            return "number|string"
        return "union"
    if "enum" in node or "const" in node:
        return "enum"
    t = node.get("type")
    if isinstance(t, list):
        return "types"
    if t == "object" or (t is None and "properties" in node):
        return "model" if "properties" in node else "dict"
    if t == "array":
        return "tuple" if "prefixItems" in node or (node.get("maxItems") == 0 and "items" not in node) else "array"
    if t == "string" and "format" in node:
        return f"string:{node['format']}"
    if isinstance(t, str):
        return t
    if node.get("not") == {}:
        return "nothing"
    return "any"


_LOWER_UPPER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _base(node: Mapping[str, Any]) -> str:
    """The JSON type of a node's values: what a union member is matched by when nothing closer matches."""
    kind = _kind(node)
    if kind == "enum":
        types = {_json_type(v) for v in _values(node)}
        return types.pop() if len(types) == 1 else "mixed"
    if kind in ("model", "dict"):
        return "object"
    if kind == "tuple":
        return "array"
    return kind.split(":", 1)[0]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def _values(node: Mapping[str, Any]) -> list[Any]:
    return list(node["enum"]) if "enum" in node else [node["const"]]


def _exact(value: Any) -> str:
    """A key that tells ``1``, ``1.0`` and ``true`` apart."""
    return json.dumps(value, sort_keys=True)


def _extra(node: Mapping[str, Any]) -> str:
    extra = node.get("additionalProperties")
    return _EXTRA.get(extra, "allow") if isinstance(extra, bool) or extra is None else "allow"


def _values_schema(node: Mapping[str, Any]) -> Any:
    extra = node.get("additionalProperties", True)
    return {} if extra is True else extra


def _keys_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    keys = node.get("propertyNames", {})
    return keys if "type" in keys or "enum" in keys or "const" in keys else {"type": "string", **keys}


def _default(prop: Mapping[str, Any]) -> str | None:
    return json.dumps(prop["default"], sort_keys=True) if "default" in prop else None


def _default_text(prop: Mapping[str, Any]) -> str:
    return f"default {_default(prop)}" if "default" in prop else "default from a factory"


def _discriminator(node: Mapping[str, Any]) -> str | None:
    disc = node.get("discriminator")
    name = disc.get("propertyName") if isinstance(disc, dict) else None
    return name if isinstance(name, str) else None


def _tags(member: Mapping[str, Any], tag: str) -> list[Any]:
    prop = (member.get("properties") or {}).get(tag)
    if not isinstance(prop, dict) or ("enum" not in prop and "const" not in prop):
        return []
    return _values(prop)


def _told_apart(members: Sequence[Mapping[str, Any]], tag: str) -> bool:
    """Whether each member of a union (old and new alike) holds its own constant values at ``tag``, so a value tagged
    for one validates as no other: a plain union of them picks the member a discriminated union would."""
    by_title: dict[Any, set[str]] = {}
    for member in members:
        values = _tags(member, tag)
        prop = (member.get("properties") or {}).get(tag) or {}
        if not values or (tag not in (member.get("required") or ()) and "default" not in prop):
            return False
        for value in values:
            by_title.setdefault(_exact(value), set()).add(str(member.get("title")))
    return all(len(titles) == 1 for titles in by_title.values())


def _member_path(path: str, tag: Any) -> str:
    """``tools[]`` + tag ``search`` -> ``tools[search]``; ``tool`` -> ``tool[search]``."""
    return f"{path.removesuffix('[]')}[{tag}]"


def _keyed(members: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Union members by what they are: a model by its title, anything else by its kind."""
    out: dict[str, dict[str, Any]] = {}
    for member in members:
        kind = _kind(member)
        key = f"model:{member.get('title', '')}" if kind == "model" else kind
        n = 2
        base = key
        while key in out:
            key, n = f"{base}#{n}", n + 1
        out[key] = member
    return out


def _same_base(member: Mapping[str, Any], candidates: Mapping[str, dict[str, Any]], taken: set[str]) -> str | None:
    base = _base(member)
    return next((k for k, m in candidates.items() if k not in taken and _base(m) == base), None)


def _bound(node: Mapping[str, Any], keys: Sequence[tuple[str, bool]], integer: bool, upper: bool) -> Any:
    """The tighter of a node's inclusive and exclusive bound on one side, as (value, exclusive), or None."""
    found = []
    for key, exclusive in keys:
        value = node.get(key)
        if value is None:
            continue
        if integer:  # on integers `> 0` is `>= 1`, and `<= 9.5` is `<= 9`
            if upper:
                value = math.ceil(value) - 1 if exclusive else math.floor(value)
            else:
                value = math.floor(value) + 1 if exclusive else math.ceil(value)
            exclusive = False
        found.append((value, exclusive))
    if not found:
        return None
    # the tightest: smallest upper / largest lower bound; at a tie the exclusive one
    return min(found, key=lambda b: (b[0], not b[1])) if upper else max(found, key=lambda b: (b[0], b[1]))


def _wider(old: Any, new: Any, upper: bool) -> bool:
    """Whether bound ``new`` accepts everything ``old`` did."""
    if new is None:
        return True
    if old is None:
        return False
    (a, a_excl), (b, b_excl) = old, new
    if a != b:
        return bool(b > a) if upper else bool(b < a)
    return a_excl or not b_excl


def _bound_text(bound: Any, upper: bool) -> str:
    if bound is None:
        return "no maximum" if upper else "no minimum"
    value, exclusive = bound
    return f"{'<' if upper else '>'}{'' if exclusive else '='} {value!r}"


def _accepts(node: Mapping[str, Any], value: Any) -> bool:
    """Whether ``value`` (of the node's JSON type) meets the node's bounds, lengths, pattern and multipleOf."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lower, upper = _bound(node, _LOWER, False, False), _bound(node, _UPPER, False, True)
        if lower is not None and (value < lower[0] or (lower[1] and value == lower[0])):
            return False
        if upper is not None and (value > upper[0] or (upper[1] and value == upper[0])):
            return False
        step = node.get("multipleOf")
        if step is not None and (Fraction(str(value)) / Fraction(str(step))).denominator != 1:
            return False
    if isinstance(value, str):
        if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", math.inf):
            return False
        if "pattern" in node and not re.search(node["pattern"], value):
            return False
    return True


def _name(node: Mapping[str, Any], depth: int = 0) -> str:
    """A short human name for a schema node: ``integer``, ``one of ['a', 'b']``, ``array of Row``."""
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    kind = _kind(node)
    if depth > 2:
        return kind
    if kind == "union":
        members = node.get("anyOf") or node.get("oneOf") or []
        return " | ".join(_name(m, depth + 1) for m in members)
    if kind == "enum":
        values = _values(node)
        shown = ", ".join(map(repr, values[:6])) + (", ..." if len(values) > 6 else "")
        return f"one of [{shown}]"
    if kind == "model":
        return str(node.get("title", "object"))
    if kind == "dict":
        return f"dict of {_name(_values_schema(node), depth + 1)}"
    if kind == "array":
        unique = "set" if node.get("uniqueItems") else "array"
        return f"{unique} of {_name(node.get('items', {}), depth + 1)}"
    if kind == "tuple":
        return f"tuple of ({', '.join(_name(m, depth + 1) for m in node.get('prefixItems', []))})"
    if kind.startswith("string:"):
        return f"string ({kind.removeprefix('string:')})"
    if kind == "any":
        return "any value"
    if kind == "types":
        return " | ".join(node["type"])
    return kind
