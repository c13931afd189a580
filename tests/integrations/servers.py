"""Stub pool servers: Ray named actors implementing the pool-server protocol (docs/external-servers.md).

``generate`` has verl's server signature and reports the weights version it generated with in
``extra_fields["global_steps"]``; ``load_weights(path, version)`` switches to a new version. Faults on command
(``set``): a fixed delay, a number of slow calls, loads that fail or hang. verl's ``TokenOutput`` is imported when
the server starts (seconds, for torch), so a server that answers ``calls()`` answers ``generate`` at once.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any


class StubServer:
    def __init__(self, name: str, delay_s: float = 0.0, version: int = 0) -> None:
        from verl.workers.rollout.replica import TokenOutput

        self.token_output = TokenOutput
        self.name = name
        self.reset(delay_s, version)

    def reset(self, delay_s: float = 0.0, version: int = 0) -> None:
        """As just started: no calls seen, no loads, no faults (a server shared by a module's tests)."""
        self.delay_s = delay_s
        self.version = version
        self.seen: list[str] = []
        self.loads: list[tuple[str, int]] = []
        self.slow_calls = 0
        self.slow_delay_s = 0.0
        self.fail_loads: str | None = None
        self.hang_loads = False

    def set(self, **settings: Any) -> None:
        """Change behaviour: delay_s, slow_calls + slow_delay_s, version, fail_loads (a message), hang_loads."""
        for key, value in settings.items():
            if not hasattr(self, key):
                raise AttributeError(key)
            setattr(self, key, value)

    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        self.seen.append(request_id)
        delay = self.delay_s
        if self.slow_calls > 0:
            self.slow_calls -= 1
            delay = self.slow_delay_s
        if delay:
            await asyncio.sleep(delay)
        return self.token_output(
            token_ids=[len(prompt_ids), 7], extra_fields={"server": self.name, "global_steps": self.version}
        )

    async def load_weights(self, path: str, version: int) -> None:
        """The protocol: load the weights at ``path`` (written for ``version``), serve them, then return."""
        if self.hang_loads:
            await asyncio.sleep(3600)
        if self.fail_loads:
            raise RuntimeError(self.fail_loads)
        manifest = os.path.join(path, "verl_ctx_weights.json")
        if os.path.exists(manifest):
            with open(manifest) as f:
                written = json.load(f)["version"]
            if written != version:
                raise RuntimeError(f"{path} holds version {written}, not {version}")
        self.loads.append((path, version))
        self.version = version

    def calls(self) -> int:
        return len(self.seen)

    def report(self) -> dict[str, Any]:
        return {"name": self.name, "calls": len(self.seen), "version": self.version, "loads": list(self.loads)}


def start_servers(names: list[str], namespace: str, **options: Any) -> dict[str, Any]:
    """Named ``StubServer`` actors, ready to answer."""
    import ray

    actor = ray.remote(num_cpus=0)(StubServer)
    handles = {n: actor.options(name=n, namespace=namespace, **options).remote(n) for n in names}
    ray.get([h.calls.remote() for h in handles.values()])
    return handles


def stop_server(handle: Any) -> None:
    """Kill a server and wait until calls to it fail (``ray.kill`` returns before the actor has exited)."""
    import time

    import ray

    ray.kill(handle)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(handle.calls.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        time.sleep(0.05)
    raise AssertionError("server actor still answers 30 s after ray.kill")


class ClientHost:
    """Another process holding a pickled client, as verl's agent-loop workers hold the one the trainer gives."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def ask(self, request_ids: list[str]) -> list[tuple[str, int | None]]:
        """(server, weights version) for each request, asked concurrently."""

        async def one(rid: str) -> tuple[str, int | None]:
            out = await self.client.generate(rid, prompt_ids=[1, 2, 3], sampling_params={"temperature": 1.0})
            return out.extra_fields["server"], out.extra_fields.get("global_steps")

        return list(await asyncio.gather(*(one(r) for r in request_ids)))

    def stale_outputs(self) -> int:
        return int(self.client.stale_outputs)
