"""A launch's Hydra config, composed exactly as its entry point's ``@hydra.main`` composes it; recipe imports.

The entry point is verl's ``python -m verl.trainer.main_ppo`` (``@hydra.main(config_path="config",
config_name="ppo_trainer")``) unless ``entry=`` names a recipe's own module (``-m recipe.dapo.main_dapo``), whose
decorator is read from its source (``_entry``). Then, as Hydra does for it:

* the arguments are read by Hydra's own argument grammar: ``--config-path``/``-cp``, ``--config-name``/``-cn``
  (a ``.yaml`` suffix allowed), ``--config-dir``/``-cd``, and overrides;
* a relative ``--config-path`` (``config``, ``./config``) is resolved against the entry module's folder, not
  the working directory; an absolute one or ``pkg://`` is used as is (Hydra's ``compute_search_path_dir``);
* ``--config-dir`` joins the search path before the primary config is loaded (a primary config may live only
  there), where Hydra's ``_run_hydra`` puts it; the primary file's own ``hydra.searchpath`` (``file://`` entries
  relative to the working directory) and a ``hydra.searchpath=`` override are Hydra's to apply, as they are.

The composition itself is Hydra's: the search path Hydra's ``hydra.main`` builds, ``Hydra.create_main_hydra2``
and ``compose_config`` in run mode (Hydra's internals, pinned by the ``hydra-core<1.4`` requirement). Nothing
here imports verl or the recipe (which pull torch and Ray): files are found with ``find_spec``.

``--config FILE`` is verl-ctx's own convenience for verl's entry point: a file *without* a ``defaults`` list is
layered over verl's ``ppo_trainer`` (as the defaults list ``[ppo_trainer, FILE, _self_]`` would); a file *with*
one is composed as the primary config, with verl's config directory on its search path (so ``defaults:
[ppo_trainer, _self_]`` works as in verl's own recipes).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._driver.validate import SECTION
from ..._secrets.withhold import named, without_assigned_values
from ...errors import ConfigError
from ._entry import VERL_ENTRY, EntryPoint, entry_point

__all__ = ["VerlArgs", "compose_config", "parse_verl_args", "verl_config_dir"]

VERL_CONFIG_PATH = "config"  # hydra.main(config_path=...) in verl/trainer/main_ppo.py
VERL_CONFIG_NAME = "ppo_trainer"  # hydra.main(config_name=...)
#: Config files larger than this are refused before Hydra reads them...
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: ...and files whose YAML aliases would expand to more values than this (a "billion laughs" file is tiny).
MAX_CONFIG_NODES = 200_000
#: ...and files nesting deeper than this (Hydra and OmegaConf recurse per level; verl's own go ~6 deep).
MAX_CONFIG_DEPTH = 100

_LAYERED = "verl_ctx_layered"


@dataclass(frozen=True)
class VerlArgs:
    """The arguments of one launch, as Hydra's parser reads them (``None``: the entry point's decorator decides)."""

    config_path: str | None = None
    config_name: str | None = None
    config_dir: str | None = None
    overrides: list[str] = field(default_factory=list)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit
        raise ConfigError(f"verl's entry point would reject these arguments: {message}")


def _hydra_parser() -> argparse.ArgumentParser:
    """Hydra 1.3's own argument grammar (``hydra._internal.utils.get_args_parser``), the options that compose."""
    p = _Parser(add_help=False, prog="verl")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--config-path", "-cp")
    p.add_argument("--config-name", "-cn")
    p.add_argument("--config-dir", "-cd")
    for flag, short in (("--cfg", "-c"), ("--package", "-p")):
        p.add_argument(flag, short)
    for flag in ("--resolve", "--run", "--help", "--hydra-help", "--version", "--multirun", "--shell-completion"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--info", "-i", nargs="?", const="all")
    p.add_argument("--experimental-rerun")
    return p


def parse_verl_args(args: Sequence[str]) -> VerlArgs:
    """Read an entry point's arguments (``python -m MODULE ARGS``); options that launch no single run are refused."""
    try:
        ns = _hydra_parser().parse_args(list(args))
    except ConfigError as e:  # argparse echoes what it could not place, overrides with their values included
        raise ConfigError(without_assigned_values(str(e), args)) from None
    for flag in ("help", "hydra_help", "version", "multirun", "shell_completion"):
        if getattr(ns, flag):
            raise ConfigError(f"--{flag.replace('_', '-')} does not launch a single run; drop it")
    if ns.info is not None or ns.experimental_rerun is not None:
        raise ConfigError("--info and --experimental-rerun do not launch a run; drop them")
    return VerlArgs(ns.config_path, ns.config_name, ns.config_dir, list(ns.overrides or []))


def verl_config_dir() -> Path:
    """verl's own trainer config directory, found without importing verl (which pulls torch and Ray)."""
    return Path(entry_point(VERL_ENTRY).folder) / VERL_CONFIG_PATH


def _search_dir(entry: EntryPoint, config_path: str | None) -> str | None:
    """Where the entry point's ``hydra.main`` looks for the primary config (Hydra's ``compute_search_path_dir``)."""
    from hydra._internal.utils import compute_search_path_dir

    if config_path is not None and os.path.splitext(config_path)[1] in (".yaml", ".yml"):
        raise ConfigError("--config-path names a directory; give the file's name with --config-name")
    found: str | None = compute_search_path_dir(entry.file, None, config_path)
    return found


def compose_config(
    args: Sequence[str] = (),
    *,
    overrides: Sequence[str] = (),
    config_file: str | os.PathLike[str] | None = None,
    entry: str | None = None,
) -> Any:
    """The ``DictConfig`` an entry point's ``hydra.main`` builds from ``args`` (its command line) plus ``overrides``.

    ``compose_config(["--config-path=config", "--config-name=ppo_megatron_trainer", "algorithm.adv_estimator=grpo"])``
    composes what ``python -m verl.trainer.main_ppo`` would with those arguments; with
    ``entry="recipe.dapo.main_dapo"``, what ``python -m recipe.dapo.main_dapo`` would (run from the working
    directory). ``config_file`` layers a YAML file over verl's config (see the module docs). Errors are
    ``ConfigError``s that keep Hydra's message whole.
    """
    point = entry_point(entry)
    given = parse_verl_args(args)
    verl = VerlArgs(
        point.require("config_path", given.config_path),
        point.require("config_name", given.config_name),
        given.config_dir,
        schema_overrides([*given.overrides, *overrides]),
    )
    check_overrides(verl.overrides)  # one Hydra cannot read is named by position and key, never quoted
    search_dir = _search_dir(point, verl.config_path)
    for path in _override_files(search_dir, verl.config_name):
        _check_file(path)
    if config_file is not None:
        if entry is not None and entry != VERL_ENTRY:
            raise ConfigError(
                f"--config layers a file over verl's own config; with -m {entry} the recipe's own config is composed. "
                "Give the recipe's --config-path/--config-name (or put the file in its config folder) instead"
            )
        return _compose_with_file(Path(config_file), verl, point)
    return _compose(search_dir, _config_name(verl.config_name), verl, point)


def schema_overrides(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with each ``extra_context.KEY=VALUE`` and ``+extra_context.KEY=VALUE`` made ``++...``.

    A context field with a default need not be in any config file, so Hydra's struct mode refuses to set it without
    ``+``, refuses ``+`` once a file sets it, and ``+`` adds a typo as readily as a field. Under ``extra_context``
    the role schemas, not verl's config, say which keys exist: ``++`` (set, adding the key when absent) lets every
    field be set with or without ``+``, and validation answers an unknown key with the nearest field. verl's own
    keys keep Hydra's strictness; ``++`` and ``~`` overrides are left as written.
    """
    out = []
    for override in overrides:
        bare = override[1:] if override.startswith("+") and not override.startswith("++") else override
        key = bare.split("=", 1)[0]
        out.append(f"++{bare}" if "=" in bare and key.split(".", 1)[0] == SECTION else override)
    return out


def _config_name(name: str | None) -> str | None:
    return name.removesuffix(".yaml") if name is not None else None


def _compose(
    search_dir: str | None,
    name: str | None,
    verl: VerlArgs,
    point: EntryPoint,
    extra_search: Sequence[str] = (),
    what: str | None = None,
) -> Any:
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery

    if search_dir is not None and not search_dir.startswith("pkg://") and not os.path.isdir(search_dir):
        raise ConfigError(
            f"no config directory {search_dir}: a relative --config-path is resolved against the folder of "
            f"{point.module} ({point.folder}), as Hydra resolves it for `python -m {point.module}`"
        )
    search_path = create_config_search_path(search_dir)
    schema = SearchPathQuery(provider="schema")  # Hydra keeps its structured-config source last
    for directory in extra_search:
        search_path.prepend(provider="verl-ctx", path=f"file://{os.path.abspath(directory)}", anchor=schema)
    if verl.config_dir is not None:  # as Hydra's _run_hydra adds it: before the primary config is looked up
        config_dir = os.path.abspath(verl.config_dir)
        if not os.path.isdir(config_dir):
            raise ConfigError(f"--config-dir {verl.config_dir}: no such directory ({config_dir})")
        search_path.prepend(provider="command-line", path=f"file://{config_dir}", anchor=schema)
    _checked_sources(search_path)
    overrides = list(verl.overrides)
    what = what or f"config {name} from {_shown_folder(search_dir)}"
    return _hydra_call(lambda: _run(search_path, point.task_name, name, overrides), what, overrides)


def _shown_folder(folder: str | None) -> str:
    """A config folder as a person knows it: verl's by that name, one under the working directory relative to it."""
    if folder is None or "://" in folder:
        return str(folder)
    real = os.path.realpath(folder)
    if real == os.path.realpath(verl_config_dir()):
        return "verl's config folder"
    relative = os.path.relpath(real)
    return relative if not relative.startswith("..") else folder


def _run(search_path: Any, task_name: str, name: str | None, overrides: list[str]) -> Any:
    """Hydra's own composition, as ``hydra.main`` runs it, leaving Hydra's global state as it was found."""
    from hydra._internal.hydra import Hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup
    from hydra.types import RunMode
    from omegaconf import open_dict

    _register_checked_source()
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        hydra = Hydra.create_main_hydra2(task_name=task_name, config_search_path=search_path)
        config = hydra.compose_config(
            config_name=name, overrides=overrides, run_mode=RunMode.RUN, from_shell=False, with_log_configuration=False
        )
    finally:
        restore_gh_from_backup(backup)
    with open_dict(config):  # the task function gets the config without Hydra's own node
        config.pop("hydra", None)
    return config


_CHECKED_SCHEME = "verlctx-file"


def _checked_sources(search_path: Any) -> None:
    """Every config directory but verl's own is read through ``_checked_source``: each file Hydra loads from it (a
    primary config, a defaults-list entry at any depth, a ``--config`` file's includes) passes ``_check_file``."""
    trusted = os.path.realpath(verl_config_dir())
    for element in search_path.get_path():
        path = element.path[len("file://") :] if element.path.startswith("file://") else element.path
        if "://" not in path and os.path.realpath(path) != trusted:  # a plain path is a file source to Hydra
            element.path = f"{_CHECKED_SCHEME}://{path}"


def _register_checked_source() -> None:
    from hydra.core.plugins import Plugins

    Plugins.instance().register(_checked_source())


@functools.cache
def _checked_source() -> type:
    """Hydra's file config source, with each file checked for size and YAML alias bombs before Hydra parses it."""
    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra.plugins.config_source import ConfigResult

    class CheckedFileConfigSource(FileConfigSource):  # type: ignore[misc]  # hydra is untyped here
        @staticmethod
        def scheme() -> str:
            return _CHECKED_SCHEME

        def load_config(self, config_path: str) -> ConfigResult:
            full = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
            if os.path.exists(full):
                _check_file(Path(full))
            return super().load_config(config_path)

    return CheckedFileConfigSource


def _compose_with_file(file: Path, verl: VerlArgs, point: EntryPoint) -> Any:
    _check_file(file)
    import yaml

    try:
        content = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"cannot read config file {file}: {e}") from None
    if not isinstance(content, dict):
        raise ConfigError(f"config file {file} should hold a mapping at the top; it holds {type(content).__name__}")
    directory, name = str(file.resolve().parent), file.stem
    if "defaults" in content:
        return _compose(directory, name, verl, point, extra_search=[str(verl_config_dir())], what=f"config file {file}")
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=_LAYERED, node={"defaults": [VERL_CONFIG_NAME, name, "_self_"]})
    return _compose(
        str(verl_config_dir()),
        _LAYERED,
        verl,
        point,
        extra_search=[directory],
        what=f"verl's config {VERL_CONFIG_NAME} with {file} over it",
    )


def _hydra_call(step: Any, what: str, overrides: Sequence[str] = ()) -> Any:
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return step()
    except ConfigError:
        raise
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(f"cannot compose {what}: {without_assigned_values(_hydra_message(e), overrides)}") from None
    except Exception as e:  # noqa: BLE001 - YAML errors and others surface through Hydra as themselves
        message = without_assigned_values(_hydra_message(e), overrides)
        raise ConfigError(f"cannot read {what}: {type(e).__name__}: {message}") from None


# Hydra's refusal of `~key=value` prints the config's whole subtree at `key` (values from files and other
# overrides, parsed and re-printed, so no override text matches them) and the value given.
_DELETE_MISMATCH = re.compile(r"The value of '([^']+)' is .* and not .*", re.DOTALL)


def _hydra_message(e: BaseException) -> str:
    """Hydra's whole message (with its cause), plus a did-you-mean for a key verl's config does not have."""
    text = str(e).strip()
    cause = e.__cause__
    if cause is not None and str(cause).strip() and str(cause).strip() not in text:
        text += f"\n{str(cause).strip()}"
    text = _DELETE_MISMATCH.sub(
        r"The value of '\1' is not the one given (values withheld: they may hold secrets); delete it with ~\1", text
    )
    hint = _key_hint(text)
    if hint is not None and hint.startswith("did you mean"):
        # Hydra's own advice for a key it lacks is `+key=...`, which for a typo adds the typo.
        text = re.sub(r"\nTo append to your config use \+\S+", "", text)
    return text + (f"\n{hint}" if hint else "")


def _key_hint(text: str) -> str | None:
    from ..._model.field_errors import suggest

    found = re.search(r"Key '([^']+)' is not in struct\s+full_key: (\S+)", text)
    if not found:
        return None
    key, full = found.group(1), found.group(2)
    parent = full.rsplit(".", 1)[0] if "." in full else ""
    known = _keys_at(parent)
    close = suggest(key, known)
    if close:
        return f"did you mean '{(parent + '.') if parent else ''}{close}'?"
    return f"to add a key verl's config does not have, prefix it with '+': +{full}=..."


def _keys_at(dotted: str) -> list[str]:
    from omegaconf import OmegaConf

    try:
        config = OmegaConf.load(verl_config_dir() / f"_generated_{VERL_CONFIG_NAME}.yaml")
    except Exception:  # noqa: BLE001 - only for a hint
        return []
    node = OmegaConf.select(config, dotted) if dotted else config
    return [str(k) for k in node] if hasattr(node, "keys") else []


def _override_files(directory: str | None, config_name: str | None) -> list[Path]:
    """Config files the arguments name directly (their size and aliases are checked before Hydra reads them)."""
    if directory is None or config_name is None:
        return []
    name = config_name if config_name.endswith((".yaml", ".yml")) else config_name + ".yaml"
    if directory.startswith("pkg://") or Path(directory).resolve() == verl_config_dir().resolve():
        return []  # verl's own config files, as trusted as its code: parsing them twice costs 0.1 s
    path = Path(directory) / name
    return [path] if path.is_file() else []


def _check_file(path: Path) -> None:
    """Refuse a config file that cannot be read as YAML text cheaply and safely, before Hydra parses it: not a
    regular file (a FIFO would block, a device never ends), huge, not UTF-8, nested deeper than
    ``MAX_CONFIG_DEPTH``, or using YAML aliases enough to be a bomb."""
    try:
        info = path.stat()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"config file {path} is not a regular file (a directory, FIFO, socket or device); give a file"
        )
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path} is {info.st_size:,} bytes; verl-ctx reads configs up to {MAX_CONFIG_BYTES:,} bytes. "
            "Keep large data out of the config (a path to a file your recipe reads)"
        )
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)  # files under /proc say they are empty: read no more than allowed
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path} holds more than {MAX_CONFIG_BYTES:,} bytes; verl-ctx reads no more")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {e.start} is {raw[e.start : e.start + 1]!r}); save it as UTF-8"
        ) from None
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)  # aliases stay shared nodes: nothing expands
    except yaml.YAMLError as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    except RecursionError:
        root = None
        depth = MAX_CONFIG_DEPTH + 1
    else:
        depth = _depth(root)
    if depth > MAX_CONFIG_DEPTH:
        raise ConfigError(
            f"config file {path} nests values more than {MAX_CONFIG_DEPTH} levels deep; verl's configs are a few "
            "levels deep. Flatten it"
        )
    if root is not None and _expanded_size(root, {}) > MAX_CONFIG_NODES:
        raise ConfigError(
            f"config file {path} would expand to more than {MAX_CONFIG_NODES:,} values through its YAML aliases: "
            "refused, as a YAML alias bomb would be. Write the values out"
        )


def _depth(root: Any) -> int:
    """How deep the YAML node tree under ``root`` goes (iterative; a shared node is visited once per depth)."""
    deepest, todo, seen = 0, [(root, 1)], set()
    while todo:
        node, depth = todo.pop()
        if (id(node), depth) in seen:
            continue
        seen.add((id(node), depth))
        deepest = max(deepest, depth)
        if depth > MAX_CONFIG_DEPTH:
            return depth
        if isinstance(node.value, list):
            for item in node.value:
                todo.extend((part, depth + 1) for part in (item if isinstance(item, tuple) else (item,)))
    return deepest


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for once every alias is expanded (shared nodes counted once each use)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    size = 1
    if isinstance(node.value, list):
        for item in node.value:
            for part in item if isinstance(item, tuple) else (item,):
                size += _expanded_size(part, sizes)
                if size > MAX_CONFIG_NODES:
                    break
    sizes[id(node)] = size
    return size


def check_overrides(overrides: Sequence[str]) -> None:
    """``ConfigError`` naming the first override Hydra's grammar cannot read, by position and key only."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for position, override in enumerate(overrides, 1):
        if "=" not in override and not override.startswith("~"):
            # A dotted key is shown; a bare word is not (a secret pasted as an argument of its own looks like one).
            key = override.lstrip("+")
            shown = key if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", key) else None
            raise ConfigError(
                f"override #{position} ({shown or 'not shown: it may be a secret'}) has no '=': give it as "
                f"{shown or 'KEY'}=VALUE (or ~KEY to delete a key)"
            )
        try:
            parser.parse_override(override)
        except Exception:  # noqa: BLE001 - Hydra's parse errors quote the input; none of them is shown
            raise ConfigError(
                f"{named(position, override)}: Hydra's override grammar cannot read its value (not shown: it may "
                "be a secret). Quote a value holding spaces or any of / ( ) [ ] { } $ ' \" = + , : as key='value' "
                "(a ' inside it as \\'); a secret comes from the environment, key='${oc.env:NAME}', never as a literal"
            ) from None
