"""The ``verl-ctx`` command. Exit codes: 0 valid, 1 invalid contexts or schema check failed, 2 usage error.

It never imports torch or Ray for ``validate``, ``describe`` and ``schema``: the point is to fail in well
under a second, before a GPU job is queued.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from .._errors import ConfigError, ContextError, ContextValidationError
from .._validate import ContextSet
from . import _render as render

__all__ = ["main"]

_F = TypeVar("_F", bound=Callable[..., Any])

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class ConfigInputs:
    """What ``validate``, ``describe`` and ``run`` read: schema modules, a config, Hydra overrides."""

    modules: tuple[str, ...]
    config_file: str | None
    config_path: str | None
    config_name: str | None
    overrides: tuple[str, ...]


_INPUT_NAMES = ("modules", "config_file", "config_path", "config_name", "overrides")


def _config_inputs(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options and hand them to the command as one ``inputs: ConfigInputs``."""

    @functools.wraps(fn)
    def with_inputs(**kwargs: Any) -> Any:
        inputs = ConfigInputs(**{name: kwargs.pop(name) for name in _INPUT_NAMES})
        return fn(inputs=inputs, **kwargs)

    options = [
        click.option(
            "-s",
            "--schemas",
            "modules",
            multiple=True,
            metavar="MODULE",
            help="Module defining RoleContext schemas (repeatable).",
        ),
        click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False),
            default=None,
            help="A YAML config file (default: verl's own ppo_trainer config).",
        ),
        click.option("--config-path", default=None, metavar="DIR", help="Hydra config directory."),
        click.option("--config-name", default=None, metavar="NAME", help="Hydra config name in --config-path."),
        click.argument("overrides", nargs=-1, metavar="[OVERRIDE]..."),
    ]
    command: Callable[..., Any] = with_inputs
    for option in reversed(options):
        command = option(command)
    return command


def _format_option(fn: _F) -> _F:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["human", "json"]),
        default="human",
        show_default=True,
        help="Output for people or for CI.",
    )(fn)


def _exits(fn: _F) -> _F:
    """Turn our errors into messages and exit codes instead of tracebacks."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            click.echo(render.bad(f"usage error: {e}"), err=True)
            sys.exit(EXIT_USAGE)
        except ContextError as e:
            click.echo(render.bad(str(e)), err=True)
            sys.exit(EXIT_INVALID)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verl-ctx")
def cli() -> None:
    """Typed, validated, versioned context for verl's workers."""


@dataclass
class _Checked:
    """A composed config, its validated contexts, and the warnings validation raised."""

    config: Any
    contexts: ContextSet
    warnings: list[str]


def _validated(inputs: ConfigInputs) -> _Checked:
    """Import the schema modules, compose the config as verl would, validate every role."""
    from .._validate import validate
    from ._load import compose_config, import_schema_modules

    import_schema_modules(inputs.modules)
    config = compose_config(
        config_file=inputs.config_file,
        config_path=inputs.config_path,
        config_name=inputs.config_name,
        overrides=inputs.overrides,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        contexts = validate(config, overrides=inputs.overrides)
    return _Checked(config, contexts, render.warning_texts(caught))


@cli.command()
@_config_inputs
@_format_option
@_exits
def validate(inputs: ConfigInputs, fmt: str) -> None:
    """Check every role's context in the composed config; list every error at once."""
    try:
        checked = _validated(inputs)
    except ContextValidationError as e:
        if fmt == "json":
            render.emit_json({"valid": False, "errors": [render.error_dict(x) for x in e.errors], "warnings": []})
        else:
            click.echo(render.bad(str(e)), err=True)
        sys.exit(EXIT_INVALID)
    summary = render.roles_summary(checked.contexts)
    if fmt == "json":
        render.emit_json({"valid": True, "errors": [], "warnings": checked.warnings, "roles": summary})
        return
    for note in checked.warnings:
        click.echo(render.warn(note), err=True)
    parts = [f"{role} ({s['schema_id']} v{s['version']}, {s['payload_bytes']:,} B)" for role, s in summary.items()]
    click.echo(render.ok(f"contexts valid for {len(parts)} role(s): " + (", ".join(parts) or "none registered")))


@cli.command()
@_config_inputs
@_format_option
@_exits
def describe(inputs: ConfigInputs, fmt: str) -> None:
    """Show every field of every role with its value and where it came from (secrets redacted)."""
    checked = _validated(inputs)
    rows = checked.contexts.describe()
    if fmt == "json":
        render.emit_json([{"role": p.role, "path": p.path, "value": p.value, "source": p.source} for p in rows])
        return
    for note in checked.warnings:
        click.echo(render.warn(note), err=True)
    click.echo(render.table(["role", "field", "value", "source"], render.provenance_rows(rows)))


@cli.group()
def schema() -> None:
    """Export role schemas as JSON Schema, and check today's code against an export."""


@schema.command("export")
@click.option("-s", "--schemas", "modules", multiple=True, metavar="MODULE", help="Module defining schemas.")
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@_exits
def schema_export(modules: tuple[str, ...], out_dir: str) -> None:
    """Write one JSON Schema per role schema, a config-file schema and a lock file."""
    from .._export import export_schemas
    from .._registry import default_registry
    from ._load import import_schema_modules

    import_schema_modules(modules)
    for path in export_schemas(default_registry, Path(out_dir)):
        click.echo(f"wrote {path}")


@schema.command("check")
@click.option("-s", "--schemas", "modules", multiple=True, metavar="MODULE", help="Module defining schemas.")
@click.argument("export_dir", type=click.Path(file_okay=False))
@_format_option
@_exits
def schema_check(modules: tuple[str, ...], export_dir: str, fmt: str) -> None:
    """Compare today's schemas with an export; a breaking change without a version bump and migration fails."""
    from .._export import check_export
    from .._registry import default_registry
    from ._load import import_schema_modules

    import_schema_modules(modules)
    report = check_export(default_registry, Path(export_dir))
    if fmt == "json":
        render.emit_json(
            {
                "ok": report.ok,
                "schemas": [
                    {
                        "schema_id": r.schema_id,
                        "roles": r.roles,
                        "old_version": r.old_version,
                        "new_version": r.new_version,
                        "problem": r.problem,
                        "changes": [
                            {"rule": c.rule, "path": c.path, "detail": c.detail, "breaking": c.breaking}
                            for c in r.changes
                        ],
                    }
                    for r in report.reports
                ],
            }
        )
    else:
        for r in report.reports:
            head = f"{r.schema_id} ({'+'.join(r.roles)}) v{r.old_version} -> v{r.new_version}"
            if r.old_version is None:
                head += ": new schema, not in the export"
            click.echo(render.bad(head) if r.problem else render.ok(head))
            for c in r.changes:
                click.echo(f"    {'BREAKING ' if c.breaking else '         '}{c}")
            if r.problem:
                click.echo(f"    {click.style(r.problem, fg='red')}")
    sys.exit(EXIT_OK if report.ok else EXIT_INVALID)


@schema.command("envelope")
@click.option("-o", "--out", "out_file", required=True, type=click.Path(dir_okay=False), help="File to write.")
def schema_envelope(out_file: str) -> None:
    """Write the JSON Schema of the envelope format."""
    from .._envelope import envelope_json_schema
    from .._export import render_json

    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    Path(out_file).write_text(render_json(envelope_json_schema()))
    click.echo(f"wrote {out_file}")


@cli.command()
@click.option("--num-cpus", default=4, show_default=True, help="CPUs for the local Ray cluster.")
@_exits
def demo(num_cpus: int) -> None:
    """Start a local Ray cluster, deliver a typed context to every verl role, and show what each decoded."""
    from ..demo import run_demo

    sys.exit(run_demo(num_cpus=num_cpus))


@cli.command(context_settings={"ignore_unknown_options": True})
@_config_inputs
@click.option(
    "--offload-bytes",
    type=int,
    default=None,
    metavar="N",
    help="Payloads above N bytes go through Ray's object store (default 8 MiB).",
)
@_exits
def run(inputs: ConfigInputs, offload_bytes: int | None) -> None:
    """Validate, then run verl's PPO trainer (v1 or legacy, per trainer.use_v1) with every context bound.

    Takes the overrides you would give `python -m verl.trainer.main_ppo`. Any invalid context stops it
    before Ray starts.
    """
    try:
        checked = _validated(inputs)
    except ContextValidationError as e:
        click.echo(render.bad(str(e)), err=True)
        click.echo("nothing was launched", err=True)
        sys.exit(EXIT_INVALID)
    for note in checked.warnings:
        click.echo(render.warn(note), err=True)
    from ..integrations.verl import DEFAULT_OFFLOAD_BYTES, launch

    launch(checked.config, checked.contexts, offload_threshold=offload_bytes or DEFAULT_OFFLOAD_BYTES)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="verl-ctx")
