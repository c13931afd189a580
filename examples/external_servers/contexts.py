"""The rollout context of a recipe whose LLM servers run outside the training job."""

from __future__ import annotations

from verl_ctx.integrations.verl.external import ExternalRolloutContext


class RolloutContext(ExternalRolloutContext, role="rollout"):
    """``routing`` (servers, policy, faults, weight_sync, max_staleness) comes from ExternalRolloutContext."""

    system_prompt: str = "You are a careful assistant."
