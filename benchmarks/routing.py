"""Routing overhead: ExternalLLMServerClient against calling the server actor directly, p50 / p99.

Three stub servers (Ray actors answering at once, so only the routing and Ray are measured) on this machine.
Candidates, interleaved round by round (the order rotates):

* direct: ``await server.generate.remote(...)``, the call every client ends with (round the servers);
* verl-ctx router: ``ExternalLLMServerClient`` routing by the context (sticky), as a user builds it;
* verl-ctx router + pool state: the client ``ExternalPoolTrainer`` hands out (reads the trainer's state);
* verl's load balancer: the same client with verl's ``GlobalRequestLoadBalancer`` actor (verl's own path).

Each round measures sequential calls (latency of one request alone) and a concurrent batch (one request among
many in flight). Reported: medians over rounds of each round's p50 / p99, with the spread (min-max), and the
overhead against direct in the same round.

Run alone: ``python -m benchmarks.routing [--quick]``; in the suite: ``python -m benchmarks --only routing``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .timing import fmt_seconds, table

NAMESPACE = "bench_routing"
SERVERS = ("r0", "r1", "r2")
FULL = {"rounds": 7, "sequential": 400, "concurrent": 256}
QUICK = {"rounds": 3, "sequential": 120, "concurrent": 128}


class BenchServer:
    """A pool server that answers at once: what remains is Ray and the routing."""

    def __init__(self, name: str) -> None:
        from verl.workers.rollout.replica import TokenOutput

        self.token_output = TokenOutput
        self.name = name

    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        return self.token_output(token_ids=[1], extra_fields={"server": self.name, "global_steps": 0})


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _candidates(handles: dict[str, Any]) -> dict[str, Callable[[str], Awaitable[Any]]]:
    import ray
    from verl.workers.rollout.llm_server import GlobalRequestLoadBalancer

    from verl_ctx.integrations.verl import compose_config
    from verl_ctx.integrations.verl.external import ExternalLLMServerClient, ExternalRouting
    from verl_ctx.integrations.verl.external._pool_state import start_pool_state

    config = compose_config(["actor_rollout_ref.rollout.name=vllm"])
    routing = ExternalRouting.model_validate(
        {"namespace": NAMESPACE, "servers": [{"name": n} for n in SERVERS], "weight_sync": "none"}
    )
    routed = ExternalLLMServerClient(config, routing=routing)
    with_state = ExternalLLMServerClient(config, routing=routing, pool_state=start_pool_state(0))
    balancer = ray.remote(GlobalRequestLoadBalancer).remote(servers=handles)
    verl_lb = ExternalLLMServerClient(config, load_balancer_handle=balancer)
    turn = itertools.cycle([handles[n] for n in SERVERS])  # direct calls go round the servers too
    kwargs: dict[str, Any] = {"prompt_ids": [1, 2, 3], "sampling_params": {"temperature": 1.0}}
    return {
        "direct actor call": lambda rid: next(turn).generate.remote(request_id=rid, **kwargs),
        "verl-ctx router": lambda rid: routed.generate(rid, **kwargs),
        "verl-ctx router + pool state": lambda rid: with_state.generate(rid, **kwargs),
        "verl's load balancer": lambda rid: verl_lb.generate(rid, **kwargs),
    }


async def _sequential(call: Callable[[str], Awaitable[Any]], n: int, tag: str) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        await call(f"{tag}-{i % 16}")  # 16 conversations, multi-turn: sticky ids repeat
        out.append(time.perf_counter() - started)
    return out


async def _concurrent(call: Callable[[str], Awaitable[Any]], n: int, tag: str) -> list[float]:
    async def one(i: int) -> float:
        started = time.perf_counter()
        await call(f"{tag}-c{i}")
        return time.perf_counter() - started

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def measure(quick: bool = False) -> dict[str, dict[str, list[float]]]:
    """Per candidate and statistic (seq p50/p99, conc p50/p99): one value per round."""
    import ray

    budget = QUICK if quick else FULL
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": repo, "RAY_AUTH_MODE": "disabled"}},
    )
    try:
        actor = ray.remote(num_cpus=0)(BenchServer)
        handles = {n: actor.options(name=n, namespace=NAMESPACE).remote(n) for n in SERVERS}
        ray.get([h.__ray_ready__.remote() for h in handles.values()])
        candidates = _candidates(handles)
        names = list(candidates)
        stats: dict[str, dict[str, list[float]]] = {n: {} for n in names}

        async def warm() -> None:
            for call in candidates.values():
                await _sequential(call, 20, "warm")

        asyncio.run(warm())
        for round_no in range(budget["rounds"]):
            order = names[round_no % len(names) :] + names[: round_no % len(names)]

            async def one_round(order: list[str] = order, round_no: int = round_no) -> None:
                for name in order:
                    seq = await _sequential(candidates[name], budget["sequential"], f"{round_no}")
                    conc = await _concurrent(candidates[name], budget["concurrent"], f"{round_no}")
                    for key, values in (("seq", seq), ("conc", conc)):
                        stats[name].setdefault(f"{key} p50", []).append(statistics.median(values))
                        stats[name].setdefault(f"{key} p99", []).append(_percentile(values, 0.99))

            asyncio.run(one_round())
        return stats
    finally:
        ray.shutdown()


def _cell(values: list[float]) -> str:
    return f"{fmt_seconds(statistics.median(values))} ({fmt_seconds(min(values))}-{fmt_seconds(max(values))})"


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    """The markdown table, and the router's median p50 / p99 overhead over a direct actor call (seconds)."""
    stats = measure(quick)
    direct = stats["direct actor call"]
    rows, numbers = [], {}
    for name, by_stat in stats.items():
        overhead = {
            key: [c - d for c, d in zip(by_stat[key], direct[key], strict=True)] for key in ("seq p50", "seq p99")
        }
        rows.append(
            [
                name,
                _cell(by_stat["seq p50"]),
                _cell(by_stat["seq p99"]),
                "" if name.startswith("direct") else fmt_seconds(statistics.median(overhead["seq p50"])),
                "" if name.startswith("direct") else fmt_seconds(statistics.median(overhead["seq p99"])),
                _cell(by_stat["conc p50"]),
                _cell(by_stat["conc p99"]),
            ]
        )
        if name == "verl-ctx router":
            numbers = {
                "router_p50_overhead_s": statistics.median(overhead["seq p50"]),
                "router_p99_overhead_s": statistics.median(overhead["seq p99"]),
            }
    budget = QUICK if quick else FULL
    headers = [
        "candidate",
        "one request: p50",
        "p99",
        "p50 overhead vs direct",
        "p99 overhead vs direct",
        f"{budget['concurrent']} in flight: p50",
        "p99",
    ]
    note = (
        f"\n\n{budget['rounds']} interleaved rounds of {budget['sequential']} sequential requests (16 sticky "
        f"conversations) and a batch of {budget['concurrent']} concurrent ones per candidate, 3 stub servers that "
        "answer at once, local Ray. Medians over rounds (min-max). Overhead = candidate minus direct, same round."
    )
    return table(headers, rows) + note, numbers


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.routing", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    text, numbers = run(quick=args.quick)
    print(text)
    print({k: fmt_seconds(v) for k, v in numbers.items()})


if __name__ == "__main__":
    main()
