"""The recipe's typed contexts, one schema per role (added for verl-ctx; the rest of the recipe is unchanged but
for one ``decode`` line per worker)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from verl_ctx import RoleContext


class ActorContext(RoleContext, role="actor"):
    entropy_bonus: float = Field(0.0, ge=0)


class RefContext(RoleContext, role="ref"):
    kl_temperature: float = Field(1.0, gt=0)


class CriticContext(RoleContext, role="critic"):
    value_clip: float = Field(0.2, gt=0)


class RolloutContext(RoleContext, role="rollout"):
    max_tool_calls: int = Field(4, ge=0)


class RewardContext(RoleContext, role="reward"):
    length_penalty: float = Field(0.0, le=0)
    judge_key: SecretStr | None = None
