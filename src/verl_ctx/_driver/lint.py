"""What will not travel well to a Ray worker: payloads near Ray's limits, risky raw ``extra_context`` values."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from .._require import importable
from .._wire.envelope import RESERVED_KEY
from ..errors import PayloadWarning

__all__ = ["RAY_ERROR_BYTES", "RAY_WARN_BYTES", "lint_extra_context", "lint_sizes"]

#: Ray warns when an actor definition passes this many bytes (ray_constants.FUNCTION_SIZE_WARN_THRESHOLD)...
RAY_WARN_BYTES = 10**7
#: ...and refuses it past this many (FUNCTION_SIZE_ERROR_THRESHOLD).
RAY_ERROR_BYTES = 10**8

_PLAIN = (str, bytes, int, float, bool, type(None))


def lint_sizes(payload_sizes: Mapping[str, int]) -> None:
    """Warn for a payload that Ray would warn about or refuse if it were embedded in an actor definition."""
    for role, size in payload_sizes.items():
        if size >= RAY_WARN_BYTES:
            verdict = "Ray refuses actor definitions past" if size >= RAY_ERROR_BYTES else "past Ray's warning at"
            limit = RAY_ERROR_BYTES if size >= RAY_ERROR_BYTES else RAY_WARN_BYTES
            warnings.warn(
                PayloadWarning(
                    f"[{role}] context payload is {size:,} bytes, {verdict} {limit:,} bytes for an actor "
                    "definition. verl-ctx's delivery sends it through the object store; never put it in a raw "
                    "extra_context",
                    role=role,
                    path=f"extra_context.{role}",
                ),
                stacklevel=3,
            )


def lint_extra_context(extra_context: Mapping[str, Any], *, warn: bool = True) -> list[str]:
    """Problems with the non-verl-ctx entries of ``extra_context``; each also a ``PayloadWarning``.

    verl pickles ``extra_context`` with cloudpickle into the actor definition. An object whose class lives
    in ``__main__`` or inside a function is pickled *by value* (slow, and it fails for some pydantic models);
    an object whose module the worker cannot import kills the whole worker group at start-up.
    """
    problems: list[str] = []
    paths: list[str] = []
    for key, value in extra_context.items():
        if key == RESERVED_KEY:
            continue
        for path, obj in _walk(str(key), value):
            cls = type(obj)
            module, qualname = cls.__module__, cls.__qualname__
            if module == "__main__" or "<locals>" in qualname:
                problems.append(
                    f"extra_context['{path}'] holds a {module}.{qualname}, a class cloudpickle sends by value "
                    "(slow; some pydantic models fail to unpickle). Move the class to an importable module, "
                    "or declare a RoleContext and let verl-ctx carry it"
                )
                paths.append(path)
            elif not importable(module):
                problems.append(
                    f"extra_context['{path}'] holds a {module}.{qualname}, but module '{module}' cannot be found "
                    "here, so a worker is unlikely to import it either: the whole worker group would fail at "
                    "start-up with ModuleNotFoundError"
                )
                paths.append(path)
    if warn:
        for path, text in zip(paths, problems, strict=True):
            warnings.warn(PayloadWarning(text, path=f"extra_context.{path}"), stacklevel=2)
    return problems


def _walk(path: str, value: Any, depth: int = 0) -> list[tuple[str, Any]]:
    if isinstance(value, _PLAIN) or depth > 32:
        return []
    if type(value) in (list, tuple, set, frozenset):
        return [item for i, v in enumerate(value) for item in _walk(f"{path}[{i}]", v, depth + 1)]
    if type(value) is dict:
        return [item for k, v in value.items() for item in _walk(f"{path}.{k}", v, depth + 1)]
    return [(path, value)]
