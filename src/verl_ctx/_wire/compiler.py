"""The compiler behind ``compiled``: a schema on the closed list becomes a msgspec mirror, generated builders (Struct
-> instance, without validating again) and a generated encoder pre-pass. ``compiled`` holds the caches and says
why a class is not compiled; why the answers are pydantic's own is told there.
"""

from __future__ import annotations

import enum
import math
import typing
import uuid
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

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
        self.prepares: dict[str, str] = {}  # field -> the function preparing its value for the encoder, if any

    @property
    def bulk(self) -> bool:
        """Lists of it are built in bulk, without bytecode per row: no field needs more than a datetime type check."""
        return all(step is None or step[0] == "dt" for step in self.steps.values())


class _Part(NamedTuple):
    """One node compiled: its msgspec mirror type, what its value needs after msgspec, and the name of the function
    preparing its value for the encoder (for a node that can hold models)."""

    mirror: Any
    step: Step = None
    prepare: str | None = None


class Compiler(schema_walk.Fold[_Part]):
    """One model class compiled: a fold of the one schema walk (``_analysis.walk.Fold``) from each node to its mirror
    type and what its value needs after msgspec (``Step``), in the context ``(config, where)``: the model config its
    leaves validate under, and the place named when a part is not on the closed list."""

    def __init__(self, root: type[BaseModel]) -> None:
        try:
            schema = root.__pydantic_core_schema__
        except Exception as e:  # noqa: BLE001 - a model pydantic has not finished building
            raise NotCompiled(f"pydantic has no core schema for it yet ({type(e).__name__})") from None
        super().__init__(schema)
        self.root = root
        self.schema = schema
        self.declared = declared_validators(schema)
        self.models: dict[str, _Model] = {}  # by the name of its builder
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
        found = self.resolve(self.schema)
        if found.get("type") != "model":
            raise NotCompiled(f"a custom core schema ({found.get('type')})")
        step = self.fold(self.schema, None, self.root.__qualname__).step
        top = self.models[step[1]] if step is not None else None
        if top is None or top.cls is not self.root:
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

    # -- how the fold reaches definitions

    def recursion(self, ref: str, depth: int) -> _Part:
        raise NotCompiled("a recursive model")

    def leaf(self, value: Any, config: Any, where: str) -> _Part:
        raise NotCompiled(f"{where} has a schema that is not a node ({type(value).__name__})")

    # -- models

    def model(self, node: Any) -> _Model:
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
        mirrors = model.fields
        for fname, field in fields_node["fields"].items():
            _only(field, _FIELD_KEYS, f"{where}.{fname}")
            inner = field["schema"]
            if inner.get("type") == "default":
                _only(inner, _DEFAULT_KEYS, f"{where}.{fname}")
                inner = inner["schema"]
            part = self.fold(inner, config, f"{where}.{fname}")
            model.steps[fname] = part.step
            mirrors.append((fname, part.mirror))
            if part.prepare is not None:
                model.prepares[fname] = part.prepare
        try:
            # Every field required (the encoder writes them all; a missing one is pydantic's to default) and no other
            # field allowed, even where the model ignores them: msgspec would skip an unknown field's value unread,
            # and pydantic's path must still refuse one that does not decode (an unknown extension, bad UTF-8).
            model.mirror = msgspec.defstruct(f"{cls.__name__}Mirror", mirrors, forbid_unknown_fields=True, gc=False)
        except (TypeError, ValueError) as e:
            raise NotCompiled(f"{where}: no msgspec Struct for it ({e})") from None
        model.dt_fields = msgpack.datetime_fields(cls)
        self.models[model.build] = model
        self.emit_builder(model)
        self.emit_preparer(model)
        return model

    def visit(self, node: Any, config: Any, where: str) -> _Part:
        """The mirror type of a core-schema node, and what its value needs after msgspec."""
        kind = node.get("type")
        if kind in schema_walk.FUNCTIONS and runs_declared(node, self.declared):
            return self.fold(node["schema"], config, where)  # see ``resolve``
        if kind == "definition-ref":
            raise NotCompiled(f"an unresolved reference {node.get('schema_ref')}")
        if kind == "function-plain":
            # Checked before the serializer: pydantic gives a plain validator a serializer of its own.
            raise NotCompiled(f"{where} has a plain validator (function-plain): its result is not a decoded type")
        if "serialization" in node:
            raise NotCompiled(f"{where} has a custom serializer")
        if kind == "model":
            model = self.model(node)
            return _Part(model.mirror, ("model", model.build), model.prepare)
        if kind in _BY_PYDANTIC:
            leaf = self.name("_v", _by_pydantic(node, config, where))
            plain = set(node) <= _PLAIN_DATETIME and node.get("microseconds_precision", "truncate") == "truncate"
            return _Part(Any, ("dt" if kind == "datetime" and plain else "leaf", leaf))
        if kind not in _NODE_KEYS:
            raise NotCompiled(f"{where} is of a type outside the compiled list ({kind})")
        _only(node, _COMMON | _NODE_KEYS[kind], where)
        if kind in ("int", "float"):
            if node.get("allow_inf_nan") is False:
                raise NotCompiled(f"{where} refuses inf and NaN (allow_inf_nan=False)")
            return _Part(_bounded(int if kind == "int" else float, node, where))
        if kind in ("str", "bytes"):
            return _Part(_sized(str if kind == "str" else bytes, node))
        if kind in ("bool", "none", "uuid"):
            return _Part({"bool": bool, "none": None, "uuid": uuid.UUID}[kind])
        if kind == "enum":
            return _Part(self.enum(node, where))
        if kind == "literal":
            expected = node["expected"]
            types = {type(v) for v in expected}
            if not expected or not (types == {str} or types == {int}):
                raise NotCompiled(f"{where} is a Literal of other than all-str or all-int values")
            return _Part(Literal[tuple(expected)])
        if kind == "nullable":
            inner, step, prepare = self.fold(node["schema"], config, where)
            # None goes through a model's preparer unchanged.
            return _Part(inner | None, self.container(step, "None if x is None else {}(x)"), prepare)
        if kind == "list":
            if "items_schema" not in node:
                raise NotCompiled(f"{where} is a list of Any")
            inner, step, prepare = self.fold(node["items_schema"], config, f"{where}[]")
            prepare = self.preparer("list", prepare)
            if step is not None and step[0] == "model":
                row, bulk = self.bulk_builder(step[1])
                return _Part(_sized(list[row], node), ("fn", bulk), prepare)  # type: ignore[valid-type]
            step = self.container(step, "_list(_map({}, x))")
            return _Part(_sized(list[inner], node), step, prepare)  # type: ignore[valid-type]
        if kind == "tuple":
            items = node.get("items_schema") or []
            if node.get("variadic_item_index") == 0 and len(items) == 1:
                inner, step, prepare = self.fold(items[0], config, f"{where}[]")
                step, prepare = self.container(step, "_tuple(_map({}, x))"), self.preparer("tuple", prepare)
                return _Part(tuple[inner, ...], step, prepare)  # type: ignore[valid-type]
            if "variadic_item_index" in node or not items:
                raise NotCompiled(f"{where} is a tuple other than tuple[X, ...] or a fixed tuple[X, Y]")
            parts = [self.fold(item, config, f"{where}[]") for item in items]
            if any(part.step is not None for part in parts):
                raise NotCompiled(f"{where} is a fixed tuple holding models or dates")
            return _Part(tuple[tuple(part.mirror for part in parts)])  # type: ignore[misc]
        if kind in ("set", "frozenset"):
            item = self.resolve(node.get("items_schema") or {})
            if item.get("type") not in _SET_ITEMS:
                raise NotCompiled(f"{where} is a set of {item.get('type') or 'Any'}")
            return _Part((set if kind == "set" else frozenset)[self.fold(item, config, f"{where}[]").mirror])
        # dict
        keys = self.resolve(node.get("keys_schema") or {})
        if keys.get("type") not in ("str", "int") or set(keys) - _COMMON:
            raise NotCompiled(f"{where} is a dict with keys other than plain str or int")
        if "values_schema" not in node:
            raise NotCompiled(f"{where} is a dict of Any")
        values, step, prepare = self.fold(node["values_schema"], config, f"{where}[]")
        prepare = self.preparer("dict", prepare)
        key_type = str if keys["type"] == "str" else int
        if step is not None and step[0] == "model":
            row, bulk = self.bulk_builder(step[1])
            step = self.container(("fn", bulk), "_dict(_zip(x.keys(), {}(_list(x.values()))))")
            return _Part(dict[key_type, row], step, prepare)  # type: ignore[valid-type]
        step = self.container(step, "_dict(_zip(x.keys(), _map({}, x.values())))")
        return _Part(dict[key_type, values], step, prepare)  # type: ignore[valid-type]

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
        model = self.models[build]
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

    def emit_preparer(self, model: _Model) -> None:
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
        if model.prepares:
            lines.append("    d = _dict(d)")
            lines += [f"    d[{f!r}] = {step}(d[{f!r}])" for f, step in model.prepares.items()]
        lines.append("    return d")
        self.lines += [f"def {model.prepare}(o):", f"    if _type(o) is not {cls}:", "        return o", *lines, ""]
        self.lines += [f"def {model.prepare_top}(o):", *lines, ""]
        model.prepared_flat = not model.prepares
        model.prepared_plain = not model.prepares and not model.dt_fields

    def preparer(self, kind: str, inner: str | None) -> str | None:
        """For a list, tuple or dict whose items can hold models (``inner`` prepares one): a function preparing each
        (exact class) for the encoder."""
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
