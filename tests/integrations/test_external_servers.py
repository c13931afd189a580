"""ExternalLLMServerClient routes verl rollout requests to named Ray server actors started outside the job."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from verl_ctx import ContextError, ContextRegistry, validate
from verl_ctx.errors import ContextValidationError, MissingContextError, ServerUnavailableError
from verl_ctx.integrations.verl import bind_config
from verl_ctx.integrations.verl.external import ExternalRolloutContext, Router

from .servers import StubServer, start_servers, stop_server

pytestmark = pytest.mark.ray

REG = ContextRegistry("external servers")
NAMESPACE = "inference_pool"


class RoutingRollout(ExternalRolloutContext, role="rollout", registry=REG):
    system_prompt: str = "hi"


BAD_DURATIONS = ("inf", float("inf"), "-inf", "nan", 0, -1)


class FakeClock:
    """The router's clock, moved by the test instead of waiting out cool-downs."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _client_cls() -> type:
    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    class Client(ExternalLLMServerClient):
        context_schema = RoutingRollout

    return Client


@pytest.fixture(scope="module")
def servers(ray_cluster: None) -> Iterator[dict[str, Any]]:
    """Three named server actors in their own namespace, as an inference pool started outside the job."""
    import ray

    handles = start_servers(["a", "b", "slow"], NAMESPACE)
    ray.get(handles["slow"].set.remote(delay_s=0.2))
    yield handles
    for h in handles.values():
        ray.kill(h)


def _client(verl_config: Any, clock: FakeClock | None = None, **routing: Any) -> Any:
    config = verl_config.copy()
    routing.setdefault("weight_sync", "none")
    section = {"rollout": {"routing": {"namespace": NAMESPACE, **routing}}}
    contexts = validate({"extra_context": section}, registry=REG)
    bind_config(config, contexts.envelopes())
    client = _client_cls()(config)
    if clock is not None:
        client.router = Router(client.router.routing, clock=clock)
    return client


def _ask(client: Any, request_ids: list[str], concurrent: bool = False) -> list[str]:
    async def one(rid: str) -> str:
        out = await client.generate(rid, prompt_ids=[1, 2, 3], sampling_params={"temperature": 1.0})
        return str(out.extra_fields["server"])

    async def run() -> list[str]:
        if concurrent:
            return list(await asyncio.gather(*(one(r) for r in request_ids)))
        return [await one(r) for r in request_ids]

    return asyncio.run(run())


def test_sticky_requests_stay_on_one_server(servers: dict[str, Any], verl_config: Any) -> None:
    """Every turn of one request id lands on the same server (its prefix cache); new ids spread out."""
    client = _client(verl_config, servers=[{"name": "a"}, {"name": "b"}], policy="sticky")
    turns = _ask(client, ["conv-1"] * 5)
    assert len(set(turns)) == 1
    spread = _ask(client, [f"conv-{i}" for i in range(2, 8)])
    assert set(spread) == {"a", "b"}
    assert _ask(client, ["conv-1"]) == turns[:1]


def test_round_robin_spreads_evenly(servers: dict[str, Any], verl_config: Any) -> None:
    """Six requests over two servers: three each."""
    client = _client(verl_config, servers=[{"name": "a"}, {"name": "b"}], policy="round_robin")
    assert Counter(_ask(client, [f"r{i}" for i in range(6)])) == {"a": 3, "b": 3}


def test_least_inflight_avoids_the_busy_server(servers: dict[str, Any], verl_config: Any) -> None:
    """Concurrent requests go to the servers with the fewest in flight: one each across three servers."""
    client = _client(verl_config, servers=[{"name": "slow"}, {"name": "a"}, {"name": "b"}], policy="least_inflight")
    assert sorted(_ask(client, ["x", "y", "z"], concurrent=True)) == ["a", "b", "slow"]
    assert all(client.router.inflight(s) == 0 for s in client.router.alive)


def test_release_never_touches_a_load_balancer(servers: dict[str, Any], verl_config: Any) -> None:
    """The client has no load balancer; releasing servers works and the handle stays None."""
    client = _client(verl_config, servers=[{"name": "a"}])
    _ask(client, ["q"])
    assert client._load_balancer is None


def test_unreachable_server_is_skipped_and_named(servers: dict[str, Any], verl_config: Any) -> None:
    """A server name with no actor is skipped; when none is reachable the error names each one."""
    client = _client(verl_config, servers=[{"name": "ghost"}, {"name": "a"}], policy="round_robin")
    assert _ask(client, ["r1", "r2", "r3"]) == ["a", "a", "a"]
    lonely = _client(verl_config, servers=[{"name": "ghost"}, {"name": "phantom"}], retries=1, max_wait_s=0)
    with pytest.raises(
        ServerUnavailableError, match=r"(?s)inference_pool/ghost: cooling down .*no Ray actor named 'ghost'.*phantom"
    ):
        _ask(lonely, ["r"])


def test_server_killed_mid_run_is_skipped_by_the_next_request(ray_cluster: None, verl_config: Any) -> None:
    """After a server dies, the sticky request on it moves to a live server; the dead one is named."""
    doomed = start_servers(["d1", "d2"], NAMESPACE)
    client = _client(verl_config, servers=[{"name": "d1"}, {"name": "d2"}], policy="sticky", retries=1, max_wait_s=0)
    first = _ask(client, ["chat"])[0]
    survivor = "d2" if first == "d1" else "d1"
    stop_server(doomed[first])
    assert _ask(client, ["chat", "chat"]) == [survivor, survivor]
    assert client.router.alive == [f"{NAMESPACE}/{survivor}"]
    stop_server(doomed[survivor])
    with pytest.raises(
        ServerUnavailableError, match=r"(?s)no external LLM server.*inference_pool/d1: .*from the server"
    ):
        _ask(client, ["chat"])


def test_slow_servers_cool_down_then_serve_again(ray_cluster: None, verl_config: Any) -> None:
    """Two servers each slow once: that request fails, and after the cool-down every request is served again."""
    import ray

    pool = start_servers(["s1", "s2"], NAMESPACE)
    ray.get([h.set.remote(slow_calls=1, slow_delay_s=1.5) for h in pool.values()])
    clock = FakeClock()
    client = _client(verl_config, clock, servers=[{"name": "s1"}, {"name": "s2"}], request_timeout_s=0.3, retries=1)
    with pytest.raises(ServerUnavailableError, match=r"(?s)s1: cooling down .*no answer within request_timeout_s"):
        _ask(client, ["first"])
    assert client.router.alive == []
    clock.now += client.router.routing.cooldown_s  # both half-open: one trial each, then healthy
    assert sorted(set(_ask(client, [f"later-{i}" for i in range(6)]))) == ["s1", "s2"]
    assert set(client.router.status().values()) == {"healthy"}
    for h in pool.values():
        ray.kill(h)


def test_each_failure_in_a_row_doubles_the_cool_down(ray_cluster: None, verl_config: Any) -> None:
    """A server that fails its half-open trial waits twice as long; one that recovers is healthy again."""
    import ray

    pool = start_servers(["t1"], NAMESPACE)
    ray.get(pool["t1"].set.remote(slow_calls=2, slow_delay_s=1.5))
    clock = FakeClock()
    client = _client(
        verl_config, clock, servers=[{"name": "t1"}], request_timeout_s=0.3, retries=0, cooldown_s=4, max_wait_s=0
    )
    for _ in range(2):
        with pytest.raises(ServerUnavailableError, match="no answer within"):
            _ask(client, ["x"])
        clock.now += 4.0
    with pytest.raises(ServerUnavailableError, match=r"t1: cooling down for 4\.0 s"):  # 8 s after the 2nd failure
        _ask(client, ["x"])
    clock.now += 4.0
    assert _ask(client, ["x"]) == ["t1"]
    assert client.router.status() == {f"{NAMESPACE}/t1": "healthy"}
    ray.kill(pool["t1"])


def test_a_restarted_server_is_found_again_and_sessions_stay_put(ray_cluster: None, verl_config: Any) -> None:
    """A killed server restarted under its name gets new sessions after its cool-down; moved ones do not move back."""
    import ray

    pool = start_servers(["p1", "p2"], NAMESPACE)
    clock = FakeClock()
    client = _client(verl_config, clock, servers=[{"name": "p1"}, {"name": "p2"}], policy="sticky", retries=1)
    placed = dict(zip(["c0", "c1", "c2", "c3"], _ask(client, ["c0", "c1", "c2", "c3"]), strict=True))
    on_p1 = [c for c, s in placed.items() if s == "p1"]
    assert on_p1
    stop_server(pool["p1"])
    assert set(_ask(client, on_p1)) == {"p2"}  # moved: their server is down
    restarted = start_servers(["p1"], NAMESPACE)
    clock.now += client.router.routing.cooldown_s
    # new sessions go round the least busy servers: one of two lands on p1, half-open, probed, then healthy
    assert sorted(_ask(client, ["new-1", "new-2"])) == ["p1", "p2"]
    assert set(_ask(client, on_p1)) == {"p2"}  # moved sessions stay where they went
    assert ray.get(restarted["p1"].calls.remote()) == 1
    for h in (pool["p2"], restarted["p1"]):
        ray.kill(h)


def test_concurrent_requests_sharing_a_request_id_never_blame_a_healthy_server(
    ray_cluster: None, verl_config: Any
) -> None:
    """Ten concurrent requests with one id over a slow and a fast server: the slow one's timeouts stay its own."""
    import ray

    pool = start_servers(["slowpoke", "quick"], NAMESPACE)
    ray.get(pool["slowpoke"].set.remote(delay_s=1.5))
    client = _client(
        verl_config,
        servers=[{"name": "slowpoke"}, {"name": "quick"}],
        policy="round_robin",
        request_timeout_s=0.4,
        retries=1,
    )
    served = _ask(client, ["shared-id"] * 10, concurrent=True)
    assert served == ["quick"] * 10
    status = client.router.status()
    assert status[f"{NAMESPACE}/quick"] == "healthy"
    assert "no answer within" in status[f"{NAMESPACE}/slowpoke"]
    for h in pool.values():
        ray.kill(h)


def test_no_load_balancer_and_no_routing_is_a_context_error(verl_config: Any) -> None:
    """Without a routing context the client says what to configure instead of an AttributeError later."""
    with pytest.raises(MissingContextError, match=r"extra_context\.rollout\.routing\.servers") as info:
        _client_cls()(verl_config.copy())
    assert isinstance(info.value, ContextError)


@pytest.mark.parametrize(
    ("routing", "fragment"),
    [
        ({"servers": [], "weight_sync": "none"}, "extra_context.rollout.routing.servers"),
        (
            {"servers": [{"name": "a"}, {"name": "a"}], "weight_sync": "none"},
            "routing.servers: value error, servers are listed twice: a",
        ),
        (
            {
                "servers": [{"name": "a"}],
                "weight_sync": {"mode": "reload_from_checkpoint", "directory": "/w", "min_servers": 2},
            },
            "routing.weight_sync: value error, min_servers is 2 but only 1 server(s) are listed",
        ),
        (
            {"servers": [{"name": "a"}], "policy": "random", "weight_sync": "none"},
            "extra_context.rollout.routing.policy",
        ),
        ({"servers": [{"name": "a"}], "retries": -1, "weight_sync": "none"}, "extra_context.rollout.routing.retries"),
        ({"servers": [{"name": "a"}]}, "routing.weight_sync: value error, must be declared: `none`"),
        ({"servers": [{"name": "a"}], "weight_sync": "sometimes"}, "extra_context.rollout.routing.weight_sync.mode"),
        (
            {"servers": [{"name": "a"}], "weight_sync": "reload_from_checkpoint"},
            "routing.weight_sync.directory: value error, reload_from_checkpoint needs a directory",
        ),
        (
            {"servers": [{"name": "a"}], "weight_sync": {"mode": "reload_from_checkpoint", "directory": "rel/dir"}},
            "must be an absolute path",
        ),
        (
            {"servers": [{"name": "a"}], "weight_sync": "none", "max_staleness": 1},
            "routing.max_staleness: value error, needs weight_sync reload_from_checkpoint",
        ),
        (
            {
                "servers": [{"name": "a"}],
                "weight_sync": {"mode": "reload_from_checkpoint", "directory": "/w", "every_n_steps": 3},
                "max_staleness": 1,
            },
            "routing.max_staleness: value error, is 1 but weight_sync.every_n_steps=3",
        ),
        (
            {"servers": [{"name": "a"}], "weight_sync": "none", "cooldown_s": 9, "max_cooldown_s": 3},
            "routing.max_cooldown_s: value error, is below",
        ),
    ],
)
def test_routing_mistakes_fail_before_launch(routing: dict[str, Any], fragment: str) -> None:
    """Routing is typed: bad servers, policies, retries, weight sync and staleness are caught by validate()."""
    with pytest.raises(ContextValidationError, match=re.escape(fragment)):
        validate({"extra_context": {"rollout": {"routing": routing}}}, registry=REG)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        *((f, v) for f in ("request_timeout_s", "cooldown_s", "probe_timeout_s") for v in BAD_DURATIONS),
        *(("max_wait_s", v) for v in ("inf", "nan", -1)),  # 0 is allowed: fail at once
    ],
)
def test_durations_must_be_finite_and_positive(field: str, value: Any) -> None:
    """request_timeout_s="inf" (no timeout at all) and every other non-finite or non-positive duration is refused."""
    routing = {"servers": [{"name": "a"}], "weight_sync": "none", field: value}
    with pytest.raises(ContextValidationError, match=rf"extra_context\.rollout\.routing\.{field}"):
        validate({"extra_context": {"rollout": {"routing": routing}}}, registry=REG)


def test_stub_server_answers_like_a_pool_server() -> None:
    """The stub reports its weights version, as the protocol asks of every pool server."""
    server = StubServer("s", version=4)
    out = asyncio.run(server.generate("r", [1, 2], {}))
    assert out.extra_fields == {"server": "s", "global_steps": 4}


@pytest.mark.parametrize(
    ("weight_sync", "staleness"),
    [
        ({"mode": "reload_from_checkpoint", "every_n_steps": 3}, "is 1 but weight_sync.every_n_steps=3"),
        ({"mode": "none", "directory": "/shared"}, "needs weight_sync reload_from_checkpoint"),
    ],
)
def test_a_bad_max_staleness_is_reported_with_the_weight_sync_error_not_after_it(
    weight_sync: dict[str, Any], staleness: str
) -> None:
    """weight_sync invalid on another field (its directory) and max_staleness wrong for its mode or sync interval:
    both errors in one answer, each at its own path, not the second only after the first is fixed."""
    routing = {"servers": [{"name": "a"}], "weight_sync": weight_sync, "max_staleness": 1}
    with pytest.raises(ContextValidationError) as caught:
        validate({"extra_context": {"rollout": {"routing": routing}}}, registry=REG)
    paths = [e.path for e in caught.value.errors]
    assert paths == [
        "extra_context.rollout.routing.weight_sync.directory",
        "extra_context.rollout.routing.max_staleness",
    ]
    assert staleness in caught.value.errors[1].message
