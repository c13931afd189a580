"""Ray fixtures: one local cluster per test module, workers able to import this repository's tests."""

from __future__ import annotations

import contextlib
import gc
import os
import warnings
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


@contextlib.contextmanager
def ray_sockets_closed_quietly() -> Iterator[None]:
    """Around Ray's start-up or shutdown in this process: the sockets Ray leaves unclosed there are not ours.

    Ray's node start-up (ports probed, its dashboard and log monitors) and shutdown drop sockets without closing
    them; CPython reports each as a ``ResourceWarning`` when it is collected, at whatever line runs then, so the
    project's ``filterwarnings = error`` failed a random test's setup (2 runs in 5 on a loaded machine). The filter
    is this one message and category, only while Ray's own code runs, and the collection is forced inside it so
    nothing of Ray's is left to be collected later under the project's filters.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"unclosed <socket\.socket", category=ResourceWarning)
        try:
            yield
        finally:
            gc.collect()


@pytest.fixture(scope="module", autouse=True)
def _ray_leftovers_collected() -> Iterator[None]:
    """At the end of each module (after its other fixtures are torn down and their values released), collect what
    Ray left behind under the same narrow filter: its sockets are finalized here, not in the next module's setup."""
    yield
    with ray_sockets_closed_quietly():
        pass


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster for the whole module (starting one costs seconds)."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with ray_sockets_closed_quietly():
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env=ray_runtime_env())
    try:
        yield
    finally:
        with ray_sockets_closed_quietly():
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
