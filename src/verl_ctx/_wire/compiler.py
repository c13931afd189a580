"""The compiler behind ``compiled``: a schema on the closed list becomes a msgspec mirror, generated builders (Struct
-> instance, without validating again) and a generated encoder pre-pass. ``compiled`` holds the caches and says
why a class is not compiled; why the answers are pydantic's own is told there.
"""

from __future__ import annotations

import enum
import math
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

from .._analysis import walk as schema_walk
from .._analysis.trusted import declared_validators, runs_declared
from . import generated, msgpack
from .generated import Refused

__all__ = ["Compiler", "Decoder", "Encoder", "NotCompiled", "Refused"]

Decoder = Callable[[bytes], Any]
Encoder = Callable[[Any], bytes]


class NotCompiled(Exception):
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


class Compiler:
    def __init__(self, root: type[BaseModel]) -> None:
        self.root = root
        self.defs: Mapping[str, Any] = {}
        self.declared: set[int] = set()
        self.models: dict[str, _Model] = {}  # by the model node's core-schema ref
        self.active: set[str] = set()
        self.enums: list[type[enum.Enum]] = []
        self.lines: list[str] = []
        self.count = 0
        self.ns: dict[str, Any] = generated.namespace()

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
            raise NotCompiled(f"pydantic has no core schema for it yet ({type(e).__name__})") from None
        self.defs = schema_walk.definitions(schema)
        self.declared = declared_validators(schema)
        top = self.model(schema)
        if top.cls is not self.root:
            raise NotCompiled("its core schema is not its own model schema")
        had = [("__msgspec_cache__" in vars(e)) for e in self.enums]
        try:
            decoder = msgspec.msgpack.Decoder(top.mirror, ext_hook=msgpack.ext_hook)
        except (TypeError, ValueError) as e:
            raise NotCompiled(f"no msgspec mirror ({e})") from None
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
        self.ns["_encode"] = msgpack.encoder.encode
        self.ns["_prepare_all"] = msgpack.prepare_all
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
        one (``_analysis.trusted``), checks the type inside them without running them again."""
        while True:
            found = schema_walk.resolve(node, self.defs)
            if found is None:
                raise NotCompiled(f"an unresolved reference {node.get('schema_ref')}")
            if not (found.get("type") in schema_walk.FUNCTIONS and runs_declared(found, self.declared)):
                return found
            node = found["schema"]

    # -- models

    def model(self, node: Any) -> _Model:
        node = self.resolve(node)
        if node.get("type") != "model":
            raise NotCompiled(f"a custom core schema ({node.get('type')})")
        key = node.get("ref") or f"id:{id(node)}"
        if key in self.models:
            return self.models[key]
        if key in self.active:
            raise NotCompiled("a recursive model")
        cls = node["cls"]
        where = getattr(cls, "__qualname__", repr(cls))
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise NotCompiled(f"{where} is not a pydantic model")
        if node.get("root_model"):
            raise NotCompiled(f"{where} is a RootModel")
        if "generic_origin" in node or cls.__pydantic_generic_metadata__.get("origin") is not None:
            raise NotCompiled(f"{where} is a parametrized generic model")
        if cls.__private_attributes__:
            raise NotCompiled(f"{where} has private attributes")
        if node.get("post_init") or cls.__pydantic_post_init__ is not None:
            raise NotCompiled(f"{where} has model_post_init")
        if node.get("custom_init") or cls.__new__ is not object.__new__:
            raise NotCompiled(f"{where} has its own __init__ or __new__")
        _only(node, _MODEL_KEYS, where)
        config = node.get("config") or {}
        _check_config(config, where)
        fields_node = self.resolve(node["schema"])
        if fields_node.get("type") != "model-fields":
            raise NotCompiled(f"{where} has a custom core schema ({fields_node.get('type')})")
        _only(fields_node, _FIELDS_KEYS, where)
        extra = fields_node.get("extra_behavior") or config.get("extra_fields_behavior") or "ignore"
        if extra not in ("ignore", "forbid"):
            raise NotCompiled(f"{where} keeps extra fields (extra={extra!r})")
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
            raise NotCompiled(f"{where}: no msgspec Struct for it ({e})") from None
        model.dt_fields = msgpack.datetime_fields(cls)
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
            raise NotCompiled(f"{where} has a plain validator (function-plain): its result is not a decoded type")
        if "serialization" in node:
            raise NotCompiled(f"{where} has a custom serializer")
        if kind == "model":
            model = self.model(node)
            return model.mirror, ("model", model.build)
        if kind in _BY_PYDANTIC:
            leaf = self.name("_v", _by_pydantic(node, config, where))
            plain = set(node) <= _PLAIN_DATETIME and node.get("microseconds_precision", "truncate") == "truncate"
            return Any, ("dt" if kind == "datetime" and plain else "leaf", leaf)
        if kind not in _NODE_KEYS:
            raise NotCompiled(f"{where} is of a type outside the compiled list ({kind})")
        _only(node, _COMMON | _NODE_KEYS[kind], where)
        if kind in ("int", "float"):
            if node.get("allow_inf_nan") is False:
                raise NotCompiled(f"{where} refuses inf and NaN (allow_inf_nan=False)")
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
                raise NotCompiled(f"{where} is a Literal of other than all-str or all-int values")
            return Literal[tuple(expected)], None
        if kind == "nullable":
            inner, step = self.node(node["schema"], config, where)
            return inner | None, self.container(step, "None if x is None else {}(x)")
        if kind == "list":
            if "items_schema" not in node:
                raise NotCompiled(f"{where} is a list of Any")
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
                raise NotCompiled(f"{where} is a tuple other than tuple[X, ...] or a fixed tuple[X, Y]")
            parts = [self.node(item, config, f"{where}[]") for item in items]
            if any(step is not None for _, step in parts):
                raise NotCompiled(f"{where} is a fixed tuple holding models or dates")
            return tuple[tuple(mirror for mirror, _ in parts)], None  # type: ignore[misc]
        if kind in ("set", "frozenset"):
            item = self.resolve(node.get("items_schema") or {})
            if item.get("type") not in _SET_ITEMS:
                raise NotCompiled(f"{where} is a set of {item.get('type') or 'Any'}")
            inner, _ = self.node(item, config, f"{where}[]")
            return (set if kind == "set" else frozenset)[inner], None
        # dict
        keys = self.resolve(node.get("keys_schema") or {})
        if keys.get("type") not in ("str", "int") or set(keys) - _COMMON:
            raise NotCompiled(f"{where} is a dict with keys other than plain str or int")
        if "values_schema" not in node:
            raise NotCompiled(f"{where} is a dict of Any")
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
            raise NotCompiled(f"{where} is a Flag or an Enum with _missing_")
        values = {type(m.value) for m in cls}
        if node.get("sub_type") not in (None, "str", "int") or not (values == {str} or values == {int}):
            raise NotCompiled(f"{where} is an Enum of other than all-str or all-int values")
        if list(node["members"]) != list(cls):
            raise NotCompiled(f"{where} validates a subset of its Enum's members")
        self.enums.append(cls)
        return cls

    def container(self, step: Step, template: str) -> Step:
        """For a container whose items need ``step``: a generated function applying it to each item."""
        if step is None:
            return None
        item = step[1]
        if step[0] == "dt":
            item = self.name("_p", generated.datetime_step(self.ns[step[1]]))
        name = self.name("_p")
        self.lines += [f"def {name}(x):", f"    return {template.format(item)}", ""]
        return ("fn", name)

    def bulk_builder(self, build: str) -> tuple[Any, str]:
        """The mirror of one item in a list of this model, and the name of the function building such a list.

        A flat model (no field needs more than a datetime type check) is built in bulk (``generated.bulk_builder``).
        """
        model = next(m for m in self.models.values() if m.build == build)
        if model.rows is None:
            if model.bulk:
                checks = tuple(f for f, step in model.steps.items() if step is not None)
                model.rows = model.mirror, self.name("_p", generated.bulk_builder(model.cls, checks, self.ns, build))
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
        make = generated.instance_maker(model.cls)
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
            body = self.name("_q", generated.bulk_preparer(model.cls, model.dt_fields, self.ns, inner)) + "(x)"
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


def _by_pydantic(node: Any, config: Any, where: str) -> Callable[[Any], Any]:
    """A validator of one leaf value: pydantic-core's own, for this node and its model's config."""
    try:
        validate = SchemaValidator(node, config or None).validate_python
    except Exception as e:  # noqa: BLE001 - pydantic-core refusing the node on its own: not compiled
        raise NotCompiled(f"{where}: pydantic cannot validate it on its own ({e})") from None

    def leaf(x: Any) -> Any:
        try:
            return validate(x, strict=False)
        except (ValidationError, RecursionError):
            raise Refused from None

    return leaf


def _only(node: Any, allowed: frozenset[str], where: str) -> None:
    extra = set(node) - allowed
    if extra:
        raise NotCompiled(f"{where} has {', '.join(sorted(extra))}")


def _check_config(config: Any, where: str) -> None:
    for key, value in config.items():
        if key in _CONFIG_ANY or key.startswith("ser_"):
            continue
        if value not in _CONFIG_DEFAULTS.get(key, ()):
            raise NotCompiled(f"{where}: config {key}={value!r}")


def _bounded(tp: type, node: Any, where: str) -> Any:
    bounds = {k: node[k] for k in ("gt", "ge", "lt", "le", "multiple_of") if k in node}
    if not bounds:
        return tp
    for key, value in bounds.items():
        if type(value) not in ((int,) if tp is int else (int, float)) or not math.isfinite(value):
            raise NotCompiled(f"{where}: {key}={value!r}")
    if tp is float and "multiple_of" in bounds:
        raise NotCompiled(f"{where}: float multiple_of (pydantic and msgspec round differently)")
    return typing.Annotated[tp, msgspec.Meta(**bounds)]


def _sized(tp: Any, node: Any) -> Any:
    sizes = {k: node[k] for k in ("min_length", "max_length") if node.get(k) is not None}
    return typing.Annotated[tp, msgspec.Meta(**sizes)] if sizes else tp
