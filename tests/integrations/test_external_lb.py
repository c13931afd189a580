"""ExternalLLMServerClient with a load balancer handle is verl's own client, on every supported verl release.

verl 0.9.0's ``LLMServerClient`` has ``_acquire_server(request_id)`` / ``_release_server(server_id)``; 0.9.1 added
``**extra`` / ``request_id=None``. The client shapes its calls by inspecting the installed base class; these tests
drive it through a real ``GlobalRequestLoadBalancer`` actor, so they fail on a release whose signatures it gets
wrong (before: ``TypeError: _release_server() got an unexpected keyword argument 'request_id'`` on 0.9.0).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .servers import start_servers

pytestmark = pytest.mark.ray

NAMESPACE = "lb_pool"


@pytest.fixture(scope="module")
def balanced(ray_cluster: None) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Two stub servers behind verl's own GlobalRequestLoadBalancer, as LLMServerManager builds it."""
    import ray
    from verl.workers.rollout.llm_server import GlobalRequestLoadBalancer

    servers = start_servers(["lb-a", "lb-b"], NAMESPACE)
    balancer = ray.remote(GlobalRequestLoadBalancer).remote(servers=servers)
    yield balancer, servers
    for handle in (balancer, *servers.values()):
        ray.kill(handle)


def _ask(client: Any, request_ids: list[str], concurrent: bool = False) -> list[Any]:
    async def one(rid: str) -> Any:
        return await client.generate(rid, prompt_ids=[5, 6], sampling_params={"temperature": 0.5})

    async def run() -> list[Any]:
        if concurrent:
            return list(await asyncio.gather(*(one(r) for r in request_ids)))
        return [await one(r) for r in request_ids]

    return asyncio.run(run())


def _inflight_drains(balancer: Any) -> bool:
    """verl releases fire-and-forget: wait until the balancer has counted every release."""
    import ray

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if ray.get(balancer.get_total_inflight.remote()) == 0:
            return True
        time.sleep(0.05)
    return False


def test_load_balancer_path_routes_and_releases(balanced: tuple[Any, dict[str, Any]], verl_config: Any) -> None:
    """generate goes through verl's balancer: sticky per request id, every server released afterwards."""
    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    balancer, _servers = balanced
    client = ExternalLLMServerClient(verl_config, load_balancer_handle=balancer)
    assert client.router is None
    turns = [out.extra_fields["server"] for out in _ask(client, ["chat-1"] * 4)]
    assert len(set(turns)) == 1
    spread = {out.extra_fields["server"] for out in _ask(client, [f"c{i}" for i in range(8)], concurrent=True)}
    assert spread == {"lb-a", "lb-b"}
    assert _inflight_drains(balancer)
    assert client.versions == {0: 12}  # the weights version each output reported is recorded


def test_signature_adapter_matches_the_installed_verl() -> None:
    """The adapter's flags are read from the installed LLMServerClient, so both call shapes stay in step with it."""
    from verl.workers.rollout.llm_server import LLMServerClient

    from verl_ctx.integrations.verl.external import _llm_client

    acquire = inspect.signature(LLMServerClient._acquire_server).parameters
    release = inspect.signature(LLMServerClient._release_server).parameters
    assert any(p.kind is p.VAR_KEYWORD for p in acquire.values()) == _llm_client.ACQUIRE_TAKES_EXTRA
    assert ("request_id" in release) == _llm_client.RELEASE_TAKES_REQUEST_ID
