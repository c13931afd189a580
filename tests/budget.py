"""How much the expensive campaigns (fuzz, evolution oracle, verl's launch scripts) run.

``make test`` runs each with a quick budget; ``make campaigns`` (``VERL_CTX_CAMPAIGN=full``, also run by CI) runs
them with the full one. Both budgets use a fixed seed and a fresh one, so the quick run still meets new inputs.
"""

from __future__ import annotations

import os

FULL = os.environ.get("VERL_CTX_CAMPAIGN", "quick") == "full"


def budget(quick: int, full: int) -> int:
    """``full`` under ``VERL_CTX_CAMPAIGN=full``, else ``quick``."""
    return full if FULL else quick
