"""verl-ctx: typed, validated, versioned context for verl's workers.

Declare one pydantic model per role, validate it before launch, carry it to every worker as a small
pickle-free envelope, and decode it there into a frozen typed object::

    from verl_ctx import RoleContext, decode, validate

    class CriticContext(RoleContext, role="critic"):
        value_clip: float = 0.2

    contexts = validate(hydra_config)            # driver: every role, every error at once
    ctx = decode(worker_config, CriticContext)   # worker: TrainingWorkerConfig, Hydra config, self, ...

Namespaces: ``verl_ctx.errors`` (every exception and warning), ``verl_ctx.envelope`` (the wire format),
``verl_ctx.schema`` (fingerprints, evolution rules), ``verl_ctx.testing`` (contexts without Ray), and
``verl_ctx.integrations.verl`` (launch and delivery into verl; imported lazily, it needs verl and Ray).
This package imports pydantic and msgspec only.
"""

from typing import Any

from ._driver.contextset import ContextSet, Provenance
from ._driver.validate import validate
from ._model.registry import ContextRegistry, default_registry
from ._model.role_context import RoleContext, migration
from ._wire.envelope import attach, encode
from ._worker.decode import decode
from .errors import ContextError


def __getattr__(name: str) -> Any:
    # ``__version__`` on first use: importing importlib.metadata costs about a quarter of `import verl_ctx`.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("verl-ctx")
        except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'verl_ctx' has no attribute {name!r}")


__all__ = [
    "ContextError",
    "ContextRegistry",
    "ContextSet",
    "Provenance",
    "RoleContext",
    "attach",
    "decode",
    "default_registry",
    "encode",
    "migration",
    "validate",
]
