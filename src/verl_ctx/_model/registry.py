"""Which schema reads which role."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import SchemaDefinitionError

if TYPE_CHECKING:
    from .role_context import RoleContext

__all__ = ["ContextRegistry", "default_registry", "qualified_name"]


class ContextRegistry:
    """A mapping of role name to the ``RoleContext`` subclass that reads it.

    ``RoleContext`` subclasses register in ``default_registry`` unless declared with ``registry=``; an
    isolated registry keeps tests, or several recipes in one process, apart. One role has one schema per
    registry. Re-defining the same class (same ``module:QualName``, as a notebook re-run or a module reload
    does) replaces it.
    """

    def __init__(self, name: str = "registry") -> None:
        self.name = name
        self._by_role: dict[str, type[RoleContext]] = {}
        self._lock = threading.Lock()

    def register(self, schema: type[RoleContext]) -> type[RoleContext]:
        """Register ``schema`` for each of its roles; a second, different schema for a role is an error."""
        roles = schema.__verl_ctx_roles__
        if not roles:
            raise SchemaDefinitionError(f"{qualified_name(schema)} has no role= and cannot be registered")
        with self._lock:
            for role in roles:
                current = self._by_role.get(role)
                if current is not None and qualified_name(current) != qualified_name(schema):
                    raise SchemaDefinitionError(
                        f"role '{role}' already has schema {qualified_name(current)} in {self.name}; "
                        f"{qualified_name(schema)} cannot claim it too. Give one role one schema, share one with "
                        "role=(...) for several roles, or register it in its own ContextRegistry."
                    )
            for role in roles:
                self._by_role[role] = schema
        return schema

    def unregister(self, schema: type[RoleContext]) -> None:
        """Remove ``schema`` from every role it holds here."""
        with self._lock:
            for role, held in list(self._by_role.items()):
                if held is schema:
                    del self._by_role[role]

    def get(self, role: str) -> type[RoleContext] | None:
        return self._by_role.get(role)

    def __getitem__(self, role: str) -> type[RoleContext]:
        return self._by_role[role]

    def __contains__(self, role: object) -> bool:
        return role in self._by_role

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._by_role))

    def __len__(self) -> int:
        return len(self._by_role)

    def roles(self) -> list[str]:
        return sorted(self._by_role)

    def schemas(self) -> list[type[RoleContext]]:
        """Each registered schema once, in role order."""
        seen: dict[type[RoleContext], None] = {}
        for role in sorted(self._by_role):
            seen.setdefault(self._by_role[role])
        return list(seen)

    def clear(self) -> None:
        with self._lock:
            self._by_role.clear()

    def __repr__(self) -> str:
        return f"ContextRegistry({self.name!r}, roles={self.roles()})"


def qualified_name(cls: type) -> str:
    """``module:QualName``: how a schema is named in envelopes, lock files and messages."""
    return f"{cls.__module__}:{cls.__qualname__}"


default_registry = ContextRegistry("the default registry")
