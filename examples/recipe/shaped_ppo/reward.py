"""The recipe's reward function (``reward.custom_reward_function`` in config/shaped_ppo_trainer.yaml): an exact-match
score with the reward context's length penalty. verl's reward loop calls it with ``reward_kwargs``, where
``verl-ctx run`` puts the context; one ``decode`` line reads it."""

from __future__ import annotations

from typing import Any

from recipe.shaped_ppo.contexts import RewardContext  # verl loads this file by path: no package, no relative import

from verl_ctx import decode


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None, **kwargs: Any
) -> float:
    ctx = decode(kwargs, RewardContext)  # the line verl-ctx adds
    exact = 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0
    return exact + float(ctx.length_penalty) * len(solution_str)
