"""The demo's role schemas: one per verl role, as a recipe would declare them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from verl_ctx import RoleContext


class DemoActorContext(RoleContext, role="actor"):
    entropy_bonus: float = Field(0.0, ge=0)
    freeze_embeddings: bool = False


class DemoRefContext(RoleContext, role="ref"):
    kl_temperature: float = Field(1.0, gt=0)


class DemoCriticContext(RoleContext, role="critic"):
    value_clip: float = Field(0.2, gt=0)
    shaping: Literal["none", "length_penalty"] = "none"


class DemoRolloutContext(RoleContext, role="rollout"):
    system_prompt: str = "You are a careful assistant."
    max_tool_calls: int = Field(4, ge=0)


class Judge(BaseModel):
    url: str = "http://judge:8000"
    api_key: SecretStr | None = None


class DemoRewardContext(RoleContext, role="reward"):
    judge: Judge = Field(default_factory=Judge)
    length_penalty: float = Field(0.0, le=0)


#: role -> schema, for code that reads every role (the demo's reporting workers).
SCHEMAS: dict[str, type[RoleContext]] = {
    "actor": DemoActorContext,
    "ref": DemoRefContext,
    "critic": DemoCriticContext,
    "rollout": DemoRolloutContext,
    "reward": DemoRewardContext,
}
