"""A custom reward function (``reward.custom_reward_function``) reads the reward context from the keyword arguments
verl hands it, loaded by verl's own loader, in a Ray worker process as verl's reward-loop workers run it; secrets
travel by store reference and never enter the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_ctx import validate
from verl_ctx.integrations.verl import compose_config, prepare

from .contexts import REGISTRY

pytestmark = pytest.mark.ray

SECRET = "sk-judge-0123456789"


@pytest.fixture(autouse=True)
def _judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's key in the environment, where the config reads it (``${oc.env:...}``)."""
    monkeypatch.setenv("VERL_CTX_TEST_JUDGE_KEY", SECRET)


# A GRPO recipe's reward function: an LLM judge's URL, key and timeout from the reward context.
_JUDGED = f"""
from verl_ctx import decode

from tests.integrations.contexts import DemoRewardContext


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    ctx = decode(kwargs, DemoRewardContext)
    key = ctx.judge.api_key.get_secret_value() if ctx.judge.api_key else ""
    return {{"score": 1.0 + ctx.length_penalty, "url": ctx.judge.url, "key_ok": key == {SECRET!r}}}
"""

# A reward function of verl's plain signature, which takes no keyword arguments it does not name.
_PLAIN = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return 0.5
"""


def _prepared(reward_file: Path) -> tuple[Any, dict[str, str]]:
    """verl's config with the reward function and the reward context set (the key from the environment, as a secret
    should come), validated, and prepared for launch."""
    config = compose_config(
        [
            f"reward.custom_reward_function.path={reward_file}",
            "+extra_context.reward.judge.url=http://judge.internal:8000",
            "+extra_context.reward.judge.api_key=${oc.env:VERL_CTX_TEST_JUDGE_KEY}",
            "+extra_context.reward.length_penalty=-0.25",
        ]
    )
    contexts = validate(config, registry=REGISTRY)
    return config, prepare(config, contexts).channels


def _score_in_a_worker(config: Any) -> Any:
    """verl's ``get_custom_reward_fn`` and a call as its reward managers make it, in a Ray worker process."""
    import ray

    @ray.remote(num_cpus=0)
    def score(config: Any) -> Any:
        from verl.trainer.ppo.reward import get_custom_reward_fn

        fn = get_custom_reward_fn(config)
        return fn(data_source="gsm8k", solution_str="42", ground_truth="42", extra_info={"index": 0})

    return ray.get(score.remote(config), timeout=120)


def test_a_reward_function_reads_its_context_from_the_kwargs_verl_hands_it(ray_cluster: None, tmp_path: Path) -> None:
    """compute_score(..., **kwargs) with decode(kwargs, RewardContext): the judge's URL, key and penalty arrive."""
    reward_file = tmp_path / "judged.py"
    reward_file.write_text(_JUDGED)
    config, channels = _prepared(reward_file)
    assert "reward.custom_reward_function.reward_kwargs.verl_ctx.reward" in channels["reward"]
    assert "by reference" in channels["reward"]  # it holds a secret: through the store, not in the config
    assert SECRET not in OmegaConf.to_yaml(config)
    assert _score_in_a_worker(config) == {"score": 0.75, "url": "http://judge.internal:8000", "key_ok": True}


def test_a_reward_function_that_takes_no_kwargs_is_left_as_verl_calls_it(ray_cluster: None, tmp_path: Path) -> None:
    """A compute_score without **kwargs gets no extra argument (verl would raise TypeError on every sample); the
    context still reaches code handed the config (a reward manager) in its top-level key."""
    reward_file = tmp_path / "plain.py"
    reward_file.write_text(_PLAIN)
    config, channels = _prepared(reward_file)
    assert channels["reward"].startswith("config: verl_ctx.reward")
    assert "reward_kwargs" not in channels["reward"]
    assert _score_in_a_worker(config) == 0.5
