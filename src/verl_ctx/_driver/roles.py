"""Which roles a verl run starts, by verl's own rules.

verl's rules live in ``verl.trainer.ppo.utils`` (``need_critic``, ``need_reference_policy``,
``need_reward_model``, ``need_teacher_policy``) and, for LoRA runs whose actor computes the reference
log-probs itself (``ref_in_actor``), in the trainers. Importing them pulls torch and Ray (~5 s): too slow for a
pre-launch check that must finish well under a second. So the rules are mirrored here, expression for
expression (verl 0.9.x), and ``tests/integrations/test_roles.py`` checks the mirror against verl's own functions
over verl's own launch scripts, so a verl upgrade that changes a rule fails our tests, not a user's job.

Contexts for roles verl does not build a worker class for (reward, teacher, custom roles) travel in the Hydra
config; ``reward`` is always read (verl always starts its reward-loop workers), ``teacher`` only when
distillation is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "inactive_roles",
    "need_critic",
    "need_reference_policy",
    "need_reward_model",
    "need_teacher_policy",
    "ref_in_actor",
]


def _get(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def need_critic(config: Mapping[str, Any]) -> bool:
    """``verl.trainer.ppo.utils.need_critic``: ``critic.enable`` if set, else the GAE estimator."""
    enable = _get(config, "critic.enable")
    if enable is not None:
        return bool(enable)
    return bool(_get(config, "algorithm.adv_estimator") == "gae")


def need_reference_policy(config: Mapping[str, Any]) -> bool:
    """``verl.trainer.ppo.utils.need_reference_policy``: a KL term in the reward or in the actor's loss."""
    return bool(
        _get(config, "algorithm.use_kl_in_reward", False) or _get(config, "actor_rollout_ref.actor.use_kl_loss")
    )


def need_reward_model(config: Mapping[str, Any]) -> bool:
    """``verl.trainer.ppo.utils.need_reward_model``: LLM reward servers (``reward.reward_model.enable``)."""
    return bool(_get(config, "reward.reward_model.enable"))


def need_teacher_policy(config: Mapping[str, Any]) -> bool:
    """``verl.trainer.ppo.utils.need_teacher_policy``: distillation teachers (``distillation.enabled``)."""
    return bool(_get(config, "distillation.enabled"))


def ref_in_actor(config: Mapping[str, Any]) -> bool:
    """The trainers' ``ref_in_actor``: a LoRA actor computes reference log-probs itself; no ref worker is built."""
    rank = _get(config, "actor_rollout_ref.model.lora.rank", 0) or 0
    if rank <= 0:
        rank = _get(config, "actor_rollout_ref.model.lora_rank", 0) or 0
    return bool(rank > 0 or _get(config, "actor_rollout_ref.model.lora_adapter_path") is not None)


def inactive_roles(config: Mapping[str, Any], roles: Iterable[str]) -> dict[str, str]:
    """``role -> reason`` for each of ``roles`` that the run described by ``config`` will not start or read.

    Only a full verl config (one with ``algorithm`` and ``actor_rollout_ref``) is judged; for anything
    else every role is taken as active.
    """
    if not (isinstance(config, Mapping) and "algorithm" in config and "actor_rollout_ref" in config):
        return {}
    out = {}
    wanted = set(roles)
    if "critic" in wanted and not need_critic(config):
        estimator = _get(config, "algorithm.adv_estimator")
        out["critic"] = (
            f"algorithm.adv_estimator={estimator} does not use a critic and critic.enable is not set; "
            "set critic.enable=True or drop the critic context"
        )
    if "ref" in wanted:
        if not need_reference_policy(config):
            out["ref"] = (
                "neither actor_rollout_ref.actor.use_kl_loss nor algorithm.use_kl_in_reward is on, so no reference "
                "policy runs; turn one on or drop the ref context"
            )
        elif ref_in_actor(config):
            out["ref"] = (
                "this is a LoRA run (actor_rollout_ref.model.lora.rank / lora_rank / lora_adapter_path), so the "
                "actor computes the reference log-probs itself and no ref worker is built; put what the reference "
                "pass needs in the actor context"
            )
    if "teacher" in wanted and not need_teacher_policy(config):
        out["teacher"] = "distillation.enabled is off, so no teacher model runs; turn it on or drop the context"
    return out
