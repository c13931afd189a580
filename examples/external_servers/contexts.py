"""The rollout context of a recipe whose LLM servers run outside the training job."""

from __future__ import annotations

from verl_ctx.integrations.verl import ExternalRolloutContext


class RolloutContext(ExternalRolloutContext, role="rollout"):
    """``routing`` (servers, policy, timeout, retries) comes from ExternalRolloutContext; add your own fields."""

    system_prompt: str = "You are a careful assistant."
