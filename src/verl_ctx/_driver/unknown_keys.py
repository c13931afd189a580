"""Unknown keys in config input at every depth, including nested models that would silently ignore them.

pydantic's default for a plain ``BaseModel`` is ``extra="ignore"``: a typo in a nested section
(``judge.timeout`` for ``judge.timeout_s``) would be dropped without a word. Input from a config or an
override is walked beside its schema here instead, so the user's models keep behaving as declared elsewhere.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from .._model.field_errors import is_union, unwrap

__all__ = ["unknown_keys"]

Found = tuple[list[str], str, Any, list[str]]  # (path parts to the key, the key, its value, known names)


def unknown_keys(tp: Any, data: Any, parts: list[str] | None = None, depth: int = 0) -> Iterator[Found]:
    """Each key of ``data`` that a model at its place would ignore (``extra="forbid"`` ones pydantic reports)."""
    parts = parts or []
    if depth > 64:
        return
    tp = unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if not isinstance(data, Mapping):
            return
        extra = tp.model_config.get("extra")
        names = _names(tp)
        for key, value in data.items():
            field = names.get(str(key))
            if field is None:
                if extra in (None, "ignore"):
                    yield parts, str(key), value, sorted(tp.model_fields)
                continue
            yield from unknown_keys(field.annotation, value, [*parts, str(key)], depth + 1)
        return
    if is_union(tp):
        yield from _in_union(tp, data, parts, depth)
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple, set, frozenset) and isinstance(data, (list, tuple)):
        for i, item in enumerate(data):
            item_tp = (
                args[i] if origin is tuple and len(args) > i and args[-1] is not Ellipsis else args[0] if args else None
            )
            yield from unknown_keys(item_tp, item, [*parts, f"[{i}]"], depth + 1)
    elif isinstance(origin, type) and issubclass(origin, Mapping) and isinstance(data, Mapping) and len(args) == 2:
        for key, value in data.items():
            yield from unknown_keys(args[1], value, [*parts, str(key)], depth + 1)


def _names(model: type[BaseModel]) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        names[name] = field
        if field.alias:
            names[field.alias] = field
    return names


def _in_union(tp: Any, data: Any, parts: list[str], depth: int) -> Iterator[Found]:
    """Judge a union by the member the data most likely meant: the one with the fewest unknown keys."""
    best: list[Found] | None = None
    for member in typing.get_args(tp):
        inner = unwrap(member)
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)) and not typing.get_origin(inner):
            continue
        if isinstance(inner, type) and issubclass(inner, BaseModel) and not _tag_matches(inner, data):
            continue
        found = list(unknown_keys(member, data, parts, depth + 1))
        if best is None or len(found) < len(best):
            best = found
        if not found:
            return
    yield from best or ()


def _tag_matches(model: type[BaseModel], data: Any) -> bool:
    """False when a ``Literal`` field of ``model`` (a discriminator) contradicts ``data``."""
    if not isinstance(data, Mapping):
        return False
    for name, field in model.model_fields.items():
        tag = typing.get_origin(field.annotation) is typing.Literal and name in data
        if tag and data[name] not in typing.get_args(field.annotation):
            return False
    return True
