"""The driver's validated values, built on the worker without running the user's validators a second time.

When the handshake proves the worker's schema is the driver's (same version and fingerprint; the fingerprint covers
the code of every validator, method and class attribute of the schema's models), the payload holds values the
driver's validators already produced. Running them again applies them twice: a validator that is not idempotent
(``v * 3``) turns the driver's 6 into 18. The validator here is the schema's own core schema with each user function
in it replaced by the identity:

* before, after and wrap validators (``field_validator``, ``model_validator``, ``Annotated`` validators): the
  value passes through them unchanged, and the type schema they wrap still checks it: types, constraints, unknown
  fields, strictness; a payload edited after validation is still refused where those rules catch it;
* plain validators: the value is taken as the payload carries it (pydantic checks no type there either);
* a custom ``__init__`` and a dataclass's ``__post_init__``: not called (their result is in the payload);
* ``model_post_init`` (and pydantic's set-up of private attributes): run after the build, inner models first as
  pydantic runs them, so a model's private state is the worker's own; any field it assigns is put back to the
  driver's value.

Default factories never run: the encoder writes every field. The compiled path (``_wire.compiled``) takes the schemas
that have none of these; this one is for the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MethodType
from typing import Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, PlainValidator, WrapValidator
from pydantic_core import SchemaValidator

from .._pydantic_compat import fresh_validator
from . import walk as schema_walk

__all__ = ["declared_validators", "function_of", "replay_post_init", "runs_declared", "trusted_validator"]

_MARKERS = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)
_FUNCTION_KINDS = frozenset({"function-before", "function-after", "function-wrap", "function-plain"})

# (model class, fail_fast, the validators skipped or None for all, whether model_post_init is replayed) -> (its
# trusted validator, the classes whose model_post_init runs after the build). A handful of entries per schema.
_Key = tuple[type, bool, frozenset[int] | None, bool]
_cache: dict[_Key, tuple[SchemaValidator, frozenset[type]]] = {}
_lock = threading.Lock()


def _identity(value: Any) -> Any:
    return value


def _identity_wrap(value: Any, handler: Any) -> Any:
    return handler(value)


_IDENTITY = {"type": "no-info", "function": _identity}
_IDENTITY_WRAP = {"type": "no-info", "function": _identity_wrap}


def trusted_validator(
    model: type[BaseModel], core: Any, shared: frozenset[int] | None = None, post_init: bool = True
) -> tuple[SchemaValidator, frozenset[type]]:
    """A validator of ``core`` (``model``'s core schema, or a variant of it) that does not run the user's declared
    validators again, and the model classes whose ``model_post_init`` ``replay_post_init`` must run on what it builds.

    ``shared``: skip only the validators with these ids (those the driver ran with the same code: a skewed worker
    runs the others); None skips every one. ``post_init``: whether ``model_post_init`` is replayed keeping the
    driver's field values (its code is the driver's) rather than run as part of validation.
    """
    key = (model, core is not model.__pydantic_core_schema__, shared, post_init)
    found = _cache.get(key)
    if found is not None:
        return found
    replayed: set[type] = set()
    skipped = declared_validators(core) if shared is None else declared_validators(core) & shared
    stripped = _strip(core, skipped, replayed if post_init else None)
    config = model.__pydantic_core_schema__.get("config")
    # pydantic-core reuses the validator a model class already has for any model schema it meets, which would run
    # that class's validators: this one is built from the stripped schema alone.
    validator = fresh_validator(stripped, config)
    with _lock:
        found = _cache.setdefault(key, (validator, frozenset(replayed)))
    return found


def declared_validators(core: Any) -> set[int]:
    """The ids of the functions the user declared as validators on the models and dataclasses in ``core``.

    Only those are skipped: ``field_validator`` / ``model_validator`` (and their v1 forms) registered on a class,
    and ``AfterValidator`` / ``BeforeValidator`` / ``WrapValidator`` / ``PlainValidator`` in a field's annotation.
    The functions a *type* puts in its own core schema (``SecretStr``'s constructor, a library's parser, a type's
    ``__get_pydantic_core_schema__``) are how that type is built, and stay.
    """
    declared: set[int] = set()
    for cls, _ in schema_walk.classes(core):
        decorators = getattr(cls, "__pydantic_decorators__", None)
        for group in ("field_validators", "model_validators", "validators", "root_validators"):
            for info in (getattr(decorators, group, None) or {}).values():
                declared.add(id(function_of(info.func)))
        annotations: list[Any] = []
        for field in (getattr(cls, "__pydantic_fields__", None) or {}).values():
            annotations.extend((field.annotation, *field.metadata))
        _markers(annotations, declared, 0)
    return declared


def _markers(items: list[Any], declared: set[int], depth: int) -> None:
    """Collect the functions of pydantic's validator markers in ``items`` and inside their type arguments."""
    if depth > 32:  # an annotation is a small tree; this only guards against a self-referencing alias
        return
    for item in items:
        if isinstance(item, _MARKERS):
            declared.add(id(function_of(item.func)))
        meta = getattr(item, "__metadata__", None)  # Annotated[T, ...]
        if isinstance(meta, tuple):
            _markers(list(meta), declared, depth + 1)
        args = getattr(item, "__args__", None)
        if isinstance(args, tuple):
            _markers(list(args), declared, depth + 1)


def runs_declared(node: Mapping[str, Any], declared: set[int]) -> bool:
    """Whether a function node of a core schema runs one of the ``declared`` validators (ids from
    ``declared_validators``), not a type's own function."""
    spec = node.get("function")
    return isinstance(spec, Mapping) and id(function_of(spec.get("function"))) in declared


def function_of(fn: Any) -> Any:
    while isinstance(fn, (staticmethod, classmethod, MethodType)):
        fn = fn.__func__
    return fn


def _strip(node: Any, declared: set[int], post_init: set[type] | None) -> Any:
    # A serializer's schema is not validation (and its own function nodes are the serializer's): left out.
    def change(original: Any, out: dict[str, Any]) -> dict[str, Any]:
        kind = original.get("type")
        if kind in _FUNCTION_KINDS:
            if runs_declared(original, declared):
                out["function"] = _IDENTITY_WRAP if kind == "function-wrap" else _IDENTITY
        elif kind == "model" and post_init is not None:
            if out.pop("post_init", None) and isinstance(original.get("cls"), type):
                post_init.add(original["cls"])
            out["custom_init"] = False
        elif kind == "dataclass" and post_init is not None:
            out["post_init"] = False
        return out

    return schema_walk.rewrite(node, change, drop=frozenset({"serialization"}))


def replay_post_init(value: Any, classes: frozenset[type]) -> None:
    """Run ``model_post_init`` on every model of ``classes`` in ``value``, inner ones first, keeping field values."""
    if isinstance(value, BaseModel):
        for item in value.__dict__.values():
            replay_post_init(item, classes)
        if value.__pydantic_extra__:
            for item in value.__pydantic_extra__.values():
                replay_post_init(item, classes)
        cls = type(value)
        if cls in classes:
            state = value.__dict__
            fields = {name: state[name] for name in cls.model_fields if name in state}
            value.model_post_init(None)
            state.update(fields)  # the driver's validated values, whatever the hook assigned
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            replay_post_init(item, classes)
    elif isinstance(value, dict):
        for item in value.values():
            replay_post_init(item, classes)
