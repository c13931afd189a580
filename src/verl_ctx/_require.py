"""Optional dependencies: whether a module can be imported, and an ImportError that names the pip extra."""

from __future__ import annotations

import importlib.util

__all__ = ["importable", "require"]


def importable(module: str) -> bool:
    """Whether ``module`` can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(*modules: str, extra: str, what: str = "verl_ctx.integrations") -> None:
    """Raise ``ImportError`` naming ``pip install 'verl-ctx[extra]'`` if any of ``modules`` is missing."""
    missing = [m for m in modules if not importable(m)]
    if missing:
        raise ImportError(
            f"{what} needs {', '.join(missing)}, which is not installed. "
            f"Install it with: pip install 'verl-ctx[{extra}]'"
        )
