"""pydantic ``ValidationError`` -> our ``FieldError`` list, with secrets redacted and typos explained."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr, ValidationError

from ._errors import FieldError

__all__ = ["REDACTED", "field_errors", "redact", "short_repr", "suggest"]

REDACTED = "'**********'"
_MAX_REPR = 80


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def redact(value: Any, secret_names: Collection[str]) -> Any:
    """``value`` with every entry keyed by a secret field name replaced by stars (a copy; input untouched)."""
    if isinstance(value, (SecretStr, SecretBytes)):
        return "**********"
    if isinstance(value, BaseModel):
        return value  # its repr already hides secrets
    if isinstance(value, dict):
        return {k: ("**********" if k in secret_names else redact(v, secret_names)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, secret_names) for v in value)
    return value


def suggest(word: str, choices: Iterable[str]) -> str | None:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def field_errors(
    exc: ValidationError,
    *,
    role: str,
    schema: type[BaseModel],
    secret_names: Collection[str],
    prefix: str = "",
) -> list[FieldError]:
    """One ``FieldError`` per pydantic error, dotted from ``prefix``."""
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(str(p) for p in err["loc"])
        path = ".".join(p for p in (prefix, *loc) if p)
        kind = err["type"]
        hint = None
        if kind == "missing":
            shown = None
            hint = "set it in the config or give the field a default"
        elif loc and loc[-1] in secret_names:
            shown = REDACTED
        else:
            shown = short_repr(redact(err.get("input"), secret_names))
        if kind == "extra_forbidden" and loc:
            known = _fields_at(schema, loc[:-1])
            close = suggest(loc[-1], known)
            hint = (
                f"did you mean '{close}'?"
                if close
                else (f"known fields: {', '.join(sorted(known))}" if known else None)
            )
        out.append(FieldError(role=role, path=path, message=_message(err), input=shown, hint=hint))
    return out


def _message(err: Any) -> str:
    msg: str = err["msg"]
    if err["type"] == "extra_forbidden":
        return "unknown field"
    return msg[0].lower() + msg[1:] if msg else msg


def _fields_at(schema: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    """Field names of the model reached by following ``loc`` from ``schema``, when it is a model."""
    model: Any = schema
    for part in loc:
        info = getattr(model, "model_fields", {}).get(part)
        if info is None:
            return []
        model = info.annotation
    fields = getattr(model, "model_fields", None)
    return list(fields) if isinstance(fields, dict) else []
