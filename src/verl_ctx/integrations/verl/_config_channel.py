"""Contexts for code that receives verl's Hydra config instead of a ``TrainingWorkerConfig``.

Rollout servers, agent loops, reward managers and reward-loop workers are handed the Hydra config (or its
rollout part), so that config is their channel. verl prints it, resolves it and sends it to experiment
trackers, so envelopes go there as JSON-safe text (``to_text``), never bytes:

* the rollout context in ``actor_rollout_ref.rollout.custom.verl_ctx.rollout`` (``RolloutConfig.custom``,
  verl's documented extension point for custom rollout settings);
* every other config-channel role (reward, and custom roles) in a top-level ``verl_ctx.<role>`` key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from ..._decode import decode
from ..._envelope import RESERVED_KEY
from ..._errors import MissingContextError
from ..._schema import RoleContext, schema_info
from ._binding import WORKER_CLASS_ROLES
from ._store import ref_to_text, resolve_text

__all__ = ["bind_config", "config_context"]

_C = TypeVar("_C", bound=RoleContext)

_ROLLOUT_PATH = ("actor_rollout_ref", "rollout", "custom")


def bind_config(config: Any, envelopes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Write the config-channel roles' envelopes (or store references) into ``config`` as text.

    ``config`` is verl's composed ``DictConfig``; it is changed in place. Returns the dotted keys written.
    """
    from omegaconf import OmegaConf, open_dict

    written = []
    with open_dict(config):
        for role in sorted(envelopes):
            if role in WORKER_CLASS_ROLES:
                continue
            text = ref_to_text(envelopes[role])
            if role == "rollout":
                rollout = OmegaConf.select(config, "actor_rollout_ref.rollout")
                if rollout is not None:
                    if rollout.get("custom") is None:
                        rollout.custom = {}
                    rollout.custom.setdefault(RESERVED_KEY, {})
                    rollout.custom[RESERVED_KEY][role] = text
                    written.append(".".join((*_ROLLOUT_PATH, RESERVED_KEY, role)))
                    continue
            if config.get(RESERVED_KEY) is None:
                config[RESERVED_KEY] = {}
            config[RESERVED_KEY][role] = text
            written.append(f"{RESERVED_KEY}.{role}")
    return written


def config_context(config: Any, schema: type[_C], *, role: str | None = None) -> _C:
    """The typed context of ``schema``'s role from a verl config handed to user code.

    ``config`` may be the whole Hydra config, its ``actor_rollout_ref.rollout`` part, a ``RolloutConfig``
    dataclass, or a ``custom`` dict: the places an agent loop, reward manager or rollout server sees.
    """
    roles = (role,) if role is not None else schema_info(schema).roles
    for slot in _slots(config):
        for name in roles:
            text = slot.get(name)
            if isinstance(text, str):
                return decode(resolve_text(text), schema, role=name)
    raise MissingContextError(
        f"no verl-ctx context for role {' / '.join(roles)} in this config: looked under "
        f"'{RESERVED_KEY}', 'actor_rollout_ref.rollout.custom.{RESERVED_KEY}' and 'custom.{RESERVED_KEY}'. "
        "Launch with `verl-ctx run`, or write it with bind_config(config, envelopes) on the driver",
        role=roles[0],
    )


def _slots(config: Any) -> Iterable[Mapping[str, Any]]:
    for path in ((RESERVED_KEY,), (*_ROLLOUT_PATH, RESERVED_KEY), ("custom", RESERVED_KEY)):
        node = config
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
            if node is None:
                break
        if node is not None and isinstance(node, Mapping):
            yield node
