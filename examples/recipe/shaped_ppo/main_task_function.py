"""A recipe whose whole job is one ``@ray.remote`` function (``main_task``), started by its own main; it binds its
workers with one line::

    python3 -m recipe.shaped_ppo.main_task_function --config-path=config --config-name=shaped_ppo_trainer ...
"""

from __future__ import annotations

from typing import Any

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

from verl_ctx.integrations.verl import bind_workers

from .train_legacy import role_workers, train


@ray.remote(num_cpus=1)
def main_task(config: Any) -> None:
    OmegaConf.resolve(config)
    role_worker_mapping, resource_pool_manager = role_workers(config)
    bind_workers(role_worker_mapping, config, resource_pool_manager)  # the line verl-ctx adds
    train(config, role_worker_mapping, resource_pool_manager)


@hydra.main(config_path="config", config_name="shaped_ppo_trainer", version_base=None)
def main(config: Any) -> None:
    if not ray.is_initialized():
        ray.init(runtime_env=get_ppo_ray_runtime_env(config))
    ray.get(main_task.remote(config))


if __name__ == "__main__":
    main()
