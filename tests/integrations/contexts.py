"""Role schemas the integration tests send through Ray, one per verl role, in their own registry."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from verl_ctx import ContextRegistry, RoleContext

#: Kept out of the default registry, so no test's validate() sees another test's schemas.
REGISTRY = ContextRegistry("integration test contexts")


class DemoActorContext(RoleContext, role="actor", registry=REGISTRY):
    entropy_bonus: float = Field(0.0, ge=0)
    freeze_embeddings: bool = False


class DemoRefContext(RoleContext, role="ref", registry=REGISTRY):
    kl_temperature: float = Field(1.0, gt=0)


class DemoCriticContext(RoleContext, role="critic", registry=REGISTRY):
    value_clip: float = Field(0.2, gt=0)
    shaping: Literal["none", "length_penalty"] = "none"


class DemoRolloutContext(RoleContext, role="rollout", registry=REGISTRY):
    system_prompt: str = "You are a careful assistant."
    max_tool_calls: int = Field(4, ge=0)


class Judge(BaseModel):
    url: str = "http://judge:8000"
    api_key: SecretStr | None = None


class DemoRewardContext(RoleContext, role="reward", registry=REGISTRY):
    judge: Judge = Field(default_factory=Judge)
    length_penalty: float = Field(0.0, le=0)


#: role -> schema, for the reporting workers that read every role.
SCHEMAS: dict[str, type[RoleContext]] = {
    "actor": DemoActorContext,
    "ref": DemoRefContext,
    "critic": DemoCriticContext,
    "rollout": DemoRolloutContext,
    "reward": DemoRewardContext,
}
