"""What ``validate``, ``describe``, ``config`` and ``run`` read (schema modules, a config, verl's arguments), and
reading it: the config composed as verl composes it, every role validated, the warnings and the roles this run
starts."""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from .._driver.contextset import ContextSet
from .._secrets.redact import learn
from ..errors import ConfigError, ContextValidationError, FieldError
from . import _render as render
from ._app import EXIT_INVALID, complete_module, path_option


@dataclass(frozen=True)
class ConfigInputs:
    """What ``validate``, ``describe``, ``config`` and ``run`` read: schema modules, a config, verl's arguments."""

    modules: tuple[str, ...]
    config_file: str | None
    verl_args: tuple[str, ...]
    #: The entry module (``-m``): a recipe's own ``main_*.py``; None for verl's ``main_ppo``.
    entry: str | None = None
    #: ``--strict``: every warning validation raises is an error (exit 1).
    strict: bool = False

    def as_args(self) -> list[str]:
        """These inputs as a command line gives them (for a hint that names the command to run next)."""
        args = [a for m in self.modules for a in ("-s", m)]
        args += ["--config", self.config_file] if self.config_file else []
        args += ["-m", self.entry] if self.entry else []
        return [*args, *(["--strict"] if self.strict else []), *self.verl_args]


def config_inputs(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options and hand them to the command as one ``inputs: ConfigInputs``."""

    @functools.wraps(fn)
    def with_inputs(
        modules: tuple[str, ...],
        config_file: str | None,
        entry: str | None,
        strict: bool,
        verl_args: tuple[str, ...],
        **kwargs: Any,
    ) -> Any:
        return fn(inputs=ConfigInputs(modules, config_file, verl_args, entry, strict), **kwargs)

    options = [
        click.option(
            "-s",
            "--schemas",
            "modules",
            multiple=True,
            metavar="MODULE",
            shell_complete=complete_module,
            help="Module defining RoleContext schemas (repeatable).",
        ),
        path_option(
            "--config",
            "config_file",
            "FILE",
            "A YAML file layered over verl's config (as a Hydra defaults list [ppo_trainer, FILE] would).",
        ),
        click.option(
            "-m",
            "--module",
            "entry",
            default=None,
            metavar="MODULE",
            shell_complete=complete_module,
            help="The recipe's entry module, as its launch script runs it (`python -m MODULE ...`): its @hydra.main "
            "config is composed from the same arguments, run from the same working directory. Default: "
            "verl.trainer.main_ppo.",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="Every warning is an error (exit 1): a context for a role the run does not start, a literal secret, "
            "a payload near Ray's limits.",
        ),
        click.argument("verl_args", nargs=-1, type=click.UNPROCESSED, metavar="[VERL_ARGS]..."),
    ]
    command: Callable[..., Any] = with_inputs
    for option in reversed(options):
        command = option(command)
    return command


@dataclass
class Checked:
    """A composed config, its validated contexts, and the warnings validation raised."""

    config: Any
    contexts: ContextSet
    warnings: list[render.Warned]
    #: Why no role is judged active or inactive (an entry point whose runner verl-ctx cannot read), else None.
    roles_unknown: str | None = None


class Invalid(ContextValidationError):
    """``ContextValidationError`` with the warnings validation raised before it (they are shown together)."""

    def __init__(
        self,
        error: ContextValidationError,
        notes: list[render.Warned],
        config: Any,
        roles_unknown: str | None = None,
    ) -> None:
        super().__init__([render.with_quoting_hint(e) for e in error.errors], omitted=error.omitted)
        self.warnings = notes
        self.config = config
        self.roles_unknown = roles_unknown

    def roles_answer(self) -> dict[str, Any]:
        """Every registered role in the JSON answer's shape (``exits`` shows it with the errors)."""
        return roles_answer(self.config, None, self.roles_unknown) if self.config is not None else {}


def valid_or_exit(inputs: ConfigInputs, fmt: str, *, then: str | None = None) -> Checked:
    """``validated``, or exit 1 with every error printed (and ``then``); in JSON ``exits`` answers instead."""
    try:
        return validated(inputs)
    except Invalid as e:
        if fmt == "json":
            raise  # exits answers in JSON
        print_invalid(e)
        if then:
            click.echo(then, err=True)
        sys.exit(EXIT_INVALID)


def _composed(inputs: ConfigInputs) -> Any:
    from .._driver.modules import import_modules

    try:
        from ..integrations.verl._compose import compose_config
    except ImportError as e:  # verl is missing: its config cannot be composed
        raise ConfigError(str(e)) from None

    if not inputs.modules:
        raise ConfigError("name at least one schema module with -s MODULE (the module that defines your contexts)")
    import_modules(inputs.modules)
    config = compose_config(inputs.verl_args, config_file=inputs.config_file, entry=inputs.entry)
    _check_schemas_registered(inputs.modules)  # after composing: a config that cannot be read is told first
    return config


def _check_schemas_registered(modules: Sequence[str]) -> None:
    """A usage error when the schema modules imported register no ``RoleContext``: validating nothing is no "valid"."""
    import importlib.util

    from .._model.registry import default_registry

    if default_registry.roles():
        return
    nearby = []
    for module in modules:
        for child in ("contexts", "schemas", "context"):
            try:
                found = importlib.util.find_spec(f"{module}.{child}") is not None
            except (ImportError, ValueError):  # not a package
                found = False
            if found:
                nearby.append(f"{module}.{child}")
    hint = f"; did you mean -s {' -s '.join(nearby)}?" if nearby else ""
    raise ConfigError(
        f"-s {' -s '.join(modules)} registered no RoleContext: a schema module defines (or imports) classes like "
        f'`class CriticContext(RoleContext, role="critic")`{hint}'
    )


def _unused_settings(config: Any, inputs: ConfigInputs) -> list[FieldError]:
    """Settings validation accepts that this run would never read (verl's main_ppo only: a recipe's own trainer may)."""
    if inputs.entry:
        return []
    from ..integrations.verl.external._checks import unused_routing

    return unused_routing(config)


def validated(inputs: ConfigInputs) -> Checked:
    """Import the schema modules, compose the config as verl would, validate every role.

    Raises ``Invalid`` with every error (the contexts' own and settings this run would not use) and the warnings.
    """
    from .._driver.validate import validate

    config = _composed(inputs)
    unused = _unused_settings(config, inputs)
    unknown = _roles_unknown(inputs)
    overrides = [a for a in inputs.verl_args if not a.startswith("-")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            contexts = validate(config, overrides=overrides, check_roles=unknown is None)
        except ContextValidationError as e:
            found, warned = _warned(caught, inputs)
            error = ContextValidationError([*e.errors, *unused, *found.errors], omitted=e.omitted)
            raise Invalid(error, warned, config, unknown) from None
    found, warned = _warned(caught, inputs)
    if unused or found.errors:
        raise Invalid(ContextValidationError([*unused, *found.errors]), warned, config, unknown)
    learn(contexts)  # from here on, whatever this command writes masks their secrets (verl_ctx._secrets.redact)
    return Checked(config, contexts, warned, unknown)


def _warned(
    caught: Sequence[warnings.WarningMessage], inputs: ConfigInputs
) -> tuple[ContextValidationError, list[render.Warned]]:
    """The warnings validation raised, and (``--strict``) the errors they are instead."""
    warned = render.warnings_caught(caught)
    if inputs.strict:
        return ContextValidationError([w.as_error() for w in warned]), []
    return ContextValidationError([]), warned


def _roles_unknown(inputs: ConfigInputs) -> str | None:
    """Why the roles this run starts are not judged: ``-m`` names an entry point that starts no runner of verl's
    (an evaluation main, a runner of its own); verl main_ppo's rules would be a guess there. None otherwise."""
    if not inputs.entry:
        return None
    from ..integrations.verl._entry import KNOWN_RUNNER_NAMES, entry_point

    if entry_point(inputs.entry).roles_known:
        return None
    return (
        f"unknown for this entry point: -m {inputs.entry} uses none of {', '.join(sorted(KNOWN_RUNNER_NAMES))}, so "
        "which roles it starts is not judged (every context is validated; none is called inactive)"
    )


def roles_answer(config: Any, contexts: ContextSet | None, unknown: str | None = None) -> dict[str, Any]:
    """Every registered role: whether this run starts it (and verl's reason when not; ``active: null`` and the reason
    when that is unknown for the entry point), and its schema when valid."""
    from .._driver.roles import inactive_roles
    from .._model.registry import default_registry

    summary = render.roles_summary(contexts) if contexts is not None else {}
    if unknown is not None:
        return {role: {"active": None, "reason": unknown, **summary.get(role, {})} for role in default_registry.roles()}
    inactive = inactive_roles(config, default_registry.roles())
    return {
        role: {"active": role not in inactive, "reason": inactive.get(role), **summary.get(role, {})}
        for role in default_registry.roles()
    }


def print_invalid(error: Invalid) -> None:
    click.echo(render.bad(str(error)), err=True)
    for note in error.warnings:
        click.echo(render.warn(note.text), err=True)
