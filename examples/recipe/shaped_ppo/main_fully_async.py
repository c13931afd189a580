"""A fully-async recipe: verl's ``FullyAsyncTaskRunner`` subclassed as verl's recipe collection does (reward_queue),
its trainer a Ray actor of its own, its rollouter separate. The subclass builds the trainer's mapping and pools in
``_create_trainer`` (as verl's does) and binds them with one line::

    python3 -m recipe.shaped_ppo.main_fully_async --config-path=config --config-name=shaped_fully_async ...
"""

from __future__ import annotations

from typing import Any

import hydra
import ray
from verl.experimental.fully_async_policy.fully_async_main import FullyAsyncTaskRunner
from verl.experimental.fully_async_policy.fully_async_trainer import FullyAsyncTrainer
from verl.experimental.separation.utils import create_resource_pool_manager
from verl.trainer.ppo.utils import Role

from verl_ctx.integrations.verl import bind_workers

# verl's runner is a Ray actor class; a subclass derives from the class it wraps (reward_queue does the same).
_VerlRunner: Any = FullyAsyncTaskRunner.__ray_metadata__.modified_class


@ray.remote(num_cpus=1)
class TaskRunner(_VerlRunner):
    def _create_trainer(self, config: Any) -> None:
        mapping = {role: cls for role, cls in self.components["role_worker_mapping"].items() if role != Role.Rollout}
        pools = create_resource_pool_manager(config, roles=list(mapping))
        bind_workers(mapping, config, pools)  # the line verl-ctx adds
        trainer = FullyAsyncTrainer.remote(
            config=config,
            tokenizer=self.components["tokenizer"],
            role_worker_mapping=mapping,
            resource_pool_manager=pools,
            ray_worker_group_cls=self.components["ray_worker_group_cls"],
            device_name=config.trainer.device,
        )
        ray.get(trainer.init_workers.remote())
        self.components["trainer"] = trainer


@hydra.main(config_path="config", config_name="shaped_fully_async", version_base=None)
def main(config: Any) -> None:
    from verl.trainer.main_ppo import run_ppo

    config.actor_rollout_ref.rollout.nnodes = config.rollout.nnodes
    config.actor_rollout_ref.rollout.n_gpus_per_node = config.rollout.n_gpus_per_node
    run_ppo(config, task_runner_class=TaskRunner)


if __name__ == "__main__":
    main()
