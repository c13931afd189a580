"""The ``verl-ctx`` command.

``validate``, ``describe``, ``config`` and ``schema`` never import torch or Ray: they answer in well under a
second, before a GPU job is queued. ``run`` validates first and launches nothing on any error.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import click
from click.shell_completion import CompletionItem

from .._contextset import ContextSet
from .._redact import RedactingStream, learn, redact
from ..errors import ConfigError, ContextError, ContextValidationError, FieldError, LaunchError
from . import _render as render

if TYPE_CHECKING:
    from .._modules import ImportCheck

__all__ = ["main"]

_F = TypeVar("_F", bound=Callable[..., Any])

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EXIT_CODES = """\b
Exit codes:
  0    valid (validate, schema check), launched (run), same (diff)
  1    invalid contexts, a breaking schema change, verl refused the launch, contexts differ
  2    usage error: a config, override, file or module that cannot be read
  130  interrupted"""

_VERL_ARGS_HELP = (
    "VERL_ARGS are exactly what you would give `python -m verl.trainer.main_ppo` (or, with -m MODULE, "
    "`python -m MODULE`, a recipe's own entry point): Hydra overrides (+extra_context.critic.value_clip=0.3, "
    "algorithm.adv_estimator=grpo) and --config-path/-cp, --config-name/-cn, --config-dir/-cd. A relative "
    "--config-path is resolved against the entry module's folder, as Hydra resolves it."
)


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


def _complete_module(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of a module name (``-s``, ``-m``, ``--import``): the packages and modules under the working
    directory, where verl-ctx imports them from, one dotted level at a time."""
    import pkgutil

    parent, _, stem = incomplete.rpartition(".")
    folder = os.path.join(os.getcwd(), *parent.split(".")) if parent else os.getcwd()
    prefix = f"{parent}." if parent else ""
    found = []
    for module in pkgutil.iter_modules([folder]):
        if module.name.startswith(stem) and (not module.name.startswith("_") or stem.startswith("_")):
            found.append(CompletionItem(prefix + module.name + ("." if module.ispkg else ""), type="plain"))
    return found


def _config_inputs(fn: Callable[..., Any]) -> Callable[..., Any]:
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
            shell_complete=_complete_module,
            help="Module defining RoleContext schemas (repeatable).",
        ),
        _path_option(
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
            shell_complete=_complete_module,
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


def _format_option(fn: _F, *, help: str = "Output for people or for CI.") -> _F:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["human", "json"]),
        default="human",
        show_default=True,
        help=help,
    )(fn)


def _exits(fn: _F) -> _F:
    """Turn our errors into messages and exit codes instead of tracebacks; with ``--format json``, into one JSON
    object on stdout (``errors``, ``warnings``, ``roles``, as the command's other JSON answers have them)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = kwargs.get("fmt") == "json"
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            if as_json:
                _emit_failure([_message_error(f"usage error: {e}")])
            else:
                click.echo(render.bad(f"usage error: {e}"), err=True)
            sys.exit(EXIT_USAGE)
        except ContextError as e:
            notes: list[render.Warned] = list(getattr(e, "warnings", ()))  # _Invalid: raised with the errors
            if as_json:
                if isinstance(e, ContextValidationError):
                    config = getattr(e, "config", None)
                    roles = _roles(config, None, getattr(e, "roles_unknown", None)) if config is not None else {}
                    _emit_failure([render.error_dict(x) for x in e.errors], notes, roles)
                else:
                    _emit_failure([_message_error(str(e))], notes)
            else:
                click.echo(render.bad(str(e)), err=True)
                for note in notes:
                    click.echo(render.warn(note.text), err=True)
            sys.exit(EXIT_INVALID)
        except KeyboardInterrupt:
            if as_json:
                _emit_failure([_message_error("interrupted")])
            else:
                click.echo(render.bad("interrupted"), err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


#: The key each command's JSON answer gives its verdict under; a failure sets it false.
_VERDICT = {"validate": "valid", "diff": "same", "check": "ok"}


def _message_error(message: str, hint: str | None = None) -> dict[str, Any]:
    """An error that is no one field's, in the shape of ``render.error_dict``."""
    return {"role": None, "path": None, "message": message, "input": None, "hint": hint}


def _failure(errors: list[dict[str, Any]], warnings: Sequence[render.Warned] = (), roles: Any = None) -> dict[str, Any]:
    """The JSON answer of a command that failed: its errors, and the warnings and roles known so far."""
    return {"errors": errors, "warnings": [w.as_dict() for w in warnings], "roles": roles or {}}


def _emit_failure(errors: list[dict[str, Any]], warnings: Sequence[render.Warned] = (), roles: Any = None) -> None:
    ctx = click.get_current_context(silent=True)
    _emit_failure_of(ctx.command.name if ctx is not None else None, _failure(errors, warnings, roles))


def _emit_failure_of(command: str | None, body: dict[str, Any]) -> None:
    """Print a failure answer, its verdict false (``valid``, ``same``, ``ok``: the key the command's answer gives it
    under); ``run``'s as one line (its JSON report is the last line of stdout), others indented."""
    if command in _VERDICT:
        body[_VERDICT[command]] = False
    if command == "run":
        click.echo(json.dumps(body, sort_keys=True, default=str))
    else:
        render.emit_json(body)


def _asks_for_json(args: Sequence[str]) -> bool:
    """Whether the command line gives ``--format json`` (read from the words, since parsing them may have failed)."""
    for i, word in enumerate(args):
        if word == "--":
            return False
        if word == "--format=json" or (word == "--format" and args[i + 1 : i + 2] == ["json"]):
            return True
    return False


def _names(command: click.Command) -> set[str | None]:
    return {p.name for p in command.params}


class _JsonUsageError(click.UsageError):
    """click's usage error (exit 2), shown as the command's JSON answer: asked for with ``--format json``."""

    def __init__(self, error: click.UsageError) -> None:
        super().__init__(error.format_message(), error.ctx)

    def show(self, file: Any = None) -> None:
        hint = None
        if self.ctx is not None:
            hint = f"Try '{self.ctx.command_path} {max(self.ctx.help_option_names, key=len)}' for help."
        command = self.ctx.command.name if self.ctx is not None else None
        _emit_failure_of(command, _failure([_message_error(f"usage error: {self.message}", hint)]))


def _answering_in_json(error: click.UsageError, args: Sequence[str] | None) -> click.UsageError:
    """``error`` as a JSON answer when the command line asks for JSON of a command that gives it (or of none)."""
    if isinstance(error, _JsonUsageError) or args is None or not _asks_for_json(args):
        return error
    command = error.ctx.command if error.ctx is not None else None
    if isinstance(command, click.Command) and not isinstance(command, click.Group) and "fmt" not in _names(command):
        return error  # a command without --format: click's own text
    return _JsonUsageError(error)


_COMMAND = {"context_settings": {"ignore_unknown_options": True}, "epilog": EXIT_CODES}
REPORT_ENV = "VERL_CTX_RUN_REPORT"  # `run --report`'s variable: a wrapper (make demo) passes it through untouched


def _withholding(parse_args: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """click's usage errors echo arguments (``Got unexpected extra argument (key=value)``); withhold the values."""

    @functools.wraps(parse_args)
    def wrapper(self: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
        from .._field_errors import without_assigned_values

        given = list(args)  # click's parser consumes the list it is given
        try:
            return parse_args(self, ctx, args)
        except click.UsageError as e:
            withheld = without_assigned_values(e.message, given)
            if withheld == e.message and e.ctx is not None:
                raise
            # click's parser raises some (an option without its value) without the command: its usage is told too
            raise click.UsageError(withheld, e.ctx or ctx) from None

    return wrapper


class _Path(click.Path):
    """click's Path, with a path the OS refuses (a NUL byte) a usage error instead of a ValueError."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except ValueError as e:
            self.fail(f"not a usable path ({e})", param, ctx)  # the value may be an override: not echoed


def _path_option(flag: str, dest: str, metavar: str, help: str, *, directory: bool = False) -> Callable[[_F], _F]:
    """An optional option naming a file (or, with ``directory``, a folder); a path the OS refuses is exit 2."""
    kind = _Path(file_okay=not directory, dir_okay=directory)
    return click.option(flag, dest, type=kind, default=None, metavar=metavar, help=help)


class _Command(click.Command):
    parse_args = _withholding(click.Command.parse_args)


_ARGS = "verl_ctx.args"  # the command line's words, in ``ctx.meta`` (shared by every nested context)


class _Group(click.Group):
    parse_args = _withholding(click.Group.parse_args)
    command_class = _Command
    group_class = type  # subgroups (`schema`) are _Groups too

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        given = list(args) if parent is None else parent.meta.get(_ARGS)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            raise _answering_in_json(e, given) from None
        if parent is None:
            ctx.meta[_ARGS] = given
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a usage error of it (unknown option, missing argument, bad value) answers in JSON when
        ``--format json`` was given."""
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise _answering_in_json(e, ctx.meta.get(_ARGS)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(package_name="verl-ctx")
def cli() -> None:
    """Typed, validated, versioned context for verl's workers."""


@dataclass
class _Checked:
    """A composed config, its validated contexts, and the warnings validation raised."""

    config: Any
    contexts: ContextSet
    warnings: list[render.Warned]
    #: Why no role is judged active or inactive (an entry point whose runner verl-ctx cannot read), else None.
    roles_unknown: str | None = None


class _Invalid(ContextValidationError):
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


def _valid_or_exit(inputs: ConfigInputs, fmt: str, *, then: str | None = None) -> _Checked:
    """``_validated``, or exit 1 with every error printed (and ``then``); in JSON ``_exits`` answers instead."""
    try:
        return _validated(inputs)
    except _Invalid as e:
        if fmt == "json":
            raise  # _exits answers in JSON
        _print_invalid(e)
        if then:
            click.echo(then, err=True)
        sys.exit(EXIT_INVALID)


def _composed(inputs: ConfigInputs) -> Any:
    from .._modules import import_modules

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

    from .._registry import default_registry

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


def _validated(inputs: ConfigInputs) -> _Checked:
    """Import the schema modules, compose the config as verl would, validate every role.

    Raises ``_Invalid`` with every error (the contexts' own and settings this run would not use) and the warnings.
    """
    from .._validate import validate

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
            raise _Invalid(error, warned, config, unknown) from None
    found, warned = _warned(caught, inputs)
    if unused or found.errors:
        raise _Invalid(ContextValidationError([*unused, *found.errors]), warned, config, unknown)
    learn(contexts)  # from here on, whatever this command writes masks their secrets (verl_ctx._redact)
    return _Checked(config, contexts, warned, unknown)


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


def _roles(config: Any, contexts: ContextSet | None, unknown: str | None = None) -> dict[str, Any]:
    """Every registered role: whether this run starts it (and verl's reason when not; ``active: null`` and the reason
    when that is unknown for the entry point), and its schema when valid."""
    from .._registry import default_registry
    from .._roles import inactive_roles

    summary = render.roles_summary(contexts) if contexts is not None else {}
    if unknown is not None:
        return {role: {"active": None, "reason": unknown, **summary.get(role, {})} for role in default_registry.roles()}
    inactive = inactive_roles(config, default_registry.roles())
    return {
        role: {"active": role not in inactive, "reason": inactive.get(role), **summary.get(role, {})}
        for role in default_registry.roles()
    }


def _print_invalid(error: _Invalid) -> None:
    click.echo(render.bad(str(error)), err=True)
    for note in error.warnings:
        click.echo(render.warn(note.text), err=True)


@cli.command(
    **_COMMAND,
    help="Check every role's context in the composed config; list every error at once.\n\n" + _VERL_ARGS_HELP,
)
@_config_inputs
@_format_option
@_exits
def validate(inputs: ConfigInputs, fmt: str) -> None:
    checked = _valid_or_exit(inputs, fmt)
    summary = render.roles_summary(checked.contexts)
    # validate stays fast and imports none of the recipe's code: -m is read for its @hydra.main, never run. Said, so
    # that a valid answer is not taken for "the recipe imports" (run --check imports it, in a process of its own).
    entry = {"module": inputs.entry, "imported": False} if inputs.entry else None
    if fmt == "json":
        roles = _roles(checked.config, checked.contexts, checked.roles_unknown)
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


@cli.command(
    **_COMMAND, help="Show every value of every role and where it came from (secrets redacted).\n\n" + _VERL_ARGS_HELP
)
@_config_inputs
@_format_option
@_exits
def describe(inputs: ConfigInputs, fmt: str) -> None:
    checked = _validated(inputs)
    rows = checked.contexts.describe()
    if fmt == "json":
        render.emit_json([{"role": p.role, "path": p.path, "value": p.value, "source": p.source} for p in rows])
        return
    for note in checked.warnings:
        click.echo(render.warn(note.text), err=True)
    click.echo(render.table(["role", "field", "value", "source"], render.provenance_rows(rows)))


@cli.command(
    "config",
    **_COMMAND,
    help="Print the config verl will get, composed and validated, with secrets redacted (like verl's --cfg job).\n\n"
    + _VERL_ARGS_HELP,
)
@_config_inputs
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
@_exits
def show_config(inputs: ConfigInputs, resolve: bool, package: str | None) -> None:
    from omegaconf import OmegaConf

    from .._validate import SECTION

    checked = _validated(inputs)
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

    from .._field_errors import suggest

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


@cli.group()
def schema() -> None:
    """Export role schemas as JSON Schema, and check today's code against an export."""


@schema.command("export")
@click.option("-s", "--schemas", "modules", multiple=True, metavar="MODULE", help="Module defining schemas.")
@click.option("-o", "--out", "out_dir", required=True, type=_Path(file_okay=False), help="Directory to write.")
@_exits
def schema_export(modules: tuple[str, ...], out_dir: str) -> None:
    """Write one JSON Schema per role schema, a config-file schema and a lock file."""
    from .._export import export_schemas
    from .._modules import import_modules
    from .._registry import default_registry

    import_modules(modules)
    for path in export_schemas(default_registry, Path(out_dir)):
        click.echo(f"wrote {path}")


@schema.command("check", epilog=EXIT_CODES)
@click.option("-s", "--schemas", "modules", multiple=True, metavar="MODULE", help="Module defining schemas.")
@click.argument("export_dir", type=_Path(file_okay=False))
@_format_option
@_exits
def schema_check(modules: tuple[str, ...], export_dir: str, fmt: str) -> None:
    """Compare today's schemas with an export; a breaking change without a version bump and migration fails."""
    from .._export import check_export
    from .._modules import import_modules
    from .._registry import default_registry

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
@click.option("-o", "--out", "out_file", required=True, type=_Path(dir_okay=False), help="File to write.")
@_exits
def schema_envelope(out_file: str) -> None:
    """Write the JSON Schema of the envelope format."""
    from .._envelope import envelope_json_schema
    from .._export import render_json

    _write_text(out_file, render_json(envelope_json_schema()), option="-o")
    click.echo(f"wrote {out_file}")


def _write_text(path: str, text: str, *, option: str, what: str = "") -> None:
    """``text`` into ``path``, its folder made; a path that cannot be written is a usage error naming ``option``."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(redact(text))
    except OSError as e:  # a read-only place, a file where a folder is needed, ...
        raise ConfigError(f"cannot write {what}{path!r}: {e.strerror or e}; choose a writable {option} path") from None


def _workers(specs: tuple[str, ...]) -> dict[str, str]:
    """``--worker`` values by slot, each judged first without importing verl, torch or the recipe (see below)."""
    out = {}
    for spec in specs:
        slot, sep, target = spec.partition("=")
        if not sep or not slot or ":" not in target:
            raise ConfigError(
                f"--worker {spec}: expected SLOT=MODULE:CLASS, e.g. critic=my_recipe.workers:CriticWorker"
            )
        _findable(slot, target)
        out[slot] = target
    return out


def _findable(given: str, target: str) -> None:
    """A slot verl has, a module that exists and a class its source defines, judged in milliseconds.

    The full check (``resolve_worker_classes``: the class derives from what the slot runs) imports the recipe's module
    and verl's workers, torch included (10-30 s on a small machine); a misspelt slot, module or class is told first.
    """
    import ast
    import difflib
    import importlib.util

    from .._modules import from_working_directory
    from ..integrations.verl._binding import HOSTED_ROLES, slot_name

    slot = slot_name(given)
    if slot not in HOSTED_ROLES:
        close = difflib.get_close_matches(slot, HOSTED_ROLES, n=1)
        raise ConfigError(
            f"--worker {slot}=...: unknown slot; use one of {', '.join(sorted(HOSTED_ROLES))} (verl's roles)"
            + (f"; did you mean {close[0]!r}?" if close else "")
        )
    module_name, _, attr = target.partition(":")
    from_working_directory()
    try:
        spec = importlib.util.find_spec(module_name) if module_name else None
    except (ImportError, ValueError) as e:  # a parent package that is missing, or an empty name part
        raise ConfigError(f"--worker {slot}={target}: cannot import {module_name}: {e}") from None
    if spec is None:
        raise ConfigError(f"--worker {slot}={target}: cannot import {module_name}: No module named {module_name!r}")
    if not (attr and spec.origin and spec.origin.endswith(".py")):
        return  # an extension module, a namespace package: the full check imports it
    try:
        tree = ast.parse(Path(spec.origin).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return  # the import in the full check reports it as Python does
    names: set[str] = set()  # every name the file binds anywhere: more than its top level, never less
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return  # names from elsewhere: not known without importing
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    head = attr.split(".")[0]
    if head not in names and "__getattr__" not in names:
        close = difflib.get_close_matches(head, sorted(names), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"--worker {slot}={target}: {module_name} has no {attr}{hint}")


@cli.command(
    **_COMMAND,
    help="Validate, then run verl's PPO trainer (v1 or legacy, per trainer.use_v1) with every context bound; with "
    "-m MODULE, the recipe's own entry point, its TaskRunner bound (legacy or v1, by the class it derives from).\n\n"
    "Any invalid context, or a config verl's own checks refuse, stops it before Ray starts; so does a context or "
    "a --worker that no slot the runner registers would use. With --rehearse it runs on this machine's CPUs up to "
    "the model engine and shows what every worker decoded.\n\n" + _VERL_ARGS_HELP,
)
@_config_inputs
@click.option(
    "--worker",
    "worker_specs",
    multiple=True,
    metavar="SLOT=MODULE:CLASS",
    help="The recipe's worker class for a verl role (critic, actor_rollout_ref, actor, ref, ...; verl's Role names "
    "too); a TrainingWorker subclass for actor/ref becomes the hybrid worker's actor_worker_cls/ref_worker_cls; a "
    "hybrid worker serves actor_rollout_ref and actor_rollout alike. Repeatable.",
)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    shell_complete=_complete_module,
    help="Import MODULE inside the TaskRunner before verl builds its trainer (e.g. one that calls "
    "@register_trainer). Repeatable.",
)
@click.option("--rehearse", is_flag=True, help="Stop every worker at the engine boundary, on CPU, and report.")
@click.option(
    "--verbose",
    is_flag=True,
    help="With --rehearse: stream verl's and Ray's output here (default: into a log file whose name is printed).",
)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="Run every check that needs no Ray: the contexts, the --worker classes, the resume comparison and verl's own "
    "pre-launch checks (validate_config); show the GPUs the run will ask for; start nothing.",
)
@functools.partial(_format_option, help="With --rehearse: the report as one JSON line at the end of stdout.")
@click.option(
    "--report",
    "report_file",
    type=_Path(dir_okay=False),
    envvar=REPORT_ENV,
    show_envvar=True,
    default=None,
    metavar="FILE",
    help="With --rehearse: also write the report (the JSON --format json prints last) to FILE, whatever the format; "
    "for a CI job that keeps the console for people and the report as an artifact.",
)
@click.option(
    "--offload-bytes",
    type=int,
    default=None,
    metavar="N",
    help="Payloads above N bytes go through Ray's object store (default 8 MiB).",
)
@click.option(
    "--accept-context-change",
    is_flag=True,
    help="Resume from a checkpoint whose contexts differ from this launch's (the change is recorded).",
)
@click.option(
    "--traceback", "show_traceback", is_flag=True, help="Show verl's full traceback when it refuses the launch."
)
@_exits
def run(report_file: str | None, **options: Any) -> None:
    """The command; on any exit but a clean one, a rehearsal's ``--report`` says what stopped it (never left empty)."""
    try:
        _run(report_file=report_file, **options)
    except BaseException as e:
        if report_file and not (isinstance(e, SystemExit) and e.code in (0, None)):
            _write_failure_report(report_file, e)
        raise


def _run(
    inputs: ConfigInputs,
    worker_specs: tuple[str, ...],
    imports: tuple[str, ...],
    rehearse: bool,
    verbose: bool,
    check_only: bool,
    fmt: str,
    report_file: str | None,
    offload_bytes: int | None,
    accept_context_change: bool,
    show_traceback: bool,
) -> None:
    if rehearse and check_only:
        raise ConfigError("--check and --rehearse: choose one (--check starts nothing; --rehearse starts Ray on CPU)")
    if report_file and not rehearse:  # a launch has no report: never a file silently left unwritten
        raise ConfigError(
            f"--report (or {REPORT_ENV}) is a rehearsal's report; add --rehearse, or leave the option out and unset "
            "the variable"
        )
    if report_file:  # written now: an unwritable path is told before a minute's rehearsal, and a run that is killed
        # leaves this in place of an older report
        unfinished = {"ok": None, "error": "the rehearsal did not finish"}
        _write_text(report_file, json.dumps(unfinished) + "\n", option="--report", what="the report to ")
    workers = _workers(worker_specs)
    from ..integrations.verl._checkpoint import LAUNCH_ARGS

    # A resume the checkpoint's contexts refuse tells the exact diff and run commands: these arguments.
    run_only = [
        *(a for spec in worker_specs for a in ("--worker", spec)),
        *(a for m in imports for a in ("--import", m)),
    ]
    LAUNCH_ARGS.set((inputs.as_args(), run_only))
    from .._modules import ImportCheck
    from ..integrations.verl._entry import VERL_ENTRY

    # The recipe's own modules import in a fresh process (as its TaskRunner and workers will), or nothing starts;
    # it imports while this one composes, validates and imports verl.
    recipe_modules = [inputs.entry] if inputs.entry and inputs.entry != VERL_ENTRY else []
    with ImportCheck([*recipe_modules, *(target.partition(":")[0] for target in workers.values()), *imports]) as check:
        checked = _valid_or_exit(inputs, fmt, then="nothing was launched")
        for note in checked.warnings:
            click.echo(render.warn(note.text), err=True)

        from ..integrations.verl import _launch
        from ..integrations.verl._binding import resolve_worker_classes
        from ..integrations.verl._store import DEFAULT_OFFLOAD_BYTES

        if workers:  # their modules are imported here next: told as the import check tells them
            check.result()
        resolve_worker_classes(workers)  # fail here, before Ray starts, on a class that cannot be imported or serve
        if accept_context_change:
            from ..integrations.verl._checkpoint import accept_context_change as accept

            accept(checked.config)
        all_imports = (*inputs.modules, *imports)
        threshold = offload_bytes or DEFAULT_OFFLOAD_BYTES
        click.echo(render.launch_plan(checked.contexts, checked.config, workers, all_imports, threshold, inputs.entry))
        options: _RunOptions = {
            "workers": workers,
            "imports": all_imports,
            "offload_threshold": threshold,
            "entry": inputs.entry,
            # Answered after verl's checks imported verl here: the imports overlap.
            "before_start": check.result if check.names else None,
        }
        try:
            if check_only:
                _check_only(checked, check)
                return
            if rehearse:
                _rehearsal(checked, options, verbose=verbose, fmt=fmt, report_file=report_file)
                return
            if inputs.entry:
                click.echo(f"handing over to {inputs.entry}'s own main (its checks, its TaskRunner, bound)")
            else:
                click.echo("running verl's pre-launch checks, then handing over to verl's run_ppo")
            _launch.launch(checked.config, checked.contexts, **options)
        except LaunchError as e:
            if show_traceback and e.__cause__ is not None:
                _print_traceback(e.__cause__)
            raise
        except Exception as e:  # noqa: BLE001 - verl stopped after the hand-over: one line here, the rest in a file
            raise _stopped(e, show_traceback) from None


def _rehearsal(checked: _Checked, options: _RunOptions, *, verbose: bool, fmt: str, report_file: str | None) -> None:
    """``run --rehearse``: the launch on this machine's CPUs, its phases told as they happen, verl's and Ray's output
    in a log file (unless ``verbose``), then the table of what each worker decoded and the report."""
    from ..integrations.verl import _launch

    log = None if verbose else _log_file("rehearsal")
    click.echo(
        "rehearsing on this machine's CPUs: Ray, TaskRunner, trainer, workers (about a minute)..."
        + (f"\n  verl's and Ray's output: {log} (--verbose shows it here)" if log else "")
    )
    try:
        with _output_into(log) as tell:
            records = _launch.rehearse(
                checked.config, checked.contexts, **options, require_decoded=False, progress=tell
            )
    except BaseException:
        if log:
            click.echo(f"verl's and Ray's output up to here: {log}", err=True)
        raise
    click.echo(render.table(["role", "worker class", "pid", "decoded"], render.rehearsal_rows(records)))
    report = json.dumps({"ok": True, "records": records}, default=str)
    if report_file:  # the records of a rehearsal the next check refuses too: they show what was decoded
        _write_report(report_file, report)
    try:
        _launch.check_decoded(records, checked.contexts, checked.config)
        click.echo(render.ok(f"rehearsal complete: {len(records)} worker record(s); nothing was trained"))
    finally:
        if fmt == "json":  # the report is the last line either way
            click.echo(report)


def _write_failure_report(path: str, exc: BaseException) -> None:
    """The report of a run that stopped: ``{"ok": false, "error": {...}, "records": [...]}``, the error as the console
    showed it (every message verl-ctx writes is redacted already), with the records of a rehearsal that a later check
    refused. An unwritable path was refused before this."""
    if isinstance(exc, SystemExit):  # exit 1 after the errors were printed: an invalid context
        error = {"type": "ContextValidationError", "exit_code": exc.code, "message": "the contexts are invalid"}
    else:
        error = {"type": type(exc).__name__, "message": str(exc)}
        for attribute in ("cause", "key"):
            if getattr(exc, attribute, None) is not None:
                error[attribute] = str(getattr(exc, attribute))
    records: list[Any] = []
    with contextlib.suppress(OSError, ValueError, AttributeError):  # the records already written, if any, are kept:
        records = list(json.loads(Path(path).read_text()).get("records") or [])  # they show what was decoded
    with contextlib.suppress(ConfigError):
        _write_text(path, json.dumps({"ok": False, "error": error, "records": records}) + "\n", option="--report")


def _write_report(path: str, report: str) -> None:
    """``report`` into ``path`` (an empty ``report`` empties it); a path that cannot be written is a usage error."""
    _write_text(path, report + "\n" if report else "", option="--report", what="the report to ")
    if report:
        click.echo(f"  the report: {path}")


def _log_file(what: str) -> str:
    import tempfile

    handle, path = tempfile.mkstemp(prefix=f"verl-ctx-{what}-", suffix=".log")
    os.close(handle)
    return path


@contextlib.contextmanager
def _output_into(path: str | None) -> Iterator[Callable[[str], None]]:
    """This process's stdout and stderr (file descriptors 1 and 2) into ``path`` while the block runs; yields a
    function that still writes a line to the terminal (the rehearsal's phases, as they happen).

    verl prints its whole config and its engines' notices, and Ray forwards every worker's lines to the driver
    (``log_to_driver``) through these descriptors: about a thousand lines a rehearsal, with the table that matters
    last. Descriptors, not ``sys.stdout``, so what Ray's and verl's own threads and native code write goes too.
    """

    def to(fd: int) -> Callable[[str], None]:
        def write(line: str) -> None:
            os.write(fd, redact(f"  {line}\n").encode())

        return write

    if path is None:
        yield lambda line: click.echo(f"  {line}")
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "ab", buffering=0) as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield to(saved[0])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _check_only(checked: _Checked, check: ImportCheck) -> None:
    """``run --check``: what ``launch`` checks before Ray starts, and the GPUs it will ask Ray for; nothing started."""
    from ..integrations.verl._checkpoint import check_resume_before_start
    from ..integrations.verl._launch import check_launch
    from ..integrations.verl._preflight import resource_pools

    check_resume_before_start(checked.config, checked.contexts, record=False)
    try:
        check_launch(checked.config)
    finally:
        check.result()  # a module that does not import is the first thing to fix: its refusal wins over verl's
    pools = [p for p in resource_pools(checked.config) if p.total]
    needed = sum(p.total for p in pools)
    click.echo(render.ok("verl's pre-launch checks passed (validate_config)"))
    click.echo(f"  the run asks Ray for {needed} GPU(s): " + "; ".join(str(p) for p in pools))
    click.echo("nothing was started (--check); the launch compares them with the cluster's after ray.init")


class _RunOptions(TypedDict):
    """The launch options ``run`` passes to both ``rehearse`` and ``launch``."""

    workers: dict[str, str]
    imports: tuple[str, ...]
    offload_threshold: int
    entry: str | None
    before_start: Callable[[], None] | None


def _print_traceback(exc: BaseException) -> None:
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__)


def _stopped(exc: BaseException, show_traceback: bool) -> ContextError:
    """What verl raised through Ray, as one line: verl's cause and config key, the full traceback kept in a file."""
    import tempfile
    import traceback

    from ..integrations.verl._launch import innermost, verl_cause

    inner = innermost(exc)
    if isinstance(inner, ContextError):
        return inner  # raised by verl-ctx in a worker (a schema mismatch, a missing context): its own message
    with tempfile.NamedTemporaryFile("w", prefix="verl-ctx-run-", suffix=".log", delete=False) as log:
        log.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    if show_traceback:
        _print_traceback(exc)
    cause, key = verl_cause(inner)
    return LaunchError(
        f"verl stopped the run: {cause}" + (f" (config key: {key})" if key else "") + f". Full traceback: {log.name}",
        cause=cause,
        key=key,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point. Everything the command prints goes through ``redact`` (``verl_ctx._redact``): the
    secrets of the contexts it validated never reach the terminal, whichever path printed them."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="verl-ctx")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams


from . import _diff, _init  # noqa: E402,F401  (register `verl-ctx diff` and `verl-ctx init` on cli)
