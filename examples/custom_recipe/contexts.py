"""The typed contexts of a custom PPO recipe: one schema per role. Import this module on the driver
(``verl-ctx run -s examples.custom_recipe.contexts``) and in the worker code that reads them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from verl_ctx import RoleContext, migration


class ActorContext(RoleContext, role="actor"):
    """What the actor's training worker needs beyond verl's own config."""

    entropy_bonus: float = Field(0.0, ge=0, description="Extra entropy coefficient for this recipe's loss.")
    freeze_embeddings: bool = False


class RefContext(RoleContext, role="ref"):
    """The reference policy's KL shaping."""

    kl_temperature: float = Field(1.0, gt=0)


class CriticContext(RoleContext, role="critic", version=2):
    """Value-head shaping for the critic."""

    value_clip: float = Field(0.2, gt=0)
    warmup_steps: int = Field(0, ge=0)
    shaping: Literal["none", "length_penalty"] = "none"

    @migration(from_version=1)
    def _clip_was_named_clip(data: dict[str, object]) -> dict[str, object]:
        # v1 called the field `clip`; payloads from a v1 driver still decode.
        if "clip" in data:
            data["value_clip"] = data.pop("clip")
        return data


class RolloutContext(RoleContext, role="rollout"):
    """Sampling hints read by agent loops in the rollout workers."""

    system_prompt: str = "You are a careful assistant."
    max_tool_calls: int = Field(4, ge=0)


class Judge(BaseModel):
    url: str = "http://judge:8000"
    api_key: SecretStr | None = None
    timeout_s: float = Field(30.0, gt=0)


class RewardContext(RoleContext, role="reward"):
    """How the reward manager scores responses."""

    judge: Judge = Field(default_factory=Judge)
    length_penalty: float = Field(0.0, le=0)
