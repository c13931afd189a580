"""``verl-ctx config``: the config verl will get, composed and validated, secrets redacted."""

from __future__ import annotations

from typing import Any

import click

from ..errors import ConfigError
from . import _render as render
from ._app import COMMAND, VERL_ARGS_HELP, cli, exits
from ._inputs import ConfigInputs, config_inputs, validated


@cli.command(
    "config",
    **COMMAND,
    help="Print the config verl will get, composed and validated, with secrets redacted (like verl's --cfg job).\n\n"
    + VERL_ARGS_HELP,
)
@config_inputs
@click.option("--resolve/--no-resolve", default=False, help="Resolve ${...} interpolations first.")
@click.option(
    "-p",
    "--package",
    "package",
    default=None,
    metavar="PATH",
    help="Print only the subtree at PATH (dotted, e.g. extra_context or actor_rollout_ref.rollout), as Hydra's "
    "--cfg job --package PATH does.",
)
@exits
def show_config(inputs: ConfigInputs, resolve: bool, package: str | None) -> None:
    from omegaconf import OmegaConf

    from .._driver.validate import SECTION

    checked = validated(inputs)
    for note in checked.warnings:
        click.echo(render.warn(note.text), err=True)
    container = OmegaConf.to_container(checked.config, resolve=resolve)
    assert isinstance(container, dict)
    container[SECTION] = checked.contexts.redacted()
    shown = OmegaConf.create(container)
    if package:
        shown = _subtree(shown, package)
        click.echo(f"# @package {package}")
        if not OmegaConf.is_config(shown):  # a leaf: its value as YAML writes it
            click.echo(OmegaConf.to_yaml({"v": shown})[len("v: ") :], nl=False)
            return
    click.echo(OmegaConf.to_yaml(shown), nl=False)


def _subtree(config: Any, path: str) -> Any:
    """The node at a dotted ``path``, or a usage error naming the nearest key where the path leaves the config."""
    from omegaconf import OmegaConf

    from .._model.field_errors import suggest

    node, walked = config, list[str]()
    for key in path.split("."):
        if not OmegaConf.is_dict(node) or key not in node:
            known = [str(k) for k in node] if OmegaConf.is_dict(node) else []
            close = suggest(key, known)
            where = ".".join(walked) or "the top"
            hint = f"; did you mean '{'.'.join([*walked, close])}'?" if close else ""
            raise ConfigError(f"--package {path}: the config has no key '{key}' under {where}{hint}")
        node = node[key]
        walked.append(key)
    return node
