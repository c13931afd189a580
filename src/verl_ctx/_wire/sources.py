"""The one reader: where a role's context can be found in whatever object a worker holds.

``decode(obj, Schema)`` asks an ordered list of sources, like pydantic-settings' settings sources. Each
source names one place relative to ``obj`` that may hold verl-ctx's reserved slot (``{role: entry}``); the
first place that holds one of the wanted roles wins. An entry is an envelope, its text, or a store reference
(its text too); references are fetched by the resolver registered for them.

The default sources are verl's channels, written as plain key paths so that reading needs no verl import:

====================================  ===================================================================
source                                what holds it
====================================  ===================================================================
the object itself                     an envelope, its text, or a store reference
``verl_ctx``                          an ``extra_context`` dict; the Hydra config's top-level slot (reward)
``extra_context.verl_ctx``            ``TrainingWorkerConfig`` (critic, and the actor's / ref's workers)
``custom.verl_ctx``                   ``RolloutConfig`` or the rollout part of the Hydra config
``rollout.custom.verl_ctx``           the ``actor_rollout_ref`` part of the Hydra config
``actor_rollout_ref.rollout...``      the whole Hydra config (rollout)
``config`` (then each of the above)   a worker object: ``self.config``
bound class                           a worker whose class verl-ctx created with envelopes (``__verl_ctx_envelopes__``)
====================================  ===================================================================

``register_source`` adds a place (a recipe keeping contexts elsewhere). Mappings are read with ``.get`` and
objects by attribute: verl's ``BaseConfig`` is a ``Mapping`` whose ``__getitem__`` is ``getattr``, so
``"key" in config`` raises ``AttributeError`` there.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import EnvelopeError, MissingContextError
from .envelope import (
    DEFAULT_MAX_BYTES,
    FORMAT_KEY,
    REF_KEY,
    RESERVED_KEY,
    check_envelope,
    check_ref,
    from_text,
    kind_of,
)

__all__ = ["ENVELOPES_ATTR", "Source", "find_envelope", "register_source", "sources"]

#: The class attribute of a worker class verl-ctx created that holds its envelopes, by role.
ENVELOPES_ATTR = "__verl_ctx_envelopes__"


@dataclass(frozen=True)
class Source:
    """One place a context may be: ``path`` from the object, then the reserved slot (``verl_ctx``)."""

    name: str
    path: tuple[str, ...]

    def slot(self, obj: object) -> object:
        node = obj
        for key in (*self.path, RESERVED_KEY):
            node = child(node, key)
            if node is None:
                return None
        return node


_sources: list[Source] = [
    Source("verl_ctx", ()),
    Source("extra_context.verl_ctx", ("extra_context",)),
    Source("custom.verl_ctx", ("custom",)),
    Source("rollout.custom.verl_ctx", ("rollout", "custom")),
    Source("actor_rollout_ref.rollout.custom.verl_ctx", ("actor_rollout_ref", "rollout", "custom")),
]
_lock = threading.Lock()

# Reference format -> "module:function" that fetches the envelope; imported on first use, so a process that
# only reads never imports Ray unless it meets a reference (the registry fsspec keeps for its protocols). The one
# place the core names an integration, as text: a worker that only imported ``verl_ctx`` must still resolve one.
_ref_resolvers: dict[int, str | Callable[[dict[str, Any]], object]] = {
    1: "verl_ctx.integrations.verl._store:fetch_envelope",
}


# The resolvers named above (verl-ctx's own), which take the reader's ``max_bytes=``.
_takes_max_bytes: set[Callable[..., object]] = set()


def sources() -> list[Source]:
    """The places ``decode`` looks, in order (a copy)."""
    return list(_sources)


def register_source(name: str, path: tuple[str, ...], *, first: bool = False) -> None:
    """Look for the reserved ``verl_ctx`` slot also at ``path`` (keys or attributes) from the decoded object."""
    with _lock:
        if all(s.path != path for s in _sources):
            source = Source(name, path)
            _sources.insert(0, source) if first else _sources.append(source)


def child(node: object, key: str) -> object:
    """``node[key]`` for a dict or DictConfig, ``node.key`` otherwise; ``None`` when it is not there."""
    if type(node) is dict:
        return node.get(key)
    if node is None or isinstance(node, (str, bytes, int, float)):
        return None
    if isinstance(node, Mapping) and not _reads_by_attribute(node):
        try:
            return node.get(key)
        except Exception:  # noqa: BLE001 - a DictConfig with a missing mandatory value, a strict mapping
            return None
    try:
        return getattr(node, key, None)
    except Exception:  # noqa: BLE001 - a property that raises is "not here"
        return None


def _reads_by_attribute(node: object) -> bool:
    # verl's BaseConfig dataclasses are Mappings over their attributes; read them as objects.
    return type(node).__module__.startswith("verl.")


def find_envelope(
    obj: object, roles: tuple[str, ...], *, role_given: bool = False, max_bytes: int = DEFAULT_MAX_BYTES
) -> dict[str, Any]:
    """The envelope for one of ``roles`` reachable from ``obj``; store references are fetched."""
    if type(obj) is dict:
        if FORMAT_KEY in obj:
            return check_envelope(obj)  # the hot path: an envelope itself
        slot = obj.get(RESERVED_KEY)
        if type(slot) is dict:  # the worker's hot path: an extra_context dict
            if len(roles) == 1:
                # One role: no ambiguity to report, and an envelope (a plain dict) needs no resolving.
                found = slot.get(roles[0])
                if type(found) is dict and FORMAT_KEY in found:
                    return check_envelope(found)
            else:
                found = _entry(slot, roles, "verl_ctx", role_given)
            if found is not None:
                return _resolve(found, max_bytes)
    entry = _direct(obj)
    if entry is not None:
        return _resolve(entry, max_bytes)
    looked: list[tuple[str, list[str]]] = []  # (where, the roles it holds)
    for holder, prefix in _holders(obj):
        for source in _sources:
            where = prefix + source.name
            slot = source.slot(holder)
            if slot is None:
                continue
            if not isinstance(slot, Mapping):
                raise EnvelopeError(f"'{where}' should map role names to envelopes; got {kind_of(slot)}")
            looked.append((where, _roles_in(slot)))
            found = _entry(slot, roles, where, role_given)
            if found is not None:
                return _resolve(found, max_bytes)
        carried = _bound_envelopes(holder)
        if carried is not None:
            where = f"{prefix}class {type(holder).__qualname__}"
            looked.append((where, _roles_in(carried)))
            found = _entry(carried, roles, where, role_given)
            if found is not None:
                return _resolve(found, max_bytes)
    raise _missing(obj, roles, looked)


def _direct(obj: object) -> object:
    """``obj`` itself when it is an envelope, a reference or their text."""
    if isinstance(obj, str):
        return obj
    marked = isinstance(obj, Mapping) and not _reads_by_attribute(obj)
    if marked and (child(obj, FORMAT_KEY) is not None or child(obj, REF_KEY) is not None):
        return dict(obj)  # type: ignore[call-overload]
    return None


def _holders(obj: object) -> list[tuple[object, str]]:
    """``obj`` and, for a worker, its ``config``: the objects the sources are asked about."""
    out: list[tuple[object, str]] = [(obj, "")]
    config = child(obj, "config") if not isinstance(obj, Mapping) else None
    if config is not None:
        out.append((config, "config."))
    return out


def _bound_envelopes(obj: object) -> Mapping[str, Any] | None:
    cls = obj if isinstance(obj, type) else type(obj)
    found = getattr(cls, ENVELOPES_ATTR, None)
    return found if isinstance(found, Mapping) else None


def _entry(slot: Mapping[str, Any], roles: tuple[str, ...], where: str, role_given: bool) -> object:
    present = [r for r in roles if child(slot, r) is not None]
    if not present:
        return None
    if len(present) > 1 and not role_given:
        raise EnvelopeError(
            f"'{where}' holds contexts for several roles this schema serves ({', '.join(present)}); "
            "pass role= to decode() to say which one"
        )
    return child(slot, present[0])


def _resolve(entry: object, max_bytes: int) -> dict[str, Any]:
    """An envelope from an entry: an envelope, a reference, or the text of either."""
    if isinstance(entry, str):
        entry = from_text(entry, max_bytes=max_bytes)
    elif isinstance(entry, Mapping) and not isinstance(entry, dict):
        entry = dict(entry)  # a DictConfig node or another mapping: plain data from here on
    if isinstance(entry, Mapping) and REF_KEY in entry:
        ref = check_ref(entry)
        fetch: Callable[..., object] = _resolver(ref)
        # verl-ctx's own resolver checks the reference's size against the reader's limit before fetching.
        return check_envelope(fetch(ref, max_bytes=max_bytes) if fetch in _takes_max_bytes else fetch(ref))
    return check_envelope(entry)


def _resolver(ref: dict[str, Any]) -> Callable[[dict[str, Any]], object]:
    ref_format = ref["verl_ctx_remote"]
    resolver = _ref_resolvers.get(ref_format)
    if resolver is None:
        raise EnvelopeError(f"no resolver for store references of format {ref_format}")
    if isinstance(resolver, str):
        module, _, name = resolver.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ImportError as e:  # Ray or verl is not installed in this process
            raise MissingContextError(
                f"[{ref['role']}] the context was sent by reference through Ray's object store, which this process "
                f"cannot reach: {e}",
                role=ref["role"],
            ) from None
        resolver = _ref_resolvers[ref_format] = getattr(loaded, name)
        _takes_max_bytes.add(resolver)
    return resolver


def _roles_in(slot: Mapping[str, Any]) -> list[str]:
    try:
        return sorted(map(str, slot))
    except Exception:  # noqa: BLE001 - a mapping that cannot list its keys
        return []


def _missing(obj: object, roles: tuple[str, ...], looked: list[tuple[str, list[str]]]) -> MissingContextError:
    wanted = " / ".join(roles)
    if looked:
        where = "; ".join(f"'{w}' holds contexts for {held or 'no role'}" for w, held in looked)
    else:
        where = f"found no '{RESERVED_KEY}' slot at any of: " + ", ".join(s.name for s in _sources)
    return MissingContextError(
        f"no verl-ctx context for role {wanted} in {kind_of(obj)}: {where}. Give the role a section under "
        f"extra_context in the config (extra_context.{roles[0]}.<field>=...) and launch with `verl-ctx run`, "
        "or put one there on the driver with verl_ctx.attach(extra_context, ctx)",
        role=roles[0],
    )
