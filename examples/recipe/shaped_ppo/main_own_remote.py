"""A recipe whose TaskRunner is a plain class that its own main makes remote and runs (no verl base, no
``run_ppo``); it binds its workers with one line::

    python3 -m recipe.shaped_ppo.main_own_remote --config-path=config --config-name=shaped_ppo_trainer ...
"""

from __future__ import annotations

from typing import Any

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

from verl_ctx.integrations.verl import bind_workers

from .train_legacy import role_workers, train


class TaskRunner:
    def run(self, config: Any) -> None:
        OmegaConf.resolve(config)
        role_worker_mapping, resource_pool_manager = role_workers(config)
        bind_workers(role_worker_mapping, config, resource_pool_manager)  # the line verl-ctx adds
        train(config, role_worker_mapping, resource_pool_manager)


def run(config: Any) -> None:
    if not ray.is_initialized():
        ray.init(runtime_env=get_ppo_ray_runtime_env(config))
    runner = ray.remote(num_cpus=1)(TaskRunner).remote()
    ray.get(runner.run.remote(config))


@hydra.main(config_path="config", config_name="shaped_ppo_trainer", version_base=None)
def main(config: Any) -> None:
    run(config)


if __name__ == "__main__":
    main()
