"""Large contexts travel by reference through the object store; a restarted worker decodes the same context."""

from __future__ import annotations

import pytest

from verl_ctx import encode
from verl_ctx.integrations.verl import bind_worker_cls, offload

from .probes import PlainProbe, Row, TableContext

pytestmark = pytest.mark.ray

MIB = 1024 * 1024


def test_32_mib_context_reaches_four_workers_by_reference(ray_cluster: None) -> None:
    """A 32 MiB context leaves the actor definition small and arrives whole in each of four workers."""
    import cloudpickle
    import ray

    ctx = TableContext(rows=[Row(prompt_id=i, weight=i / 7) for i in range(1000)], blob=b"\x01" * (32 * MIB))
    envelopes = offload({"critic": encode(ctx)})
    assert "verl_ctx_remote" in envelopes["critic"]
    bound = bind_worker_cls(PlainProbe, envelopes)
    definition = len(cloudpickle.dumps(bound))
    assert definition < 10**6, f"actor definition is {definition} bytes; Ray warns at 10**7"

    actors = [ray.remote(bound).remote() for _ in range(4)]
    reports = ray.get([a.report.remote() for a in actors])
    for actor in actors:
        ray.kill(actor)
    assert all(r["blob"] == 32 * MIB and r["rows"] == 1000 for r in reports)
    assert reports[0]["first"] == {"prompt_id": 0, "weight": 0.0}
    assert len({r["pid"] for r in reports}) == 4


def test_small_context_stays_inline(ray_cluster: None) -> None:
    """Below the threshold nothing goes to the object store."""
    env = encode(TableContext(rows=[Row(prompt_id=1, weight=1.0)]))
    assert offload({"critic": env}) == {"critic": env}


def test_restarted_worker_decodes_the_same_context(ray_cluster: None) -> None:
    """A worker killed with os._exit and restarted by Ray (max_restarts) decodes the same context again."""
    import ray

    ctx = TableContext(rows=[Row(prompt_id=i, weight=0.5) for i in range(10)], blob=b"x" * (9 * MIB))
    bound = bind_worker_cls(PlainProbe, offload({"critic": encode(ctx)}))
    actor = ray.remote(max_restarts=1, max_task_retries=0)(bound).remote()
    before = ray.get(actor.report.remote())
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(actor.crash.remote())
    # Called while the actor restarts, a plain call fails ("The actor is restarting"). With retries, Ray holds
    # the call until the restarted actor is alive (its constructor, the decode, has run) and sends it there;
    # were the actor dead for good, it would fail instead of waiting.
    after = ray.get(actor.report.options(max_task_retries=-1).remote(), timeout=120)
    ray.kill(actor)
    assert after["pid"] != before["pid"]
    assert {k: v for k, v in after.items() if k != "pid"} == {k: v for k, v in before.items() if k != "pid"}
