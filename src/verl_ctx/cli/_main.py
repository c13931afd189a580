"""The ``verl-ctx`` command: the group (``_app``) with every command registered, one module a command.

``validate``, ``describe``, ``config`` and ``schema`` never import torch or Ray: they answer in well under a
second, before a GPU job is queued. ``run`` validates first and launches nothing on any error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .._secrets.redact import RedactingStream

# Each command module registers its command on ``cli`` when imported.
from . import _config, _describe, _diff, _init, _run, _schema, _validate  # noqa: F401
from ._app import cli

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point. Everything the command prints goes through ``redact``
    (``verl_ctx._secrets.redact``): the secrets of the contexts it validated never reach the terminal, whichever path
    printed them."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="verl-ctx")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams
