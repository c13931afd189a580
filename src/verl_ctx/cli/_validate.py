"""``verl-ctx validate``: every role's context in the composed config, every error at once."""

from __future__ import annotations

import click

from . import _render as render
from ._app import COMMAND, VERL_ARGS_HELP, cli, exits, format_option
from ._inputs import ConfigInputs, config_inputs, roles_answer, valid_or_exit


@cli.command(
    **COMMAND,
    help="Check every role's context in the composed config; list every error at once.\n\n" + VERL_ARGS_HELP,
)
@config_inputs
@format_option
@exits
def validate(inputs: ConfigInputs, fmt: str) -> None:
    checked = valid_or_exit(inputs, fmt)
    summary = render.roles_summary(checked.contexts)
    # validate stays fast and imports none of the recipe's code: -m is read for its @hydra.main, never run. Said, so
    # that a valid answer is not taken for "the recipe imports" (run --check imports it, in a process of its own).
    entry = {"module": inputs.entry, "imported": False} if inputs.entry else None
    if fmt == "json":
        roles = roles_answer(checked.config, checked.contexts, checked.roles_unknown)
        body = {"valid": True, "errors": [], "warnings": [w.as_dict() for w in checked.warnings], "roles": roles}
        render.emit_json({**body, "entry": entry} if entry else body)
        return
    for note in checked.warnings:
        click.echo(render.warn(note.text), err=True)
    parts = [f"{role} ({s['schema_id']} v{s['version']}, {s['payload_bytes']:,} B)" for role, s in summary.items()]
    click.echo(render.ok(f"contexts valid for {len(parts)} role(s): " + (", ".join(parts) or "none registered")))
    if checked.roles_unknown:
        click.echo(f"  roles: {checked.roles_unknown}")
    if entry:
        click.echo(
            f"  -m {inputs.entry}: its config was composed; the module was read, not imported. "
            "`verl-ctx run --check` (same arguments) imports it and the worker modules, and runs verl's own checks"
        )
