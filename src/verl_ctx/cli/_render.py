"""Human and JSON output. Colour only on a terminal (click strips ANSI codes elsewhere)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

import click

from .._errors import FieldError
from .._schema import schema_info
from .._validate import ContextSet, Provenance


def ok(text: str) -> str:
    return click.style("✓ ", fg="green", bold=True) + text


def bad(text: str) -> str:
    return click.style("✗ ", fg="red", bold=True) + text


def warn(text: str) -> str:
    return click.style("! ", fg="yellow", bold=True) + text


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str))


def error_dict(e: FieldError) -> dict[str, Any]:
    return {"role": e.role, "path": e.path, "message": e.message, "input": e.input, "hint": e.hint}


def roles_summary(contexts: ContextSet) -> dict[str, Any]:
    sizes = contexts.payload_sizes()
    out = {}
    for role, ctx in contexts.items():
        info = schema_info(type(ctx))
        out[role] = {
            "schema_id": info.schema_id,
            "version": info.version,
            "fingerprint": info.fingerprint,
            "payload_bytes": sizes[role],
        }
    return out


def warning_texts(caught: Sequence[warnings.WarningMessage]) -> list[str]:
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(click.style(h.ljust(w), bold=True) for h, w in zip(headers, widths, strict=True)).rstrip()
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([line, *body])


def provenance_rows(rows: Sequence[Provenance]) -> list[list[str]]:
    return [[p.role, p.path, p.value, p.source] for p in rows]
