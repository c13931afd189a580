"""Reading JSON Schema nodes for the evolution check: a node's kind and base, its members, bounds, defaults, tags
and values, and whether one string pattern accepts everything another does (``pattern_wider``)."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

try:  # Python's own regex parser: public as sre_parse up to 3.10, re._parser since 3.11 (sre_parse then warns)
    from re import _parser as _sre  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef,unused-ignore]

LOWER = (("minimum", False), ("exclusiveMinimum", True))
UPPER = (("maximum", False), ("exclusiveMaximum", True))
EXTRA = {False: "forbid", None: "ignore", True: "allow"}


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


def deref(node: Any, defs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
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
        inner, inner_name = deref(node["allOf"][0], defs)
        node = {**inner, **{k: v for k, v in node.items() if k != "allOf"}}
        name = name or inner_name
    return node, name


def members_of(node: dict[str, Any], defs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The members of a union (nested unions flattened); ``[node]`` for anything else."""
    kind = kind_of(node)
    if kind == "union":
        out = []
        for member in node.get("anyOf") or node.get("oneOf") or []:
            out.extend(members_of(deref(member, defs)[0], defs))
        return out
    if kind == "types":  # {"type": ["integer", "null"]}
        return [{**node, "type": t} for t in node["type"]]
    return [node]


def kind_of(node: Mapping[str, Any]) -> str:
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


def base_of(node: Mapping[str, Any]) -> str:
    """The JSON type of a node's values: what a union member is matched by when nothing closer matches."""
    kind = kind_of(node)
    if kind == "enum":
        types = {json_type(v) for v in values_of(node)}
        return types.pop() if len(types) == 1 else "mixed"
    if kind in ("model", "dict"):
        return "object"
    if kind == "tuple":
        return "array"
    return kind.split(":", 1)[0]


def json_type(value: Any) -> str:
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


def values_of(node: Mapping[str, Any]) -> list[Any]:
    return list(node["enum"]) if "enum" in node else [node["const"]]


def exact(value: Any) -> str:
    """A key that tells ``1``, ``1.0`` and ``true`` apart."""
    return json.dumps(value, sort_keys=True)


def extra_of(node: Mapping[str, Any]) -> str:
    extra = node.get("additionalProperties")
    return EXTRA.get(extra, "allow") if isinstance(extra, bool) or extra is None else "allow"


def values_schema(node: Mapping[str, Any]) -> Any:
    extra = node.get("additionalProperties", True)
    return {} if extra is True else extra


def keys_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    keys = node.get("propertyNames", {})
    return keys if "type" in keys or "enum" in keys or "const" in keys else {"type": "string", **keys}


def default(prop: Mapping[str, Any]) -> str | None:
    return json.dumps(prop["default"], sort_keys=True) if "default" in prop else None


def default_text(prop: Mapping[str, Any]) -> str:
    return f"default {default(prop)}" if "default" in prop else "default from a factory"


def discriminator(node: Mapping[str, Any]) -> str | None:
    disc = node.get("discriminator")
    name = disc.get("propertyName") if isinstance(disc, dict) else None
    return name if isinstance(name, str) else None


def tags(member: Mapping[str, Any], tag: str) -> list[Any]:
    prop = (member.get("properties") or {}).get(tag)
    if not isinstance(prop, dict) or ("enum" not in prop and "const" not in prop):
        return []
    return values_of(prop)


def told_apart(members: Sequence[Mapping[str, Any]], tag: str) -> bool:
    """Whether each member of a union (old and new alike) holds its own constant values at ``tag``, so a value tagged
    for one validates as no other: a plain union of them picks the member a discriminated union would."""
    by_title: dict[Any, set[str]] = {}
    for member in members:
        values = tags(member, tag)
        prop = (member.get("properties") or {}).get(tag) or {}
        if not values or (tag not in (member.get("required") or ()) and "default" not in prop):
            return False
        for value in values:
            by_title.setdefault(exact(value), set()).add(str(member.get("title")))
    return all(len(titles) == 1 for titles in by_title.values())


def member_path(path: str, tag: Any) -> str:
    """``tools[]`` + tag ``search`` -> ``tools[search]``; ``tool`` -> ``tool[search]``."""
    return f"{path.removesuffix('[]')}[{tag}]"


def keyed(members: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Union members by what they are: a model by its title, anything else by its kind."""
    out: dict[str, dict[str, Any]] = {}
    for member in members:
        kind = kind_of(member)
        key = f"model:{member.get('title', '')}" if kind == "model" else kind
        n = 2
        base = key
        while key in out:
            key, n = f"{base}#{n}", n + 1
        out[key] = member
    return out


def same_base(member: Mapping[str, Any], candidates: Mapping[str, dict[str, Any]], taken: set[str]) -> str | None:
    base = base_of(member)
    return next((k for k, m in candidates.items() if k not in taken and base_of(m) == base), None)


def bound_of(node: Mapping[str, Any], keys: Sequence[tuple[str, bool]], integer: bool, upper: bool) -> Any:
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


def wider(old: Any, new: Any, upper: bool) -> bool:
    """Whether bound ``new`` accepts everything ``old`` did."""
    if new is None:
        return True
    if old is None:
        return False
    (a, a_excl), (b, b_excl) = old, new
    if a != b:
        return bool(b > a) if upper else bool(b < a)
    return a_excl or not b_excl


def bound_text(bound: Any, upper: bool) -> str:
    if bound is None:
        return "no maximum" if upper else "no minimum"
    value, exclusive = bound
    return f"{'<' if upper else '>'}{'' if exclusive else '='} {value!r}"


def accepts(node: Mapping[str, Any], value: Any) -> bool:
    """Whether ``value`` (of the node's JSON type) meets the node's bounds, lengths, pattern and multipleOf."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lower, upper = bound_of(node, LOWER, False, False), bound_of(node, UPPER, False, True)
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


def name_of(node: Mapping[str, Any], depth: int = 0) -> str:
    """A short human name for a schema node: ``integer``, ``one of ['a', 'b']``, ``array of Row``."""
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    kind = kind_of(node)
    if depth > 2:
        return kind
    if kind == "union":
        members = node.get("anyOf") or node.get("oneOf") or []
        return " | ".join(name_of(m, depth + 1) for m in members)
    if kind == "enum":
        values = values_of(node)
        shown = ", ".join(map(repr, values[:6])) + (", ..." if len(values) > 6 else "")
        return f"one of [{shown}]"
    if kind == "model":
        return str(node.get("title", "object"))
    if kind == "dict":
        return f"dict of {name_of(values_schema(node), depth + 1)}"
    if kind == "array":
        unique = "set" if node.get("uniqueItems") else "array"
        return f"{unique} of {name_of(node.get('items', {}), depth + 1)}"
    if kind == "tuple":
        return f"tuple of ({', '.join(name_of(m, depth + 1) for m in node.get('prefixItems', []))})"
    if kind.startswith("string:"):
        return f"string ({kind.removeprefix('string:')})"
    if kind == "any":
        return "any value"
    if kind == "types":
        return " | ".join(node["type"])
    return kind
