"""``verl-ctx run``: validate, then launch verl (or the recipe's own main) with every context bound; ``--check``
runs every check that needs no Ray, ``--rehearse`` the launch on CPU up to the model engine."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import click

from .._secrets.redact import redact
from ..errors import ConfigError, ContextError, LaunchError
from . import _render as render
from ._app import COMMAND, VERL_ARGS_HELP, PathType, cli, complete_module, exits, format_option, write_text
from ._inputs import Checked, ConfigInputs, config_inputs, valid_or_exit

if TYPE_CHECKING:
    from .._driver.modules import ImportCheck


REPORT_ENV = "VERL_CTX_RUN_REPORT"  # `run --report`'s variable: a wrapper (make demo) passes it through untouched


def _workers(specs: tuple[str, ...]) -> dict[str, str]:
    """``--worker`` values by slot, each judged first without importing verl, torch or the recipe (see below)."""
    out = {}
    for spec in specs:
        slot, sep, target = spec.partition("=")
        if not sep or not slot or ":" not in target:
            raise ConfigError(
                f"--worker {spec}: expected SLOT=MODULE:CLASS, e.g. critic=my_recipe.workers:CriticWorker"
            )
        _check_findable(slot, target)
        out[slot] = target
    return out


def _check_findable(given: str, target: str) -> None:
    """A slot verl has, a module that exists and a class its source defines, judged in milliseconds.

    The full check (``resolve_worker_classes``: the class derives from what the slot runs) imports the recipe's module
    and verl's workers, torch included (10-30 s on a small machine); a misspelt slot, module or class is told first.
    """
    import ast
    import difflib
    import importlib.util

    from .._driver.modules import from_working_directory
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
    **COMMAND,
    help="Validate, then run verl's PPO trainer (v1 or legacy, per trainer.use_v1) with every context bound; with "
    "-m MODULE, the recipe's own entry point, its TaskRunner bound (legacy or v1, by the class it derives from).\n\n"
    "Any invalid context, or a config verl's own checks refuse, stops it before Ray starts; so does a context or "
    "a --worker that no slot the runner registers would use. With --rehearse it runs on this machine's CPUs up to "
    "the model engine and shows what every worker decoded.\n\n" + VERL_ARGS_HELP,
)
@config_inputs
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
    shell_complete=complete_module,
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
@functools.partial(format_option, help="With --rehearse: the report as one JSON line at the end of stdout.")
@click.option(
    "--report",
    "report_file",
    type=PathType(dir_okay=False),
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
@exits
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
        write_text(report_file, json.dumps(unfinished) + "\n", option="--report", what="the report to ")
    workers = _workers(worker_specs)
    from ..integrations.verl._checkpoint import LAUNCH_ARGS

    # A resume the checkpoint's contexts refuse tells the exact diff and run commands: these arguments.
    run_only = [
        *(a for spec in worker_specs for a in ("--worker", spec)),
        *(a for m in imports for a in ("--import", m)),
    ]
    LAUNCH_ARGS.set((inputs.as_args(), run_only))
    from .._driver.modules import ImportCheck
    from ..integrations.verl._entry import VERL_ENTRY

    # The recipe's own modules import in a fresh process (as its TaskRunner and workers will), or nothing starts;
    # it imports while this one composes, validates and imports verl.
    recipe_modules = [inputs.entry] if inputs.entry and inputs.entry != VERL_ENTRY else []
    with ImportCheck([*recipe_modules, *(target.partition(":")[0] for target in workers.values()), *imports]) as check:
        checked = valid_or_exit(inputs, fmt, then="nothing was launched")
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


def _rehearsal(checked: Checked, options: _RunOptions, *, verbose: bool, fmt: str, report_file: str | None) -> None:
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
        write_text(path, json.dumps({"ok": False, "error": error, "records": records}) + "\n", option="--report")


def _write_report(path: str, report: str) -> None:
    """``report`` into ``path`` (an empty ``report`` empties it); a path that cannot be written is a usage error."""
    write_text(path, report + "\n" if report else "", option="--report", what="the report to ")
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


def _check_only(checked: Checked, check: ImportCheck) -> None:
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
