"""A recipe whose TaskRunner is a plain ``@ray.remote`` class with no verl base (as most of verl's recipe collection
writes them), started by verl's ``run_ppo``; it binds its workers with one line::

    python3 -m recipe.shaped_ppo.main_plain_runner --config-path=config --config-name=shaped_ppo_trainer ...
"""

from __future__ import annotations

from typing import Any

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo import run_ppo

from verl_ctx.integrations.verl import bind_workers

from .train_legacy import role_workers, train


@ray.remote(num_cpus=1)
class TaskRunner:
    def run(self, config: Any) -> None:
        OmegaConf.resolve(config)
        role_worker_mapping, resource_pool_manager = role_workers(config)
        bind_workers(role_worker_mapping, config, resource_pool_manager)  # the line verl-ctx adds
        train(config, role_worker_mapping, resource_pool_manager)


@hydra.main(config_path="config", config_name="shaped_ppo_trainer", version_base=None)
def main(config: Any) -> None:
    run_ppo(config, task_runner_class=TaskRunner)


if __name__ == "__main__":
    main()
