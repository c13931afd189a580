"""The exceptions and warnings verl-ctx raises.

Every error is a ``ContextError``; catch that one to handle them all::

    ContextError
     ├── ContextValidationError    a context's values do not fit its schema (all errors at once)
     ├── EnvelopeError             not an envelope, corrupt or oversize payload, unknown format, unencodable value
     ├── SchemaMismatchError       driver and worker schemas differ and the payload cannot be decoded safely
     ├── MissingContextError       no context was delivered for a role
     ├── SchemaDefinitionError     a RoleContext subclass is declared wrongly (role, version, migration, registry)
     └── ConfigError               a verl config, override or schema module cannot be read

    ContextWarning (UserWarning)
     ├── SchemaSkewWarning         same version, different fingerprint, payload still valid
     ├── InactiveRoleWarning       a context is given for a role this run will not start
     └── PayloadWarning            a payload is large, or raw ``extra_context`` holds something risky

Messages name the role and a dotted field path, say what was expected, what came, and what to do.
Secret values never appear in them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ConfigError",
    "ContextError",
    "ContextValidationError",
    "ContextWarning",
    "EnvelopeError",
    "FieldError",
    "InactiveRoleWarning",
    "MissingContextError",
    "PayloadWarning",
    "SchemaDefinitionError",
    "SchemaMismatchError",
    "SchemaSkewWarning",
]


class ContextError(Exception):
    """Root of every error verl-ctx raises."""


@dataclass(frozen=True)
class FieldError:
    """One problem with one value.

    ``path`` is dotted from the root the caller gave (``extra_context.critic.value_clip`` when validating
    a verl config, ``value_clip`` when decoding). ``input`` is a short, already redacted ``repr`` of what
    came; ``None`` when nothing came (a missing field).
    """

    role: str
    path: str
    message: str
    input: str | None = None
    hint: str | None = None

    def __str__(self) -> str:
        line = f"[{self.role}] {self.path or '<root>'}: {self.message}"
        if self.input is not None:
            line += f" (got {self.input})"
        if self.hint:
            line += f"; {self.hint}"
        return line


class ContextValidationError(ContextError, ValueError):
    """One or more values do not fit their role's schema; ``errors`` lists every one."""

    def __init__(self, errors: Sequence[FieldError], *, summary: str | None = None) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        roles = sorted({e.role for e in self.errors})
        head = summary or (
            f"{len(self.errors)} invalid value{'s' if len(self.errors) != 1 else ''} "
            f"in the context of {', '.join(roles) or 'no role'}"
        )
        super().__init__("\n".join([head + ":", *(f"  {e}" for e in self.errors)]))


class EnvelopeError(ContextError, ValueError):
    """The envelope is not one, is corrupt, too large, of an unknown format, or cannot be built."""


class SchemaMismatchError(ContextError):
    """The worker's schema differs from the driver's and the payload cannot be decoded safely.

    Carries both sides so a caller (or a log line) can say exactly which code is stale.
    """

    def __init__(
        self,
        message: str,
        *,
        role: str,
        driver_fingerprint: str,
        worker_fingerprint: str,
        driver_version: int,
        worker_version: int,
        differing_fields: Sequence[str] = (),
    ) -> None:
        self.role = role
        self.driver_fingerprint = driver_fingerprint
        self.worker_fingerprint = worker_fingerprint
        self.driver_version = driver_version
        self.worker_version = worker_version
        self.differing_fields = tuple(differing_fields)
        super().__init__(message)


class MissingContextError(ContextError, LookupError):
    """No context was delivered for the role that asked for one."""

    def __init__(self, message: str, *, role: str) -> None:
        self.role = role
        super().__init__(message)


class SchemaDefinitionError(ContextError, TypeError):
    """A ``RoleContext`` subclass is declared wrongly, or two schemas claim one role."""


class ConfigError(ContextError):
    """A config file, override, or schema module given to verl-ctx cannot be read."""


class ContextWarning(UserWarning):
    """Root of the warnings verl-ctx emits."""


class SchemaSkewWarning(ContextWarning):
    """Driver and worker schemas have the same version but different fingerprints; the payload still validated."""


class InactiveRoleWarning(ContextWarning):
    """A context is configured for a role the run will not start, so nothing will read it."""


class PayloadWarning(ContextWarning):
    """A payload is close to Ray's limits, or a raw ``extra_context`` value will not travel safely."""
