"""Importing the user's modules (schemas, recipe code) by name, each failure a ``ConfigError`` that says why."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from ..errors import ConfigError

__all__ = ["ImportCheck", "from_working_directory", "import_modules"]


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


class ImportCheck:
    """Import modules in a fresh Python process, from the working directory, as the launch's processes will.

    A recipe's entry module and worker modules are otherwise first imported by the launch itself: verl's entry
    point after composing, Ray's TaskRunner after the cluster started, a worker after its GPUs were reserved. A
    module that no longer imports on this verl (a name moved out of ``verl.trainer.main_ppo``, a removed
    ``verl.workers.fsdp_workers``) is told here, in seconds, with the first failing module and its error. A process
    of its own, so that the modules' import-time code (a recipe main's ``ray.init``, its globals) stays out of this one.

    Started when made, answered by ``result()``: the process imports while the launch composes and validates (an
    entry module alone imports verl, torch and Ray: seconds not to be waited for twice). Leaving the ``with`` block
    without asking for the answer (an invalid config) ends the process.
    """

    def __init__(self, modules: Sequence[str], *, timeout: float = 300) -> None:
        import subprocess

        self.names = list(dict.fromkeys(modules))
        self.timeout = timeout
        # `python -c` has the working directory first on its path, as `python -m` and the job's Ray workers do.
        self._process = (
            subprocess.Popen(
                [sys.executable, "-c", _IMPORT_EACH, *self.names],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            if self.names
            else None
        )

    def __enter__(self) -> ImportCheck:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()

    def result(self) -> None:
        """Wait for the imports; raise ``ConfigError`` naming the first module that does not import."""
        import json
        import subprocess

        if self._process is None:
            return
        names = ", ".join(self.names)
        try:
            stdout, stderr = self._process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.communicate()
            raise ConfigError(
                f"importing modules {names} took over {self.timeout:.0f} s in a fresh process; a module that blocks "
                "while it is imported (a network call, a wait) stops the launch there too: move that into a function"
            ) from None
        if self._process.returncode == 0:
            return
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if not lines:  # the interpreter itself died (a crash in an extension module): its last words
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(
                f"importing modules {names} ended the Python process (exit {self._process.returncode}): {tail}"
            )
        failed = json.loads(lines[-1])
        where = f" (at {failed['where']})" if failed["where"] else ""
        raise ConfigError(
            f"module '{failed['module']}' does not import here: {failed['error']}{where}. The launch would fail there, "
            "after Ray started; fix the import (a name this verl moved or removed?) and check again with `verl-ctx run "
            "--check`"
        )
