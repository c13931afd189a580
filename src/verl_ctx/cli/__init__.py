"""The ``verl-ctx`` command (``verl_ctx.cli:main``). Its dependencies come with ``pip install 'verl-ctx[cli]'``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

try:
    from ._main import main
except ModuleNotFoundError as _missing:  # httpx's pattern: the console script explains itself without its extra
    if _missing.name not in ("click", "hydra", "omegaconf", "yaml"):
        raise
    _name = _missing.name

    def main(argv: Sequence[str] | None = None) -> None:
        """Say which extra to install instead of failing with a traceback."""
        print(
            f"The verl-ctx command needs '{_name}', which is not installed. "
            "Install the command's dependencies with: pip install 'verl-ctx[cli]'",
            file=sys.stderr,
        )
        sys.exit(2)


__all__ = ["main"]
