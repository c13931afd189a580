"""Our reading of which roles a run starts agrees with verl's own need_critic / need_reference_policy."""

from __future__ import annotations

import itertools
import warnings

import pytest

from verl_ctx._driver.roles import need_critic, need_reference_policy


@pytest.mark.parametrize(
    ("estimator", "critic_enable", "kl_loss", "kl_reward"),
    list(itertools.product(["gae", "grpo", "rloo"], [None, True, False], [True, False], [True, False])),
)
def test_mirror_agrees_with_verl(estimator: str, critic_enable: bool | None, kl_loss: bool, kl_reward: bool) -> None:
    """For every combination, the light rule gives verl's answer (a verl upgrade that changes a rule fails here)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import utils as verl_utils

    cfg = {
        "algorithm": {"adv_estimator": estimator, "use_kl_in_reward": kl_reward},
        "critic": {"enable": critic_enable},
        "actor_rollout_ref": {"actor": {"use_kl_loss": kl_loss}},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert need_critic(cfg) == verl_utils.need_critic(OmegaConf.create(cfg))
    assert need_reference_policy(cfg) == verl_utils.need_reference_policy(OmegaConf.create(cfg))
