"""What type each field's value has, where the wire cannot tell: ``@kind`` entries of a schema's field digests.

MessagePack carries a tuple, a list, a set and a frozenset as one array; an Enum, a Literal, a str, a Path, a UUID
and a ``SecretStr`` as one string; a nested model, a dataclass, a TypedDict and a ``dict`` as one map. A worker
whose field type changed between two of these decodes the driver's bytes, encodes them again to the same bytes,
and holds a value of another type (the secret as a plain ``str``). So each field of each model in a schema gets
an entry ``@kind Model.field``: a digest of its type's *kind* (containers, unions, scalar types, enum classes and
the library types wrapping them, as text), without constraints, defaults or the user's declared validators (those are
the fingerprint's) and with nested models standing as ``model`` (their own fields have their own entries, so a
field added to a nested model with a default stays a lossless change).

On skew (``_worker.skew.check_skew``) an entry that differs is a changed type, unless the driver's kind is one member
of the worker's union or optional (a widening: the same typed value decodes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any

from pydantic import AliasChoices
from pydantic.fields import FieldInfo

from . import walk as schema_walk
from .trusted import declared_validators, runs_declared

__all__ = ["KIND_KEY", "input_names", "kept_untyped", "kind_entries", "model_named", "reads_alike", "renamed_to"]

#: Prefix of a field-kind entry in ``SchemaInfo.field_digests``.
KIND_KEY = "@kind "
_CONTAINERS = frozenset({"list", "set", "frozenset", "generator"})
_FUNCTIONS = schema_walk.FUNCTIONS


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class _Kinds(schema_walk.Fold[str]):
    """Each field's kind, as text: a fold of the one schema walk (``_analysis.walk.Fold``), in the context of the depth
    (a bound on how far a kind is spelled out). A definition is folded once; one met inside itself (a recursive type
    alias or TypedDict) stands as ``recursive#N``."""

    def __init__(self, core: Any) -> None:
        super().__init__(core)
        self.core = core
        self.declared = declared_validators(core)

    def declared_function(self, node: dict[str, Any]) -> bool:
        """Whether a function node runs a validator the user declared (not a type's own function)."""
        return runs_declared(node, self.declared)

    def resolve(self, node: Any) -> Any:
        found = schema_walk.resolve(node, self.defs, defaults=True)
        return {} if found is None and node is not None else found  # an unresolved reference: nothing known

    def models(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for cls, fields in self.classes():
            yield cls.__qualname__, fields

    def classes(self) -> Iterator[tuple[type, dict[str, Any]]]:
        """Every model and dataclass of the schema (each once), with its fields' schemas by name."""
        return schema_walk.classes(self.core, self.defs)

    def kind(self, node: Any, depth: int = 0) -> str:
        return self.fold(node, depth)

    def leaf(self, value: Any, depth: int = 0) -> str:
        return "?"

    def recursion(self, ref: str, depth: int) -> str:
        return f"recursive#{depth}"

    def visit(self, node: Any, depth: int = 0) -> str:
        if depth > 64:
            return "?"
        if node.get("type") == "default":
            return self.fold(node.get("schema"), depth)
        kind = str(node.get("type"))  # "definition-ref" here: unresolved, nothing known
        d = depth + 1
        if kind in ("model", "dataclass"):
            return kind
        if kind == "typed-dict":
            fields = node.get("fields") or {}
            return "typed-dict{" + ",".join(f"{n}:{self.fold(f.get('schema'), d)}" for n, f in fields.items()) + "}"
        if kind == "nullable":
            return f"nullable[{self.fold(node.get('schema'), d)}]"
        if kind == "union":
            return "union[" + "|".join(self.fold(c, d) for c in schema_walk.choices(node)) + "]"
        if kind == "tagged-union":
            return "union[" + "|".join(sorted(self.fold(c, d) for c in schema_walk.choices(node))) + "]"
        if kind in _CONTAINERS:
            return f"{kind}[{self.fold(node.get('items_schema'), d) if 'items_schema' in node else 'any'}]"
        if kind == "tuple":
            items = [self.fold(i, d) for i in node.get("items_schema", ())]
            if node.get("variadic_item_index") is not None:
                items.append("...")
            return "tuple[" + ",".join(items) + "]"
        if kind == "dict":
            keys = self.fold(node["keys_schema"], d) if "keys_schema" in node else "any"
            values = self.fold(node["values_schema"], d) if "values_schema" in node else "any"
            return f"dict[{keys},{values}]"
        if kind in _FUNCTIONS or kind == "function-plain":
            fn = (node.get("function") or {}).get("function")
            inner = self.fold(node.get("schema"), d) if kind != "function-plain" else ""
            if self.declared_function(node):
                return inner or "plain"  # the user's validator: the fingerprint's, not the type's
            name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
            return f"{kind}({getattr(fn, '__module__', '')}.{name})[{inner}]"
        if kind == "json-or-python":
            return self.fold(node.get("python_schema"), d)
        if kind == "lax-or-strict":
            return self.fold(node.get("strict_schema"), d)
        if kind == "chain":
            return "chain[" + ",".join(self.fold(s, d) for s in node.get("steps", ())) + "]"
        if kind in ("is-instance", "is-subclass", "enum"):
            cls = node.get("cls")
            return f"{kind}({getattr(cls, '__module__', '')}.{getattr(cls, '__qualname__', cls)})"
        if kind == "literal":  # its values are plain str / int / ...: the kind is theirs (str -> Literal keeps "a")
            return "|".join(sorted({type(v).__name__ for v in node.get("expected", ())})) or kind
        return kind  # a scalar: int, str, uuid, datetime, any, ...


def kind_entries(core: Any) -> dict[str, str]:
    """``@kind Model.field`` -> that field's kind as text (``list[int]``, ``nullable[str]``, ``enum(m.Color)``), for
    every field of every model in ``core``; a kind past ``_MAX_TEXT`` characters by its digest (compared only for
    equality)."""
    kinds = _Kinds(core)
    return {
        f"{KIND_KEY}{model}.{name}": _text(kinds.kind(schema))
        for model, fields in kinds.models()
        for name, schema in fields.items()
    }


_MAX_TEXT = 160
# The kinds whose values msgpack carries as themselves: an ``Any`` field decodes them unchanged.
_PLAIN = frozenset({"int", "float", "str", "bool", "none", "bytes", "list", "dict", "nullable", "union", "any"})


def _text(kind: str) -> str:
    return kind if len(kind) <= _MAX_TEXT else "#" + _short(kind)


def reads_alike(core: Any, key: str, theirs: str) -> bool:
    """Whether the field ``key`` names (``@kind Model.field``) reads each value of the driver's kind ``theirs`` as the
    same typed value or not at all: each alternative of ``theirs`` is the worker's kind, one of the alternatives of
    the worker's optional or union, or a plain kind where the worker takes ``Any``; or it is an alternative the worker
    dropped whose wire form none of the worker's kinds shares (``int | None`` -> ``int``: a nil is refused, an int
    read as the int it was), so a value of it fails validation, or is coerced into other bytes, which the byte
    comparison refuses. A dropped alternative sharing a wire form (``tuple | list`` -> ``list``) would be read as
    another kind of value: not alike."""
    kinds = _Kinds(core)
    target = key.removeprefix(KIND_KEY)
    for model, fields in kinds.models():
        for name, schema in fields.items():
            if f"{model}.{name}" == target:
                mine = {_text(kinds.kind(m)) for m in [schema, *_members(kinds, schema, 0)]}
                forms = {_wire_form(alt) for kind in mine for alt in _alternatives(kind)}
                return (
                    all(
                        _accepted(alt, mine) or (_wire_form(alt) is not None and _wire_form(alt) not in forms)
                        for alt in _alternatives(theirs)
                    )
                    and None not in forms
                )
    return False


# The MessagePack form a kind's values take: kinds of one form carry alike (a tuple is sent as a list is).
_FORMS = {"none": "nil", "bool": "bool", "int": "int", "float": "float", "bytes": "bin", "str": "str"}
_ARRAYS = ("list[", "tuple[", "set[", "frozenset[", "deque[")
_MAPS = ("model", "dataclass", "dict[", "typed-dict{")


def _wire_form(kind: str) -> str | None:
    """``nil``, ``bool``, ``int``, ``float``, ``bin``, ``str``, ``array`` or ``map`` for a kind whose values take that
    form alone; None for any other (``any``, an enum, a datetime, a digest): judged as sharing every form."""
    if kind in _FORMS:
        return _FORMS[kind]
    if kind.startswith(_ARRAYS):
        return "array"
    if kind.startswith(_MAPS):
        return "map"
    return None


def model_named(core: Any, qualname: str) -> type | None:
    """The model or dataclass in ``core`` whose ``__qualname__`` is ``qualname``, if one is."""
    return next((cls for cls, _ in _Kinds(core).classes() if cls.__qualname__ == qualname), None)


def renamed_to(core: Any, key: str) -> str | None:
    """The worker's ``@kind Model.field`` entry for the field that reads a field only the driver's schema has
    (``key``) by alias: a field renamed with its old name as ``alias=`` (or a ``validation_alias`` string or
    ``AliasChoices`` member) reads the old payload's key, so the driver's kind is compared with that field's."""
    model, _, name = key.removeprefix(KIND_KEY).rpartition(".")
    for cls, fields in _Kinds(core).classes():
        if cls.__qualname__ != model or name in fields:
            continue
        specs = getattr(cls, "__pydantic_fields__", None) or {}
        for field, spec in specs.items():
            if field in fields and name in input_names(spec):
                return f"{KIND_KEY}{model}.{field}"
    return None


def input_names(spec: FieldInfo) -> list[str]:
    """The keys a field reads by alias: ``alias=``, a ``validation_alias`` string, or its ``AliasChoices`` strings."""
    alias = spec.validation_alias if spec.validation_alias is not None else spec.alias
    return [a for a in (alias.choices if isinstance(alias, AliasChoices) else [alias]) if isinstance(a, str)]


def kept_untyped(core: Any, key: str, theirs: str) -> bool:
    """Whether a field only the driver's schema has (``key``, of the driver's kind ``theirs``) is held by the
    worker as another typed value: its model (same name) keeps unknown keys (``extra="allow"``), so the value
    arrives as plain msgpack data (a nested model as a ``dict``, a tuple as a ``list``, an Enum as a ``str``).
    Where the model ignores or forbids unknown keys, the value is dropped or refused, and the value check says so."""
    model, _, name = key.removeprefix(KIND_KEY).rpartition(".")
    for cls, fields in _Kinds(core).classes():
        if cls.__qualname__ == model and name not in fields:
            config = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", None) or {}
            keeps = config.get("extra") == "allow"
            return keeps and not all(_accepted(alt, {"any"}) for alt in _alternatives(theirs))
    return False


def _accepted(kind: str, mine: set[str]) -> bool:
    if kind in mine:
        return True
    return "any" in mine and not kind.startswith("#") and set(re.findall(r"[a-z-]+", kind)) <= _PLAIN


def _alternatives(kind: str) -> list[str]:
    """``nullable[T]`` -> none and T's alternatives; ``union[A|B]`` -> A's and B's; any other kind -> itself."""
    if kind.startswith("nullable[") and kind.endswith("]"):
        return ["none", *_alternatives(kind[len("nullable[") : -1])]
    if kind.startswith("union[") and kind.endswith("]"):
        out, depth, start, body = [], 0, 0, kind[len("union[") : -1]
        for i, ch in enumerate(body):
            depth += ch == "["
            depth -= ch == "]"
            if ch == "|" and depth == 0:
                out.append(body[start:i])
                start = i + 1
        return [alt for part in [*out, body[start:]] for alt in _alternatives(part)]
    return [kind]


def _members(kinds: _Kinds, node: Any, depth: int) -> list[Any]:
    """The alternatives of an optional or union type, flattened (``int | str | None``: int, str, none)."""
    node = kinds.resolve(node)
    while isinstance(node, dict) and node.get("type") in _FUNCTIONS and kinds.declared_function(node):
        node = kinds.resolve(node.get("schema"))  # the user's validator around it: the kind is the inner type's
    if not isinstance(node, dict) or depth > 16:
        return []
    if node.get("type") == "nullable":
        return [{"type": "none"}, node.get("schema"), *_members(kinds, node.get("schema"), depth + 1)]
    if node.get("type") in ("union", "tagged-union"):
        out: list[Any] = []
        for member in schema_walk.choices(node):
            out += [member, *_members(kinds, member, depth + 1)]
        return out
    return []
