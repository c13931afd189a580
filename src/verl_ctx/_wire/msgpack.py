"""The wire format: MessagePack of ``RoleContext`` field values, with msgspec's hooks (the hot path of every worker).

Encoding walks the model with msgspec and an ``enc_hook`` that hands back each model's ``__dict__``:
msgspec encodes datetimes, UUIDs, Decimals, Enums, bytes, sets and non-str dict keys natively, so only
what it cannot hold is touched in Python.
Decoding is an untyped msgspec decode followed by pydantic-core validation against the caller's schema,
so the worker always gets a validated instance and never an object named by the payload.
(Measurements behind these choices: benchmarks/README.md.)

Two things msgpack would get wrong are carried in extension types:

* a tz-aware datetime becomes a UTC timestamp and loses its offset, so one with a non-zero offset travels
  as ``Ext(1, isoformat)`` (a UTC one as the native timestamp). Only fields whose type can hold a datetime
  are looked at (planned once per class), so a table of ints pays nothing;
* an int outside [-2**63, 2**64) raises ``OverflowError``; then the whole value is re-walked once and
  such ints travel as ``Ext(2, decimal text)``.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import types
import typing
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

import msgspec
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .._pydantic_compat import SecretBase

__all__ = [
    "EXT_AWARE_DATETIME",
    "EXT_BIG_INT",
    "UnencodableError",
    "datetime_fields",
    "decoder",
    "enc_hook",
    "encoder",
    "ext_hook",
    "prepare_all",
    "wrap_datetimes",
]

EXT_AWARE_DATETIME = 1
EXT_BIG_INT = 2
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class UnencodableError(TypeError):
    """Raised from inside the encoder for a value msgpack cannot carry; turned into EnvelopeError above."""


# --- encoding ------------------------------------------------------------------------------------------

# model class -> (names of fields whose type can hold a datetime, whether the model keeps extra fields, its
# fields). Planned once per class: the encoder's hook runs once per model instance, 100,000 times for a large
# table. Unbounded like the classes it is keyed by: one entry per model class the program encodes.
_Plan = tuple[tuple[str, ...], bool, frozenset[str]]
_plans: dict[type, _Plan] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    fields = tuple(name for name, info in cls.model_fields.items() if _may_hold_datetime(info.annotation))
    plan = _plans[cls] = (fields, cls.model_config.get("extra") == "allow", frozenset(cls.model_fields))
    return plan


def datetime_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``cls`` the encoder's hook looks at for datetimes with a non-UTC offset, in its order."""
    return (_plans.get(cls) or _plan(cls))[0]


def _model_dict(obj: BaseModel, plan: _Plan) -> dict[str, Any]:
    fields, keeps_extra, names = plan
    data: dict[str, Any] = obj.__dict__
    if len(data) != len(names):
        # Something besides the fields lives in __dict__: a functools.cached_property's value, once read. It is
        # not a field (pydantic's model_dump leaves it out) and the worker's schema would refuse it as unknown.
        data = {k: v for k, v in data.items() if k in names}
        if len(data) != len(names):
            missing = ", ".join(sorted(names - data.keys()))
            raise UnencodableError(
                f"this {type(obj).__name__} has no value for {missing} (deleted after it was built?); "
                "set it again, or build the instance anew, before encoding"
            )
    if keeps_extra and obj.__pydantic_extra__:
        data = {**data, **obj.__pydantic_extra__}
    copied = False
    for name in fields:
        value = data[name]
        if type(value) is dt.datetime and (value.tzinfo is None or not value.utcoffset()):
            continue  # the common case, kept inline: naive and UTC datetimes travel natively
        wrapped = wrap_datetimes(value)
        if wrapped is not value:  # copy only when a value changes
            if not copied:
                data, copied = dict(data), True
            data[name] = wrapped
    return data


def enc_hook(obj: Any) -> Any:
    plan = _plans.get(type(obj))  # before isinstance: pydantic's metaclass makes isinstance slow
    if plan is not None:
        if not plan[0] and not plan[1] and len(data := obj.__dict__) == len(plan[2]):
            return data  # no datetime field, no extras: msgspec encodes the field values as they are
        return _model_dict(obj, plan)
    if isinstance(obj, BaseModel):
        return _model_dict(obj, _plan(type(obj)))
    if isinstance(obj, SecretBase):  # SecretStr, SecretBytes, pydantic.Secret[T] (checked at class creation)
        return obj.get_secret_value()  # the worker needs the secret itself; it is never logged
    if isinstance(obj, collections.deque):
        return list(obj)  # items as they are: pydantic's JSON form would turn a secret in it into stars
    if isinstance(obj, PurePath):
        return str(obj)
    try:
        # URLs, IP addresses, and other types pydantic knows: their JSON form, which pydantic validates back.
        return to_jsonable_python(obj)
    except PydanticSerializationError:
        pass
    raise UnencodableError(
        f"a value of type {type(obj).__module__}.{type(obj).__qualname__} cannot be carried in MessagePack; "
        "declare the field with a JSON-like type, a datetime/UUID/Decimal/Enum/bytes/Path, or a nested model"
    )


def wrap_datetimes(value: Any) -> Any:
    """``value`` with each aware, non-UTC datetime in it as an extension; ``value`` itself if none is."""
    if isinstance(value, dt.datetime):
        # UTC travels natively (a msgpack timestamp decodes as UTC); only another offset needs the text form.
        if value.tzinfo is not None and value.utcoffset():
            return msgspec.msgpack.Ext(EXT_AWARE_DATETIME, value.isoformat().encode())
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [wrap_datetimes(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: wrap_datetimes(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        # A map key must stay hashable: aware datetime keys travel as ISO text, which pydantic parses back.
        out = {
            (k.isoformat() if isinstance(k, dt.datetime) and k.tzinfo else k): wrap_datetimes(v)
            for k, v in value.items()
        }
        same_keys = out.keys() == value.keys()
        return value if same_keys and all(out[k] is v for k, v in value.items()) else out
    return value


def _unwrapped(secret: SecretBase[Any]) -> Any:
    return secret.get_secret_value()


def prepare_all(value: Any, on_secret: Callable[[SecretBase[Any]], Any] = _unwrapped) -> Any:
    """Slow path for payloads with ints msgpack cannot hold: walk everything once.

    ``on_secret`` gives what a secret travels as: itself for a worker, its seal for a checkpoint. It is called on the
    secret object, before anything else is done with it, so no caller ever sees a secret it did not ask to unwrap.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return value
        return msgspec.msgpack.Ext(EXT_BIG_INT, str(value).encode())
    if isinstance(value, SecretBase):
        return prepare_all(on_secret(value), on_secret)
    if isinstance(value, BaseModel):
        plan = _plans.get(type(value)) or _plan(type(value))
        return {k: prepare_all(v, on_secret) for k, v in _model_dict(value, plan).items()}
    if isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        return [prepare_all(v, on_secret) for v in value]
    if isinstance(value, dict):
        return {
            (str(k) if isinstance(k, int) and not _INT_MIN <= k <= _INT_MAX else k): prepare_all(v, on_secret)
            for k, v in value.items()
        }
    return wrap_datetimes(value)


encoder = msgspec.msgpack.Encoder(enc_hook=enc_hook)


def ext_hook(code: int, data: memoryview) -> Any:
    if code == EXT_AWARE_DATETIME:
        return dt.datetime.fromisoformat(bytes(data).decode("ascii"))
    if code == EXT_BIG_INT:
        return int(bytes(data).decode("ascii"))
    raise ValueError(f"unknown MessagePack extension type {code}")


#: Untyped: the general path validates what it gives with pydantic afterwards.
decoder = msgspec.msgpack.Decoder(ext_hook=ext_hook)


# --- which annotations can hold a datetime -------------------------------------------------------------

_NEVER_DATETIME = (str, bytes, int, float, bool, dt.date, dt.time, dt.timedelta, type(None))


def _may_hold_datetime(tp: Any) -> bool:
    if tp is dt.datetime or tp is Any or tp is object:
        return True
    origin = typing.get_origin(tp)
    # On Python 3.10 ``isinstance(list[datetime], type)`` is True: look at generics before classes.
    if origin is None and isinstance(tp, type):
        if issubclass(tp, dt.datetime):
            return True
        if issubclass(tp, (BaseModel, enum.Enum, *_NEVER_DATETIME)):
            return False  # a nested model is planned on its own when the encoder reaches it
        return tp.__module__ not in ("builtins", "uuid", "decimal", "pathlib", "ipaddress", "pydantic.types")
    if origin is typing.Literal:
        return False
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _may_hold_datetime(args[0])
    if origin is not None or isinstance(tp, types.UnionType):
        return any(_may_hold_datetime(a) for a in args if a is not Ellipsis) or not args
    return True  # a TypeVar, a forward reference, an alias we do not know: walk it to be safe
