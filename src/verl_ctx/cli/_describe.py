"""``verl-ctx describe``: every value of every role and where it came from, secrets redacted."""

from __future__ import annotations

import click

from . import _render as render
from ._app import COMMAND, VERL_ARGS_HELP, cli, exits, format_option
from ._inputs import ConfigInputs, config_inputs, validated


@cli.command(
    **COMMAND, help="Show every value of every role and where it came from (secrets redacted).\n\n" + VERL_ARGS_HELP
)
@config_inputs
@format_option
@exits
def describe(inputs: ConfigInputs, fmt: str) -> None:
    checked = validated(inputs)
    rows = checked.contexts.describe()
    if fmt == "json":
        render.emit_json([{"role": p.role, "path": p.path, "value": p.value, "source": p.source} for p in rows])
        return
    for note in checked.warnings:
        click.echo(render.warn(note.text), err=True)
    click.echo(render.table(["role", "field", "value", "source"], render.provenance_rows(rows)))
