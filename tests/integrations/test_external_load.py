"""Load test, loopback only and bounded: 500 concurrent multi-turn conversations over 3 stub servers under faults.

While the conversations run, one server is made slow (its calls outlast ``request_timeout_s``), one is killed and
restarted under its name, and the last is killed once the restarted one answers: at every moment some server
answers. Required: no request lost; a conversation changes server only when its server is down (killed, timing
out, or still starting), never while its server is healthy, and never back. The summary line (-s) gives the
figures; routing overhead itself is measured by ``python -m benchmarks.routing``.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from typing import Any

import pytest

from verl_ctx import ContextRegistry, validate
from verl_ctx.integrations.verl import bind_config
from verl_ctx.integrations.verl.external import ExternalRolloutContext

from .servers import StubServer, start_servers

pytestmark = pytest.mark.ray

REG = ContextRegistry("external load")
NAMESPACE = "load_pool"
CONVERSATIONS = 500
GAP_S = 2.0  # between a conversation's turns
AFTER_FAULTS = 3  # turns each conversation still takes once the last fault happened
MAX_TURNS = 90  # bound: a run that stalls fails instead of hanging


class LoadRollout(ExternalRolloutContext, role="rollout", registry=REG):
    pass


def _client(verl_config: Any) -> Any:
    from verl_ctx.integrations.verl.external import ExternalLLMServerClient, routing_from

    routing = {
        "namespace": NAMESPACE,
        "servers": [{"name": n} for n in ("L0", "L1", "L2")],
        "policy": "sticky",
        "request_timeout_s": 3.0,
        "retries": 6,
        "cooldown_s": 0.5,
        "max_cooldown_s": 2.0,
        "weight_sync": "none",
    }
    config = verl_config.copy()
    bind_config(config, validate({"extra_context": {"rollout": {"routing": routing}}}, registry=REG).envelopes())
    return ExternalLLMServerClient(config, routing=routing_from(config, LoadRollout))


def test_no_request_is_lost_and_sessions_move_only_off_down_servers(ray_cluster: None, verl_config: Any) -> None:
    """500 concurrent conversations while servers are slowed, killed and restarted: all served, moves justified."""
    import ray

    servers = start_servers(["L0", "L1", "L2"], NAMESPACE, max_concurrency=2000)
    ray.get([h.set.remote(delay_s=0.02) for h in servers.values()])
    client = _client(verl_config)
    down_since: dict[str, float] = {}  # server -> when it was made slow or killed (or restarted, still starting)
    served: dict[str, list[tuple[float, str]]] = {}  # per conversation: (when each turn was answered, by whom)
    latencies: list[float] = []
    faults_over = asyncio.Event()

    async def conversation(index: int) -> None:
        cid = f"conv-{index}"
        await asyncio.sleep(GAP_S * index / CONVERSATIONS)  # staggered starts
        turns = served.setdefault(cid, [])
        after = 0
        while after < AFTER_FAULTS and len(turns) < MAX_TURNS:
            started = time.monotonic()
            out = await client.generate(cid, prompt_ids=[len(turns), 1, 2], sampling_params={"temperature": 0.7})
            answered = time.monotonic()
            latencies.append(answered - started)
            turns.append((answered, out.extra_fields["server"]))
            after += faults_over.is_set()
            await asyncio.sleep(GAP_S)

    async def faults() -> None:
        await asyncio.sleep(1.5)
        down_since["L1"] = time.monotonic()
        await servers["L1"].set.remote(slow_calls=150, slow_delay_s=8.0)  # alive, but too slow to answer
        await asyncio.sleep(1.0)
        down_since["L0"] = time.monotonic()
        ray.kill(servers["L0"])
        await asyncio.sleep(0.5)
        actor = ray.remote(num_cpus=0)(StubServer)
        for _ in range(100):  # the dead actor's name is free once Ray has reaped it
            try:
                restarted = actor.options(name="L0", namespace=NAMESPACE, max_concurrency=2000).remote("L0", 0.02)
                break
            except ValueError:
                await asyncio.sleep(0.1)
        await restarted.calls.remote()  # started (seconds): from now on L0 answers again
        down_since["L2"] = time.monotonic()
        ray.kill(servers["L2"])
        servers["L0"] = restarted
        faults_over.set()

    async def run() -> list[Any]:
        fault_task = asyncio.ensure_future(faults())
        results = await asyncio.gather(*(conversation(i) for i in range(CONVERSATIONS)), return_exceptions=True)
        await fault_task
        return list(results)

    began = time.monotonic()
    results = asyncio.run(run())
    elapsed = time.monotonic() - began
    lost = [r for r in results if isinstance(r, BaseException)]
    assert not lost, f"{len(lost)} conversations failed, first: {lost[0]!r}"
    assert all(len(t) < MAX_TURNS for t in served.values())

    moves = 0
    for cid, turns in served.items():
        for (_, before), (when, after) in itertools.pairwise(turns):
            if before == after:
                continue
            moves += 1
            assert before in down_since, f"{cid} moved {before}->{after} although {before} was never disrupted"
            # a turn in flight when its server was disrupted may move: it is answered after the disruption
            assert down_since[before] <= when, f"{cid} moved off {before} before it was disrupted"
    recorded = len(client.router.moves)
    assert moves <= recorded  # the router moved sessions only when their server was not up (Router._choose)
    first_fault = min(down_since.values())
    early = [t for turns in served.values() for t in itertools.pairwise(turns) if t[1][0] < first_fault]
    assert all(a[1] == b[1] for a, b in early)  # before any fault no conversation changed server

    ordered = sorted(latencies)
    print(
        f"\nload: {CONVERSATIONS} concurrent conversations, {len(latencies)} requests in {elapsed:.1f} s, "
        f"0 lost; {moves} session moves (router recorded {recorded}); latency p50 "
        f"{statistics.median(ordered) * 1e3:.1f} ms, p99 {ordered[int(len(ordered) * 0.99)] * 1e3:.1f} ms, "
        f"max {ordered[-1] * 1e3:.1f} ms; final status {client.router.status()}"
    )
    for handle in servers.values():
        ray.kill(handle)
