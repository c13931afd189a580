"""``validate``: check a verl config's ``extra_context`` section before launch, every role, every error at once."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from .._model.field_errors import (
    field_errors,
    join_path,
    may_hold_secret,
    plain,
    suggest,
    unknown_value_shown,
    withheld,
)
from .._model.registry import ContextRegistry, default_registry
from .._model.role_context import RoleContext
from .._secrets.redact import MASK, learn_context
from ..errors import ConfigError, ContextValidationError, FieldError, InactiveRoleWarning, LiteralSecretWarning
from .contextset import ContextSet, Provenance, ValueSource
from .lint import lint_sizes
from .roles import inactive_roles
from .unknown_keys import unknown_keys

__all__ = ["SECTION", "validate"]

#: The top-level key of the verl config that holds one section per role.
SECTION = "extra_context"


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
    with its path from the config root. Unknown keys are errors at every depth, also inside nested models that
    would otherwise ignore them. ``overrides`` are the Hydra overrides that were applied, used to tell
    "command-line override" from "config file" in ``ContextSet.describe()``.

    With ``check_roles`` (the default) roles are judged by verl's own rules: a context for a role this run will
    not start gives an ``InactiveRoleWarning`` and never blocks the launch, even when it is missing or invalid.
    """
    registry = default_registry if registry is None else registry
    root = _as_mapping(config, "the config")
    section = _as_mapping(root.get(SECTION) or {}, SECTION)
    inactive = inactive_roles(root, registry.roles()) if check_roles else {}
    errors = _unknown_roles(section, registry)
    contexts: dict[str, RoleContext] = {}
    provenance: list[Provenance] = []
    notes: list[tuple[str, str]] = []
    overridden = _override_paths(overrides)

    for role in registry.roles():
        schema = registry[role]
        prefix = f"{SECTION}.{role}"
        given = section.get(role)
        if given is None and role in inactive:
            continue  # nothing configured for a role that will not run: nothing to say
        found = _check_role(role, schema, given, prefix)
        if isinstance(found, list):
            if role in inactive:
                notes.append(
                    (role, f"[{role}] its context is invalid, but {inactive[role]}: " + "; ".join(map(str, found)))
                )
            else:
                errors.extend(found)
            continue
        contexts[role] = found
        learn_context(found)  # from here on, this process's messages mask its secrets (verl_ctx._secrets.redact)
        provenance.extend(_provenance(role, found, given or {}, prefix, overridden))
        if role in inactive:
            notes.append((role, f"[{role}] a context is configured, but this run starts no {role}: {inactive[role]}"))

    for role, note in notes:  # before the errors: a caller recording warnings gets both at once
        warnings.warn(InactiveRoleWarning(note, role=role, path=f"{SECTION}.{role}"), stacklevel=2)
    if errors:
        raise ContextValidationError(errors)
    for row, note in _literal_secrets(config, provenance, overrides):
        warnings.warn(LiteralSecretWarning(note, role=row.role, path=row.path), stacklevel=2)
    result = ContextSet(contexts, provenance)
    lint_sizes(result.payload_sizes())
    return result


def _unknown_roles(section: Mapping[Any, Any], registry: ContextRegistry) -> list[FieldError]:
    errors = []
    for role in sorted(section, key=str):
        if role in registry:
            continue
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
    return errors


def _check_role(role: str, schema: type[RoleContext], given: object, prefix: str) -> RoleContext | list[FieldError]:
    """The validated context of one role, or its errors."""
    if given is None:
        missing = [name for name, f in schema.model_fields.items() if f.is_required()]
        if missing:
            return [
                FieldError(
                    role=role,
                    path=prefix,
                    message=f"no section, but {schema.__name__} requires {', '.join(missing)}",
                    hint=f"add `{prefix}:` to the config or pass +{prefix}.{missing[0]}=...",
                )
            ]
        given = {}
    if not isinstance(given, Mapping):
        shown = withheld(given) if may_hold_secret(schema) else repr(plain(given))
        return [FieldError(role=role, path=prefix, message="expected a mapping of field values", input=shown)]
    errors = [
        FieldError(
            role=role,
            path=join_path(prefix, [*parts, key]),
            message="unknown field",
            input=unknown_value_shown(key, value, schema, parts, close := suggest(key, known)),
            hint=f"did you mean '{close}'?" if close else f"known fields: {', '.join(known)}",
        )
        for parts, key, value, known in unknown_keys(schema, given)
    ]
    failure: list[FieldError] | None = None
    omitted = 0
    try:
        ctx = schema.model_validate(dict(given))
    except ValidationError as e:
        failure, omitted = field_errors(e, role=role, schema=schema, prefix=prefix)
    except RecursionError:
        failure = [FieldError(role=role, path=prefix, message="nested too deeply to validate")]
    if failure is not None:
        if omitted:
            failure.append(FieldError(role=role, path=prefix, message=f"... and {omitted} more errors"))
        return errors + failure
    return errors or ctx


def _as_mapping(value: object, what: str) -> Mapping[Any, Any]:
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        try:
            value = OmegaConf.to_container(value, resolve=True)
        except Exception as e:  # noqa: BLE001 - OmegaConf raises many types for a bad interpolation
            # OmegaConf's message quotes the interpolation, which is part of a value that may be a secret: say
            # where and what kind of failure only.
            unset = _unset_environment(value)
            if unset:  # the usual cause, told by name: a variable's name is no secret, its value is never read here
                names = ", ".join(f"{name} (read at {key})" for key, name in unset)
                raise ConfigError(
                    f"cannot resolve {what}: environment variable {names} is not set; export it before the command, "
                    "or give a default: '${oc.env:NAME,default}'"
                ) from None
            where = getattr(e, "full_key", None)
            raise ConfigError(
                f"cannot resolve {what}: the interpolation at {where or 'a key'} failed ({type(e).__name__}; its "
                "text is not shown, it may be part of a secret). Fix or remove the ${...} in that value; write a "
                "literal '${' as '\\${'"
            ) from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} should be a mapping; got {type(value).__name__}")
    return value


_LITERAL_DEFAULT = re.compile(r"\$\{oc\.env:[^,}]+,[^}]+\}")
_ENV_READ = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _unset_environment(config: Any) -> list[tuple[str, str]]:
    """``(key, variable)`` for each value that is exactly ``${oc.env:NAME}`` (the documented way to give a secret) in
    ``config`` whose variable is not set. A value with anything else around the interpolation is not read: its text
    may be part of a secret."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(config, resolve=False)
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack and len(found) < 5:
        key, node = stack.pop()
        if isinstance(node, dict):
            stack += [(f"{key}.{k}" if key else str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(f"{key}[{i}]", v) for i, v in enumerate(node)]
        elif isinstance(node, str) and (whole := _ENV_READ.fullmatch(node)) and whole.group(1) not in os.environ:
            found.append((key, whole.group(1)))
    return sorted(found)


def _literal_secrets(
    config: object, provenance: Sequence[Provenance], overrides: Sequence[str]
) -> list[tuple[Provenance, str]]:
    """A note for each secret given as a literal rather than from the environment (``${oc.env:NAME}``): on the
    command line it is readable in ``ps`` and the shell's history while the job runs; in a config file, by whoever
    reads, tracks or copies the file. The value is never part of the note."""
    notes = []
    for row in provenance:
        if row.source == "schema default" or not _holds_mask(row.value):
            continue
        if row.source == "command-line override":
            given = [o.split("=", 1)[1] for o in overrides if "=" in o and _sets(o.split("=", 1)[0], row.path)]
            # From the environment, unless the interpolation carries a literal default (${oc.env:NAME,sk-...})
            if given and all("${" in value and not _LITERAL_DEFAULT.search(value) for value in given):
                continue
            where = "on the command line, where `ps` and the shell's history show it while the job runs"
        else:
            # A mapping built in Python is no file; a Hydra config's value that is an interpolation is not literal.
            if not type(config).__module__.startswith("omegaconf") or _interpolated(config, row.path):
                continue
            where = "in the config, where whoever reads, tracks or copies the file it came from sees it"
        name = row.path.rpartition(".")[2]
        note = (
            f"[{row.role}] {row.path}: a secret given as a literal {where}; give it from the environment instead: "
            f"{name}: ${{oc.env:NAME}} in the config file (on the command line, in single quotes: "
            f"'{row.path}=${{oc.env:NAME}}')"
        )
        notes.append((row, note))
    return notes


def _holds_mask(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_holds_mask(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_mask(v) for v in value)
    return bool(value == MASK)


def _sets(key: str, path: str) -> bool:
    """Whether an override's key (``+extra_context.reward.judge``) sets ``path`` or a mapping holding it."""
    key = key.lstrip("+~")
    return path == key or path.startswith(key + ".")


def _interpolated(config: object, path: str) -> bool:
    """Whether the config's value at ``path`` (unresolved) is an interpolation: from the environment, a resolver."""
    from omegaconf import OmegaConf

    parent_path, _, key = path.rpartition(".")
    try:
        parent = OmegaConf.select(config, parent_path) if parent_path else config
        return bool(parent is not None and OmegaConf.is_interpolation(parent, key))
    except Exception:  # noqa: BLE001 - a node OmegaConf cannot select: say nothing rather than guess
        return True


def _override_paths(overrides: Sequence[str]) -> list[str]:
    """Dotted keys set on the command line, from override strings like ``+extra_context.critic.x=1``."""
    paths = []
    for item in overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        if key.startswith(SECTION):
            paths.append(key)
    return paths


def _provenance(
    role: str, ctx: BaseModel, given: Mapping[str, Any], prefix: str, overridden: Sequence[str]
) -> Iterator[Provenance]:
    """One row per leaf: nested models are walked, each leaf with its own source."""
    for name, field in type(ctx).model_fields.items():
        path = f"{prefix}.{name}"
        value = getattr(ctx, name)
        key = field.alias if field.alias is not None and field.alias in given else name
        sub = given.get(key) if isinstance(given, Mapping) else None
        if isinstance(value, BaseModel) and (sub is None or isinstance(sub, Mapping)):
            yield from _provenance(role, value, sub or {}, path, overridden)
            continue
        source: ValueSource
        if not isinstance(given, Mapping) or key not in given:
            source = "schema default"
        elif any(path == o or path.startswith(o + ".") or o.startswith(path + ".") for o in overridden):
            source = "command-line override"
        else:
            source = "config file"
        yield Provenance(role=role, path=path, value=plain(value), source=source)  # plain() masks secrets
