"""``ContextSet``: what ``validate`` returns — each role's typed context, where each value came from, its envelope."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._model.field_errors import plain
from .._model.role_context import RoleContext
from .._secrets.plan import holds_secret
from .._wire.envelope import encode

__all__ = ["ContextSet", "Provenance", "ValueSource"]

ValueSource = Literal["schema default", "config file", "command-line override"]


@dataclass(frozen=True)
class Provenance:
    """One leaf value of one role's context and where it came from.

    ``value`` is JSON-native (ISO times, enum values, secrets as stars); ``path`` is dotted from the config root.
    """

    role: str
    path: str
    value: Any
    source: ValueSource


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

    def secret_roles(self) -> frozenset[str]:
        """Roles whose context holds a secret value: verl-ctx never puts those in a config or class definition."""
        return frozenset(role for role, ctx in self._contexts.items() if holds_secret(ctx))

    def redacted(self) -> dict[str, dict[str, Any]]:
        """Each role's values as JSON-native data with secrets as stars: safe to print, track or save."""
        return {role: plain(ctx) for role, ctx in self._contexts.items()}

    def describe(self) -> list[Provenance]:
        """Every leaf of every role with its value (secrets redacted) and its source."""
        return list(self.provenance)

    def __repr__(self) -> str:
        return f"ContextSet({', '.join(f'{r}={type(c).__name__}' for r, c in self._contexts.items())})"
