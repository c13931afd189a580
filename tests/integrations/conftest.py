"""Ray fixtures: one local cluster per test process, empty at each module's start; workers able to import this
repository's tests."""

from __future__ import annotations

import contextlib
import gc
import os
import time
import warnings
from collections.abc import Generator, Iterator
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


def ray_trouble(since: float, lines: int = 15) -> str:
    """The trouble lines Ray's own daemons logged since ``since`` (epoch seconds), in every session this process's
    Ray temp directory holds: the shared cluster's and any a rehearsal's subprocess started. Empty when there are none.

    A test that fails because Ray's node died (the machine was starved, a raylet was killed) otherwise shows only a
    one-line ``ActorUnavailableError``; the cause is in these files.
    """
    from verl_ctx.integrations.verl._ray_logs import trouble_lines

    root = Path(os.environ.get("RAY_TMPDIR") or "/tmp") / "ray"
    found = []
    for logs in sorted(root.glob("session_2*/logs")):
        for log, bad in trouble_lines(logs, since=since).items():
            found.append(f"--- {log} (last {min(lines, len(bad))} of {len(bad)} error lines)")
            found += bad[-lines:]
    return "\n".join(found)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that starts Ray shows what Ray's daemons logged as errors while it ran, as a report section."""
    report = yield
    if report.failed and item.get_closest_marker("ray") is not None:
        trouble = ray_trouble(since=call.start - 1)
        if trouble:
            report.sections.append(("Ray's daemons logged errors during this test", trouble))
    return report


class SharedRay:
    """The local Ray cluster of this pytest process (an xdist worker), shared by every module that asks for one.

    Starting a cluster and shutting it down cost ~4 s of a core each time; a cluster per module paid that a dozen
    times a run. The first module that asks starts it; at each module's end whatever the module left is checked
    (``clean``), and only a module that leaves an actor alive or a CPU taken gets the cluster shut down, so every
    module still starts on an empty cluster. A module that needs Ray to itself (the multi-node one) calls ``stop``.
    """

    def __init__(self) -> None:
        self.up = False

    def start(self) -> None:
        import ray

        if self.up and self.alive():
            return
        if self.up:  # its raylet or GCS died since the last module (a busy machine, a test that killed it): a new one
            self.stop()
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        with ray_sockets_closed_quietly():
            ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env=ray_runtime_env())
        self.up = True

    def alive(self) -> bool:
        """Whether this process's cluster still stands: Ray connected, and none of its head node's processes dead.

        A driver outlives its raylet (its next call raises ``LocalRayletDiedError``), so a dead cluster is only seen
        by looking at its processes. ``_global_node`` is the node ``ray.init`` started in this process (private API;
        a Ray without it is trusted as alive, as before).
        """
        import ray

        if not ray.is_initialized():
            return False
        node = getattr(ray._private.worker, "_global_node", None)
        return node is None or not node.dead_processes()

    def stop(self) -> None:
        import ray

        if self.up:
            with ray_sockets_closed_quietly():
                ray.shutdown()
            self.up = False

    def clean(self, timeout: float = 10.0) -> None:
        """Keep the cluster for the next module if nothing of this module's is left on it, else shut it down."""
        import ray

        from verl_ctx.integrations.verl import _store

        if not self.up:
            return
        if not self.alive():  # died during the module: nothing to keep
            self.stop()
            return
        try:
            from ray._private.state import actors  # the GCS's actor table: no dashboard needed (a debugging API)
        except ImportError:  # a Ray that moved it: a cluster per module, as before
            self.stop()
            return
        # The stores offload() started live as long as the driver (a launch's contexts must), so as long as this
        # process: a module's stores are released with the module, as a module's own cluster released them.
        for store in _store._stores:
            ray.kill(store)
        _store._stores.clear()
        with ray_sockets_closed_quietly():  # its collection releases the actors whose last handle the module dropped
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = actors(actor_state_name="ALIVE")
            if not alive and ray.available_resources().get("CPU") == ray.cluster_resources().get("CPU"):
                return
            time.sleep(0.1)
        self.stop()


@pytest.fixture(scope="session")
def shared_ray() -> Iterator[SharedRay]:
    """This process's ``SharedRay``, shut down at the end of the session."""
    shared = SharedRay()
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture(scope="module")
def ray_cluster(shared_ray: SharedRay) -> Iterator[None]:
    """A local Ray cluster for the module, with nothing of another module's on it (``SharedRay``)."""
    shared_ray.start()
    try:
        yield
    finally:
        shared_ray.clean()


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
