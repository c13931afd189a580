"""Importing the user's modules (schemas, recipe code) by name, each failure a ``ConfigError`` that says why."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from .errors import ConfigError

__all__ = ["check_importable", "from_working_directory", "import_modules"]


def from_working_directory() -> None:
    """Let modules be found from the working directory, as ``python -m`` (and every Ray worker of the job) finds them.

    The ``verl-ctx`` console script starts with its own folder on ``sys.path``, not the working directory, so a
    recipe's ``recipe.x.workers`` was found by ``python -m recipe.x.main`` and not by ``verl-ctx``. Every lookup of a
    user's module (``-s``, ``-m``, ``--worker``, ``--import``) calls this first; Ray puts the driver's working
    directory on its workers' path itself (``job_config.py_driver_sys_path``), so a module found here is found there.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def import_modules(modules: Sequence[str], *, what: str = "schema module") -> None:
    """Import each module (from the working directory too, as ``python -m`` would); failures are ``ConfigError``."""
    from_working_directory()
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and not _is_prefix(e.name, name):
                raise ConfigError(
                    f"{what} '{name}' was found, but importing it needs module '{e.name}', which is not installed "
                    "here; install it (or import it lazily inside the code that needs it)"
                ) from None
            raise ConfigError(
                f"cannot import {what} '{name}': no module named '{e.name}'. Pass a dotted module name importable "
                "from the working directory or the installed packages (e.g. -s my_recipe.contexts)"
            ) from None
        except SystemExit as e:
            raise ConfigError(f"{what} '{name}' called sys.exit({e.code!r}) while being imported") from None
        except Exception as e:
            raise ConfigError(f"{what} '{name}' failed while importing: {type(e).__name__}: {e}") from e
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - GeneratorExit, or a BaseException subclass of its own
            raise ConfigError(
                f"{what} '{name}' raised {type(e).__name__} (a BaseException, not an Exception) while being imported"
                f"{': ' + str(e) if str(e) else ''}; fix the module so that importing it defines its schemas only"
            ) from None


def _is_prefix(missing: str, wanted: str) -> bool:
    """Whether the module that is missing is ``wanted`` itself or one of its parent packages."""
    return wanted == missing or wanted.startswith(missing + ".")


# Run by ``check_importable`` in a fresh interpreter: import each module named on the command line, stop at the
# first that fails, and print one JSON line saying which, with the exception and the frame that raised it.
_IMPORT_EACH = """
import importlib, json, sys, traceback
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as e:
        frames = traceback.extract_tb(e.__traceback__)
        user = [f for f in frames if "importlib" not in f.filename] or frames
        where = f"{user[-1].filename}:{user[-1].lineno}" if user else ""
        print(json.dumps({"module": name, "error": f"{type(e).__name__}: {e}".splitlines()[0], "where": where}))
        sys.exit(1)
"""


def check_importable(modules: Sequence[str], *, timeout: float = 300) -> None:
    """Import ``modules`` in a fresh Python process, from the working directory, as the launch's processes will.

    A recipe's entry module and worker modules are otherwise first imported by the launch itself: verl's entry
    point after composing, Ray's TaskRunner after the cluster started, a worker after its GPUs were reserved. A
    module that no longer imports on this verl (a name moved out of ``verl.trainer.main_ppo``, a removed
    ``verl.workers.fsdp_workers``) is told here, in seconds, with the first failing module and its error. A process
    of its own, so that the modules' import-time code (a recipe main's ``ray.init``, its globals) stays out of this one.
    """
    import json
    import subprocess

    names = list(dict.fromkeys(modules))
    if not names:
        return
    try:
        # `python -c` has the working directory first on its path, as `python -m` and the job's Ray workers do.
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT_EACH, *names], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"importing modules {', '.join(names)} took over {timeout:.0f} s in a fresh process; a module that "
            "blocks while it is imported (a network call, a wait) stops the launch there too: move that into a function"
        ) from None
    if done.returncode == 0:
        return
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:  # the interpreter itself died (a crash in an extension module): its last words
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(
            f"importing modules {', '.join(names)} ended the Python process (exit {done.returncode}): {tail}"
        )
    failed = json.loads(lines[-1])
    where = f" (at {failed['where']})" if failed["where"] else ""
    raise ConfigError(
        f"module '{failed['module']}' does not import here: {failed['error']}{where}. The launch would fail there, "
        "after Ray started; fix the import (a name this verl moved or removed?) and check again with `verl-ctx run "
        "--check`"
    )
