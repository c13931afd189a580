"""Which roles a verl run starts, by verl's own rules.

verl's rules live in ``verl.trainer.ppo.utils`` (``need_critic``, ``need_reference_policy``), whose import
pulls torch and Ray (~5 s): too slow for a pre-launch check that must finish well under a second. So when
that module is already imported (inside a TaskRunner, or under ``verl-ctx run``) its functions are called;
otherwise the same rules are read here from the config. ``tests/integrations/test_roles.py`` checks the two
agree over a grid of configs, so a verl upgrade that changes a rule fails our tests, not a user's job.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["inactive_roles"]


def _get(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def need_critic(config: Mapping[str, Any]) -> bool:
    """Mirror of ``verl.trainer.ppo.utils.need_critic`` (verl 0.9.1)."""
    enable = _get(config, "critic.enable")
    if enable is not None:
        return bool(enable)
    return bool(_get(config, "algorithm.adv_estimator") == "gae")


def need_reference_policy(config: Mapping[str, Any]) -> bool:
    """Mirror of ``verl.trainer.ppo.utils.need_reference_policy`` (verl 0.9.1)."""
    return bool(
        _get(config, "algorithm.use_kl_in_reward", False) or _get(config, "actor_rollout_ref.actor.use_kl_loss")
    )


def _rules() -> tuple[Any, Any]:
    verl_utils = sys.modules.get("verl.trainer.ppo.utils")
    if verl_utils is not None:
        return verl_utils.need_critic, verl_utils.need_reference_policy
    return need_critic, need_reference_policy


def inactive_roles(config: Mapping[str, Any], roles: Iterable[str]) -> dict[str, str]:
    """``role -> reason`` for each of ``roles`` that the run described by ``config`` will not start.

    Only a full verl config (one with ``algorithm`` and ``actor_rollout_ref``) is judged; for anything
    else every role is taken as active.
    """
    if not (isinstance(config, Mapping) and "algorithm" in config and "actor_rollout_ref" in config):
        return {}
    critic_rule, ref_rule = _rules()
    cfg = _as_rule_input(config)
    out = {}
    wanted = set(roles)
    with warnings.catch_warnings():  # verl's need_critic warns on every call that returns False
        warnings.simplefilter("ignore")
        critic_on, ref_on = critic_rule(cfg), ref_rule(cfg)
    if "critic" in wanted and not critic_on:
        estimator = _get(config, "algorithm.adv_estimator")
        out["critic"] = (
            f"algorithm.adv_estimator={estimator} does not use a critic and critic.enable is not set; "
            "set critic.enable=True or drop the critic context"
        )
    if "ref" in wanted and not ref_on:
        out["ref"] = (
            "neither actor_rollout_ref.actor.use_kl_loss nor algorithm.use_kl_in_reward is on, so no reference "
            "policy runs; turn one on or drop the ref context"
        )
    return out


def _as_rule_input(config: Mapping[str, Any]) -> Any:
    """verl's rules read attributes (``config.critic.enable``); give them a DictConfig when they are verl's."""
    if "verl.trainer.ppo.utils" in sys.modules:
        from omegaconf import OmegaConf

        return OmegaConf.create(dict(config))
    return config
