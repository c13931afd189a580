"""Missing optional dependencies, named with the command that installs them."""

from __future__ import annotations

import importlib.util

__all__ = ["require"]


def require(*modules: str, extra: str) -> None:
    """Raise ``ImportError`` naming ``pip install 'verl-ctx[extra]'`` if any of ``modules`` is missing."""
    missing = [m for m in modules if _missing(m)]
    if missing:
        raise ImportError(
            f"verl_ctx.integrations needs {', '.join(missing)}, which is not installed. "
            f"Install it with: pip install 'verl-ctx[{extra}]'"
        )


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True
