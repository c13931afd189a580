"""The recipe's own unit tests: its worker code reads its contexts, with verl's real config objects, no Ray.

``verl_ctx.testing`` builds what verl hands each piece of code at run time (a ``TrainingWorkerConfig``, verl's
composed Hydra config, a worker class bound as ``verl-ctx run`` binds it). Copy this file beside your recipe.
Run: ``pytest examples/custom_recipe``.
"""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from verl_ctx import decode
from verl_ctx.errors import ContextError, MissingContextError
from verl_ctx.testing import bound_worker, hydra_config, worker_config

from .contexts import CriticContext, Judge, RewardContext, RolloutContext
from .workers import CriticWorker, agent_loop_settings, reward_settings


def test_the_critic_reads_its_context_from_verls_worker_config() -> None:
    """What CriticWorker.__init__ reads from the TrainingWorkerConfig verl hands it."""
    ctx = decode(worker_config(CriticContext(value_clip=0.3), model_type="value_model"), CriticContext)
    assert (ctx.value_clip, ctx.shaping) == (0.3, "none")


def test_a_bound_critic_worker_carries_the_drivers_context() -> None:
    """The worker class `--worker critic=...` puts in verl's role mapping holds the context it was bound to."""
    worker = bound_worker(CriticWorker, CriticContext(warmup_steps=10))
    assert decode(worker, CriticContext).warmup_steps == 10


def test_the_reward_code_reads_the_judge_from_the_hydra_config() -> None:
    """The reward manager gets verl's whole config; the judge's key stays a secret there."""
    config = hydra_config(RewardContext(judge=Judge(api_key=SecretStr("sk-test")), length_penalty=-0.5))
    settings = reward_settings(config)
    assert settings.length_penalty == -0.5
    assert settings.judge.api_key is not None
    assert settings.judge.api_key.get_secret_value() == "sk-test"
    assert "sk-test" not in repr(settings)


def test_the_agent_loop_reads_the_rollout_config() -> None:
    """An agent loop is handed the rollout section of verl's config."""
    config = hydra_config(RolloutContext(max_tool_calls=1))
    assert agent_loop_settings(config.actor_rollout_ref.rollout).max_tool_calls == 1


def test_a_run_without_a_reward_context_is_a_clear_error() -> None:
    """Code that needs a context the launch did not carry fails with verl-ctx's error, not a KeyError."""
    with pytest.raises(MissingContextError) as caught:
        reward_settings(hydra_config(CriticContext()))
    assert isinstance(caught.value, ContextError)
    assert "reward" in str(caught.value)
