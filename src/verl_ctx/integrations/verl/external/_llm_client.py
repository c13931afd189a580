"""``ExternalLLMServerClient``: verl's ``LLMServerClient`` routing to servers managed outside the job.

verl 0.9.1 lets ``LLMServerClient(config, load_balancer_handle=None)`` be built so a subclass can route
requests itself; the base ``_acquire_server`` then fails with ``AttributeError: 'NoneType' object has no
attribute ...``. This subclass reads the servers, policy, timeout and retries from the rollout role's typed
context (validated before launch like any other) and never touches a load balancer it does not have.

Imported on first use of ``verl_ctx.integrations.verl.ExternalLLMServerClient``: verl's client module pulls
its rollout stack.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from verl.workers.rollout.llm_server import LLMServerClient

from ...._decode import decode
from ...._registry import default_registry
from ...._schema import RoleContext
from ....errors import MissingContextError
from ._routing import ExternalRouting, Router

__all__ = ["ExternalLLMServerClient"]

# What a dead, restarting or unreachable server actor raises to its caller.
_SERVER_FAILURES = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)


def routing_from(config: Any, schema: type[RoleContext] | None) -> ExternalRouting | None:
    """The ``ExternalRouting`` in the rollout context carried by ``config``; ``None`` when there is none."""
    schema = schema or default_registry.get("rollout")
    if schema is None:
        return None
    try:
        ctx = decode(config, schema)
    except MissingContextError:
        return None
    routing = getattr(ctx, "routing", None)
    if not isinstance(routing, ExternalRouting):
        raise MissingContextError(
            f"the rollout context {type(ctx).__qualname__} has no `routing: ExternalRouting` field; declare it "
            'as `class RolloutContext(ExternalRolloutContext, role="rollout")`',
            role="rollout",
        )
    return routing


class ExternalLLMServerClient(LLMServerClient):  # type: ignore[misc]
    """``LLMServerClient`` that routes to externally managed servers named in the rollout context.

    With a load balancer handle it behaves exactly like verl's client. Without one it reads
    ``extra_context.rollout.routing`` (an ``ExternalRouting``) from the config verl hands it and routes each
    ``generate`` itself: sticky, round robin or least in flight. A server that fails or cannot be reached is
    skipped by later requests; after ``retries`` further servers a ``ServerUnavailableError`` names them all.
    """

    #: The rollout schema to read; default: the schema registered for role "rollout".
    context_schema: type[RoleContext] | None = None

    def __init__(self, config: Any, load_balancer_handle: Any = None, **kwargs: Any) -> None:
        super().__init__(config, load_balancer_handle, **kwargs)
        self.router: Router | None = None
        if load_balancer_handle is None:
            routing = routing_from(config, self.context_schema)
            if routing is None:
                raise MissingContextError(
                    "ExternalLLMServerClient has no load balancer and no routing context. Either pass "
                    "load_balancer_handle, or name the servers in the rollout context: declare "
                    '`class RolloutContext(ExternalRolloutContext, role="rollout")`, set '
                    "extra_context.rollout.routing.servers, and launch with `verl-ctx run` so it reaches the config",
                    role="rollout",
                )
            self.router = Router(routing)

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        if self.router is None:
            return await super()._acquire_server(request_id, **extra)  # type: ignore[no-any-return]
        return self.router.acquire(request_id)

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        if self.router is None:
            super()._release_server(server_id, request_id=request_id)
        else:
            self.router.release(server_id)  # no load balancer to tell

    async def generate(self, request_id: str, **kwargs: Any) -> Any:
        router = self.router
        if router is None:
            return await super().generate(request_id, **kwargs)
        last_error = None
        for _ in range(router.routing.retries + 1):
            if not router.alive:
                break
            try:
                return await asyncio.wait_for(
                    super().generate(request_id, **kwargs), timeout=router.routing.request_timeout_s
                )
            except _SERVER_FAILURES as e:
                last_error = f"{type(e).__name__} from the server"
            except asyncio.TimeoutError:
                last_error = f"no answer within request_timeout_s={router.routing.request_timeout_s}"
            finally:
                # which server this attempt went to; popped on success too, so the map stays small
                used = router.last_server.pop(request_id, None)
            if used is not None:
                router.mark_dead(used, last_error)
        raise router.unavailable(last_error)
