"""The same recipe on verl's v1 trainer: its TaskRunner derives from ``TaskRunnerV1`` and builds the recipe's own
trainer (a subclass of verl's ``sync`` trainer). Launched like the legacy one:

    python3 -m recipe.shaped_ppo.main_shaped_ppo_v1 --config-path=config --config-name=shaped_ppo_trainer ...
"""

from __future__ import annotations

from typing import Any

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
from verl.utils.device import auto_set_device

from .main_shaped_ppo import check_recipe_config


@ray.remote(num_cpus=1)
class TaskRunner(TaskRunnerV1.__ray_actor_class__):
    """verl's v1 runner, with the recipe's trainer in place of the one trainer.v1.trainer_mode names."""

    def run(self, config: Any) -> None:
        import transfer_queue as tq
        from verl.trainer.ppo.v1 import get_trainer_cls

        class ShapedSyncTrainer(get_trainer_cls("sync")):  # type: ignore[misc]
            """The recipe's v1 trainer."""

        config.transfer_queue.enable = True
        OmegaConf.resolve(config)
        self.config = config
        tq.init(config.transfer_queue)
        try:
            self.trainer = ShapedSyncTrainer(config=config)
            self.trainer.init()
            self.init_agent_loop_manager()
            self.trainer.fit(self.agent_loop_manager)
        finally:
            tq.close()


@hydra.main(config_path="config", config_name="shaped_ppo_trainer", version_base=None)
def main(config: Any) -> None:
    auto_set_device(config)
    check_recipe_config(config)
    run_ppo(config, task_runner_class=TaskRunner)


if __name__ == "__main__":
    main()
