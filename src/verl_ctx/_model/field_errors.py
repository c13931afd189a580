"""pydantic's ``ValidationError`` as our ``FieldError`` list: one path syntax, secrets never echoed, typos explained.

Paths read ``rows[0].weight`` (list and tuple items, int dict keys in brackets; str dict keys and fields dotted)
with pydantic's union tags (``tools.1.search.index``) removed. An input is shown only when the type at its
place cannot hold a secret; otherwise (a ``SecretStr`` field, a union or container that may hold one, an
unknown field, ``Any``) only its type and length are said. At most ``MAX_ERRORS`` are kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import enum
import types
import typing
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr, ValidationError

from .._secrets.plan import SecretBase
from .._secrets.redact import MASK
from .._secrets.withhold import looks_secret
from ..errors import FieldError

__all__ = [
    "MAX_ERRORS",
    "REDACTED",
    "field_errors",
    "is_union",
    "join_path",
    "may_hold_secret",
    "plain",
    "render_value",
    "suggest",
    "unwrap",
    "withheld",
]

REDACTED = "'**********'"
MAX_ERRORS = 50
_MAX_SHOWN = 80

# Types whose values are never secrets, so an invalid one may be echoed back.
_PLAIN_LEAVES: tuple[type, ...] = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    dt.date,
    dt.time,
    dt.timedelta,
    uuid.UUID,
    decimal.Decimal,
    PurePath,
)


def field_errors(
    exc: ValidationError,
    *,
    role: str,
    schema: type[BaseModel],
    prefix: str = "",
    limit: int = MAX_ERRORS,
    withhold: bool = False,
) -> tuple[list[FieldError], int]:
    """The first ``limit`` errors of ``exc`` as ``FieldError``s dotted from ``prefix``, and how many were left out.

    ``withhold``: show no input at all (the values came from another schema, whose secrets ``schema`` cannot name).
    """
    out = []
    raw = exc.errors(include_url=False)
    for err in raw[:limit]:
        out.append(_one(err, role=role, schema=schema, prefix=prefix, withhold=withhold))
    return out, max(0, len(raw) - limit)


def _one(err: Any, *, role: str, schema: type[BaseModel], prefix: str, withhold: bool = False) -> FieldError:
    parts, tp, known, in_secret_union = _walk(schema, tuple(err["loc"]))
    kind = err["type"]
    path = join_path(prefix, parts)
    hint = None
    shown: str | None
    if kind == "missing":
        shown = None
        hint = "set it in the config or give the field a default"
    elif kind == "extra_forbidden":
        key = str(err["loc"][-1])
        close = suggest(key, known)
        shown = unknown_value_shown(key, err.get("input"), schema, parts[:-1], close)
        renamed = _renamed_by_migration(schema, key) if len(err["loc"]) == 1 else None
        if renamed is not None:
            hint = renamed
        else:
            known_text = f"known fields: {', '.join(sorted(known))}" if known else None
            hint = f"did you mean '{close}'?" if close else known_text
    elif withhold or in_secret_union or may_hold_secret(tp):
        shown = withheld(err.get("input"))
    else:
        shown = render_value(err.get("input"))
        hint = _choice_hint(tp, err.get("input")) or _type_hint(kind, tp)
    return FieldError(role=role, path=path, message=_message(err, kind), input=shown, hint=hint)


def unknown_value_shown(key: str, value: Any, schema: type[BaseModel], parent: Sequence[str], close: str | None) -> str:
    """An unknown field's value as an error shows it: a number, a boolean or null in clear, unless the key reads like
    a secret's or is a typo of a field that may hold one; anything else (a string, bytes, a container: a secret could
    be one) by its type and length only."""
    plain = value is None or isinstance(value, (bool, int, float))
    if not plain or looks_secret(key):
        return withheld(value)
    if close is not None:
        owner = _owner(schema, parent)
        spec = getattr(owner, "model_fields", {}).get(close) if isinstance(owner, type) else None
        if spec is None or may_hold_secret(spec.annotation):
            return withheld(value)
    return render_value(value)


def _owner(schema: type[BaseModel], parts: Sequence[str]) -> Any:
    """The model at ``parts`` (field names; list positions skipped) under ``schema``, or None."""
    tp: Any = schema
    for part in parts:
        if part.startswith("["):
            continue
        fields = getattr(tp, "model_fields", None) if isinstance(tp, type) else None
        if not fields or part not in fields:
            return None
        tp = next(
            (
                a
                for a in [fields[part].annotation, *typing.get_args(fields[part].annotation)]
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
    return tp


def _renamed_by_migration(schema: type[BaseModel], key: str) -> str | None:
    """ "renamed to X in version N" when one of ``schema``'s migrations moves ``key`` to another field: found by
    running the migrations (pure dict -> dict functions) on a probe holding only ``key``, from the oldest."""
    migrations = getattr(schema, "__verl_ctx_migrations__", None) or {}
    for start in sorted(migrations):
        probe: Any = object()
        data: Any = {key: probe}
        for step in sorted(v for v in migrations if v >= start):
            try:
                data = migrations[step](dict(data))
            except Exception:  # noqa: BLE001 - a migration written for whole payloads may need other keys
                break
            if not isinstance(data, dict):
                break
            moved = [k for k, v in data.items() if v is probe and k != key]
            if moved and key not in data:
                return (
                    f"renamed to '{moved[0]}' in version {step + 1} (@migration(from_version={step})): write "
                    f"{moved[0]} in the config"
                )
    return None


def join_path(prefix: str, parts: Sequence[str]) -> str:
    """``prefix`` then each part: ``[i]`` parts attach, names are dotted."""
    text = prefix
    for part in parts:
        text += part if part.startswith("[") or not text else "." + part
    return text


def _message(err: Any, kind: str) -> str:
    if kind == "extra_forbidden":
        return "unknown field"
    msg: str = err["msg"]
    # "Input should be ..." -> "input should be ...", but "URL scheme ..." keeps its capitals.
    if len(msg) > 1 and msg[0].isupper() and msg[1].islower():
        msg = msg[0].lower() + msg[1:]
    return msg


# --- walking a type along pydantic's error location -------------------------------------------------------


def _walk(schema: type[BaseModel], loc: tuple[Any, ...]) -> tuple[list[str], Any, list[str], bool]:
    """The rendered path parts, the type at the end (``None`` if unknown), the field names around it, and whether
    the path went through a union that may hold a secret (an error about one member says nothing about the input)."""
    parts: list[str] = []
    tp: Any = schema
    known: list[str] = list(schema.model_fields)
    in_secret_union = False
    for item in loc:
        tp = unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            known = list(tp.model_fields)
            field = _field(tp, item)
            # A field's name, or an unknown key shaped like one (a typo); any other key is data (a corrupt payload's
            # key, a tuple's repr) that may hold a secret: not shown.
            named = field is not None or (isinstance(item, str) and item.isidentifier())
            parts.append(_part(item) if named else f"<{type(item).__name__} key, not shown>")
            tp = field.annotation if field is not None else None
            continue
        if is_union(tp) and isinstance(item, str):
            in_secret_union = in_secret_union or may_hold_secret(tp)
            tp = _union_member(tp, item)  # a union tag: not part of the path
            continue
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (list, tuple, set, frozenset):
            parts.append(f"[{item}]")
            tp = _item_type(origin, args, item)
        elif isinstance(origin, type) and issubclass(origin, Mapping):
            if item == "[key]":
                parts.append("<key>")
                tp = args[0] if args else None
            else:
                parts.append(_part(item) if isinstance(item, str) else f"[{_part(item)}]")
                tp = args[1] if len(args) == 2 else None
        else:
            parts.append(f"[{item}]" if isinstance(item, int) else _part(item))
            tp = None
    return parts, tp, known, in_secret_union


def _part(item: Any) -> str:
    """A location part as a path shows it: a name or number as itself; a map key of another type (a corrupt
    payload's array key, decoded as a tuple) by its type only: it holds data, which may be a secret."""
    if isinstance(item, (str, int)) and not isinstance(item, bool):
        return str(item)
    return f"<{type(item).__name__} key>"


def _field(model: type[BaseModel], name: Any) -> Any:
    field = model.model_fields.get(str(name))
    if field is None:
        field = next((f for f in model.model_fields.values() if f.alias == name), None)
    return field


def unwrap(tp: Any) -> Any:
    """``tp`` without ``Annotated`` and ``Optional`` (pydantic's nullable schema adds no tag to paths)."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if is_union(tp):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Union or isinstance(tp, types.UnionType)


def _union_member(tp: Any, tag: str) -> Any:
    """The member of a union that pydantic's tag names: a discriminator value or a type's name."""
    for member in typing.get_args(tp):
        inner = unwrap(member)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            if inner.__name__ == tag:
                return inner
            for field in inner.model_fields.values():
                if typing.get_origin(field.annotation) is typing.Literal and tag in typing.get_args(field.annotation):
                    return inner
        elif getattr(inner, "__name__", None) == tag or str(inner) == tag:
            return inner
    return tp  # not identified: keep the whole union (which decides redaction conservatively)


def _item_type(origin: Any, args: tuple[Any, ...], index: Any) -> Any:
    if not args:
        return None
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return args[index] if isinstance(index, int) and index < len(args) else None
    return args[0]


# --- secrets ----------------------------------------------------------------------------------------------

_secret_cache: dict[Any, bool] = {}


def may_hold_secret(tp: Any) -> bool:
    """Whether a value of type ``tp`` can be, or contain, a secret (unknown types: yes)."""
    try:
        return _secret_cache[tp]
    except (KeyError, TypeError):
        pass
    result = _may_hold_secret(tp, set())
    with contextlib.suppress(TypeError):
        _secret_cache[tp] = result
    return result


def _may_hold_secret(tp: Any, seen: set[int]) -> bool:
    tp = unwrap(tp)
    if tp is None or tp is Any or tp is object:
        return True
    if isinstance(tp, type):
        if issubclass(tp, SecretBase):  # SecretStr, SecretBytes, pydantic.Secret's subclasses
            return True
        if issubclass(tp, (enum.Enum, *_PLAIN_LEAVES)):
            return False
        if issubclass(tp, BaseModel):
            if id(tp) in seen:
                return False
            seen.add(id(tp))
            return tp.model_config.get("extra") == "allow" or any(
                _may_hold_secret(f.annotation, seen) for f in tp.model_fields.values()
            )
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return False
    if isinstance(origin, type) and issubclass(origin, SecretBase):  # pydantic.Secret[int]: a secret of any type
        return True
    args = [a for a in typing.get_args(tp) if a is not Ellipsis]
    if origin is not None or is_union(tp):
        return not args or any(_may_hold_secret(a, seen) for a in args)
    # A type we do not know can hold anything; network and address types cannot hold a secret.
    return not (
        isinstance(tp, type) and tp.__module__ in ("ipaddress", "pydantic.networks", "pydantic_core._pydantic_core")
    )


def withheld(value: Any) -> str:
    """What may be said of a value that could be secret: its type and length."""
    try:
        size = f", length {len(value)}"
    except TypeError:
        size = ""
    return f"<{type(value).__name__}{size}, not shown>"


# --- rendering values ---------------------------------------------------------------------------------------


def render_value(value: Any, limit: int = _MAX_SHOWN) -> str:
    """JSON-like text of a value for people (ISO times, enum values), cut at ``limit`` characters."""
    import json  # on first use: `import verl_ctx` stays as light as importing pydantic and msgspec (#15)

    text = json.dumps(plain(value), ensure_ascii=False, default=str, sort_keys=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-native data: secrets masked, enums by value, times in ISO form."""
    if depth > 20:
        return "..."
    if isinstance(value, (SecretStr, SecretBytes)):
        return MASK
    if isinstance(value, BaseModel):
        # Its fields only: a cached_property's value, once read, sits in __dict__ too, and may be made from a
        # secret (a "Bearer ..." header) where nothing says to mask it.
        fields = type(value).model_fields
        return {k: plain(v, depth + 1) for k, v in value.__dict__.items() if k in fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # its fields, each masked as needed
        return {f.name: plain(getattr(value, f.name, None), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, SecretBase):  # pydantic.Secret[...]
        return MASK
    if isinstance(value, enum.Enum):
        return plain(value.value, depth + 1)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [plain(v, depth + 1) for v in items]
    return str(value)


# --- hints ----------------------------------------------------------------------------------------------


def suggest(word: str, choices: Iterable[str]) -> str | None:
    import difflib  # on first use: only a mistyped name needs it

    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def _choices(tp: Any) -> list[str]:
    tp = unwrap(tp)
    if typing.get_origin(tp) is typing.Literal:
        return [str(a) for a in typing.get_args(tp)]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return [str(m.value) for m in tp]
    if is_union(tp):
        return [c for a in typing.get_args(tp) for c in _choices(a)]
    return []


def _choice_hint(tp: Any, value: Any) -> str | None:
    choices = _choices(tp)
    if not choices or not isinstance(value, str):
        return None
    close = suggest(value, choices)
    return f"did you mean '{close}'?" if close else None


_TYPE_WORDS = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list, e.g. [1, 2] (quote it on the command line: '+extra_context.x.y=[1,2]')",
    "dict_type": "a mapping, e.g. {a: 1}",
    "model_type": "a mapping of this section's fields",
    "model_attributes_type": "a mapping of this section's fields",
}


def _type_hint(kind: str, tp: Any) -> str | None:
    word = _TYPE_WORDS.get(kind)
    if word is None:
        return None
    shown = getattr(unwrap(tp), "__name__", None) or (str(tp) if tp is not None else None)
    return f"expected {word}" + (f" ({shown})" if shown and shown not in word else "")
