"""``verl-ctx init NAME``: write a recipe skeleton (``_scaffold``) that validates, rehearses and tests as written."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import ConfigError
from . import _render as render
from . import _scaffold
from ._app import PathType, cli, exits, write_text

_HELP = f"""Write a recipe skeleton NAME/ in the working directory (or --dir): a context per role, the worker
classes that decode them, the reward function reading its context, a config section layered over verl's
ppo_trainer, unit tests on verl's real objects, and a README with the commands to validate, test and rehearse it.

\b
--roles picks the roles (comma-separated, from {", ".join(_scaffold.ROLES)}); default actor,critic,rollout,reward.
Existing files are never overwritten unless --force is given."""


@cli.command("init", help=_HELP)
@click.argument("name")
@click.option("--roles", default=None, metavar="ROLE,...", help="The roles to write contexts for.")
@click.option(
    "--dir", "directory", type=PathType(file_okay=False), default=".", show_default=True, help="Where NAME/ is written."
)
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@exits
def init(name: str, roles: str | None, directory: str, force: bool) -> None:
    name = _scaffold.check_name(name, directory)
    chosen = _scaffold.check_roles(roles)
    files = _scaffold.files(name, chosen)
    there = [path for path in files if (Path(directory) / path).exists()]
    if there and not force:
        raise ConfigError(f"{', '.join(there)} exist already; nothing was written (--force overwrites them)")
    for path, text in files.items():
        write_text(str(Path(directory) / path), text, option="--dir")
    click.echo(render.ok(f"wrote {name}/ for {', '.join(chosen)}: {', '.join(Path(p).name for p in files)}"))
    steps = _scaffold.commands(name, chosen)
    where = "" if directory == "." else f" (from {directory})"
    click.echo(f"next{where}:\n  {steps['validate']}\n  {steps['test']}\n  {steps['rehearse']}")
