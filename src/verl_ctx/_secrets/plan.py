"""verl-ctx's one home for secrets: which values are secrets, and which paths of a schema can hold one.

pydantic's secret types share a private base class (``SecretBase``, from ``_pydantic_compat``); every other module asks
``is_secret``, ``secrets_in`` (a value's secrets), ``secret_plan`` / ``secrets_at`` (a schema's secret paths) or
``field_holds_secret`` (the editor schema), and ``redact`` masks what they find in every output.

The plan is read once per class from its pydantic core schema, as a visitor of the one schema walk
(``_analysis.walk``).

Whether a context can hold a secret is a property of its type, not of the values one instance happens to hold:
a ``SecretStr``, ``SecretBytes`` or ``pydantic.Secret[T]`` reachable from the model through nested models, stdlib
and pydantic dataclasses, TypedDicts, lists, tuples, sets, deques, dicts (keys and values), unions and optionals,
at any depth, recursive models included. The core schema is what pydantic itself validates with, so what is found
here is what a value can be, however the annotation was spelled (``Annotated``, aliases, generics, forward refs).

Each secret is found with the node types above it. The encoder (``_wire.msgpack``) carries a secret as its plain value
only through the node types in ``_CARRIED``; a secret below any other node (a custom type's own schema, a
``Secret`` wrapping something else than a scalar) would reach ``to_jsonable_python`` and travel as
``'**********'``, so such a schema is refused where it is declared (``check_carried``, called at class creation),
never discovered as stars on the worker.

Paths read like the decoder's: ``judge.api_key``, ``keys[*]``, ``by_name{*}`` (a dict's values), ``by_key{key}``.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from pydantic import BaseModel

from .._analysis import walk as schema_walk
from .._pydantic_compat import SECRET_SERIALIZERS, SecretBase

__all__ = [
    "SecretBase",
    "SecretPlan",
    "check_carried",
    "field_holds_secret",
    "holds_secret",
    "holds_secret_at",
    "is_secret",
    "secret_kind",
    "secret_plan",
    "secrets_at",
    "secrets_in",
]

# The serializers pydantic gives its secret types (SecretStr/SecretBytes, Secret[T]): a node carrying one is a secret.
_FIELD_SECRET, _GENERIC_SECRET = SECRET_SERIALIZERS

# Node types the encoder walks with their values intact (models and dataclasses by their fields, containers by
# their items, dict keys and values, and the validator and default wrappers around a value).
_CARRIED = frozenset(
    {
        "model",
        "model-fields",
        "model-field",
        "dataclass",
        "dataclass-args",
        "dataclass-field",
        "typed-dict",
        "typed-dict-field",
        "list",
        "set",
        "frozenset",
        "tuple",
        "deque",
        "dict",
        "nullable",
        "union",
        "tagged-union",
        "default",
        "definitions",
        "definition-ref",
        "lax-or-strict",
        "json-or-python",
        "function-after",
        "function-before",
        "function-wrap",
    }
)
# What a ``Secret[T]`` may wrap: the value travels as itself, natively, and validates back to the same value.
_SCALARS = frozenset({"str", "bytes", "int", "float", "bool"})


@dataclass(frozen=True)
class SecretPlan:
    """``paths`` that can hold a secret; ``refused``: (path, why) for each the encoder cannot carry as itself."""

    paths: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]

    def field_names(self) -> frozenset[str]:
        """The names of the fields the paths end at (``judge.api_key``, ``keys[*]``: api_key, keys)."""
        names = (re.split(r"[\[{]", path.rsplit(".", 1)[-1], maxsplit=1)[0] for path in self.paths)
        return frozenset(n for n in names if n and n not in ("**", "*", "<root>"))


_plans: dict[type, SecretPlan] = {}
_lock = threading.Lock()


def secret_plan(cls: type[BaseModel]) -> SecretPlan:
    """Where ``cls`` (a model class) can hold a secret, from its core schema; computed once per class."""
    plan = _plans.get(cls)
    if plan is None:
        plan = _plan_of(cls.__pydantic_core_schema__)
        with _lock:
            _plans[cls] = plan
    return plan


def forget(cls: type) -> None:
    """Drop the plan of a rebuilt class."""
    with _lock:
        _plans.pop(cls, None)


def check_carried(cls: type[BaseModel]) -> str | None:
    """Why ``cls`` cannot be carried without losing a secret (a message), or ``None`` when it can."""
    schema = getattr(cls, "__pydantic_core_schema__", None)
    if not isinstance(schema, Mapping):  # not complete yet (a forward reference): checked when rebuilt
        return None
    forget(cls)
    refused = secret_plan(cls).refused
    if not refused:
        return None
    listed = "; ".join(f"{path}: {why}" for path, why in refused[:5])
    more = f" (and {len(refused) - 5} more)" if len(refused) > 5 else ""
    return (
        f"{listed}{more}. The worker would receive '**********' instead of the secret. Declare such a value as "
        "SecretStr or SecretBytes, or pydantic.Secret[str | bytes | int | float | bool], inside models, "
        "dataclasses, TypedDicts, lists, tuples, sets, deques or dicts"
    )


def holds_secret_at(value: object, cls: type[BaseModel]) -> bool:
    """Whether ``value`` (an instance of ``cls``) holds a non-``None`` value at a path its schema marks secret."""
    return any(True for path in secret_plan(cls).paths for _ in _at(value, _steps(path)))


def secrets_at(value: object, cls: type[BaseModel]) -> Iterator[SecretBase[Any]]:
    """The secrets ``value`` (an instance of ``cls``) holds where its schema can hold one: only those paths are
    read, so a context with a large table beside its key costs what its secret paths cost."""
    for path in secret_plan(cls).paths:
        for found in _at(value, _steps(path)):
            if isinstance(found, SecretBase):
                yield found


# --- the plan: a visitor of the one walk --------------------------------------------------------------


class _Plan:
    """Collects the secret paths of a schema as ``schema_walk.walk`` visits it."""

    def __init__(self, defs: Mapping[str, Mapping[str, Any]], holds: dict[str, bool]) -> None:
        self.defs = defs
        self.holds = holds  # definition ref -> whether it holds a secret anywhere, shared with the probes
        self.paths: list[str] = []
        self.refused: list[tuple[str, str]] = []

    def enter(self, node: Mapping[str, Any], path: str, above: tuple[str, ...]) -> bool:
        secret = secret_kind(node)
        if secret is None:
            return True
        shown = path or "<root>"
        self.paths.append(shown)
        lost = [k for k in above if k not in _CARRIED]
        if lost:
            self.refused.append((shown, f"a secret inside a '{lost[-1]}' schema, which the encoder does not walk"))
        elif secret == "generic":
            inner = _secret_inner(node)
            if inner not in _SCALARS:
                self.refused.append(
                    (shown, f"pydantic.Secret of a '{inner}' value (only str, bytes, int, float, bool travel)")
                )
        return False

    def again(self, ref: str, path: str) -> None:
        if self._holds(ref):
            self.paths.append(schema_walk.join(path, "**"))  # a recursive model: its secrets again, at any depth

    def _holds(self, ref: str) -> bool:
        """Whether the definition ``ref`` holds a secret anywhere (its own walk, paths discarded)."""
        if ref not in self.holds:
            self.holds[ref] = False  # while it is probed, a reference back to it adds nothing
            probe = _Plan(self.defs, self.holds)
            schema_walk.walk(self.defs[ref], probe, self.defs, refs=frozenset({ref}))
            self.holds[ref] = bool(probe.paths)
        return self.holds[ref]


def _plan_of(schema: Mapping[str, Any]) -> SecretPlan:
    defs = schema_walk.definitions(schema)
    plan = _Plan(defs, {})
    schema_walk.walk(schema, plan, defs)
    return SecretPlan(tuple(dict.fromkeys(plan.paths)), tuple(dict.fromkeys(plan.refused)))


# Nodes whose fields are judged one by one where their own JSON Schema is generated: a field holding a model is not
# itself a secret field (the model's secret fields are optional there).
_OWN_FIELDS = frozenset({"model", "dataclass", "typed-dict", "definition-ref"})


def field_holds_secret(schema: Any) -> bool:
    """Whether a field's value (its core schema) can be, or contain outside a nested model, a secret."""
    todo = [schema]
    while todo:
        node = todo.pop()
        if not isinstance(node, Mapping):
            continue
        if secret_kind(node) is not None:
            return True
        if node.get("type") in _OWN_FIELDS:
            continue
        todo.extend(child for _, child in schema_walk.children(node))
    return False


def secret_kind(node: Mapping[str, Any]) -> str | None:
    """'field' for SecretStr/SecretBytes, 'generic' for pydantic.Secret[T], None for any other node."""
    serializer = node.get("serialization")
    function = serializer.get("function") if isinstance(serializer, Mapping) else None
    if function is not None and function is _FIELD_SECRET:
        return "field"
    if function is not None and function is _GENERIC_SECRET:
        return "generic"
    if node.get("type") == "is-instance" and isinstance(cls := node.get("cls"), type) and issubclass(cls, SecretBase):
        return "field"
    return None


def _secret_inner(node: Mapping[str, Any]) -> str:
    """The type of the value a ``Secret[T]`` node wraps (its JSON side: ``function-after`` over T's schema)."""
    inner: Any = node.get("json_schema", node)
    while isinstance(inner, Mapping) and inner.get("type") in ("function-after", "function-before", "function-wrap"):
        inner = inner.get("schema")
    return str(inner.get("type")) if isinstance(inner, Mapping) else "unknown"


# --- values at paths ------------------------------------------------------------------------------------


def _steps(path: str) -> list[str]:
    steps: list[str] = []
    for part in path.split("."):
        head, sep, rest = part.partition("[")
        if not sep:
            head, sep, rest = part.partition("{")
            rest = "{" + rest if sep else ""
        else:
            rest = "[" + rest
        if head:
            steps.append(head)
        while rest:
            close = "]" if rest[0] == "[" else "}"
            end = rest.index(close) + 1
            steps.append(rest[:end])
            rest = rest[end:]
    return steps


def _at(value: object, steps: list[str]) -> Iterator[object]:
    """The non-None values at ``steps`` under ``value`` (every item of a container followed); at a ``**`` step
    (a recursive model), every secret below."""
    todo = [(value, 0)]
    while todo:
        node, i = todo.pop()
        if node is None:
            continue
        if i == len(steps):
            yield node
            continue
        step = steps[i]
        if step == "**":
            yield from secrets_in(node)
        elif step == "<root>":
            todo.append((node, i + 1))
        elif step == "{key}":
            if isinstance(node, Mapping):
                todo.extend((k, i + 1) for k in node)
        elif step == "{*}":
            if isinstance(node, Mapping):
                todo.extend((v, i + 1) for v in node.values())
        elif step == "*":  # a model's extra fields, a TypedDict's extra keys
            extra = node if isinstance(node, Mapping) else getattr(node, "__pydantic_extra__", None) or {}
            todo.extend((v, i + 1) for v in extra.values())
        elif step.startswith("["):
            if isinstance(node, (list, tuple, set, frozenset, deque)):
                items = list(node)
                if step == "[*]":
                    todo.extend((v, i + 1) for v in items)
                elif int(step[1:-1]) < len(items):
                    todo.append((items[int(step[1:-1])], i + 1))
        elif isinstance(node, Mapping):  # a TypedDict
            todo.append((node.get(step), i + 1))
        else:
            todo.append((getattr(node, step, None), i + 1))


# --- secrets in values ----------------------------------------------------------------------------------


def is_secret(value: object) -> bool:
    """Whether ``value`` is a ``SecretStr``, ``SecretBytes`` or ``pydantic.Secret[T]`` (or a subclass's) instance."""
    return isinstance(value, SecretBase)


def secrets_in(value: object) -> Iterator[SecretBase[Any]]:
    """Every secret instance under ``value``: in models (fields and extras), dataclasses, mappings (keys and
    values), lists, tuples, sets and deques, at any depth (iterative), each object visited once."""
    todo = [value]
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if isinstance(node, SecretBase):
            yield node
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, BaseModel):
            todo.extend(node.__dict__.values())
            todo.extend((node.__pydantic_extra__ or {}).values())
        elif is_dataclass(node) and not isinstance(node, type):
            todo.extend(getattr(node, f.name, None) for f in fields(node))
        elif isinstance(node, Mapping):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, (list, tuple, set, frozenset, deque)):
            todo.extend(node)


def holds_secret(value: Any) -> bool:
    """Whether a secret value is anywhere in ``value`` (an instance, not a type: ``None`` secrets do not count).

    A model is first asked at the paths its schema can hold a secret at (``secrets_at``: any depth, any
    container pydantic validates). Then the value itself is walked, for secrets the schema cannot name (an ``Any``
    field, extra fields): models, dataclasses, mappings and collections, at any depth.
    """
    if isinstance(value, BaseModel) and holds_secret_at(value, type(value)):
        return True  # a path its schema marks secret holds a value: whatever the depth or the container
    return next(secrets_in(value), None) is not None
