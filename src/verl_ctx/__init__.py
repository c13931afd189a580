"""verl-ctx: typed, validated, versioned context for verl's workers.

Declare one pydantic model per role, validate it before launch, carry it to every worker as a small
pickle-free envelope, and decode it there into a frozen typed object::

    class CriticContext(RoleContext, role="critic"):
        value_clip: float = 0.2

    env = encode(CriticContext(value_clip=0.3))   # driver
    ctx = decode(worker_config, CriticContext)     # worker

This package imports pydantic and msgspec only; verl and Ray are imported by ``verl_ctx.integrations``.
"""

from ._decode import decode
from ._envelope import DEFAULT_MAX_BYTES, ENVELOPE_FORMAT, RESERVED_KEY, attach, encode, from_text, to_text
from ._errors import (
    ConfigError,
    ContextError,
    ContextValidationError,
    ContextWarning,
    EnvelopeError,
    FieldError,
    InactiveRoleWarning,
    MissingContextError,
    PayloadWarning,
    SchemaDefinitionError,
    SchemaMismatchError,
    SchemaSkewWarning,
)
from ._lint import lint_extra_context
from ._registry import ContextRegistry, default_registry
from ._schema import KNOWN_ROLES, RoleContext, SchemaInfo, migration, schema_info
from ._validate import ContextSet, Provenance, validate

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENVELOPE_FORMAT",
    "KNOWN_ROLES",
    "RESERVED_KEY",
    "ConfigError",
    "ContextError",
    "ContextRegistry",
    "ContextSet",
    "ContextValidationError",
    "ContextWarning",
    "EnvelopeError",
    "FieldError",
    "InactiveRoleWarning",
    "MissingContextError",
    "PayloadWarning",
    "Provenance",
    "RoleContext",
    "SchemaDefinitionError",
    "SchemaInfo",
    "SchemaMismatchError",
    "SchemaSkewWarning",
    "attach",
    "decode",
    "default_registry",
    "encode",
    "from_text",
    "lint_extra_context",
    "migration",
    "schema_info",
    "to_text",
    "validate",
]
