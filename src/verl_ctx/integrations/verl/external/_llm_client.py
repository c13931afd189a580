"""``ExternalLLMServerClient``: verl's ``LLMServerClient`` for servers managed outside the job.

Two paths:

* **with a load balancer handle** it is verl's own client (verl's routing, verl's load balancer actor), on every
  supported verl: the base class's ``_acquire_server`` / ``_release_server`` signatures differ between releases
  (0.9.0 ``(request_id)`` / ``(server_id)``; 0.9.1 adds ``**extra`` / ``request_id=None``), so the calls are
  shaped by inspecting the installed base class, never by a version string;
* **without one** it routes each ``generate`` itself by the rollout context's ``routing`` (``Router``): per-call
  attempts, cool-down and half-open retry of failed servers, a finite timeout, retries on other servers, and the
  weights version each output was generated with checked against ``max_staleness``.

Both paths record the weights version servers report in ``TokenOutput.extra_fields["global_steps"]``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from contextvars import ContextVar
from typing import Any

import ray
from verl.workers.rollout.llm_server import LLMServerClient

from ...._model.role_context import RoleContext
from ...._secrets.redact import logger as redacted_logger
from ....errors import MissingContextError, ServerUnavailableError, StaleOutputError
from ._checks import routing_from
from ._router import Attempt, Router
from ._routing import ExternalRouting

__all__ = ["ExternalLLMServerClient"]

logger = redacted_logger("verl_ctx.external")

# What a dead, restarting or unreachable server actor raises to its caller.
_SERVER_FAILURES = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)

# The attempt this task's generate call is making: verl's generate asks _acquire_server for it.
_ATTEMPT: ContextVar[Attempt | None] = ContextVar("verl_ctx_external_attempt", default=None)


def _takes_var_keyword(fn: Any) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


#: verl 0.9.1 forwards the request's fields to the load balancer (``_acquire_server(request_id, **extra)``).
ACQUIRE_TAKES_EXTRA = _takes_var_keyword(LLMServerClient._acquire_server)
#: verl 0.9.1 tells the load balancer which request ends (``_release_server(server_id, request_id=None)``).
RELEASE_TAKES_REQUEST_ID = "request_id" in inspect.signature(LLMServerClient._release_server).parameters


class _Snapshot:
    """The pool state read once per request (fired when the request starts, awaited after the first answer)."""

    def __init__(self, pool_state: Any) -> None:
        self._ref = pool_state.snapshot.remote() if pool_state is not None else None
        self._value: tuple[int, dict[str, str]] | None = None

    async def get(self) -> tuple[int, dict[str, str]] | None:
        if self._ref is not None and self._value is None:
            try:
                self._value = await self._ref
            except _SERVER_FAILURES:  # the trainer (its owner) is gone: judge by what this client has seen
                self._ref = None
        return self._value


class ExternalLLMServerClient(LLMServerClient):  # type: ignore[misc]
    """``LLMServerClient`` that routes to externally managed servers named in the rollout context.

    ``routing`` defaults to ``extra_context.rollout.routing`` read from ``config`` (the rollout schema:
    ``context_schema``, else the one registered for role "rollout"). ``pool_state`` is the trainer's
    ``PoolState`` actor: the weights version outputs are judged against and the servers to route around.
    Without it the newest version this client has seen is the reference.

    ``versions`` counts outputs per reported weights version; ``stale_outputs`` counts stale ones.
    """

    #: The rollout schema to read; default: the schema registered for role "rollout".
    context_schema: type[RoleContext] | None = None

    def __init__(
        self,
        config: Any,
        load_balancer_handle: Any = None,
        *,
        routing: ExternalRouting | None = None,
        pool_state: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, load_balancer_handle, **kwargs)
        self.router: Router | None = None
        self.pool_state = pool_state
        self.versions: Counter[int | None] = Counter()
        self.stale_outputs = 0
        self._newest: int | None = None
        self._logged: set[tuple[str, int | None]] = set()
        if load_balancer_handle is None:
            routing = routing or routing_from(config, self.context_schema)
            if routing is None:
                raise MissingContextError(
                    "ExternalLLMServerClient has no load balancer and no routing context. Either pass "
                    "load_balancer_handle, or name the servers in the rollout context: declare "
                    '`class RolloutContext(ExternalRolloutContext, role="rollout")`, set '
                    "extra_context.rollout.routing.servers, and launch with `verl-ctx run` so it reaches the config",
                    role="rollout",
                )
            self.router = Router(routing)

    # ------------------------------------------------------- verl's hooks

    async def _acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        if self.router is None:
            if ACQUIRE_TAKES_EXTRA:
                return await super()._acquire_server(request_id, **extra)  # type: ignore[no-any-return]
            return await super()._acquire_server(request_id)  # type: ignore[no-any-return]
        attempt = _ATTEMPT.get()
        if attempt is None:
            raise RuntimeError("ExternalLLMServerClient routes only from its own generate()")
        return attempt.server_id, attempt.handle

    def _release_server(self, server_id: str, request_id: str | None = None) -> None:
        if self.router is None:
            if RELEASE_TAKES_REQUEST_ID:
                super()._release_server(server_id, request_id=request_id)
            else:
                super()._release_server(server_id)
        # routed: the attempt loop in generate() releases the attempt it made

    async def generate(self, request_id: str, **kwargs: Any) -> Any:
        if self.router is None:
            output = await super().generate(request_id, **kwargs)
            self._version_of(output)
            return output
        try:
            return await self._routed(self.router, request_id, kwargs)
        except ServerUnavailableError as e:
            if self.pool_state is not None:  # the trainer raises it on the driver, not verl's downstream symptom
                await self.pool_state.record_failure.remote(e)
            raise

    # ------------------------------------------------------------ routing

    async def _routed(self, router: Router, request_id: str, kwargs: dict[str, Any]) -> Any:
        routing = router.routing
        snapshot = _Snapshot(self.pool_state)
        last_error: str | None = None
        stale = False
        for _ in range(routing.retries + 1):
            attempt = await self._attempt(router, request_id, last_error)
            token = _ATTEMPT.set(attempt)  # copied into the task wait_for makes
            try:
                output = await asyncio.wait_for(super().generate(request_id, **kwargs), routing.request_timeout_s)
            except _SERVER_FAILURES as e:
                last_error, stale = f"{attempt.server_id}: {type(e).__name__} from the server", False
                router.failed(attempt, f"{type(e).__name__} from the server")
                continue
            except asyncio.TimeoutError:
                why = f"no answer within request_timeout_s={routing.request_timeout_s}"
                last_error, stale = f"{attempt.server_id}: {why}", False
                router.failed(attempt, why)
                continue
            finally:
                _ATTEMPT.reset(token)
                router.release(attempt)
            rejected = await self._judge(router, attempt, output, snapshot)
            if rejected is None:
                router.succeeded(attempt)
                return output
            why, stale = rejected
            last_error = f"{attempt.server_id}: {why}"
            if stale:
                router.failed(attempt, why)
        if stale:
            raise StaleOutputError(str(router.unavailable(last_error)))
        raise router.unavailable(last_error)

    async def _attempt(self, router: Router, request_id: str, last_error: str | None) -> Attempt:
        """The next attempt; waits (``max_wait_s``) while no server is up; pings a half-open one first."""
        routing = router.routing
        loop = asyncio.get_running_loop()
        deadline = loop.time() + routing.max_wait_s
        while True:
            try:
                attempt = router.acquire(request_id)
            except ServerUnavailableError:
                wait = router.next_chance()
                if wait is None or loop.time() + wait > deadline:
                    raise router.unavailable(last_error) from None
                await asyncio.sleep(max(wait, 0.01))
                continue
            if not (attempt.trial and routing.health_probe):
                return attempt
            try:
                await asyncio.wait_for(attempt.handle.__ray_ready__.remote(), routing.probe_timeout_s)
                return attempt
            except (*_SERVER_FAILURES, asyncio.TimeoutError) as e:
                router.release(attempt)
                router.failed(attempt, f"health probe failed ({type(e).__name__})")

    # ---------------------------------------------------------- staleness

    def _version_of(self, output: Any) -> int | None:
        extra = getattr(output, "extra_fields", None) or {}
        version = extra.get("global_steps")
        if not isinstance(version, int) or isinstance(version, bool):
            version = None
        self.versions[version] += 1
        if version is not None and (self._newest is None or version > self._newest):
            self._newest = version
        return version

    async def _judge(
        self, router: Router, attempt: Attempt, output: Any, snapshot: _Snapshot
    ) -> tuple[str, bool] | None:
        """``None`` to return ``output``; else (why, whether it is stale) to try another server."""
        version = self._version_of(output)
        state = await snapshot.get()
        expected = self._newest
        if state is not None:
            expected, excluded = state
            router.set_excluded(excluded)
            if attempt.server_id in excluded:
                # routed before this client heard of it; never hand out an output from an excluded server
                return f"excluded by the trainer: {excluded[attempt.server_id]}", False
        limit = router.routing.max_staleness
        if limit is None or expected is None:
            return None
        if version is None:
            why = "reported no weights version (TokenOutput.extra_fields['global_steps'] must be an int)"
        elif expected - version > limit:
            why = (
                f"generated with weights version {version}, {expected - version} behind the trainer's {expected} "
                f"(max_staleness={limit})"
            )
        else:
            return None
        self.stale_outputs += 1
        self._report_stale(attempt.server_id, version, expected, why)
        if router.routing.on_stale == "count":
            return None
        return why, True

    def _report_stale(self, server_id: str, version: int | None, expected: int, why: str) -> None:
        if self.pool_state is not None:
            self.pool_state.record_stale.remote(server_id, version, expected)  # counted by the trainer's metrics
        key = (server_id, version)
        if key not in self._logged:  # once per server and version, not once per output
            if len(self._logged) > 1000:
                self._logged.clear()
            self._logged.add(key)
            policy = self.router.routing.on_stale if self.router is not None else "count"
            logger.warning("stale output from %s: %s (on_stale=%s)", server_id, why, policy)
