"""Ray fixtures: one local cluster per test module, workers able to import this repository's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl integration tests need `pip install 'verl-ctx[verl]'`")
pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[2]


def ray_runtime_env() -> dict[str, Any]:
    """Workers import `tests.*` probe modules from the repository, as a recipe's workers import its code."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {"env_vars": {"PYTHONPATH": path, "RAY_AUTH_MODE": "disabled"}}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster for the whole module (starting one costs seconds)."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env=ray_runtime_env())
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def pools() -> Iterator[Any]:
    """Make verl worker groups on CPU; their workers and placement groups are released after the test.

    Returns ``make(ray_cls, process_on_nodes)``: a ``RayWorkerGroup`` over a fresh ``RayResourcePool``.
    """
    import ray
    from ray.util.placement_group import remove_placement_group
    from verl.single_controller.ray import RayResourcePool, RayWorkerGroup

    made: list[tuple[Any, Any]] = []

    def make(ray_cls: Any, process_on_nodes: list[int]) -> Any:
        pool = RayResourcePool(process_on_nodes=process_on_nodes, use_gpu=False, max_colocate_count=1)
        group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=ray_cls, device_name="cpu")
        made.append((pool, group))
        return group

    yield make
    for pool, group in made:
        for worker in group._workers:
            ray.kill(worker)
        for pg in pool.pgs or ():
            remove_placement_group(pg)


@pytest.fixture(scope="module")
def verl_config() -> Any:
    """verl's own ppo_trainer config, composed as `verl-ctx run` composes it, with a critic and a ref."""
    from verl_ctx.integrations.verl import compose_config

    return compose_config(
        [
            "algorithm.adv_estimator=gae",
            "actor_rollout_ref.actor.use_kl_loss=True",
            "actor_rollout_ref.rollout.name=vllm",  # the LLM client reads it; nothing starts vLLM
        ],
    )
