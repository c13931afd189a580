"""The recipe's entry point, as verl's recipe collection writes them (nothing here knows verl-ctx):

    python3 -m recipe.shaped_ppo.main_shaped_ppo --config-path=config --config-name=shaped_ppo_trainer ...

run from the folder that holds ``verl/`` and ``recipe/``. Its TaskRunner derives from verl's legacy
``BaseTaskRunner`` and registers the recipe's own workers; its trainer is a ``RayPPOTrainer`` of its own.
"""

from __future__ import annotations

import socket
from typing import Any

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo import run_ppo
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.utils import Role, create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
from verl.utils.device import auto_set_device


class ShapedPPOTrainer(RayPPOTrainer):
    """The recipe's trainer: verl's, its rewards scaled by ``shaped_ppo.reward_scale``."""


@ray.remote(num_cpus=1)
class TaskRunner(BaseTaskRunner):
    """Registers the recipe's workers (``actor_rollout`` without a reference policy), then trains."""

    def run(self, config: Any) -> None:
        from verl.single_controller.ray import RayWorkerGroup
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        from .workers import ShapedCriticWorker, ShapedHybridWorker

        print(f"TaskRunner on {socket.gethostname()}")
        OmegaConf.resolve(config)
        hybrid = Role.ActorRolloutRef if need_reference_policy(config) else Role.ActorRollout
        self.role_worker_mapping[hybrid] = ray.remote(ShapedHybridWorker)
        self.mapping[hybrid] = "global_pool"
        if need_critic(config):
            self.role_worker_mapping[Role.Critic] = ray.remote(ShapedCriticWorker)
            self.mapping[Role.Critic] = "global_pool"
        model: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        pools = self.init_resource_pool_mgr(config)
        train = create_rl_dataset(config.data.train_files, config.data, model.tokenizer, model.processor, is_train=True)
        val = create_rl_dataset(config.data.val_files, config.data, model.tokenizer, model.processor, is_train=False)
        trainer = ShapedPPOTrainer(
            config=config,
            tokenizer=model.tokenizer,
            processor=model.processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=pools,
            ray_worker_group_cls=RayWorkerGroup,
            train_dataset=train,
            val_dataset=val,
            collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train),
        )
        trainer.init_workers()
        trainer.fit()


def check_recipe_config(config: Any) -> None:
    """The recipe's own pre-launch check (in place of verl main_ppo's)."""
    if config.shaped_ppo.reward_scale <= 0:
        raise ValueError(f"shaped_ppo.reward_scale must be > 0, got {config.shaped_ppo.reward_scale}")


@hydra.main(config_path="config", config_name="shaped_ppo_trainer", version_base=None)
def main(config: Any) -> None:
    auto_set_device(config)
    check_recipe_config(config)
    run_ppo(config, task_runner_class=TaskRunner)


if __name__ == "__main__":
    main()
