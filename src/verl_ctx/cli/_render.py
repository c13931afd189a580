"""Human and JSON output. Colour only on a terminal (click strips ANSI codes elsewhere)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import click

from .._driver.contextset import ContextSet, Provenance
from .._driver.lint import RAY_WARN_BYTES
from .._files.evolution import RULES
from .._files.export import CheckReport
from .._model.fingerprint import schema_info
from ..errors import ContextWarning, FieldError


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


_READ_AS = {"int": "a number", "float": "a number", "bool": "a boolean"}


def with_quoting_hint(e: FieldError) -> FieldError:
    """A text field that got a number or boolean: YAML and Hydra read ``12345`` / ``true`` / ``1.5`` unquoted as one.

    The hint says to quote the value where it is written, never showing it (a secret's input is only its type).
    """
    if e.message != "input should be a valid string" or e.input is None:
        return e
    kind = e.input.removeprefix("<").split(",", 1)[0] if e.input.startswith("<") else None
    if kind not in _READ_AS:
        kind = "bool" if e.input in ("true", "false") else "float" if _numeric(e.input) else None
    if kind is None:
        return e
    hint = (
        f"the value was read as {_READ_AS[kind]} because it is not quoted; quote it: in YAML "
        f'`{e.path.rsplit(".", 1)[-1]}: "..."`, on the command line \'{e.path}="..."\' (Hydra keeps the quotes\' '
        "text as a string)"
    )
    return dataclasses.replace(e, hint=hint)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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


@dataclasses.dataclass(frozen=True)
class Warned:
    """A warning a command raised, as its JSON answer gives it: whose (``role``), which value (``path``), what kind
    (``code``: ``inactive_role``, ``literal_secret``, ``payload``, ``schema_skew``; another library's warning by its
    class name) and the message."""

    role: str | None
    path: str | None
    code: str
    message: str
    category: str

    @property
    def text(self) -> str:
        return f"{self.category}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "path": self.path, "code": self.code, "message": self.message}

    def as_error(self) -> FieldError:
        """The warning as an error, for ``--strict``: its message without the ``[role] path:`` the error's own line
        starts with, its code in the hint."""
        message = self.message
        prefix = f"[{self.role}] " if self.role else ""
        for lead in (f"{prefix}{self.path}: ", prefix):
            if lead and message.startswith(lead):
                message = message[len(lead) :]
                break
        hint = f"a warning ({self.code}) made an error by --strict"
        return FieldError(self.role or "", self.path or "", f"{self.category}: {message}", hint=hint)


def warnings_caught(caught: Sequence[warnings.WarningMessage]) -> list[Warned]:
    out = []
    for w in caught:
        found = w.message
        code = getattr(w.category, "code", None) if isinstance(found, ContextWarning) else None
        role, path = (found.role, found.path) if isinstance(found, ContextWarning) else (None, None)
        out.append(Warned(role, path, code or w.category.__name__, str(found), w.category.__name__))
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(click.style(h.ljust(w), bold=True) for h, w in zip(headers, widths, strict=True)).rstrip()
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([line, *body])


def provenance_rows(rows: Sequence[Provenance]) -> list[list[str]]:
    return [[p.role, p.path, json.dumps(p.value, ensure_ascii=False), p.source] for p in rows]


def check_report(report: CheckReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "schemas": [
            {
                "schema_id": r.schema_id,
                "roles": r.roles,
                "old_version": r.old_version,
                "new_version": r.new_version,
                "problem": r.problem,
                "changes": [
                    {
                        "rule": c.rule,
                        "path": c.path,
                        "detail": c.detail,
                        "breaking": c.breaking,
                        "why": RULES[c.rule].why if c.rule in RULES else None,
                    }
                    for c in r.changes
                ],
            }
            for r in report.reports
        ],
    }


def check_lines(report: CheckReport) -> Iterator[str]:
    for r in report.reports:
        head = f"{r.schema_id} ({'+'.join(r.roles)}) v{r.old_version} -> v{r.new_version}"
        if r.old_version is None:
            head = f"{r.schema_id} ({'+'.join(r.roles)}) v{r.new_version}: new schema, not in the export"
        elif r.new_version is None:
            head = f"{r.schema_id} ({'+'.join(r.roles)}) v{r.old_version}: in the export, not in today's code"
        yield bad(head) if r.problem else ok(head)
        # A breaking change under a version bump with its migrations is handled, not compatible: said so.
        bumped = r.old_version is not None and r.new_version is not None and r.new_version > r.old_version
        migrated = not r.problem and bumped
        for c in r.changes:
            mark = ("MIGRATED " if migrated else "BREAKING ") if c.breaking else "         "
            yield f"    {mark}{c}"
        if r.problem:
            yield f"    {click.style(r.problem, fg='red')}"
        elif migrated and any(c.breaking for c in r.changes):
            yield (
                f"    v{r.old_version} payloads and checkpoints are migrated to version {r.new_version} by its "
                f"migrations; a config file written for v{r.old_version} may need editing (`verl-ctx validate` "
                "names each key, a renamed one by its new name). Run `verl-ctx schema export` to record these changes"
            )
        elif r.changes:
            yield "    compatible; run `verl-ctx schema export` to record these changes"


def launch_plan(
    contexts: ContextSet,
    config: Any,
    workers: Mapping[str, str],
    imports: Sequence[str],
    threshold: int,
    entry: str | None = None,
) -> str:
    """What ``run`` validated and will bind, before it hands over to verl."""
    from ..integrations.verl._binding import WORKER_CLASS_ROLES

    secret = contexts.secret_roles()
    rows = []
    for role, size in contexts.payload_sizes().items():
        if role in WORKER_CLASS_ROLES:
            channel = "worker class"
        elif role == "rollout":
            channel = "config: actor_rollout_ref.rollout.custom.verl_ctx.rollout"
        else:
            channel = f"config: verl_ctx.{role}"
        how = (
            "by reference (holds a secret)"
            if role in secret
            else "by reference (large)"
            if size > threshold
            else "inline"
        )
        rows.append([role, type(contexts[role]).__qualname__, f"{size:,} B", channel, how])
    if entry:
        trainer = f"{entry}'s own TaskRunner (legacy or v1 by its base class)"
    else:
        trainer = "v1 " + str(config.trainer.v1.trainer_mode) if config.trainer.use_v1 else "legacy RayPPOTrainer"
    lines = [ok(f"validated {len(contexts)} role context(s); trainer: {trainer}")]
    lines.append(table(["role", "schema", "payload", "channel", "travels"], rows))
    if any(size > RAY_WARN_BYTES for size in contexts.payload_sizes().values()):
        lines.append(warn("a payload is past Ray's actor-definition warning; it travels by reference"))
    for slot, target in sorted(workers.items()):
        lines.append(f"  recipe worker for {slot}: {target}")
    if imports:
        lines.append(f"  imported in the TaskRunner: {', '.join(imports)}")
    return "\n".join(lines)


def rehearsal_rows(records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for record in sorted(records, key=lambda r: str(r["role"])):
        decoded = record.get("decoded") or {}
        shown = "; ".join(f"{k}={v}" for k, v in decoded.items()) or "(holds no typed context)"
        rows.append([str(record["role"]), str(record["worker"]), str(record["pid"]), shown])
    return rows
