"""Every exception and warning verl-ctx raises, in one place.

Catch ``ContextError`` to handle them all::

    ContextError
     ├── ContextValidationError    a context's values do not fit its schema (all errors at once, .errors)
     ├── EnvelopeError             not an envelope, corrupt or oversize payload, unknown format, bad reference
     ├── SchemaMismatchError       driver and worker schemas differ and the payload cannot be decoded safely
     ├── MissingContextError       no context was delivered for a role
     ├── SchemaDefinitionError     a RoleContext subclass is declared wrongly (role, version, migration, registry)
     ├── ConfigError               a verl config, override, file or schema module cannot be read
     ├── LaunchError               verl's own pre-launch checks refused the run (cause and config key named)
     ├── ContextChangedError       a resumed run's contexts differ from its checkpoint's
     └── ServerUnavailableError    no external LLM server could take a request
          └── StaleOutputError     none could answer with weights within max_staleness of the trainer's

    ContextWarning (UserWarning)
     ├── SchemaSkewWarning         driver and worker schemas differ in a way that provably loses nothing
     ├── InactiveRoleWarning       a context is given for a role this run will not start
     ├── LiteralSecretWarning      a secret is given as a literal (command line, config file), not from the env
     └── PayloadWarning            a payload is large, or raw ``extra_context`` holds something risky

Messages name the role and a path (``extra_context.critic.rows[0].weight``), say what was expected, what came
and what to do. Secret values never appear in them: an input that could be a secret is shown by type and
length only.

Every error and warning pickles with its attributes, because they cross Ray: a ``SchemaMismatchError`` raised
in a worker is caught on the driver with ``except SchemaMismatchError`` (Ray re-raises it as a subclass of
both ``RayTaskError`` and the original class).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._secrets import redact as _redaction

__all__ = [
    "ConfigError",
    "ContextChangedError",
    "ContextError",
    "ContextValidationError",
    "ContextWarning",
    "EnvelopeError",
    "FieldError",
    "InactiveRoleWarning",
    "LaunchError",
    "LiteralSecretWarning",
    "MissingContextError",
    "PayloadWarning",
    "SchemaDefinitionError",
    "SchemaMismatchError",
    "SchemaSkewWarning",
    "ServerUnavailableError",
    "StaleOutputError",
]


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """Unpickle without calling ``__init__`` (whose keyword-only arguments pickle does not pass)."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


def _shown(text: Any) -> Any:
    """``text`` with every secret this process has seen masked (``verl_ctx._secrets.redact``)."""
    if not isinstance(text, str):
        return text
    return _redaction.redact(text)


class _Pickles:
    """Pickle an exception or warning as (class, message args, attributes); its message redacted when it is made
    (so what is pickled to another process holds no secret this one knows) and when it is shown (so what this
    process learnt since, or what a worker sent before it knew, is masked too). Every message verl-ctx raises or
    warns passes here: no code path that builds one has to remember."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(_shown(a) for a in args))

    def __str__(self) -> str:
        return str(_shown(super().__str__()))

    def __reduce__(self) -> tuple[Any, ...]:
        exc: BaseException = self  # type: ignore[assignment]
        return (_rebuild, (type(self), exc.args, dict(exc.__dict__)))


class ContextError(_Pickles, Exception):
    """Root of every error verl-ctx raises."""


@dataclass(frozen=True)
class FieldError:
    """One problem with one value.

    ``path`` runs from the root the caller gave (``extra_context.critic.rows[0].weight`` when validating a
    verl config, ``rows[0].weight`` when decoding). ``input`` is a short, already redacted rendering of what
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
    """One or more values do not fit their role's schema; ``errors`` lists them (``omitted`` more not kept)."""

    def __init__(self, errors: Sequence[FieldError], *, summary: str | None = None, omitted: int = 0) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.omitted = omitted
        roles = sorted({e.role for e in self.errors})
        total = len(self.errors) + omitted
        head = summary or (
            f"{total} invalid value{'s' if total != 1 else ''} in the context of {', '.join(roles) or 'no role'}"
        )
        lines = [head + ":", *(f"  {e}" for e in self.errors)]
        if omitted:
            lines.append(f"  ... and {omitted} more")
        super().__init__("\n".join(lines))


class EnvelopeError(ContextError, ValueError):
    """The envelope (or its text, or a store reference) is not one, is corrupt, too large or of an unknown format.

    ``errors`` lists the values of a payload that parsed but does not validate against the very schema it
    names (its bytes were edited after encoding).
    """

    def __init__(self, message: str, *, errors: Sequence[FieldError] = ()) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__(message)


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


class LaunchError(ContextError):
    """verl's own checks refused the run before anything started; ``verl_cause`` is verl's last line, ``key`` its key.

    Read ``verl_cause``: across Ray the driver gets a ``RayTaskError`` subclass of this class whose ``cause`` Ray
    sets to the original exception, so ``cause`` (the same text, kept for code written before) holds verl's line
    only where the error was raised.
    """

    def __init__(self, message: str, *, cause: str, key: str | None = None) -> None:
        self.verl_cause = cause
        self.cause = cause
        self.key = key
        super().__init__(message)


class ContextChangedError(ContextError):
    """A resumed run's contexts differ from the ones saved with its checkpoint; ``changes`` lists each one."""

    def __init__(self, message: str, *, changes: Sequence[str] = ()) -> None:
        self.changes = tuple(changes)
        super().__init__(message)


class ServerUnavailableError(ContextError):
    """No configured external LLM server could take the request; the message names each server and why."""


class StaleOutputError(ServerUnavailableError):
    """Every server that answered generated with weights older than the routing's ``max_staleness`` allows."""


class ContextWarning(_Pickles, UserWarning):
    """Root of the warnings verl-ctx emits.

    ``role`` and ``path`` say whose and which value it is about (``None`` when it is about no one role or value);
    ``code`` names the kind in a word a CI script can match (``verl-ctx validate --format json`` gives all three).
    """

    code = "context"

    def __init__(self, message: str, *, role: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.role = role
        self.path = path


class SchemaSkewWarning(ContextWarning):
    """Driver and worker schemas differ (fingerprint or schema id) in a way that provably changes no value."""

    code = "schema_skew"


class InactiveRoleWarning(ContextWarning):
    """A context is configured for a role the run will not start, so nothing will read it."""

    code = "inactive_role"


class LiteralSecretWarning(ContextWarning):
    """A secret was given as a literal (on the command line or in a config file) rather than from the environment."""

    code = "literal_secret"


class PayloadWarning(ContextWarning):
    """A payload is close to Ray's limits, or a raw ``extra_context`` value will not travel safely."""

    code = "payload"
