"""The compiled path: msgspec checks a payload in C, and pydantic instances are built without re-validation.

For a schema whose every part is on the closed list below, a mirror of it is generated once per class, lazily (on
its first encode or decode): a ``msgspec.Struct`` per model, every field required and no other allowed, constraints
as ``msgspec.Meta``. The typed decoder then checks in C what pydantic-core would, and generated code builds the
instances without validating again: one instance by pydantic-core's own model builder (a ``model`` schema whose
inner schema is ``any``, given the ``(__dict__, extra, fields set)`` its fields validator would have returned); a
list of flat models by the same builder inside a ``list`` schema, one call per 4,096 rows, its triples made by ``map``
and ``zip`` over C callables (no bytecode per row: 17 % faster per row than setting BaseModel's slot descriptors
through ``map``, which remains where pydantic-core cannot be given a prebuilt-free schema).

Why the answers are pydantic's own:

* on the closed list, the mirror accepts a subset of what pydantic accepts, and where both accept they build the
  same value, with ``__dict__`` in field order (``msgspec.structs.asdict``). ``tests/core/test_compiled.py``
  checks this by property test (generated schemas; their payloads, valid and mutated). The encoder writes every
  field and nothing else, so requiring exactly the fields costs nothing, and ``model_fields_set`` is every field.
  The models of one list (or one dict's values) built in bulk share one such set, a fresh one per container:
  pydantic only ever adds a field to a fields set (on assignment) or copies it (``model_copy``, ``copy``,
  ``deepcopy``), which leaves a set of every field as it is, and a million rows do not carry 216 bytes each of the
  same set. Code that edits ``model_fields_set`` in place by hand would see them share it, and a pickle of them
  holds the set once (shorter bytes; unpickled, they share it again);
* whatever the mirror refuses (a missing or unknown field, an ``Ext`` value such as an int past 2**64 in an
  ``int`` field, NaN against a bound, a ``bool`` for an ``int``) goes to the pydantic path, so acceptance and the
  error list are pydantic's;
* datetimes, dates, times, timedeltas and decimals are decoded as plain values and given, one by one, to
  pydantic-core's validator of that field's own core-schema node (a ``datetime`` object, which pydantic would
  return unchanged, skips it): msgspec's parsers never read text pydantic would read differently.

What does not qualify keeps the pydantic path: validators, serializers, private attributes, ``model_post_init``,
a custom ``__init__``/``__new__``, custom core schemas, generics, ``RootModel``, ``extra="allow"``, aliases, unions
other than ``X | None``, ``Any``, secrets, paths, URLs, recursive models, string patterns or transformations,
``allow_inf_nan=False``, float ``multiple_of``, length limits on dicts, sets and tuples. A ``RoleContext``
opts out with the class keyword ``compiled=False``; ``why_not(cls)`` says why a class takes the pydantic path.

Encoding takes a generated pre-pass that hands msgspec each model's ``__dict__`` wherever today's ``enc_hook``
would return that same dict (an instance of exactly the expected class, its ``__dict__`` only its fields, its
datetimes naive or UTC); any other value is left to the hook, so the bytes are the hook's, byte for byte.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import threading
import typing
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator, core_schema

from . import _schema_walk as schema_walk
from ._trusted import declared_validators, runs_declared

__all__ = ["Refused", "decoder_for", "decoders", "encoder_for", "encoders", "forget", "why_not"]

Decoder = Callable[[bytes], Any]
Encoder = Callable[[Any], bytes]


class Refused(Exception):
    """The compiled path cannot vouch for this payload; the pydantic path decides it."""


class _NotCompiled(Exception):
    """The schema has a part outside the closed list (the message says which)."""


# --- the closed list --------------------------------------------------------------------------------------

# CoreConfig keys that cannot change what validation returns for the values the mirror accepts; for the others,
# the values that keep the default behaviour. Any other key (one a newer pydantic adds) keeps the pydantic path.
_CONFIG_ANY = frozenset(
    {
        "title",
        "strict",  # validate_python(strict=False) overrides it, as it overrides a field's strict=
        "from_attributes",
        "revalidate_instances",
        "validate_default",
        "populate_by_name",
        "validate_by_name",
        "validate_by_alias",
        "loc_by_alias",
        "hide_input_in_errors",
        "validation_error_cause",
        "coerce_numbers_to_str",  # only widens what str fields accept: the mirror's refusals go to pydantic
        "regex_engine",
        "cache_strings",
        "val_json_bytes",
        "val_temporal_unit",
        "serialize_by_alias",
        "polymorphic_serialization",
    }
)
_CONFIG_DEFAULTS: dict[str, tuple[object, ...]] = {
    "extra_fields_behavior": ("ignore", "forbid"),
    "allow_inf_nan": (True,),
    "str_strip_whitespace": (False,),
    "str_to_lower": (False,),
    "str_to_upper": (False,),
    "str_min_length": (None, 0),
    "str_max_length": (None,),
}
# Keys any node may carry without changing validation (``strict`` is overridden by validate_python).
_COMMON = frozenset({"type", "ref", "metadata", "strict"})
_NODE_KEYS: dict[str, frozenset[str]] = {
    "int": frozenset({"gt", "ge", "lt", "le", "multiple_of"}),
    "float": frozenset({"gt", "ge", "lt", "le", "allow_inf_nan"}),
    "bool": frozenset(),
    "str": frozenset({"min_length", "max_length", "coerce_numbers_to_str"}),
    "bytes": frozenset({"min_length", "max_length"}),
    "none": frozenset(),
    "uuid": frozenset(),
    "nullable": frozenset({"schema"}),
    "list": frozenset({"items_schema", "min_length", "max_length", "fail_fast"}),
    "tuple": frozenset({"items_schema", "variadic_item_index", "fail_fast"}),
    "set": frozenset({"items_schema", "fail_fast"}),
    "frozenset": frozenset({"items_schema", "fail_fast"}),
    "dict": frozenset({"keys_schema", "values_schema", "fail_fast"}),
    "enum": frozenset({"cls", "members", "sub_type"}),
    "literal": frozenset({"expected"}),
}
_DEFAULT_KEYS = frozenset(
    {*_COMMON, "schema", "default", "default_factory", "default_factory_takes_data", "on_error", "validate_default"}
)
# Leaves decoded as plain values and validated one by one by pydantic-core itself (the node as it is).
_BY_PYDANTIC = frozenset({"datetime", "date", "time", "timedelta", "decimal"})
# A datetime node with only these keys returns a datetime input unchanged: generated code skips the validator.
_PLAIN_DATETIME = frozenset({*_COMMON, "microseconds_precision"})
_MODEL_KEYS = frozenset({*_COMMON, "cls", "schema", "config", "custom_init", "root_model", "post_init"})
_FIELDS_KEYS = frozenset({*_COMMON, "fields", "model_name", "computed_fields", "extra_behavior", "from_attributes"})
_FIELD_KEYS = frozenset(
    {"type", "schema", "metadata", "frozen", "serialization_exclude", "serialization_exclude_if", "serialization_alias"}
)
_SET_ITEMS = frozenset({"int", "float", "bool", "str", "bytes", "none", "uuid", "enum", "literal"})

_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
# ``o.__dict__``, as the hook reads it (``_codec._model_dict``); 13 ns a row faster through map than calling the
# descriptor's __get__.
_get_dict = attrgetter("__dict__")
_asdict = msgspec.structs.asdict
_tzinfo = attrgetter("tzinfo")
_UTC = dt.timezone.utc
_CHUNK = 4096  # rows built per pass in a list of flat models


# --- one compile per class, lazily ------------------------------------------------------------------------

# class -> its compiled decoder / payload encoder (None: the pydantic path / the encoder's hook). Looked up by
# class, because reading a class attribute goes through pydantic's metaclass and costs more than this whole lookup.
# A class is compiled
# from its core schema once it is complete; RoleContext.model_rebuild() calls forget(), so a rebuilt schema is
# compiled again and a decode always answers as the validator pydantic would use. Unbounded like the classes
# themselves (one entry per schema class encoded or decoded, as in _fingerprint).
decoders: dict[type, Decoder | None] = {}
encoders: dict[type, Encoder | None] = {}
_why_not: dict[type, str | None] = {}
_lock = threading.Lock()


def decoder_for(cls: type[BaseModel]) -> Decoder | None:
    """``payload -> instance`` for ``cls`` (raising ``Refused`` where pydantic must decide); None if not compiled."""
    if cls in decoders:
        return decoders[cls]
    return _compile(cls)[0]


def encoder_for(cls: type[BaseModel]) -> Encoder | None:
    """``instance -> payload bytes``, the hook's exact bytes without its calls; None if ``cls`` is not compiled."""
    if cls in encoders:
        return encoders[cls]
    return _compile(cls)[1]


def why_not(cls: type[BaseModel]) -> str | None:
    """Why ``cls`` takes the pydantic path; None when it is compiled."""
    _compile(cls)
    return _why_not.get(cls, "pydantic has not finished building the class")


def forget(cls: type) -> None:
    """Drop what was compiled for ``cls`` (its schema was rebuilt): the next encode or decode compiles it again."""
    with _lock:
        for cache in (decoders, encoders, _why_not):
            cache.pop(cls, None)


def _compile(cls: type[BaseModel]) -> tuple[Decoder | None, Encoder | None]:
    with _lock:
        if cls not in _why_not:
            decode = encode = why = None
            if getattr(cls, "__verl_ctx_compiled__", True) is False:
                why = "the class says compiled=False"
            elif not cls.__pydantic_complete__:
                return None, None  # not cached: pydantic finishes the class on first use, then it is compiled
            else:
                try:
                    decode, encode = _Compiler(cls).compile()
                except _NotCompiled as e:
                    why = str(e)
            _why_not[cls] = why
            # The hot paths read these two without the lock: each holds a finished entry or none.
            decoders[cls], encoders[cls] = decode, encode
    return decoders.get(cls), encoders.get(cls)


# --- the compiler -----------------------------------------------------------------------------------------

# What a value needs after msgspec: nothing (None), or (kind, name of a one-argument function in the namespace).
# Kinds: "dt" (a plain datetime: the function only for non-datetime values), "leaf" (pydantic's validator),
# "model" (build one instance), "fn" (a generated function for a container).
Step = tuple[str, str] | None


class _Model:
    """One model class of the schema: its mirror Struct and the names of its generated functions."""

    def __init__(self, index: int, cls: type[BaseModel]) -> None:
        self.cls = cls
        self.build = f"_b{index}"  # Struct -> instance (raises Refused)
        self.prepare = f"_e{index}"  # instance -> its dict (or a copy with models prepared), or itself for the hook
        self.prepare_top = f"_t{index}"  # the same for an instance known to be exactly of this class
        self.steps: dict[str, Step] = {}  # field -> what its value needs after msgspec
        self.dt_fields: tuple[str, ...] = ()  # fields the encoder's hook checks for datetime offsets
        self.prepared_flat = False  # no field holds models: a list of it is prepared in bulk
        self.prepared_plain = False  # nor a datetime: an instance encodes as its __dict__ itself
        self.mirror: Any = None  # a Struct: one instance's value
        self.fields: list[tuple[str, Any]] = []  # (name, mirror type) in field order
        self.rows: tuple[Any, str] | None = None  # (mirror of one row in a list, its bulk builder's name)

    @property
    def bulk(self) -> bool:
        """Lists of it are built in bulk, without bytecode per row: no field needs more than a datetime type check."""
        return all(step is None or step[0] == "dt" for step in self.steps.values())


class _Compiler:
    def __init__(self, root: type[BaseModel]) -> None:
        from . import _codec  # here: _codec imports this module

        self.codec = _codec
        self.root = root
        self.defs: Mapping[str, Any] = {}
        self.declared: set[int] = set()
        self.models: dict[str, _Model] = {}  # by the model node's core-schema ref
        self.active: set[str] = set()
        self.enums: list[type[enum.Enum]] = []
        self.lines: list[str] = []
        self.count = 0
        self.ns: dict[str, Any] = {
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
            "_unchanged": lambda value: _codec._wrap_datetimes(value) is value,
        }

    def name(self, prefix: str, value: object = None) -> str:
        """A fresh name in the generated namespace (bound to ``value`` unless None)."""
        self.count += 1
        key = f"{prefix}{self.count}"
        if value is not None:
            self.ns[key] = value
        return key

    def compile(self) -> tuple[Decoder, Encoder]:
        try:
            schema = self.root.__pydantic_core_schema__
        except Exception as e:  # noqa: BLE001 - a model pydantic has not finished building
            raise _NotCompiled(f"pydantic has no core schema for it yet ({type(e).__name__})") from None
        self.defs = schema_walk.definitions(schema)
        self.declared = declared_validators(schema)
        top = self.model(schema)
        if top.cls is not self.root:
            raise _NotCompiled("its core schema is not its own model schema")
        had = [("__msgspec_cache__" in vars(e)) for e in self.enums]
        try:
            decoder = msgspec.msgpack.Decoder(top.mirror, ext_hook=self.codec._ext_hook)
        except (TypeError, ValueError) as e:
            raise _NotCompiled(f"no msgspec mirror ({e})") from None
        finally:
            # msgspec caches a lookup table on an Enum class it decodes (``__msgspec_cache__``), which cloudpickle
            # cannot pickle when it pickles the class by value (a schema defined in __main__, sent to a Ray
            # worker); the decoder keeps its own reference to the table.
            for cls, cached in zip(self.enums, had, strict=True):
                if not cached and "__msgspec_cache__" in vars(cls):
                    delattr(cls, "__msgspec_cache__")
        self.ns["_decode"] = decoder.decode
        self.ns["_errors"] = (msgspec.DecodeError, ValueError, OverflowError, RecursionError, TypeError)
        # The top level, inlined (this runs once per decode): the builder's body after the decode.
        self.lines += [
            "def decode(payload):",
            "    try:",
            "        s = _decode(payload)",
            "    except _errors:",
            "        raise _Refused from None",
            *self.builder_body(top),
            "",
        ]
        # At the top the class is known exactly (the encoder is looked up by it): no type check, and a model with
        # nothing to prepare is its own __dict__ (unless it holds more than the fields: then the instance itself,
        # for the hook). An int msgpack cannot hold: the hook's slow path, as before.
        plain = f"d if _len(d := o.__dict__) == {len(self.root.model_fields)} else o"
        self.ns["_encode"] = self.codec._encoder.encode
        self.ns["_prepare_all"] = self.codec._prepare_all
        self.lines += [
            "def encode(o):",
            "    try:",
            f"        return _encode({plain if top.prepared_plain else top.prepare_top + '(o)'})",
            "    except OverflowError:",
            "        return _encode(_prepare_all(o))",
        ]
        source = "\n".join(self.lines) + "\n"
        exec(compile(source, f"<verl_ctx compiled {self.root.__qualname__}>", "exec"), self.ns)
        return self.ns["decode"], self.ns["encode"]

    def resolve(self, node: Any) -> Any:
        """``node`` through references and the validators the user declared: a payload of the driver's own
        fingerprint holds their results already (they ran there), so the compiled path, like pydantic's trusted
        one (``_trusted``), checks the type inside them without running them again."""
        while True:
            found = schema_walk.resolve(node, self.defs)
            if found is None:
                raise _NotCompiled(f"an unresolved reference {node.get('schema_ref')}")
            if not (found.get("type") in schema_walk.FUNCTIONS and runs_declared(found, self.declared)):
                return found
            node = found["schema"]

    # -- models

    def model(self, node: Any) -> _Model:
        node = self.resolve(node)
        if node.get("type") != "model":
            raise _NotCompiled(f"a custom core schema ({node.get('type')})")
        key = node.get("ref") or f"id:{id(node)}"
        if key in self.models:
            return self.models[key]
        if key in self.active:
            raise _NotCompiled("a recursive model")
        cls = node["cls"]
        where = getattr(cls, "__qualname__", repr(cls))
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise _NotCompiled(f"{where} is not a pydantic model")
        if node.get("root_model"):
            raise _NotCompiled(f"{where} is a RootModel")
        if "generic_origin" in node or cls.__pydantic_generic_metadata__.get("origin") is not None:
            raise _NotCompiled(f"{where} is a parametrized generic model")
        if cls.__private_attributes__:
            raise _NotCompiled(f"{where} has private attributes")
        if node.get("post_init") or cls.__pydantic_post_init__ is not None:
            raise _NotCompiled(f"{where} has model_post_init")
        if node.get("custom_init") or cls.__new__ is not object.__new__:
            raise _NotCompiled(f"{where} has its own __init__ or __new__")
        _only(node, _MODEL_KEYS, where)
        config = node.get("config") or {}
        _check_config(config, where)
        fields_node = self.resolve(node["schema"])
        if fields_node.get("type") != "model-fields":
            raise _NotCompiled(f"{where} has a custom core schema ({fields_node.get('type')})")
        _only(fields_node, _FIELDS_KEYS, where)
        extra = fields_node.get("extra_behavior") or config.get("extra_fields_behavior") or "ignore"
        if extra not in ("ignore", "forbid"):
            raise _NotCompiled(f"{where} keeps extra fields (extra={extra!r})")
        model = _Model(self.count + 1, cls)
        self.count += 1
        self.active.add(key)
        mirrors = model.fields
        try:
            for fname, field in fields_node["fields"].items():
                _only(field, _FIELD_KEYS, f"{where}.{fname}")
                inner = field["schema"]
                if inner.get("type") == "default":
                    _only(inner, _DEFAULT_KEYS, f"{where}.{fname}")
                    inner = inner["schema"]
                mirror, model.steps[fname] = self.node(inner, config, f"{where}.{fname}")
                mirrors.append((fname, mirror))
        finally:
            self.active.discard(key)
        try:
            # Every field required (the encoder writes them all; a missing one is pydantic's to default) and no other
            # field allowed, even where the model ignores them: msgspec would skip an unknown field's value unread,
            # and pydantic's path must still refuse one that does not decode (an unknown extension, bad UTF-8).
            model.mirror = msgspec.defstruct(f"{cls.__name__}Mirror", mirrors, forbid_unknown_fields=True, gc=False)
        except (TypeError, ValueError) as e:
            raise _NotCompiled(f"{where}: no msgspec Struct for it ({e})") from None
        model.dt_fields = self.codec.datetime_fields(cls)
        self.models[key] = model
        self.emit_builder(model)
        self.emit_preparer(model, fields_node["fields"])
        return model

    def node(self, node: Any, config: Any, where: str) -> tuple[Any, Step]:
        """The mirror type of a core-schema node, and what its value needs after msgspec."""
        node = self.resolve(node)
        kind = node.get("type")
        if kind == "function-plain":
            # Checked before the serializer: pydantic gives a plain validator a serializer of its own.
            raise _NotCompiled(f"{where} has a plain validator (function-plain): its result is not a decoded type")
        if "serialization" in node:
            raise _NotCompiled(f"{where} has a custom serializer")
        if kind == "model":
            model = self.model(node)
            return model.mirror, ("model", model.build)
        if kind in _BY_PYDANTIC:
            leaf = self.name("_v", _by_pydantic(node, config, where))
            plain = set(node) <= _PLAIN_DATETIME and node.get("microseconds_precision", "truncate") == "truncate"
            return Any, ("dt" if kind == "datetime" and plain else "leaf", leaf)
        if kind not in _NODE_KEYS:
            raise _NotCompiled(f"{where} is of a type outside the compiled list ({kind})")
        _only(node, _COMMON | _NODE_KEYS[kind], where)
        if kind in ("int", "float"):
            if node.get("allow_inf_nan") is False:
                raise _NotCompiled(f"{where} refuses inf and NaN (allow_inf_nan=False)")
            return _bounded(int if kind == "int" else float, node, where), None
        if kind in ("str", "bytes"):
            return _sized(str if kind == "str" else bytes, node), None
        if kind in ("bool", "none", "uuid"):
            return {"bool": bool, "none": None, "uuid": uuid.UUID}[kind], None
        if kind == "enum":
            return self.enum(node, where), None
        if kind == "literal":
            expected = node["expected"]
            types = {type(v) for v in expected}
            if not expected or not (types == {str} or types == {int}):
                raise _NotCompiled(f"{where} is a Literal of other than all-str or all-int values")
            return Literal[tuple(expected)], None
        if kind == "nullable":
            inner, step = self.node(node["schema"], config, where)
            return inner | None, self.container(step, "None if x is None else {}(x)")
        if kind == "list":
            if "items_schema" not in node:
                raise _NotCompiled(f"{where} is a list of Any")
            inner, step = self.node(node["items_schema"], config, f"{where}[]")
            if step is not None and step[0] == "model":
                row, bulk = self.bulk_builder(step[1])
                return _sized(list[row], node), ("fn", bulk)  # type: ignore[valid-type]
            return _sized(list[inner], node), self.container(step, "_list(_map({}, x))")  # type: ignore[valid-type]
        if kind == "tuple":
            items = node.get("items_schema") or []
            if node.get("variadic_item_index") == 0 and len(items) == 1:
                inner, step = self.node(items[0], config, f"{where}[]")
                return tuple[inner, ...], self.container(step, "_tuple(_map({}, x))")  # type: ignore[valid-type]
            if "variadic_item_index" in node or not items:
                raise _NotCompiled(f"{where} is a tuple other than tuple[X, ...] or a fixed tuple[X, Y]")
            parts = [self.node(item, config, f"{where}[]") for item in items]
            if any(step is not None for _, step in parts):
                raise _NotCompiled(f"{where} is a fixed tuple holding models or dates")
            return tuple[tuple(mirror for mirror, _ in parts)], None  # type: ignore[misc]
        if kind in ("set", "frozenset"):
            item = self.resolve(node.get("items_schema") or {})
            if item.get("type") not in _SET_ITEMS:
                raise _NotCompiled(f"{where} is a set of {item.get('type') or 'Any'}")
            inner, _ = self.node(item, config, f"{where}[]")
            return (set if kind == "set" else frozenset)[inner], None
        # dict
        keys = self.resolve(node.get("keys_schema") or {})
        if keys.get("type") not in ("str", "int") or set(keys) - _COMMON:
            raise _NotCompiled(f"{where} is a dict with keys other than plain str or int")
        if "values_schema" not in node:
            raise _NotCompiled(f"{where} is a dict of Any")
        values, step = self.node(node["values_schema"], config, f"{where}[]")
        key_type = str if keys["type"] == "str" else int
        if step is not None and step[0] == "model":
            row, bulk = self.bulk_builder(step[1])
            return dict[key_type, row], self.container(  # type: ignore[valid-type]
                ("fn", bulk), "_dict(_zip(x.keys(), {}(_list(x.values()))))"
            )
        return dict[key_type, values], self.container(  # type: ignore[valid-type]
            step, "_dict(_zip(x.keys(), _map({}, x.values())))"
        )

    def enum(self, node: Any, where: str) -> Any:
        cls = node["cls"]
        if "missing" in node or issubclass(cls, enum.Flag):
            raise _NotCompiled(f"{where} is a Flag or an Enum with _missing_")
        values = {type(m.value) for m in cls}
        if node.get("sub_type") not in (None, "str", "int") or not (values == {str} or values == {int}):
            raise _NotCompiled(f"{where} is an Enum of other than all-str or all-int values")
        if list(node["members"]) != list(cls):
            raise _NotCompiled(f"{where} validates a subset of its Enum's members")
        self.enums.append(cls)
        return cls

    def container(self, step: Step, template: str) -> Step:
        """For a container whose items need ``step``: a generated function applying it to each item."""
        if step is None:
            return None
        item = step[1]
        if step[0] == "dt":
            item = self.name("_p", _datetime_step(self.ns[step[1]]))
        name = self.name("_p")
        self.lines += [f"def {name}(x):", f"    return {template.format(item)}", ""]
        return ("fn", name)

    def bulk_builder(self, build: str) -> tuple[Any, str]:
        """The mirror of one item in a list of this model, and the name of the function building such a list.

        A flat model (no field needs more than a datetime type check) is built in bulk (``_bulk_builder``).
        """
        model = next(m for m in self.models.values() if m.build == build)
        if model.rows is None:
            if model.bulk:
                checks = tuple(f for f, step in model.steps.items() if step is not None)
                model.rows = model.mirror, self.name("_p", _bulk_builder(model.cls, checks, self.ns, build))
            else:
                model.rows = model.mirror, self.container(("model", build), "_list(_map({}, x))")[1]  # type: ignore[index]
        return model.rows

    # -- code generation

    def emit_builder(self, model: _Model) -> None:
        self.lines += [f"def {model.build}(s):", *self.builder_body(model), ""]

    def builder_body(self, model: _Model) -> list[str]:
        fields_set = self.name("_f", set(model.steps).copy)
        lines = ["    d = _asdict(s)"]
        for fname, step in model.steps.items():
            if step is None:
                continue
            key = repr(fname)
            if step[0] == "dt":
                lines += [f"    v = d[{key}]", "    if _type(v) is not _dt:", f"        d[{key}] = {step[1]}(v)"]
            else:
                lines.append(f"    d[{key}] = {step[1]}(d[{key}])")
        make = _instance_maker(model.cls)
        if make is not None:
            # pydantic-core's own model builder, its inner schema `any`: it sets __dict__, the fields set, extra
            # and private exactly as after validation, in one call.
            lines.append(f"    return {self.name('_m', make)}((d, None, {fields_set}()))")
        else:
            lines += [
                f"    o = _new({self.name('_c', model.cls)})",
                f"    _sf(o, {fields_set}())",
                "    _sp(o, _se(o, _sd(o, d)))",  # each setter returns None, the next slot's value
                "    return o",
            ]
        return lines

    def emit_preparer(self, model: _Model, fields: dict[str, Any]) -> None:
        """``instance -> its __dict__`` (a copy where nested models are prepared), or the instance for the hook."""
        cls = self.name("_c", model.cls)
        # A __dict__ holding more than the fields (a cached_property's value) goes to the hook, which drops it.
        lines = ["    d = o.__dict__", f"    if _len(d) != {len(model.cls.model_fields)}:", "        return o"]
        for fname in model.dt_fields:  # what the hook checks, so that a datetime it would wrap goes to it
            key = repr(fname)
            lines += [
                f"    v = d[{key}]",
                "    if _type(v) is not _dt or not ((z := v.tzinfo) is None or z is _utc or not v.utcoffset()):",
                "        if not _unchanged(v):",
                "            return o",
            ]
        replaced = [(f, s) for f, s in ((f, self.prepare_step(node["schema"])) for f, node in fields.items()) if s]
        if replaced:
            lines.append("    d = _dict(d)")
            lines += [f"    d[{f!r}] = {step}(d[{f!r}])" for f, step in replaced]
        lines.append("    return d")
        self.lines += [f"def {model.prepare}(o):", f"    if _type(o) is not {cls}:", "        return o", *lines, ""]
        self.lines += [f"def {model.prepare_top}(o):", *lines, ""]
        model.prepared_flat = not replaced
        model.prepared_plain = not replaced and not model.dt_fields

    def prepare_step(self, node: Any) -> str | None:
        """For a field that can hold models: a function that prepares each one (exact class) for the encoder."""
        node = self.resolve(node)
        kind = node.get("type")
        if kind in ("default", "nullable"):  # None goes through a model's preparer unchanged
            return self.prepare_step(node["schema"])
        if kind == "model":
            return self.models[node.get("ref") or f"id:{id(node)}"].prepare
        if kind not in ("list", "tuple", "dict"):
            return None
        if kind == "tuple":
            items = node.get("items_schema") or []
            if len(items) != 1 or node.get("variadic_item_index") != 0:
                return None  # a fixed tuple holds no models (the decoder would not compile)
            inner_node = items[0]
        else:
            inner_node = node["values_schema" if kind == "dict" else "items_schema"]
        inner = self.prepare_step(inner_node)
        if inner is None:
            return None
        exact = {"list": "_list", "tuple": "_tuple", "dict": "_dict"}[kind]
        model = next((m for m in self.models.values() if m.prepare == inner), None)
        if kind == "list" and model is not None and model.prepared_flat:
            body = self.name("_q", _bulk_preparer(model.cls, model.dt_fields, self.ns, inner)) + "(x)"
        elif kind == "dict":
            body = f"_dict(_zip(x.keys(), _map({inner}, x.values())))"
        else:
            body = f"{exact}(_map({inner}, x))"
        name = self.name("_q")
        self.lines += [
            f"def {name}(x):",
            f"    if _type(x) is not {exact}:",
            "        return x",
            f"    return {body}",
            "",
        ]
        return name


# --- what the generated code calls -------------------------------------------------------------------------


def _bulk_builder(
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


def _bulk_preparer(
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


def _instance_maker(cls: type[BaseModel]) -> Callable[[Any], Any] | None:
    """``(dict, None, fields_set) -> instance`` by pydantic-core's model builder, or None if it cannot be had.

    A ``model`` schema whose inner schema is ``any`` takes the triple its fields validator would have produced. It
    must not be swapped for the class's own validator (pydantic-core reuses a class's validator for its schema),
    which a pydantic-core without ``_use_prebuilt`` would do: then the descriptors are set from Python instead.
    """
    try:
        make = SchemaValidator(
            core_schema.model_schema(cls, core_schema.any_schema()), _use_prebuilt=False
        ).validate_python
        probe = make(({}, None, set()))
    except (TypeError, ValidationError):
        return None
    return make if type(probe) is cls and probe.__dict__ == {} else None


def _list_maker(cls: type[BaseModel]) -> Callable[[list[Any]], list[Any]] | None:
    """``[(dict, None, fields_set), ...] -> [instance, ...]`` by pydantic-core in one call, or None (see above)."""
    if _instance_maker(cls) is None:
        return None
    return SchemaValidator(
        core_schema.list_schema(core_schema.model_schema(cls, core_schema.any_schema())), _use_prebuilt=False
    ).validate_python


def _datetime_step(leaf: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def step(x: Any) -> Any:
        return x if type(x) is dt.datetime else leaf(x)

    return step


def _by_pydantic(node: Any, config: Any, where: str) -> Callable[[Any], Any]:
    """A validator of one leaf value: pydantic-core's own, for this node and its model's config."""
    try:
        validate = SchemaValidator(node, config or None).validate_python
    except Exception as e:  # noqa: BLE001 - pydantic-core refusing the node on its own: not compiled
        raise _NotCompiled(f"{where}: pydantic cannot validate it on its own ({e})") from None

    def leaf(x: Any) -> Any:
        try:
            return validate(x, strict=False)
        except (ValidationError, RecursionError):
            raise Refused from None

    return leaf


def _only(node: Any, allowed: frozenset[str], where: str) -> None:
    extra = set(node) - allowed
    if extra:
        raise _NotCompiled(f"{where} has {', '.join(sorted(extra))}")


def _check_config(config: Any, where: str) -> None:
    for key, value in config.items():
        if key in _CONFIG_ANY or key.startswith("ser_"):
            continue
        if value not in _CONFIG_DEFAULTS.get(key, ()):
            raise _NotCompiled(f"{where}: config {key}={value!r}")


def _bounded(tp: type, node: Any, where: str) -> Any:
    bounds = {k: node[k] for k in ("gt", "ge", "lt", "le", "multiple_of") if k in node}
    if not bounds:
        return tp
    for key, value in bounds.items():
        if type(value) not in ((int,) if tp is int else (int, float)) or not math.isfinite(value):
            raise _NotCompiled(f"{where}: {key}={value!r}")
    if tp is float and "multiple_of" in bounds:
        raise _NotCompiled(f"{where}: float multiple_of (pydantic and msgspec round differently)")
    return typing.Annotated[tp, msgspec.Meta(**bounds)]


def _sized(tp: Any, node: Any) -> Any:
    sizes = {k: node[k] for k in ("min_length", "max_length") if node.get(k) is not None}
    return typing.Annotated[tp, msgspec.Meta(**sizes)] if sizes else tp
