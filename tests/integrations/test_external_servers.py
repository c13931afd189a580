"""ExternalLLMServerClient routes verl rollout requests to named Ray server actors started outside the job."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from verl_ctx import ContextError, ContextRegistry, validate
from verl_ctx.errors import ContextValidationError, MissingContextError
from verl_ctx.integrations.verl import (
    ExternalRolloutContext,
    ServerUnavailableError,
    bind_config,
)

from .servers import StubServer

pytestmark = pytest.mark.ray

REG = ContextRegistry("external servers")
NAMESPACE = "inference_pool"


class RoutingRollout(ExternalRolloutContext, role="rollout", registry=REG):
    system_prompt: str = "hi"


def _client_cls() -> type:
    from verl_ctx.integrations.verl import ExternalLLMServerClient

    class Client(ExternalLLMServerClient):  # type: ignore[misc,valid-type]
        context_schema = RoutingRollout

    return Client


@pytest.fixture(scope="module")
def servers(ray_cluster: None) -> Iterator[dict[str, Any]]:
    """Three named server actors in their own namespace, as an inference pool started outside the job."""
    import ray

    actor = ray.remote(num_cpus=0)(StubServer)
    handles = {
        n: actor.options(name=n, namespace=NAMESPACE, lifetime=None).remote(n, delay_s=0.2 if n == "slow" else 0)
        for n in ("a", "b", "slow")
    }
    ray.get([h.calls.remote() for h in handles.values()])
    yield handles
    for h in handles.values():
        ray.kill(h)


def _client(verl_config: Any, **routing: Any) -> Any:
    config = verl_config.copy()
    section = {"rollout": {"routing": {"namespace": NAMESPACE, **routing}}}
    contexts = validate({"extra_context": section}, registry=REG)
    bind_config(config, contexts.envelopes())
    return _client_cls()(config)


def _kill(handle: Any) -> None:
    """Kill a server actor and wait until calls to it fail (ray.kill returns before the actor is gone)."""
    import time

    import ray

    ray.kill(handle)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(handle.calls.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        time.sleep(0.1)
    raise AssertionError("server actor still answers 30 s after ray.kill")


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
    lonely = _client(verl_config, servers=[{"name": "ghost"}, {"name": "phantom"}], retries=1)
    with pytest.raises(ServerUnavailableError, match=r"(?s)inference_pool/ghost: no Ray actor named 'ghost'.*phantom"):
        _ask(lonely, ["r"])


def test_server_killed_mid_run_is_skipped_by_the_next_request(ray_cluster: None, verl_config: Any) -> None:
    """After a server dies, the sticky request on it moves to a live server; the dead one is named."""
    import ray

    actor = ray.remote(num_cpus=0)(StubServer)
    doomed = [actor.options(name=n, namespace=NAMESPACE).remote(n) for n in ("d1", "d2")]
    ray.get([d.calls.remote() for d in doomed])
    client = _client(verl_config, servers=[{"name": "d1"}, {"name": "d2"}], policy="sticky", retries=1)
    first = _ask(client, ["chat"])[0]
    _kill(doomed[0] if first == "d1" else doomed[1])
    survivor = "d2" if first == "d1" else "d1"
    assert _ask(client, ["chat", "chat"]) == [survivor, survivor]
    assert client.router.alive == [f"{NAMESPACE}/{survivor}"]
    _kill(doomed[1] if first == "d1" else doomed[0])
    with pytest.raises(
        ServerUnavailableError, match=r"(?s)no external LLM server.*inference_pool/d1: .*from the server"
    ):
        _ask(client, ["chat"])


def test_no_load_balancer_and_no_routing_is_a_context_error(verl_config: Any) -> None:
    """Without a routing context the client says what to configure instead of an AttributeError later."""
    with pytest.raises(MissingContextError, match=r"extra_context\.rollout\.routing\.servers") as info:
        _client_cls()(verl_config.copy())
    assert isinstance(info.value, ContextError)


@pytest.mark.parametrize(
    ("routing", "fragment"),
    [
        ({"servers": []}, "extra_context.rollout.routing.servers"),
        ({"servers": [{"name": "a"}, {"name": "a"}]}, "servers are listed twice: a"),
        ({"servers": [{"name": "a"}], "policy": "random"}, "extra_context.rollout.routing.policy"),
        ({"servers": [{"name": "a"}], "retries": -1}, "extra_context.rollout.routing.retries"),
    ],
)
def test_routing_mistakes_fail_before_launch(routing: dict[str, Any], fragment: str) -> None:
    """Routing is a typed context: bad servers, policies and retries are caught by validate()."""
    with pytest.raises(ContextValidationError, match=fragment.replace(".", r"\.")):
        validate({"extra_context": {"rollout": {"routing": routing}}}, registry=REG)
