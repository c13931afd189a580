"""``launch``: run verl's PPO entry with every role's context bound (what ``verl-ctx run`` calls)."""

from __future__ import annotations

from typing import Any

from ..._validate import ContextSet
from ._binding import WORKER_CLASS_ROLES
from ._config_channel import bind_config
from ._runners import make_task_runner
from ._store import DEFAULT_OFFLOAD_BYTES, offload_large

__all__ = ["launch", "prepare"]


def prepare(
    config: Any,
    contexts: ContextSet,
    *,
    offload_threshold: int = DEFAULT_OFFLOAD_BYTES,
    task_runner_base: type | None = None,
) -> Any:
    """Bind ``contexts`` into ``config`` and a TaskRunner class; returns the ``ray.remote`` TaskRunner.

    Needs Ray running when a payload is above ``offload_threshold`` (it goes to the object store).
    """
    envelopes = offload_large(contexts.envelopes(), threshold=offload_threshold)
    bind_config(config, envelopes)
    by_worker = {role: env for role, env in envelopes.items() if role in WORKER_CLASS_ROLES}
    return make_task_runner(by_worker, use_v1=bool(config.trainer.use_v1), base=task_runner_base)


def launch(
    config: Any,
    contexts: ContextSet,
    *,
    offload_threshold: int = DEFAULT_OFFLOAD_BYTES,
    task_runner_base: type | None = None,
) -> None:
    """Run verl's PPO training (``trainer.use_v1`` picks v1 or legacy) with every role's context delivered.

    Does what ``python -m verl.trainer.main_ppo`` does after composing the config, with a bound TaskRunner.
    """
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if any(size > offload_threshold for size in contexts.payload_sizes().values()):
        _init_ray_as_verl_does(config)
    runner = prepare(config, contexts, offload_threshold=offload_threshold, task_runner_base=task_runner_base)
    run_ppo(config, task_runner_class=runner)


def _init_ray_as_verl_does(config: Any) -> None:
    """``ray.init`` with the arguments ``run_ppo`` would use (it skips its own init when Ray is up)."""
    import ray
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    if ray.is_initialized():
        return
    ray_init_kwargs = config.ray_kwargs.get("ray_init", {})
    runtime_env = OmegaConf.merge(get_ppo_ray_runtime_env(config), ray_init_kwargs.get("runtime_env", {}))
    kwargs: dict[str, Any] = OmegaConf.to_container(OmegaConf.create({**ray_init_kwargs, "runtime_env": runtime_env}))  # type: ignore[assignment]
    ray.init(**kwargs)
