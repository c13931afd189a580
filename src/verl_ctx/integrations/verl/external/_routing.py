"""The typed routing context for LLM servers started outside the job, and the policy that applies it.

Plain pydantic and Ray: ``ExternalLLMServerClient`` (``_llm_client``) puts it behind verl's client API.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from ...._schema import RoleContext
from ....errors import ServerUnavailableError

__all__ = [
    "ExternalRolloutContext",
    "ExternalRouting",
    "Router",
    "ServerRef",
]

Policy = Literal["sticky", "round_robin", "least_inflight"]


class ServerRef(BaseModel):
    """A Ray named actor implementing verl's server ``generate`` (an inference pool started outside the job)."""

    model_config = {"frozen": True, "extra": "forbid"}

    name: str = Field(min_length=1, description="Ray actor name, as given to .options(name=...).")
    namespace: str | None = Field(None, description="Ray namespace; default: ExternalRouting.namespace.")


class ExternalRouting(BaseModel):
    """Where and how rollout requests go when the job does not run its own LLM servers."""

    model_config = {"frozen": True, "extra": "forbid"}

    servers: list[ServerRef] = Field(min_length=1, description="The servers to route to.")
    namespace: str | None = Field(None, description="Default Ray namespace of the servers.")
    policy: Policy = Field(
        "sticky",
        description="sticky: one request id stays on one server (multi-turn prefix cache reuse); "
        "round_robin; least_inflight: the server with the fewest requests in flight from this client.",
    )
    request_timeout_s: float = Field(600.0, gt=0, description="Limit for one generate call.")
    retries: int = Field(2, ge=0, description="Further servers tried after one fails or is unreachable.")
    sticky_capacity: int = Field(100_000, gt=0, description="Request ids remembered by the sticky policy.")

    @model_validator(mode="after")
    def _unique_servers(self) -> ExternalRouting:
        keys = [(s.namespace or self.namespace, s.name) for s in self.servers]
        dupes = sorted({name for (_, name) in keys if keys.count((_, name)) > 1})
        if dupes:
            raise ValueError(f"servers are listed twice: {', '.join(dupes)}")
        return self


class ExternalRolloutContext(RoleContext):
    """Base for a rollout context that routes to external servers; declare yours with ``role="rollout"``::

    class RolloutContext(ExternalRolloutContext, role="rollout"):
        system_prompt: str = "..."
    """

    routing: ExternalRouting


class Router:
    """Picks a server per request by policy, skipping servers that died or cannot be reached."""

    def __init__(self, routing: ExternalRouting) -> None:
        self.routing = routing
        self._ids = [self._server_id(s) for s in routing.servers]
        self._refs = dict(zip(self._ids, routing.servers, strict=True))
        self._handles: dict[str, Any] = {}
        self._dead: dict[str, str] = {}  # server id -> why
        self._inflight = dict.fromkeys(self._ids, 0)
        self._sticky: OrderedDict[str, str] = OrderedDict()
        self._cycle = itertools.cycle(self._ids)
        self._turn = -1
        # request id -> the server its latest attempt went to, to mark it dead if that attempt fails
        self.last_server: dict[str, str] = {}

    def _server_id(self, ref: ServerRef) -> str:
        namespace = ref.namespace or self.routing.namespace
        return f"{namespace}/{ref.name}" if namespace else ref.name

    @property
    def alive(self) -> list[str]:
        return [s for s in self._ids if s not in self._dead]

    def mark_dead(self, server_id: str, why: str) -> None:
        self._dead[server_id] = why
        for request_id in [r for r, s in self._sticky.items() if s == server_id]:
            del self._sticky[request_id]

    def inflight(self, server_id: str) -> int:
        return self._inflight[server_id]

    def _handle(self, server_id: str) -> Any:
        handle = self._handles.get(server_id)
        if handle is None:
            import ray

            ref = self._refs[server_id]
            try:
                handle = ray.get_actor(ref.name, namespace=ref.namespace or self.routing.namespace)
            except ValueError as e:
                raise LookupError(
                    f"no Ray actor named '{ref.name}' in namespace '{ref.namespace or self.routing.namespace}' ({e})"
                ) from None
            self._handles[server_id] = handle
        return handle

    def _choose(self, request_id: str) -> str:
        alive = self.alive
        if not alive:
            raise self.unavailable()
        policy = self.routing.policy
        if policy == "sticky":
            chosen = self._sticky.get(request_id)
            if chosen is None or chosen in self._dead:
                chosen = self._least_busy(alive)
                self._sticky[request_id] = chosen
                while len(self._sticky) > self.routing.sticky_capacity:
                    self._sticky.popitem(last=False)
            else:
                self._sticky.move_to_end(request_id)
            return chosen
        if policy == "round_robin":
            return next(s for s in self._cycle if s not in self._dead)
        return self._least_busy(alive)

    def _least_busy(self, alive: list[str]) -> str:
        """The server with the fewest requests in flight; ties go round the servers, not to the first."""
        self._turn = (self._turn + 1) % len(alive)
        rotated = alive[self._turn :] + alive[: self._turn]
        return min(rotated, key=lambda s: self._inflight[s])

    def acquire(self, request_id: str) -> tuple[str, Any]:
        """A live server for ``request_id`` and its handle; marks unreachable ones dead as it goes."""
        while True:
            server_id = self._choose(request_id)
            try:
                handle = self._handle(server_id)
            except LookupError as e:
                self.mark_dead(server_id, str(e))
                continue
            self._inflight[server_id] += 1
            self.last_server[request_id] = server_id
            return server_id, handle

    def release(self, server_id: str) -> None:
        if self._inflight.get(server_id, 0) > 0:
            self._inflight[server_id] -= 1

    def unavailable(self, last_error: str | None = None) -> ServerUnavailableError:
        lines = [f"  {s}: {self._dead.get(s, 'alive')}" for s in self._ids]
        tail = f"; last error: {last_error}" if last_error else ""
        return ServerUnavailableError(
            f"no external LLM server could take the request after {self.routing.retries} retries "
            f"(policy {self.routing.policy}){tail}. Servers:\n"
            + "\n".join(lines)
            + "\nStart them (ray named actors in the configured namespace) or fix "
            "extra_context.rollout.routing.servers"
        )
