"""``ContextSet``: what ``validate`` returns — each role's typed context, where each value came from, its envelope."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from ._envelope import encode
from ._field_errors import plain
from ._schema import RoleContext
from ._secret_schema import holds_secret_at, secrets_in

__all__ = ["ContextSet", "Provenance", "Source", "holds_secret"]

Source = Literal["schema default", "config file", "command-line override"]


@dataclass(frozen=True)
class Provenance:
    """One leaf value of one role's context and where it came from.

    ``value`` is JSON-native (ISO times, enum values, secrets as stars); ``path`` is dotted from the config root.
    """

    role: str
    path: str
    value: Any
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


def holds_secret(value: Any) -> bool:
    """Whether a secret value is anywhere in ``value`` (an instance, not a type: ``None`` secrets do not count).

    A model is first asked at the paths its schema can hold a secret at (``_secret_schema``: any depth, any
    container pydantic validates). Then the value itself is walked, for secrets the schema cannot name (an ``Any``
    field, extra fields): models, dataclasses, mappings and collections, at any depth.
    """
    if isinstance(value, BaseModel) and holds_secret_at(value, type(value)):
        return True  # a path its schema marks secret holds a value: whatever the depth or the container
    return next(secrets_in(value), None) is not None
