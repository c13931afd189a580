"""The routing policy alone (no Ray): cool-down, half-open trials, sticky moves, exclusions, per-call attempts."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from verl_ctx.errors import ServerUnavailableError
from verl_ctx.integrations.verl.external import ExternalRouting, Router, ServerRef


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lookup(ref: ServerRef, namespace: str | None) -> str:
    return f"handle-{ref.name}"


def _router(clock: Clock, names: tuple[str, ...] = ("a", "b", "c"), **routing: Any) -> Router:
    spec = ExternalRouting.model_validate({"servers": [{"name": n} for n in names], "weight_sync": "none", **routing})
    return Router(spec, clock=clock, lookup=lookup)


def test_cool_down_doubles_per_failure_in_a_row_up_to_the_cap() -> None:
    """cooldown_s, then twice, four times ... capped at max_cooldown_s; a success resets the count."""
    clock = Clock()
    router = _router(clock, ("a",), cooldown_s=2, max_cooldown_s=5)
    pauses = []
    for _ in range(4):
        attempt = router.acquire("r")
        router.release(attempt)
        router.failed(attempt, "boom")
        start = clock.now
        while "a" not in router.alive:
            clock.now += 0.5
        pauses.append(clock.now - start)
    assert pauses == [2.0, 4.0, 5.0, 5.0]
    attempt = router.acquire("r")
    router.release(attempt)
    router.succeeded(attempt)
    router.failed(router.acquire("r"), "boom again")
    assert router.status()["a"] == "cooling down for 2.0 s after: boom again"


def test_a_half_open_server_takes_one_trial_at_a_time() -> None:
    """After its cool-down a server admits a single trial request; others go elsewhere until it succeeds."""
    clock = Clock()
    router = _router(clock, ("a", "b"), policy="least_inflight", cooldown_s=1)
    router.failed("a", "down")
    clock.now = 1.0
    first = router.acquire("x")
    assert (first.server_id, first.trial) == ("a", True)  # least busy: a has nothing in flight
    others = [router.acquire(f"y{i}").server_id for i in range(3)]
    assert others == ["b", "b", "b"]
    router.release(first)
    router.succeeded(first)
    assert router.status()["a"] == "healthy"


def test_sticky_sessions_move_only_when_their_server_is_down_and_never_back() -> None:
    """A busy server keeps its sessions; a failed one loses them; they stay put once it recovers."""
    clock = Clock()
    router = _router(clock, ("a", "b"), cooldown_s=1)
    home = {r: router.acquire(r).server_id for r in ("s1", "s2", "s3", "s4")}
    assert set(home.values()) == {"a", "b"}
    assert all(router.acquire(r).server_id == home[r] for r in home)  # busy or not, no move
    assert not router.moves
    router.failed("a", "crashed")
    after = {r: router.acquire(r).server_id for r in home}
    assert after == dict.fromkeys(home, "b")
    assert sorted(m[0] for m in router.moves) == sorted(r for r, s in home.items() if s == "a")
    clock.now = 5.0
    assert {r: router.acquire(r).server_id for r in home} == after


def test_excluded_servers_get_nothing_until_the_trainer_lifts_it() -> None:
    """Servers the trainer excluded (failed to load weights) are skipped and named in the error."""
    clock = Clock()
    router = _router(clock, ("a", "b"), policy="round_robin")
    router.set_excluded({"a": "load_weights raised OSError"})
    assert {router.acquire(f"r{i}").server_id for i in range(4)} == {"b"}
    router.set_excluded({"a": "x", "b": "y"})
    with pytest.raises(
        ServerUnavailableError, match=r"(?s)a: excluded by the trainer: x.*b: excluded by the trainer: y"
    ):
        router.acquire("r")
    router.set_excluded({})
    assert {router.acquire(f"r{i}").server_id for i in range(4)} == {"a", "b"}


def test_attempts_belong_to_their_call() -> None:
    """Two attempts for one request id are two objects: releasing or failing one never touches the other's server."""
    clock = Clock()
    router = _router(clock, ("a", "b"), policy="round_robin")
    first, second = router.acquire("same"), router.acquire("same")
    assert {first.server_id, second.server_id} == {"a", "b"}
    router.release(second)
    router.failed(first, "timeout")
    router.release(first)
    assert router.status()[second.server_id] == "healthy"
    assert router.inflight("a") == router.inflight("b") == 0


def test_a_router_handed_to_another_process_starts_fresh() -> None:
    """Pickled into verl's agent-loop workers, the router carries its routing, not this process's handles or health."""
    clock = Clock()
    router = _router(clock, ("a",))
    router.failed(router.acquire("r"), "down")
    copy = pickle.loads(pickle.dumps(router))
    assert copy.routing == router.routing
    assert copy.status() == {"a": "healthy"}
    assert copy._handles == {}
