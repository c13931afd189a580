"""Plain, process-independent forms of values and code, for the fingerprint: the same in every process that runs
the same source (never ``id()``, addresses or ``hash()``).

``code_digest`` digests a function from its bytecode, constants, names, defaults, closure cells, and the plain
constants, helper functions and module-level instances it reads, recursively; ``class_state`` digests what a class
holds besides fields (methods, properties, class attributes); ``plain`` turns a default or a setting into
JSON-native data.
"""

from __future__ import annotations

import ast
import datetime as dt
import enum
import functools
import hashlib
import inspect
import math
import re
import textwrap
import types
from typing import Any

from pydantic import BaseModel

from .role_context import MIGRATION_MARK

__all__ = [
    "ADDRESS",
    "LIBRARY_MODULES",
    "callable_name",
    "class_state",
    "code_digest",
    "json_digest",
    "plain",
    "unwrap",
]

ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")
#: Callables from these modules are covered by the digest but not named: the user did not write them.
LIBRARY_MODULES = frozenset({"pydantic", "pydantic_core", "builtins", "typing", "annotated_types"})
PRIMITIVES = (str, int, float, bool, bytes, type(None), enum.Enum)


def json_digest(obj: object) -> str:
    import json  # on first use: `import verl_ctx` stays as light as importing pydantic and msgspec (#15)

    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def plain(value: Any) -> Any:
    """``value`` as JSON-native data that is the same in every process (no addresses, no hash order)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return {"enum": f"{type(value).__qualname__}.{value.name}", "value": plain(value.value)}
    if isinstance(value, BaseModel):
        fields = type(value).model_fields  # not a cached_property's value, which only a read puts in __dict__
        return {
            "model": type(value).__qualname__,
            "values": plain({k: v for k, v in value.__dict__.items() if k in fields}),
        }
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: plain(v) for k, v in value.items()}
        return {"items": [[plain(k), plain(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        import json

        return {"set": sorted(json.dumps(plain(v), sort_keys=True) for v in value)}
    if isinstance(value, type):
        return {"class": value.__qualname__}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, (dt.date, dt.time, dt.timedelta)):
        return {type(value).__name__: str(value)}
    if callable(value):
        return {"code": code_digest(value)}
    return {"repr": ADDRESS.sub("", repr(value))}


def code_digest(fn: Any) -> str:
    """A digest of what ``fn`` does: the same in every process that runs the same code."""
    return json_digest(_code_of(fn, set()))


def callable_name(fn: Any) -> str:
    target = unwrap(fn)
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return str(name)


def unwrap(fn: Any) -> Any:
    while True:
        if isinstance(fn, (staticmethod, classmethod, types.MethodType)):
            fn = fn.__func__
        elif isinstance(fn, property) and fn.fget is not None:
            fn = fn.fget
        else:
            return fn


def _code_of(fn: Any, seen: set[int]) -> Any:
    fn = unwrap(fn)
    if isinstance(fn, functools.partial):
        return {
            "partial": _code_of(fn.func, seen),
            "args": [_const(a, fn, seen) for a in fn.args],
            "keywords": {k: _const(v, fn, seen) for k, v in fn.keywords.items()},
        }
    if isinstance(fn, types.FunctionType):
        if (fn.__module__ or "").partition(".")[0] in _LIBRARIES:
            # A library's own function (pydantic's SecretStr serializer, ...): its name says what it does.
            return {"library": f"{fn.__module__}.{fn.__qualname__}"}
        key = id(fn)  # only a recursion guard within this walk; never part of the digest
        if key in seen:
            return {"recursive": fn.__qualname__}
        seen.add(key)
        try:
            return {
                "name": fn.__qualname__,
                "code": _source_of(fn) or _code_object(fn.__code__, fn.__doc__),
                "defaults": [_const(v, fn, seen) for v in fn.__defaults__ or ()],
                "kwdefaults": {k: _const(v, fn, seen) for k, v in (fn.__kwdefaults__ or {}).items()},
                "closure": [_cell(c, fn, seen) for c in fn.__closure__ or ()],
                "globals": _globals_read(fn, seen),
            }
        finally:
            seen.discard(key)
    if isinstance(fn, (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType)):
        return {"builtin": f"{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', repr(fn))}"}
    if isinstance(fn, type):
        return {"class": f"{fn.__module__}.{fn.__qualname__}"}
    # A callable object (pydantic's own validator classes, a user's class with __call__): its class and
    # its state.
    call = type(fn).__dict__.get("__call__")
    state = getattr(fn, "__dict__", None)
    return {
        "object": type(fn).__qualname__,
        "call": _code_of(call, seen) if isinstance(call, types.FunctionType) else None,
        "state": {k: _const(v, None, seen) for k, v in sorted(state.items())} if isinstance(state, dict) else None,
        "repr": None if state else ADDRESS.sub("", repr(fn)),
    }


# Packages whose functions are named, not read: their code is not the user's schema (and differs by version).
_LIBRARIES = frozenset({"pydantic", "pydantic_core", "annotated_types", "typing_extensions", "msgspec", "verl_ctx"})


def _source_of(fn: types.FunctionType) -> str | None:
    """``fn``'s source, normalised (docstrings and comments dropped, layout canonical), or None if unavailable.

    Source, not bytecode: bytecode differs between Python 3.10, 3.11 and 3.12, and a driver and its workers (or
    a lock file and today's code) may run different ones. Code without source (typed at a prompt, generated,
    or a lambda the parser cannot isolate) falls back to its bytecode.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def _code_object(code: types.CodeType, doc: str | None) -> Any:
    consts = list(code.co_consts)
    if doc is not None and consts and consts[0] == doc:
        consts = consts[1:]  # a docstring edit is not a behaviour change
    return {
        "bytecode": code.co_code.hex(),
        "names": list(code.co_names),
        "args": [code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount],
        "consts": [_code_object(c, None) if isinstance(c, types.CodeType) else _plain_const(c) for c in consts],
    }


def _plain_const(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain_const(v) for v in value]
    if isinstance(value, frozenset):
        import json

        return {"set": sorted(json.dumps(_plain_const(v)) for v in value)}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {type(value).__name__: value} if isinstance(value, (bool, float)) else value
    return {"repr": ADDRESS.sub("", repr(value))}


def _const(value: Any, fn: Any, seen: set[int]) -> Any:
    if callable(value) and not isinstance(value, type):
        return {"code": _code_of(value, seen)}
    return plain(value)


def _cell(cell: types.CellType, fn: Any, seen: set[int]) -> Any:
    try:
        value = cell.cell_contents
    except ValueError:
        return "<empty>"
    return _const(value, fn, seen)


def _globals_read(fn: types.FunctionType, seen: set[int]) -> dict[str, Any]:
    """What ``fn`` (and the functions it defines) reads from its module, as far as it can shape a value.

    A validator ``v * SCALE`` changes behaviour when ``SCALE`` does, ``_helper(v)`` when ``_helper`` does,
    ``ALIASES[v]`` when the dict does, ``helperlib.SCALE`` when the imported module's attribute does, and
    ``Units.convert(v)`` when the helper class does, ``SETTINGS.limit`` when the module-level instance does.
    Covered: constants and containers of them, functions (also wrapped: ``lru_cache``, ``partial``), builtins bound
    to a name (``norm = str.strip``), the attributes an imported module is read for (every name the code reads that
    the module has), the state of user-written classes (``class_state``) and of module-level instances of them. Not
    covered: state reached through a call's result (a file's contents, a server's answer) or held by a library's
    object (a client), which no digest of code can see (docs/schema-evolution.md).
    """
    names: set[str] = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    out: dict[str, Any] = {}
    module_globals = fn.__globals__
    for name in sorted(names):
        if name not in module_globals:
            continue
        value = module_globals[name]
        if isinstance(value, types.ModuleType):
            read = {attr: _state_value(vars(value)[attr], seen) for attr in sorted(names) if attr in vars(value)}
            out[name] = {"module": value.__name__, "read": {k: v for k, v in read.items() if v is not None}}
        else:
            digest = _state_value(value, seen)
            if digest is not None:
                out[name] = digest
    return out


def _is_library(obj: Any) -> bool:
    module = str(getattr(obj, "__module__", None) or "")
    return module.partition(".")[0] in _LIBRARIES | LIBRARY_MODULES | _STDLIB_SKIPPED


# Modules whose classes hold no user state worth a digest (and whose attributes are many).
_STDLIB_SKIPPED = frozenset({"abc", "enum", "collections", "dataclasses", "functools", "types"})


# Callables written in C: named, as what they do is their name (``norm = str.strip``).
_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)


def _state_value(value: Any, seen: set[int]) -> Any:
    """The digestible form of a module global or class attribute, or None for what cannot shape a value."""
    if isinstance(value, (types.FunctionType, functools.partial, staticmethod, classmethod, property)):
        return _code_of(value, seen)
    if isinstance(value, _BUILTIN_CALLABLES):
        return {"builtin": f"{getattr(value, '__module__', None)}.{getattr(value, '__qualname__', repr(value))}"}
    wrapped = getattr(value, "__wrapped__", None)
    if callable(value) and not isinstance(value, type) and isinstance(wrapped, types.FunctionType):
        # functools.lru_cache / cache and other wrappers that keep the function they wrap: its code is what runs
        return {"wraps": type(value).__qualname__, "code": _code_of(wrapped, seen)}
    if isinstance(value, type):
        if issubclass(value, enum.Enum):
            return {"enum": value.__qualname__, "members": {m.name: plain(m.value) for m in value}}
        if _is_library(value) or id(value) in seen:
            return None
        return {"class": value.__qualname__, "state": class_state(value, seen)}
    if isinstance(value, types.ModuleType) or callable(value):
        return None
    if isinstance(value, (*PRIMITIVES, tuple, list, dict, set, frozenset)):
        try:
            return plain(value)
        except RecursionError:  # a container holding itself: its size is what a digest can say
            return {"recursive": type(value).__name__}
    return _instance_state(value, seen)


def _instance_state(value: Any, seen: set[int]) -> Any:
    """A module-level instance of a user-written class (``SETTINGS = Settings(limit=100)``, read as
    ``SETTINGS.limit``): its class and the digestible form of each attribute; None for a library's object (a client,
    a lock), whose state no digest should hold."""
    cls = type(value)
    if _is_library(value) or _is_library(cls) or id(value) in seen:
        return None
    attrs = getattr(value, "__dict__", None)
    if not isinstance(attrs, dict):
        slots = [n for klass in cls.__mro__ for n in getattr(klass, "__slots__", ()) if isinstance(n, str)]
        attrs = {n: getattr(value, n) for n in slots if hasattr(value, n)}
    seen.add(id(value))
    try:
        state = {name: _state_value(attr, seen) for name, attr in sorted(attrs.items())}
    finally:
        seen.discard(id(value))
    return {"instance": f"{cls.__module__}.{cls.__qualname__}", "attrs": state}


_DECORATOR_GROUPS = (
    "validators",
    "field_validators",
    "root_validators",
    "field_serializers",
    "model_serializers",
    "model_validators",
    "computed_fields",
)


def class_state(cls: type, seen: set[int]) -> dict[str, Any]:
    """``cls``'s own state and that of its user-written bases: methods, class attributes, ``ClassVar``s.

    pydantic's and verl-ctx's own attributes (fields, validators' bookkeeping, config, generated dunders) are
    left out: the core schema covers what they decide.
    """
    seen.add(id(cls))
    out: dict[str, Any] = {}
    for base in cls.__mro__:
        if base is object or _is_library(base):
            continue
        own: dict[str, Any] = {}
        # Validators, serializers and computed fields are digested where the core schema applies them.
        decorators = base.__dict__.get("__pydantic_decorators__")
        registered = {name for group in _DECORATOR_GROUPS for name in getattr(decorators, group, None) or ()}
        for name, value in base.__dict__.items():
            dunder = name.startswith("__") and name.endswith("__")
            # A dunder is the user's when they wrote it (pydantic generates __hash__ for frozen models, ...).
            if (
                name in registered
                or name in ("model_config", "_abc_impl")
                or (
                    dunder
                    and (not isinstance(value, (types.FunctionType, staticmethod, classmethod)) or _is_library(value))
                )
            ):
                continue
            if hasattr(unwrap(value), MIGRATION_MARK):
                continue  # it shapes an older version's payload; the version number covers it
            digest = _state_value(value, seen)
            if digest is not None:
                own[name] = digest
        if own:
            out[base.__qualname__] = own
    return out
