"""Contexts reach workers on every node of a multi-node Ray cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from verl_ctx import validate
from verl_ctx.integrations.verl import bind_role_worker_mapping

from .conftest import SharedRay, ray_runtime_env, ray_sockets_closed_quietly
from .contexts import REGISTRY, DemoCriticContext

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def two_node_cluster(shared_ray: SharedRay) -> Iterator[None]:
    """A ray.cluster_utils.Cluster: a head and a worker node, one CPU each, so each node fits one worker. The
    process's shared cluster is shut down first (a driver connects to one cluster); the next module starts it."""
    import ray
    from ray.cluster_utils import Cluster

    shared_ray.stop()
    with ray_sockets_closed_quietly():  # Ray's head node starts in this process
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, runtime_env=ray_runtime_env(), log_to_driver=False)
    try:
        yield None  # not the Cluster: pytest would keep it (and Ray's sockets) alive past this teardown
    finally:
        with ray_sockets_closed_quietly():
            ray.shutdown()
            cluster.shutdown()
            del cluster


def test_workers_on_both_nodes_decode_the_context(two_node_cluster: Any) -> None:
    """One critic worker per node, placed by verl's RayResourcePool, each decodes the same typed context."""
    import ray
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.trainer.ppo.utils import Role
    from verl.workers.config import TrainingWorkerConfig

    from .workers import BoundaryTrainingWorker

    contexts = validate({"extra_context": {"critic": {"value_clip": 0.9}}}, registry=REGISTRY)
    mapping = bind_role_worker_mapping({Role.Critic: ray.remote(BoundaryTrainingWorker)}, contexts.envelopes())
    pool = RayResourcePool(process_on_nodes=[1, 1], use_gpu=False, max_colocate_count=1)
    ray_cls = RayClassWithInitArgs(cls=mapping[Role.Critic], config=TrainingWorkerConfig(model_type="value_model"))
    group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=ray_cls, device_name="cpu")
    reports = group.report()
    assert len({r["node_id"] for r in reports}) == 2, "one worker on each node"
    expected = repr(DemoCriticContext(value_clip=0.9))
    assert [r["decoded"] for r in reports] == [{"critic": expected}] * 2
