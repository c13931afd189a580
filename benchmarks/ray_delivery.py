"""Ray: spawning a verl worker group with a typed context vs a raw dict, and a 32 MiB context to 4 workers."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from verl_ctx import encode

from .timing import fmt_seconds, table

TITLE = "Ray delivery (real verl RayWorkerGroup on CPU)"

MIB = 1024 * 1024


def _spawn(ray_cls: Any) -> tuple[float, Any, Any]:
    from verl.single_controller.ray import RayResourcePool, RayWorkerGroup

    started = time.perf_counter()
    pool = RayResourcePool(process_on_nodes=[2], use_gpu=False, max_colocate_count=1)
    group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=ray_cls, device_name="cpu")
    reports = group.report()
    return time.perf_counter() - started, group, (pool, reports)


def _release(group: Any, pool: Any) -> None:
    import ray
    from ray.util.placement_group import remove_placement_group

    for worker in group._workers:
        ray.kill(worker)
    for pg in pool.pgs or ():
        remove_placement_group(pg)


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    import ray
    from verl.single_controller.ray import RayClassWithInitArgs
    from verl.trainer.ppo.utils import Role
    from verl.workers.config import TrainingWorkerConfig

    from verl_ctx.integrations.verl import bind_role_worker_mapping, bind_worker_cls, offload

    from .probes import CriticContext, RawDictTrainingWorker, ReadingTrainingWorker, TableProbe, table_context

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": repo, "RAY_AUTH_MODE": "disabled"}},
    )
    try:
        rounds = 2 if quick else 4
        typed_t, raw_t = [], []
        ctx = CriticContext(value_clip=0.3, shaping="length_penalty")
        for _ in range(rounds):
            mapping = bind_role_worker_mapping(
                {Role.Critic: ray.remote(ReadingTrainingWorker)}, {"critic": encode(ctx)}
            )
            typed = RayClassWithInitArgs(cls=mapping[Role.Critic], config=TrainingWorkerConfig())
            t, group, (pool, _) = _spawn(typed)
            typed_t.append(t)
            _release(group, pool)
            raw = RayClassWithInitArgs(
                cls=ray.remote(RawDictTrainingWorker),
                config=TrainingWorkerConfig(extra_context={"critic": ctx.model_dump()}),
            )
            t, group, (pool, _) = _spawn(raw)
            raw_t.append(t)
            _release(group, pool)
        typed_med, raw_med = statistics.median(typed_t), statistics.median(raw_t)

        big = table_context(32 * MIB)
        started = time.perf_counter()
        bound = bind_worker_cls(TableProbe, offload({"critic": encode(big)}))
        actors = [ray.remote(bound).remote() for _ in range(4)]
        reports = ray.get([a.report.remote() for a in actors])
        big_t = time.perf_counter() - started
        for a in actors:
            ray.kill(a)
        peak = max(r["peak_rss_mib"] for r in reports)
        base = max(r["baseline_rss_mib"] for r in reports)
    finally:
        ray.shutdown()
    rows = [
        [
            "spawn 2-worker RayWorkerGroup, typed context (bound class)",
            fmt_seconds(typed_med),
            f"{typed_med / raw_med:.2f}x the raw dict",
        ],
        ["spawn 2-worker RayWorkerGroup, equivalent raw dict in extra_context", fmt_seconds(raw_med), "1.00"],
        [
            "32 MiB context to 4 workers (object store, decode in each)",
            fmt_seconds(big_t),
            f"peak worker RSS {peak:.0f} MiB (worker before decoding: {base:.0f} MiB)",
        ],
    ]
    return table(["Ray", "median wall time", "note"], rows), {"spawn_ratio": typed_med / raw_med, "big_s": big_t}
