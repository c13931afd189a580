"""``verl-ctx schema``: export role schemas as JSON Schema, check today's code against an export, write the
envelope's schema."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ConfigError
from . import _render as render
from ._app import EXIT_CODES, EXIT_INVALID, EXIT_OK, PathType, cli, exits, format_option, write_text


@cli.group()
def schema() -> None:
    """Export role schemas as JSON Schema, and check today's code against an export."""


@schema.command("export")
@click.option("-s", "--schemas", "modules", multiple=True, metavar="MODULE", help="Module defining schemas.")
@click.option("-o", "--out", "out_dir", required=True, type=PathType(file_okay=False), help="Directory to write.")
@exits
def schema_export(modules: tuple[str, ...], out_dir: str) -> None:
    """Write one JSON Schema per role schema, a config-file schema and a lock file."""
    from .._driver.modules import import_modules
    from .._files.export import export_schemas
    from .._model.registry import default_registry

    import_modules(modules)
    for path in export_schemas(default_registry, Path(out_dir)):
        click.echo(f"wrote {path}")


@schema.command("check", epilog=EXIT_CODES)
@click.option("-s", "--schemas", "modules", multiple=True, metavar="MODULE", help="Module defining schemas.")
@click.argument("export_dir", type=PathType(file_okay=False))
@format_option
@exits
def schema_check(modules: tuple[str, ...], export_dir: str, fmt: str) -> None:
    """Compare today's schemas with an export; a breaking change without a version bump and migration fails."""
    from .._driver.modules import import_modules
    from .._files.export import check_export
    from .._model.registry import default_registry

    key, assigned, _ = export_dir.partition("=")
    if assigned:
        raise ConfigError(f"`schema check` takes an export directory, not a verl override ({key}=...)")
    import_modules(modules)
    report = check_export(default_registry, Path(export_dir))
    if fmt == "json":
        render.emit_json(render.check_report(report))
    else:
        for line in render.check_lines(report):
            click.echo(line)
    sys.exit(EXIT_OK if report.ok else EXIT_INVALID)


@schema.command("envelope")
@click.option("-o", "--out", "out_file", required=True, type=PathType(dir_okay=False), help="File to write.")
@exits
def schema_envelope(out_file: str) -> None:
    """Write the JSON Schema of the envelope format."""
    from .._files.export import render_json
    from .._wire.envelope import envelope_json_schema

    write_text(out_file, render_json(envelope_json_schema()), option="-o")
    click.echo(f"wrote {out_file}")
