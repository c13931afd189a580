"""verl's own answer: the config verl's entry point composes from a command line.

Two ways, both without importing verl itself:

* ``verl_cfg_job(args)`` runs verl's unmodified entry point, ``python -m verl.trainer.main_ppo --cfg job ARGS``
  (Hydra composes the job config, prints it and exits before verl's ``main`` runs): the ground truth, ~10 s a
  call, since it imports torch and Ray;
* ``verl_hydra_main(args)`` applies Hydra's ``hydra.main`` with verl's own arguments (``config_path="config"``,
  ``config_name="ppo_trainer"``, ``version_base=None``) to a function Hydra takes for verl's ``main`` run as
  ``python -m`` (module ``__main__``, code in ``verl/trainer/main_ppo.py``), in this process: what verl's ``main``
  would receive, in ~0.4 s. Nothing in Hydra or verl is patched; tests cross-check it against ``verl_cfg_job``.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import os
import subprocess
import sys
from typing import Any

from verl_ctx.integrations.verl._entry import entry_point

MAIN_PPO = entry_point().file


def verl_cfg_job(args: list[str], cwd: str) -> tuple[int, str]:
    """(exit code, job config YAML) from verl's own entry point."""
    out = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", "--cfg", "job", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    return out.returncode, out.stdout


def verl_hydra_main(
    args: list[str],
    cwd: str,
    *,
    main_file: str = MAIN_PPO,
    config_path: str | None = "config",
    config_name: str | None = "ppo_trainer",
) -> Any:
    """The DictConfig verl's main would receive for ``args`` run from ``cwd``; ``None`` where verl refuses them.

    ``main_file``, ``config_path`` and ``config_name`` make it another entry point's (a recipe's ``main_*.py``
    with its ``@hydra.main`` arguments)."""
    import hydra
    from hydra.core.global_hydra import GlobalHydra

    captured: dict[str, Any] = {}

    def task(config: Any) -> None:
        captured["config"] = copy.deepcopy(config)

    task.__code__ = task.__code__.replace(co_filename=main_file)
    task.__module__ = "__main__"
    task.__name__ = "main"
    main = hydra.main(config_path=config_path, config_name=config_name, version_base=None)(task)
    GlobalHydra.instance().clear()
    argv, here = sys.argv, os.getcwd()
    sys.argv = [main_file, *args, "hydra.run.dir=.", "hydra.output_subdir=null", "hydra/job_logging=disabled"]
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            main()
    except SystemExit:
        return None
    except Exception:  # noqa: BLE001 - escapes hydra.main as a traceback: verl refuses the arguments
        return None
    finally:
        sys.argv = argv
        os.chdir(here)
        GlobalHydra.instance().clear()
        for handler in list(logging.getLogger().handlers):
            logging.getLogger().removeHandler(handler)
    return captured.get("config")
