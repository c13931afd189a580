"""Reading the CLI's inputs: schema modules, and verl's Hydra config with the user's overrides."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._errors import ConfigError

__all__ = ["compose_config", "import_schema_modules", "verl_config_dir"]

VERL_CONFIG_NAME = "ppo_trainer"


def import_schema_modules(modules: Sequence[str]) -> None:
    """Import each ``-s MODULE`` (from the working directory too, as ``python -m`` would)."""
    if not modules:
        raise ConfigError("name at least one schema module with -s MODULE (the module that defines your contexts)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            raise ConfigError(
                f"cannot import schema module '{name}': {e}. Pass a dotted module name importable from the "
                "working directory or the installed packages (e.g. -s my_recipe.contexts)"
            ) from None
        except Exception as e:
            raise ConfigError(f"schema module '{name}' failed while importing: {type(e).__name__}: {e}") from e


def verl_config_dir() -> Path:
    """verl's own trainer config directory, found without importing verl (which pulls torch and Ray)."""
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(
            "verl is not installed, so its ppo_trainer config cannot be used. Install it with "
            "`pip install 'verl-ctx[verl]'`, or pass your own config with --config FILE "
            "or --config-path DIR --config-name NAME"
        )
    path = Path(locations[0]) / "trainer" / "config"
    if not (path / f"{VERL_CONFIG_NAME}.yaml").is_file():
        raise ConfigError(f"verl is installed at {locations[0]} but has no trainer/config/{VERL_CONFIG_NAME}.yaml")
    return path


def compose_config(
    *,
    config_file: str | None,
    config_path: str | None,
    config_name: str | None,
    overrides: Sequence[str],
) -> Any:
    """The composed Hydra config (a ``DictConfig``), exactly as ``python -m verl.trainer.main_ppo`` builds it."""
    if config_file is not None and (config_path or config_name):
        raise ConfigError("pass either --config FILE or --config-path DIR --config-name NAME, not both")
    if config_file is not None:
        file = Path(config_file)
        if not file.is_file():
            raise ConfigError(f"config file {config_file} does not exist")
        directory, name = file.resolve().parent, file.stem
    elif config_path or config_name:
        if not (config_path and config_name):
            raise ConfigError("--config-path and --config-name go together")
        directory, name = Path(config_path).resolve(), config_name.removesuffix(".yaml")
        if not (directory / f"{name}.yaml").is_file():
            raise ConfigError(f"no config {name}.yaml in {directory}")
    else:
        directory, name = verl_config_dir(), VERL_CONFIG_NAME

    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(directory), version_base=None):
            return compose(config_name=name, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(f"cannot compose config {name} from {directory}: {_first_line(e)}") from None
    except Exception as e:  # YAML errors surface as yaml.YAMLError and friends through Hydra
        raise ConfigError(f"cannot read config {name} from {directory}: {type(e).__name__}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return " ".join(text.splitlines()[:4])
