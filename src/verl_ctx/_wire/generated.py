"""What compiled code calls at run time: the namespace the generated builders and encoders run in, the bulk
builders of lists of flat models, and ``Refused`` (a payload pydantic must decide on).

Instances are built as pydantic-core builds them: by its own model builder where it can be given a prebuilt-free
schema (``instance_maker``), else by writing ``BaseModel``'s slot descriptors (``_pydantic_compat``).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any

import msgspec
from pydantic import BaseModel, ValidationError
from pydantic_core import core_schema

from .._pydantic_compat import fresh_validator, set_extra, set_fields_set, set_private
from . import msgpack

__all__ = ["Refused", "bulk_builder", "bulk_preparer", "datetime_step", "instance_maker", "namespace"]


class Refused(Exception):
    """The compiled path cannot vouch for this payload; the pydantic path decides it."""


_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields, _set_extra, _set_private = set_fields_set, set_extra, set_private
# ``o.__dict__``, as the hook reads it (``msgpack._model_dict``); 13 ns a row faster through map than calling the
# descriptor's __get__.
_get_dict = attrgetter("__dict__")
_asdict = msgspec.structs.asdict
_tzinfo = attrgetter("tzinfo")
_UTC = dt.timezone.utc
_CHUNK = 4096  # rows built per pass in a list of flat models


def namespace() -> dict[str, Any]:
    """A fresh namespace for one schema's generated code: what every builder and encoder reads by name."""
    return {
        "_new": _new,
        "_sd": _set_dict,
        "_sf": _set_fields,
        "_se": _set_extra,
        "_sp": _set_private,
        "_asdict": _asdict,
        "_utc": _UTC,
        "_type": type,
        "_len": len,
        "_tuple": tuple,
        "_list": list,
        "_dict": dict,
        "_map": map,
        "_zip": zip,
        "_dt": dt.datetime,
        "_Refused": Refused,
        "_unchanged": lambda value: msgpack.wrap_datetimes(value) is value,
    }


def bulk_builder(
    cls: type[BaseModel], checks: tuple[str, ...], ns: dict[str, Any], one: str
) -> Callable[[list[Any]], list[Any]]:
    """Instances of a flat model from a list of its Structs, without bytecode per row.

    ``checks`` are its plain-datetime fields: when one holds anything but a datetime, the rows go one by one
    through ``ns[one]`` (the generated builder), which hands such values to pydantic.
    """
    fields = set(cls.model_fields)
    getters = [attrgetter(name) for name in checks]
    make = _list_maker(cls)

    def bulk(rows: list[Any]) -> list[Any]:
        n = len(rows)
        for get in getters:
            if list(map(type, map(get, rows))).count(dt.datetime) != n:
                return list(map(ns[one], rows))
        # The rows share one fields set, a fresh one per container (see the module's docstring).
        shared = fields.copy()
        if n <= _CHUNK:
            return build(rows, shared)
        # A chunk at a time, from the end: each chunk's Structs are freed as the next is built (they never all live
        # beside their instances), every pass over a chunk finds it still in the CPU cache, and each chunk's
        # instances go straight to their place in the one list returned (no second list of them all).
        out: list[Any] = [None] * n
        end = n
        while rows:
            part = rows[-_CHUNK:]
            del rows[-_CHUNK:]
            start = end - len(part)
            out[start:end] = build(part, shared)
            end = start
        return out

    def by_core(part: list[Any], shared: set[str]) -> list[Any]:
        # pydantic-core's model builder over a whole chunk: one call, given for each row the triple its fields
        # validator would have returned (__dict__ in field order, no extra, every field set).
        k = len(part)
        return make(list(zip(map(_asdict, part), repeat(None, k), repeat(shared, k), strict=True)))  # type: ignore[misc]

    build = _by_slots(cls) if make is None else by_core
    return bulk


def _by_slots(cls: type[BaseModel]) -> Callable[[list[Any], set[str]], list[Any]]:
    """Instances of ``cls`` from Structs by ``object.__new__`` and BaseModel's slot setters, mapped in C."""

    def build(part: list[Any], shared: set[str]) -> list[Any]:
        k = len(part)
        objs = list(map(_new, repeat(cls, k)))
        # zip advances both pipelines a row at a time; the setters return None, the next slot's value.
        slots = map(_set_private, objs, map(_set_extra, objs, map(_set_fields, objs, repeat(shared, k))))
        deque(zip(map(_set_dict, objs, map(_asdict, part)), slots, strict=True), 0)
        return objs

    return build


def bulk_preparer(
    cls: type[BaseModel], dt_fields: tuple[str, ...], ns: dict[str, Any], one: str
) -> Callable[[list[Any]], list[Any]]:
    """Each row's ``__dict__`` when every row is exactly ``cls``, its ``__dict__`` only the fields, with naive or UTC
    datetimes; else row by row."""
    getters = [itemgetter(name) for name in dt_fields]
    width = len(cls.model_fields)

    def bulk(rows: list[Any]) -> list[Any]:
        n = len(rows)
        if list(map(type, rows)).count(cls) != n:  # count: identity first, and a class equals only itself
            return list(map(ns[one], rows))
        dicts = list(map(_get_dict, rows))
        if list(map(len, dicts)).count(width) != n:  # more than the fields in some __dict__ (a cached_property)
            return list(map(ns[one], rows))
        for get in getters:
            values = list(map(get, dicts))
            if list(map(type, values)).count(dt.datetime) != n:
                return list(map(ns[one], rows))
            zones = list(map(_tzinfo, values))
            if not (all(map(is_, zones, repeat(_UTC))) or all(map(is_, zones, repeat(None)))):
                return list(map(ns[one], rows))  # mixed or other zones: the exact per-row check
        return dicts

    return bulk


def instance_maker(cls: type[BaseModel]) -> Callable[[Any], Any] | None:
    """``(dict, None, fields_set) -> instance`` by pydantic-core's model builder, or None if it cannot be had.

    A ``model`` schema whose inner schema is ``any`` takes the triple its fields validator would have produced. It
    must not be swapped for the class's own validator (pydantic-core reuses a class's validator for its schema),
    which a pydantic-core without ``_use_prebuilt`` would do: then the descriptors are set from Python instead.
    """
    try:
        make = fresh_validator(core_schema.model_schema(cls, core_schema.any_schema())).validate_python
        probe = make(({}, None, set()))
    except (TypeError, ValidationError):
        return None
    return make if type(probe) is cls and probe.__dict__ == {} else None


def _list_maker(cls: type[BaseModel]) -> Callable[[list[Any]], list[Any]] | None:
    """``[(dict, None, fields_set), ...] -> [instance, ...]`` by pydantic-core in one call, or None (see above)."""
    if instance_maker(cls) is None:
        return None
    return fresh_validator(
        core_schema.list_schema(core_schema.model_schema(cls, core_schema.any_schema()))
    ).validate_python


def datetime_step(leaf: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def step(x: Any) -> Any:
        return x if type(x) is dt.datetime else leaf(x)

    return step
