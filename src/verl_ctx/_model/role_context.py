"""``RoleContext``: the base class a user declares one schema per role with, and what we derive from it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from .._secrets.plan import check_carried, holds_secret
from .._secrets.redact import learn_context, redact
from ..errors import SchemaDefinitionError
from .registry import ContextRegistry, default_registry, qualified_name

__all__ = ["KNOWN_ROLES", "MIGRATION_MARK", "ON_REBUILD", "Migration", "RoleContext", "migration"]

#: The roles verl itself starts workers for. Any other identifier is accepted for custom workers.
KNOWN_ROLES: tuple[str, ...] = ("actor", "ref", "critic", "rollout", "reward")

_ROLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The attribute `@migration` marks a function with (the version it upgrades from).
MIGRATION_MARK = "__verl_ctx_migrates_from__"

Migration = Callable[[dict[str, Any]], dict[str, Any]]
_F = TypeVar("_F", bound=Callable[..., Any])


def migration(from_version: int) -> Callable[[_F], Any]:
    """Mark a function in a ``RoleContext`` body as the upgrade from ``from_version`` to ``from_version + 1``.

    The function takes the decoded payload of the old version (a plain ``dict``) and returns the dict of
    the next version. Migrations run in order, so a v1 payload read by a v3 schema goes through the
    ``from_version=1`` and ``from_version=2`` steps, then through validation::

        class CriticContext(RoleContext, role="critic", version=2):
            value_clip: float = 0.2

            @migration(from_version=1)
            def _clip_renamed(data):
                data["value_clip"] = data.pop("clip")
                return data
    """
    if not isinstance(from_version, int) or isinstance(from_version, bool) or from_version < 1:
        raise SchemaDefinitionError(f"migration(from_version=...) takes an int >= 1; got {from_version!r}")

    def mark(fn: _F) -> Any:
        func = fn.__func__ if isinstance(fn, staticmethod) else fn
        setattr(func, MIGRATION_MARK, from_version)
        # A staticmethod is a "known" class attribute to pydantic, so it is not mistaken for a field.
        return staticmethod(func)

    return mark


#: Called with a class whose schema ``model_rebuild`` rebuilt. What is derived from a schema lives in the layers
#: above this one (the compiled codec registers its cache's ``forget`` when it is imported), so the model names
#: none of them: a layer only ever imports the layers below it.
ON_REBUILD: list[Callable[[type], None]] = []


class RoleContext(BaseModel):
    """Base class of a role's typed context: frozen, unknown fields forbidden.

    Declare one subclass per role with the ``role=`` and ``version=`` class keywords::

        class CriticContext(RoleContext, role="critic", version=1):
            value_clip: float = 0.2

    ``role`` may be a tuple to share one schema between several roles. A subclass without ``role`` is an
    abstract base and is not registered. ``registry=`` registers into an isolated ``ContextRegistry``
    instead of the default one. ``compiled=False`` keeps the class (and its subclasses) off the compiled codec
    path (``verl_ctx._wire.compiled``): every decode then goes through pydantic's validator, as for a schema that does
    not qualify. The answers are the same either way; it is an escape hatch, not a setting to tune.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    __verl_ctx_roles__: ClassVar[tuple[str, ...]] = ()
    __verl_ctx_version__: ClassVar[int] = 1
    __verl_ctx_migrations__: ClassVar[Mapping[int, Migration]] = {}
    __verl_ctx_compiled__: ClassVar[bool] = True

    @classmethod
    def __pydantic_init_subclass__(
        cls,
        *,
        role: str | tuple[str, ...] | None = None,
        version: int = 1,
        registry: ContextRegistry | None = None,
        compiled: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise SchemaDefinitionError(f"{qualified_name(cls)}: version= takes an int >= 1; got {version!r}")
        if compiled is not None:  # None: inherited from the base class
            if not isinstance(compiled, bool):
                raise SchemaDefinitionError(f"{qualified_name(cls)}: compiled= takes True or False; got {compiled!r}")
            cls.__verl_ctx_compiled__ = compiled
        cls.__verl_ctx_version__ = version
        cls.__verl_ctx_migrations__ = _collect_migrations(cls, version)
        _check_secrets_carried(cls)
        if role is None:
            cls.__verl_ctx_roles__ = ()
            return
        cls.__verl_ctx_roles__ = _check_roles(cls, role)
        (default_registry if registry is None else registry).register(cls)

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        """pydantic's ``model_rebuild``; what was derived from the old schema is dropped (``ON_REBUILD``)."""
        try:
            rebuilt = super().model_rebuild(
                force=force,
                raise_errors=raise_errors,
                _parent_namespace_depth=_parent_namespace_depth + 1,  # this frame sits between the caller and pydantic
                _types_namespace=_types_namespace,
            )
        finally:
            for forget in ON_REBUILD:
                forget(cls)
        _check_secrets_carried(cls)
        return rebuilt

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """pydantic's, except that a computed field of a context holding a secret is not shown: it may be made from
        the secret (``f"Bearer {self.token.get_secret_value()}"``), and ``repr`` is what logs, reports and
        tracebacks print. Fields are shown as pydantic shows them (a secret as stars)."""
        computed = type(self).__pydantic_computed_fields__
        hide = bool(computed) and holds_secret(self)
        for name, value in super().__repr_args__():
            yield (name, _NOT_SHOWN) if hide and name in computed else (name, value)

    def __repr__(self) -> str:
        return _shown(self, super().__repr__())

    def __str__(self) -> str:
        return _shown(self, super().__str__())

    @classmethod
    def __init_subclass__(cls, **kwargs: Any) -> None:
        # pydantic hands class keywords to both hooks; ours are consumed in __pydantic_init_subclass__.
        for key in ("role", "version", "registry", "compiled"):
            kwargs.pop(key, None)
        super().__init_subclass__(**kwargs)


def _shown(context: RoleContext, text: str) -> str:
    """``text`` (the context's repr or str) through the one redaction, its own secrets learnt first: a value the
    context holds or made from its secret (a header, a URL with the key) is stars, wherever it is printed."""
    learn_context(context)
    return redact(text)


class _NotShown:
    def __repr__(self) -> str:
        return "<computed from a context that holds a secret: not shown>"


_NOT_SHOWN = _NotShown()


def _check_secrets_carried(cls: type[BaseModel]) -> None:
    """A schema holding a secret the encoder cannot carry as itself is refused here, not seen as stars later."""
    if not cls.__pydantic_complete__:  # a forward reference not yet defined: checked again by model_rebuild
        return
    why = check_carried(cls)
    if why is not None:
        raise SchemaDefinitionError(f"{qualified_name(cls)} cannot carry a secret it declares: {why}")


def _check_roles(cls: type, role: object) -> tuple[str, ...]:
    roles = (role,) if isinstance(role, str) else role
    if not isinstance(roles, tuple) or not roles or not all(isinstance(r, str) for r in roles):
        raise SchemaDefinitionError(
            f"{qualified_name(cls)}: role= takes a role name or a non-empty tuple of names; got {role!r}"
        )
    bad = [r for r in roles if not _ROLE_RE.match(r)]
    if bad:
        raise SchemaDefinitionError(
            f"{qualified_name(cls)}: role names must be identifiers (known verl roles: {', '.join(KNOWN_ROLES)}); "
            f"got {', '.join(map(repr, bad))}"
        )
    if len(set(roles)) != len(roles):
        raise SchemaDefinitionError(f"{qualified_name(cls)}: role= names a role twice: {role!r}")
    return tuple(roles)


def _collect_migrations(cls: type, version: int) -> dict[int, Migration]:
    found: dict[int, Migration] = {}
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            func = value.__func__ if isinstance(value, staticmethod) else value
            step = getattr(func, MIGRATION_MARK, None)
            if step is not None:
                found[step] = func
    late = sorted(step for step in found if step >= version)
    if late:
        raise SchemaDefinitionError(
            f"{qualified_name(cls)} is version {version} but has a migration from version {late[0]}; "
            f"a migration from version N upgrades to N+1, so N must be below {version}. "
            "Bump version= or remove the migration."
        )
    return found
