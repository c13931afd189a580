"""``validate``: check a verl config's ``extra_context`` section before launch, every role, every error."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ._envelope import encode
from ._errors import ConfigError, ContextValidationError, FieldError, InactiveRoleWarning, PayloadWarning
from ._pydantic_errors import REDACTED, field_errors, short_repr, suggest
from ._registry import ContextRegistry, default_registry
from ._roles import inactive_roles
from ._schema import RoleContext, schema_info

__all__ = ["SECTION", "ContextSet", "Provenance", "validate"]

#: The top-level key of the verl config that holds one section per role.
SECTION = "extra_context"
#: Ray warns when an actor definition passes this many bytes (ray_constants.FUNCTION_SIZE_WARN_THRESHOLD)...
RAY_WARN_BYTES = 10**7
#: ...and refuses it past this many (FUNCTION_SIZE_ERROR_THRESHOLD).
RAY_ERROR_BYTES = 10**8

Source = Literal["schema default", "config file", "command-line override"]


@dataclass(frozen=True)
class Provenance:
    """Where one field's value came from."""

    role: str
    path: str
    value: str
    source: Source


class ContextSet(Mapping[str, RoleContext]):
    """The validated context of each role: ``role -> typed instance``, with where each value came from."""

    def __init__(self, contexts: Mapping[str, RoleContext], provenance: Sequence[Provenance] = ()) -> None:
        self._contexts = dict(sorted(contexts.items()))
        self.provenance: tuple[Provenance, ...] = tuple(provenance)
        self._envelopes: dict[str, dict[str, Any]] | None = None

    def __getitem__(self, role: str) -> RoleContext:
        return self._contexts[role]

    def __iter__(self) -> Iterator[str]:
        return iter(self._contexts)

    def __len__(self) -> int:
        return len(self._contexts)

    def envelope(self, role: str) -> dict[str, Any]:
        return self.envelopes()[role]

    def envelopes(self) -> dict[str, dict[str, Any]]:
        """Each role's envelope, encoded once and reused."""
        if self._envelopes is None:
            self._envelopes = {role: encode(ctx, role=role) for role, ctx in self._contexts.items()}
        return self._envelopes

    def payload_sizes(self) -> dict[str, int]:
        return {role: len(env["payload"]) for role, env in self.envelopes().items()}

    def describe(self) -> list[Provenance]:
        """Every field of every role with its value (secrets redacted) and its source."""
        return list(self.provenance)

    def __repr__(self) -> str:
        return f"ContextSet({', '.join(f'{r}={type(c).__name__}' for r, c in self._contexts.items())})"


def validate(
    config: object,
    *,
    registry: ContextRegistry | None = None,
    overrides: Sequence[str] = (),
    check_roles: bool = True,
) -> ContextSet:
    """Validate the ``extra_context`` section of ``config`` against every registered role schema.

    ``config`` is a mapping or an OmegaConf ``DictConfig`` (a whole verl config, or any mapping with an
    ``extra_context`` key). All roles' errors are raised together as one ``ContextValidationError``, each
    with its dotted path from the config root. ``overrides`` are the Hydra overrides that were applied,
    used only to tell "command-line override" from "config file" in ``ContextSet.describe()``.

    With ``check_roles`` (the default) a context given for a role this run will not start, by verl's own
    rules, is reported with an ``InactiveRoleWarning``.
    """
    registry = default_registry if registry is None else registry
    root = _as_mapping(config, "the config")
    section = _as_mapping(root.get(SECTION) or {}, SECTION)
    overridden = _override_paths(overrides)
    errors: list[FieldError] = []
    contexts: dict[str, RoleContext] = {}
    provenance: list[Provenance] = []

    for role in sorted(section, key=str):
        if role not in registry:
            close = suggest(str(role), registry.roles())
            errors.append(
                FieldError(
                    role=str(role),
                    path=f"{SECTION}.{role}",
                    message="no schema is registered for this role",
                    hint=(f"did you mean '{close}'?" if close else None)
                    or f"registered roles: {', '.join(registry.roles()) or 'none (import your schema module)'}",
                )
            )
    for role in registry.roles():
        schema = registry[role]
        data = section.get(role)
        prefix = f"{SECTION}.{role}"
        if data is None:
            missing = [name for name, f in schema.model_fields.items() if f.is_required()]
            if missing:
                errors.append(
                    FieldError(
                        role=role,
                        path=prefix,
                        message=f"no section, but {schema.__name__} requires {', '.join(missing)}",
                        hint=f"add `{prefix}:` to the config or pass +{prefix}.{missing[0]}=...",
                    )
                )
                continue
            data = {}
        if not isinstance(data, Mapping):
            errors.append(
                FieldError(role=role, path=prefix, message="expected a mapping of field values", input=short_repr(data))
            )
            continue
        info = schema_info(schema)
        try:
            ctx = schema.model_validate(dict(data))
        except ValidationError as e:
            errors.extend(field_errors(e, role=role, schema=schema, secret_names=info.secret_fields, prefix=prefix))
            continue
        contexts[role] = ctx
        provenance.extend(_provenance(role, ctx, data, prefix, overridden, info.secret_fields))

    if errors:
        raise ContextValidationError(errors)
    result = ContextSet(contexts, provenance)
    if check_roles:
        for role, why in inactive_roles(root, [r for r in section if r in contexts]).items():
            warnings.warn(
                InactiveRoleWarning(f"[{role}] a context is configured, but this run starts no {role}: {why}"),
                stacklevel=2,
            )
    lint_sizes(result)
    return result


def lint_sizes(contexts: ContextSet) -> None:
    """Warn for a payload that Ray would warn about or refuse if it were embedded in an actor definition."""
    for role, size in contexts.payload_sizes().items():
        if size >= RAY_ERROR_BYTES:
            warnings.warn(
                PayloadWarning(
                    f"[{role}] context payload is {size:,} bytes: Ray refuses actor definitions past "
                    f"{RAY_ERROR_BYTES:,}. verl-ctx's delivery sends it through the object store; "
                    "never put it in a raw extra_context"
                ),
                stacklevel=3,
            )
        elif size >= RAY_WARN_BYTES:
            warnings.warn(
                PayloadWarning(
                    f"[{role}] context payload is {size:,} bytes, past Ray's {RAY_WARN_BYTES:,}-byte actor "
                    "definition warning; verl-ctx's delivery sends it through the object store"
                ),
                stacklevel=3,
            )


def _as_mapping(value: object, what: str) -> Mapping[Any, Any]:
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        try:
            value = OmegaConf.to_container(value, resolve=True)
        except Exception as e:  # OmegaConf raises many types for a bad interpolation
            raise ConfigError(f"cannot resolve {what}: {e}") from e
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} should be a mapping; got {type(value).__name__}")
    return value


def _override_paths(overrides: Sequence[str]) -> list[str]:
    """Dotted keys set on the command line, from override strings like ``+extra_context.critic.x=1``."""
    paths = []
    for item in overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        if key.startswith(SECTION):
            paths.append(key)
    return paths


def _provenance(
    role: str,
    ctx: RoleContext,
    given: Mapping[str, Any],
    prefix: str,
    overridden: Sequence[str],
    secrets: frozenset[str],
) -> Iterator[Provenance]:
    for name in type(ctx).model_fields:
        path = f"{prefix}.{name}"
        source: Source
        if name not in given:
            source = "schema default"
        elif any(path == o or path.startswith(o + ".") or o.startswith(path + ".") for o in overridden):
            source = "command-line override"
        else:
            source = "config file"
        value = getattr(ctx, name)
        shown = REDACTED if name in secrets else short_repr(value)
        yield Provenance(role=role, path=path, value=shown, source=source)
