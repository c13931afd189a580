"""Importing the user's modules (schemas, recipe code) by name, each failure a ``ConfigError`` that says why."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from .errors import ConfigError

__all__ = ["from_working_directory", "import_modules"]


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
