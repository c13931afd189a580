"""The command's frame: the click group every command registers on, its exit codes, the options several commands
share (``--format``, a path), and how an error becomes a message and an exit code, as text or as the command's JSON
answer (click's own usage errors included, the values they would echo withheld)."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

from .._secrets.redact import redact
from ..errors import ConfigError, ContextError, ContextValidationError
from . import _render as render

_F = TypeVar("_F", bound=Callable[..., Any])

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EXIT_CODES = """\b
Exit codes:
  0    valid (validate, schema check), launched (run), same (diff)
  1    invalid contexts, a breaking schema change, verl refused the launch, contexts differ
  2    usage error: a config, override, file or module that cannot be read
  130  interrupted"""

VERL_ARGS_HELP = (
    "VERL_ARGS are exactly what you would give `python -m verl.trainer.main_ppo` (or, with -m MODULE, "
    "`python -m MODULE`, a recipe's own entry point): Hydra overrides (+extra_context.critic.value_clip=0.3, "
    "algorithm.adv_estimator=grpo) and --config-path/-cp, --config-name/-cn, --config-dir/-cd. A relative "
    "--config-path is resolved against the entry module's folder, as Hydra resolves it."
)


def complete_module(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
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


def format_option(fn: _F, *, help: str = "Output for people or for CI.") -> _F:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["human", "json"]),
        default="human",
        show_default=True,
        help=help,
    )(fn)


def exits(fn: _F) -> _F:
    """Turn our errors into messages and exit codes instead of tracebacks; with ``--format json``, into one JSON
    object on stdout (``errors``, ``warnings``, ``roles``, as the command's other JSON answers have them)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = kwargs.get("fmt") == "json"
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:
            if as_json:
                emit_failure([message_error(f"usage error: {e}")])
            else:
                click.echo(render.bad(f"usage error: {e}"), err=True)
            sys.exit(EXIT_USAGE)
        except ContextError as e:
            notes: list[render.Warned] = list(getattr(e, "warnings", ()))  # Invalid: raised with the errors
            if as_json:
                if isinstance(e, ContextValidationError):
                    answer = getattr(e, "roles_answer", None)  # Invalid: the roles of the config it was raised for
                    emit_failure([render.error_dict(x) for x in e.errors], notes, answer() if answer else {})
                else:
                    emit_failure([message_error(str(e))], notes)
            else:
                click.echo(render.bad(str(e)), err=True)
                for note in notes:
                    click.echo(render.warn(note.text), err=True)
            sys.exit(EXIT_INVALID)
        except KeyboardInterrupt:
            if as_json:
                emit_failure([message_error("interrupted")])
            else:
                click.echo(render.bad("interrupted"), err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


#: The key each command's JSON answer gives its verdict under; a failure sets it false.
VERDICT = {"validate": "valid", "diff": "same", "check": "ok"}


def message_error(message: str, hint: str | None = None) -> dict[str, Any]:
    """An error that is no one field's, in the shape of ``render.error_dict``."""
    return {"role": None, "path": None, "message": message, "input": None, "hint": hint}


def failure(errors: list[dict[str, Any]], warnings: Sequence[render.Warned] = (), roles: Any = None) -> dict[str, Any]:
    """The JSON answer of a command that failed: its errors, and the warnings and roles known so far."""
    return {"errors": errors, "warnings": [w.as_dict() for w in warnings], "roles": roles or {}}


def emit_failure(errors: list[dict[str, Any]], warnings: Sequence[render.Warned] = (), roles: Any = None) -> None:
    ctx = click.get_current_context(silent=True)
    emit_failure_of(ctx.command.name if ctx is not None else None, failure(errors, warnings, roles))


def emit_failure_of(command: str | None, body: dict[str, Any]) -> None:
    """Print a failure answer, its verdict false (``valid``, ``same``, ``ok``: the key the command's answer gives it
    under); ``run``'s as one line (its JSON report is the last line of stdout), others indented."""
    if command in VERDICT:
        body[VERDICT[command]] = False
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
        emit_failure_of(command, failure([message_error(f"usage error: {self.message}", hint)]))


def _answering_in_json(error: click.UsageError, args: Sequence[str] | None) -> click.UsageError:
    """``error`` as a JSON answer when the command line asks for JSON of a command that gives it (or of none)."""
    if isinstance(error, _JsonUsageError) or args is None or not _asks_for_json(args):
        return error
    command = error.ctx.command if error.ctx is not None else None
    if isinstance(command, click.Command) and not isinstance(command, click.Group) and "fmt" not in _names(command):
        return error  # a command without --format: click's own text
    return _JsonUsageError(error)


COMMAND = {"context_settings": {"ignore_unknown_options": True}, "epilog": EXIT_CODES}


def _withholding(parse_args: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """click's usage errors echo arguments (``Got unexpected extra argument (key=value)``); withhold the values."""

    @functools.wraps(parse_args)
    def wrapper(self: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
        from .._secrets.withhold import without_assigned_values

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


class PathType(click.Path):
    """click's Path, with a path the OS refuses (a NUL byte) a usage error instead of a ValueError."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except ValueError as e:
            self.fail(f"not a usable path ({e})", param, ctx)  # the value may be an override: not echoed


def path_option(flag: str, dest: str, metavar: str, help: str, *, directory: bool = False) -> Callable[[_F], _F]:
    """An optional option naming a file (or, with ``directory``, a folder); a path the OS refuses is exit 2."""
    kind = PathType(file_okay=not directory, dir_okay=directory)
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


def write_text(path: str, text: str, *, option: str, what: str = "") -> None:
    """``text`` into ``path``, its folder made; a path that cannot be written is a usage error naming ``option``."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(redact(text))
    except OSError as e:  # a read-only place, a file where a folder is needed, ...
        raise ConfigError(f"cannot write {what}{path!r}: {e.strerror or e}; choose a writable {option} path") from None
