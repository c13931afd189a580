"""``Router``: picks a server per attempt by policy; failed servers cool down and come back half-open.

Health policy (docs/external-servers.md, "Faults"):

* a server that fails (dead, restarting, unreachable) or does not answer within ``request_timeout_s`` is
  **cooling down**: it gets no request for ``cooldown_s``, doubled for each further failure in a row, at most
  ``max_cooldown_s``. Its cached handle is dropped, so a server restarted under the same name is found again;
* when the cool-down is over it is **half-open**: exactly one request (a *trial*) may go to it at a time,
  after a ping when ``health_probe`` is on. A trial that succeeds makes it **healthy** again; one that fails
  starts a longer cool-down;
* when no server is up, a request waits for the first to come off its cool-down, at most ``max_wait_s``
  (``ExternalLLMServerClient``), then fails with ``ServerUnavailableError`` naming every server's state;
* servers the trainer reports as **excluded** (they failed to load the current weights) get nothing until a
  later report no longer lists them.

Each attempt is an ``Attempt`` object owned by the call that made it (issue #11, item 11): concurrent
requests sharing a request id never see each other's servers. Sticky sessions move only when their server is
down (cooling, excluded, or half-open with another request on trial); they never move back.

Plain Python: no Ray import until a handle is looked up; the clock and the lookup are injectable for tests.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ....errors import ServerUnavailableError
from ._routing import ExternalRouting, ServerRef

__all__ = ["Attempt", "Router"]


@dataclass
class Attempt:
    """One try of one request on one server."""

    server_id: str
    handle: Any
    trial: bool = False  # the first request to a half-open server
    released: bool = False


@dataclass
class _Health:
    failures: int = 0  # in a row; 0 = healthy
    until: float = 0.0  # clock time the cool-down ends
    why: str = ""
    trial: bool = False  # a trial attempt is in flight


def _lookup(ref: ServerRef, namespace: str | None) -> Any:
    import ray

    try:
        return ray.get_actor(ref.name, namespace=namespace)
    except ValueError as e:
        raise LookupError(f"no Ray actor named '{ref.name}' in namespace '{namespace}' ({e})") from None


class Router:
    """Picks a server per attempt by the routing's policy, skipping servers that are down."""

    def __init__(
        self,
        routing: ExternalRouting,
        *,
        clock: Callable[[], float] = time.monotonic,
        lookup: Callable[[ServerRef, str | None], Any] = _lookup,
    ) -> None:
        self.routing = routing
        self._clock = clock
        self._lookup = lookup
        self._ids = [self._server_id(s) for s in routing.servers]
        self._refs = dict(zip(self._ids, routing.servers, strict=True))
        self._handles: dict[str, Any] = {}
        self._health = {s: _Health() for s in self._ids}
        self._excluded: dict[str, str] = {}
        self._inflight = dict.fromkeys(self._ids, 0)
        self._sticky: OrderedDict[str, str] = OrderedDict()
        self._next = 0  # round robin position
        self._turn = -1  # least-busy tie rotation
        #: the latest sticky sessions moved off a server that was down: (request id, from, to)
        self.moves: deque[tuple[str, str, str]] = deque(maxlen=10_000)

    def _server_id(self, ref: ServerRef) -> str:
        namespace = ref.namespace or self.routing.namespace
        return f"{namespace}/{ref.name}" if namespace else ref.name

    @property
    def server_ids(self) -> list[str]:
        return list(self._ids)

    def handle_of(self, server_id: str) -> Any:
        """The server's handle, looked up by name if not cached; raises ``LookupError`` when there is none."""
        handle = self._handles.get(server_id)
        if handle is None:
            ref = self._refs[server_id]
            handle = self._lookup(ref, ref.namespace or self.routing.namespace)
            self._handles[server_id] = handle
        return handle

    # ----------------------------------------------------------------- state

    def _state(self, server_id: str, now: float) -> str:
        if server_id in self._excluded:
            return "excluded"
        health = self._health[server_id]
        if health.failures == 0:
            return "healthy"
        return "cooling" if now < health.until else "half-open"

    def _up(self, server_id: str, now: float) -> bool:
        """Healthy, or half-open with no trial in flight (so this request may be the trial)."""
        state = self._state(server_id, now)
        return state == "healthy" or (state == "half-open" and not self._health[server_id].trial)

    @property
    def alive(self) -> list[str]:
        """Servers a request may go to now."""
        now = self._clock()
        return [s for s in self._ids if self._up(s, now)]

    def status(self) -> dict[str, str]:
        """Each server's state, with the reason it is not healthy."""
        now = self._clock()
        out = {}
        for s in self._ids:
            state = self._state(s, now)
            health = self._health[s]
            if state == "excluded":
                out[s] = f"excluded by the trainer: {self._excluded[s]}"
            elif state == "cooling":
                out[s] = f"cooling down for {health.until - now:.1f} s after: {health.why}"
            elif state == "half-open":
                out[s] = f"half-open (trial {'in flight' if health.trial else 'next'}) after: {health.why}"
            else:
                out[s] = "healthy"
        return out

    def next_chance(self) -> float | None:
        """Seconds until some server may take a request (0: now); ``None`` when all are excluded."""
        now = self._clock()
        waits = []
        for s in self._ids:
            state = self._state(s, now)
            if state == "cooling":
                waits.append(self._health[s].until - now)
            elif state == "half-open" and self._health[s].trial:
                waits.append(0.05)  # its trial is in flight: look again shortly
            elif state != "excluded":
                waits.append(0.0)
        return min(waits) if waits else None

    def inflight(self, server_id: str) -> int:
        return self._inflight[server_id]

    def set_excluded(self, excluded: Mapping[str, str]) -> None:
        """Servers the trainer excluded (e.g. they failed to load the current weights), with why."""
        self._excluded = {s: why for s, why in excluded.items() if s in self._health}

    # --------------------------------------------------------------- routing

    def acquire(self, request_id: str) -> Attempt:
        """An attempt on a server that is up; raises ``ServerUnavailableError`` when none is."""
        while True:
            server_id = self._choose(request_id)
            try:
                handle = self.handle_of(server_id)
            except LookupError as e:
                self.failed(server_id, str(e))
                continue
            now = self._clock()
            trial = self._state(server_id, now) == "half-open"
            if trial:
                self._health[server_id].trial = True
            self._inflight[server_id] += 1
            return Attempt(server_id, handle, trial=trial)

    def _choose(self, request_id: str) -> str:
        now = self._clock()
        up = [s for s in self._ids if self._up(s, now)]
        if not up:
            raise self.unavailable()
        policy = self.routing.policy
        if policy == "sticky":
            previous = self._sticky.get(request_id)
            if previous is not None and self._up(previous, now):
                self._sticky.move_to_end(request_id)
                return previous
            chosen = self._least_busy(up)
            if previous is not None:
                self.moves.append((request_id, previous, chosen))
            self._sticky[request_id] = chosen
            self._sticky.move_to_end(request_id)
            while len(self._sticky) > self.routing.sticky_capacity:
                self._sticky.popitem(last=False)
            return chosen
        if policy == "round_robin":
            for _ in range(len(self._ids)):
                candidate = self._ids[self._next % len(self._ids)]
                self._next += 1
                if candidate in up:
                    return candidate
        return self._least_busy(up)

    def _least_busy(self, up: list[str]) -> str:
        """The server with the fewest requests in flight; ties go round the servers, not to the first."""
        self._turn = (self._turn + 1) % len(up)
        rotated = up[self._turn :] + up[: self._turn]
        return min(rotated, key=lambda s: self._inflight[s])

    def release(self, attempt: Attempt) -> None:
        """The attempt is over (whatever its outcome): its slot frees; an unresolved trial may be retried."""
        if attempt.released:
            return
        attempt.released = True
        if self._inflight.get(attempt.server_id, 0) > 0:
            self._inflight[attempt.server_id] -= 1
        if attempt.trial:
            self._health[attempt.server_id].trial = False

    def succeeded(self, attempt: Attempt) -> None:
        health = self._health[attempt.server_id]
        health.failures, health.why, health.trial = 0, "", False

    def failed(self, attempt_or_id: Attempt | str, why: str) -> None:
        """The server failed an attempt: it cools down (longer each time in a row) and is looked up again."""
        server_id = attempt_or_id.server_id if isinstance(attempt_or_id, Attempt) else attempt_or_id
        health = self._health[server_id]
        health.failures += 1
        pause = min(self.routing.cooldown_s * 2 ** (health.failures - 1), self.routing.max_cooldown_s)
        health.until = self._clock() + pause
        health.why = why
        health.trial = False
        self._handles.pop(server_id, None)

    def unavailable(self, last_error: str | None = None) -> ServerUnavailableError:
        lines = [f"  {s}: {why}" for s, why in self.status().items()]
        tail = f"; last error: {last_error}" if last_error else ""
        return ServerUnavailableError(
            f"no external LLM server could take the request (policy {self.routing.policy}, "
            f"{self.routing.retries} retries){tail}. Servers:\n"
            + "\n".join(lines)
            + "\nStart them (Ray named actors in the configured namespace), wait for their cool-down "
            f"({self.routing.cooldown_s} s, doubling), or fix extra_context.rollout.routing.servers"
        )

    def __getstate__(self) -> dict[str, Any]:
        # Handed to verl's agent-loop workers inside the client: each process starts with fresh health and
        # looks handles up itself.
        state = dict(self.__dict__)
        state["_handles"] = {}
        state["_health"] = {s: _Health() for s in self._ids}
        state["_inflight"] = dict.fromkeys(self._ids, 0)
        state["_sticky"] = OrderedDict()
        state["moves"] = deque(maxlen=10_000)
        return state
