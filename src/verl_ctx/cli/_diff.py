"""``verl-ctx diff``: the contexts saved with a checkpoint against a config (what a resume would check), or
against another checkpoint. Secret values are compared by their sealed digests and never printed."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import ConfigError
from . import _render as render
from ._app import COMMAND, EXIT_INVALID, EXIT_OK, PathType, cli, exits, format_option, path_option
from ._inputs import ConfigInputs, config_inputs, validated

_HELP = """Compare the contexts saved with CHECKPOINT with a config, or with another checkpoint.

CHECKPOINT is a global_step_N directory, or a run's trainer.default_local_dir (its latest checkpoint, as
resume_mode=auto picks it). With -s MODULE and VERL_ARGS it is compared with the contexts that config
gives, exactly as a resume with that config would compare them (an older schema version is migrated
first). With --against OTHER it is compared with another checkpoint's (-s MODULE migrates both to today's
schema). Exits 0 when the contexts are the same, 1 when they differ.

\b
VERL_ARGS are exactly what you would give `python -m verl.trainer.main_ppo` (Hydra overrides and
--config-path/-cp, --config-name/-cn, --config-dir/-cd)."""


@cli.command("diff", **COMMAND, help=_HELP)
@click.argument("checkpoint", type=PathType(file_okay=False))
@path_option(
    "--against", "other", "CHECKPOINT", "Compare with this checkpoint's contexts instead of a config.", directory=True
)
@config_inputs
@format_option
@exits
def diff(checkpoint: str, other: str | None, inputs: ConfigInputs, fmt: str) -> None:
    from ..integrations.verl._checkpoint import Snapshot, compare_snapshots, compare_with_launch, find_saved

    saved = Snapshot.read(find_saved(checkpoint))
    if other is not None:
        if inputs.verl_args or inputs.config_file:
            raise ConfigError("--against compares two checkpoints: give no config (--config, VERL_ARGS) with it")
        newer = Snapshot.read(find_saved(other))
        found = compare_snapshots(saved, newer, _schemas(inputs.modules))
        against = f"checkpoint {newer.where}"
    else:
        found = compare_with_launch(saved, validated(inputs).contexts)
        against = "the config"
    if fmt == "json":
        render.emit_json(
            {
                "same": found.same,
                "checkpoint": saved.where,
                "against": against,
                "changes": [c.as_dict() for c in found.changes],
                "omitted": found.omitted,
                "migrated": list(found.migrated),
                "notes": list(found.notes),
            }
        )
    else:
        click.echo(f"checkpoint {saved.where} (step {saved.global_step}) against {against}")
        for line in (*found.migrated, *found.notes):
            click.echo(f"  note: {line}")
        if found.same:
            click.echo(render.ok(f"same contexts ({len(saved.envelopes)} role(s))"))
        else:
            count = len(found.changes) + found.omitted
            click.echo(render.bad(f"{count} difference{'s' if count != 1 else ''}:"))
            for line in found.listing(limit=200):
                click.echo(f"  {line}")
    sys.exit(EXIT_OK if found.same else EXIT_INVALID)


def _schemas(modules: tuple[str, ...]) -> dict[str, Any]:
    """Today's schema of each role, when schema modules are named (to migrate both checkpoints to it)."""
    if not modules:
        return {}
    from .._driver.modules import import_modules
    from .._model.registry import default_registry

    import_modules(modules)
    return {role: default_registry[role] for role in default_registry.roles()}
