"""Shared test setup: hypothesis profiles and an isolated registry per test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from verl_ctx import ContextRegistry

# Under pytest-xdist each worker gets a Ray temp directory of its own (Ray's sessions, sockets and the
# ``ray_current_cluster`` file). A bare ``ray.init()`` -- verl's own, in a rehearsal's subprocess -- connects to the
# cluster that file names, so without this a rehearsal or a module's cluster on one worker joined the multi-node
# test's cluster running on the other (``ValueError: When connecting to an existing cluster, num_cpus ... must not
# be provided``). Subprocesses inherit the variable.
# The run's id is in the name too, so that two runs at once (a developer's two checkouts) never share one.
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:8]
    ray_tmp = os.path.join(os.environ.get("RAY_TMPDIR") or "/tmp", f"verl-ctx-{run}-{worker}")
    os.environ["RAY_TMPDIR"] = ray_tmp
    os.makedirs(ray_tmp, exist_ok=True)

# Every Ray cluster the suite starts (its own fixtures', verl's in a rehearsal's subprocess) inherits these:
# - Ray starts its worker processes at nice 15, so that its own daemons stay responsive. On a busy machine (the
#   other xdist worker's tests, a CI neighbour) a nice-0 process then takes ~97 % of a shared core and every actor
#   the other ~3 %: measured on 2 cores beside two CPU burners, tests/integrations/test_runners.py took 1,178 s
#   instead of 79 s, long enough for a test's timeouts to fire. The suite's actors run at the test run's priority.
# - Ray prestarts a worker per core for the first driver; where the job has a runtime env (every launch of ours and
#   verl's) no actor took one (measured: the actor got a process of its own, the prestarted ones stayed idle), so
#   that is a process per core importing Ray for nothing, each cluster.
os.environ.setdefault("RAY_worker_niceness", "0")
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
# - The GCS declares a node dead when its raylet misses health checks: by default 5 misses in a row, each a 10 s
#   timeout, 3 s apart. A raylet starved of CPU on a busy 2-core machine (load 5-9: the suite's two workers, their
#   clusters, a neighbour's build) missed them, and the GCS killed a healthy node with the actors on it ("Owner's
#   node has crashed", then the xdist worker went down with it). A test cluster is one machine: a raylet that really
#   died is seen at once through its socket (``LocalRayletDiedError``), so the suite's clusters wait minutes before
#   calling a silent node dead. Raylets and workers likewise wait 5 minutes, not 1, for a GCS that is slow to answer.
os.environ.setdefault("RAY_health_check_period_ms", "3000")
os.environ.setdefault("RAY_health_check_timeout_ms", "20000")
os.environ.setdefault("RAY_health_check_failure_threshold", "10")
os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "300")

# "ci" keeps property tests quick on CI's two cores; "deep" is for a long local run.
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=3000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def registry() -> ContextRegistry:
    """A fresh registry, so a test's schemas never collide with another test's."""
    return ContextRegistry("test registry")


@pytest.fixture
def empty_default_registry() -> Iterator[None]:
    """The default registry emptied for one in-process test, then restored.

    Collecting ``examples/`` imports the example recipe's contexts into the default registry; a test that imports
    its own schemas for the same roles in this process (the CLI through click's runner) starts from an empty one.
    """
    from verl_ctx import default_registry

    saved = dict(default_registry._by_role)
    default_registry._by_role.clear()
    try:
        yield
    finally:
        default_registry._by_role.clear()
        default_registry._by_role.update(saved)


@pytest.fixture(autouse=True)
def _no_learnt_secrets() -> Iterator[None]:
    """Each test starts with a process that has seen no secret: validate and decode teach verl_ctx._secrets.redact the
    secrets they meet, and a value one test used as a secret must not turn to stars in the next test's messages."""
    from verl_ctx._secrets import redact as _redact

    _redact.forget_all()
    yield
    _redact.forget_all()
