"""What the recipe's runners of every shape share: verl's legacy trainer built over their mapping and pools, then run.

Kept apart so that each ``main_*`` shows only what differs between runner shapes: how the runner is written and
started, and the one line that binds it (``bind_workers``).
"""

from __future__ import annotations

from typing import Any

from verl.trainer.ppo.utils import Role, create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy


def role_workers(config: Any) -> tuple[dict[Any, Any], Any]:
    """The recipe's worker classes by verl role, and a ``ResourcePoolManager`` putting them all in one pool."""
    import ray
    from verl.trainer.ppo.ray_trainer import ResourcePoolManager

    from .workers import ShapedCriticWorker, ShapedHybridWorker

    hybrid = Role.ActorRolloutRef if need_reference_policy(config) else Role.ActorRollout
    role_worker_mapping: dict[Any, Any] = {hybrid: ray.remote(ShapedHybridWorker)}
    if need_critic(config):
        role_worker_mapping[Role.Critic] = ray.remote(ShapedCriticWorker)
    config.reward.reward_model.nnodes = config.trainer.nnodes  # as verl's BaseTaskRunner.init_resource_pool_mgr
    config.reward.reward_model.n_gpus_per_node = config.trainer.n_gpus_per_node
    pools = ResourcePoolManager(
        resource_pool_spec={"global_pool": [config.trainer.n_gpus_per_node] * config.trainer.nnodes},
        mapping=dict.fromkeys(role_worker_mapping, "global_pool"),
    )
    return role_worker_mapping, pools


def train(config: Any, role_worker_mapping: dict[Any, Any], resource_pool_manager: Any) -> None:
    """verl's legacy ``RayPPOTrainer`` over the runner's mapping and pools: workers started, then ``fit``."""
    from verl.single_controller.ray import RayWorkerGroup
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.dataset.rl_dataset import collate_fn
    from verl.workers.config import HFModelConfig

    model: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
    train_set = create_rl_dataset(config.data.train_files, config.data, model.tokenizer, model.processor)
    val_set = create_rl_dataset(config.data.val_files, config.data, model.tokenizer, model.processor, is_train=False)
    trainer = RayPPOTrainer(
        config=config,
        tokenizer=model.tokenizer,
        processor=model.processor,
        role_worker_mapping=role_worker_mapping,
        resource_pool_manager=resource_pool_manager,
        ray_worker_group_cls=RayWorkerGroup,
        train_dataset=train_set,
        val_dataset=val_set,
        collate_fn=collate_fn,
        train_sampler=create_rl_sampler(config.data, train_set),
    )
    trainer.init_workers()
    trainer.fit()
