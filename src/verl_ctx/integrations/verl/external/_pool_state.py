"""``PoolState``: what the trainer tells every client about the pool, in one small Ray actor.

The trainer owns it (``ExternalPoolTrainer``) and hands its handle to the ``ExternalLLMServerClient`` it gives
verl; verl pickles that client into each agent-loop worker, so every copy reads the same state:

* ``version``: the trainer's current weights version (``global_steps`` after the latest update, synced to the
  pool or not): an output generated with an older version is that many steps stale;
* ``excluded``: servers that failed to load the current weights, with why: clients route around them;
* stale events the clients report (``on_stale: count``), which the trainer logs as metrics each step;
* the first ``ServerUnavailableError`` (``StaleOutputError`` included) a client raised: verl's agent loop turns it
  into a downstream symptom (the replay buffer's "no materializable trajectories"), so the trainer raises it instead.

Methods are ``async`` so Ray runs the actor as an async actor: hundreds of concurrent readers do not queue.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["PoolState", "start_pool_state"]


class PoolState:
    def __init__(self, version: int = 0) -> None:
        self.version = version
        self.excluded: dict[str, str] = {}
        self._stale: Counter[str] = Counter()
        self._worst = 0
        self._failure: BaseException | None = None

    async def snapshot(self) -> tuple[int, dict[str, str]]:
        """(trainer's weights version, excluded servers with why)."""
        return self.version, self.excluded

    async def publish(self, version: int, excluded: dict[str, str] | None = None) -> None:
        """The trainer's new version; ``excluded`` replaces the excluded servers when given."""
        self.version = version
        if excluded is not None:
            self.excluded = dict(excluded)

    async def record_stale(self, server_id: str, version: int | None, expected: int) -> None:
        self._stale[server_id] += 1
        if version is not None:
            self._worst = max(self._worst, expected - version)

    async def record_failure(self, error: BaseException) -> None:
        """A client could not serve a request (the error it raised); the first one is kept."""
        if self._failure is None:
            self._failure = error

    async def failure(self) -> BaseException | None:
        """The first error a client recorded, if any."""
        return self._failure

    async def take_stats(self) -> dict[str, Any]:
        """Stale events since the last call, per server, and the largest staleness seen; then reset."""
        stats = {"stale_outputs": sum(self._stale.values()), "by_server": dict(self._stale), "worst": self._worst}
        self._stale.clear()
        self._worst = 0
        return stats


def start_pool_state(version: int) -> Any:
    """A ``PoolState`` actor owned by the calling process (it ends with the trainer)."""
    import ray

    return ray.remote(num_cpus=0)(PoolState).remote(version)
