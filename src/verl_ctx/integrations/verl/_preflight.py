"""Preflight: the accelerators a composed config asks for, against what the Ray cluster has, before anything starts.

verl learns that a cluster is too small late, or never: its ``ResourcePoolManager`` checks the GPUs only after
the TaskRunner, the trainer and TransferQueue are up (``ValueError: Total available GPUs 0 is less than total
desired GPUs N``), a placement group that no node can hold waits silently, and a rollout replica wider than the
training GPUs becomes zero replicas. Every number involved is in the config, and the cluster's are known the moment
``ray.init`` returns, so ``launch`` compares them there, in well under a second:

* one resource pool per verl pool, as the trainers build them (``PPOTrainer._init_resource_pool_mgr``,
  ``main_ppo_v0.TaskRunner.init_resource_pool_mgr``): ``global_pool`` = ``trainer.n_gpus_per_node`` x
  ``trainer.nnodes``; ``reward_pool`` when ``reward.reward_model.enable_resource_pool``; ``teacher_pool`` when
  ``distillation.enabled``; the standalone rollout pool of ``trainer.v1.trainer_mode=separate_async``
  (``actor_rollout_ref.rollout.n_gpus_per_node`` x ``nnodes``);
* every pool's GPUs together against the cluster's total, and each pool's GPUs per node against its largest nodes
  (a placement group bundle is one node's);
* one local rollout replica (``rollout.tensor_model_parallel_size`` x ``data_parallel_size`` x
  ``pipeline_model_parallel_size`` GPUs) fits in the training GPUs it is carved from (``LLMServerManager``
  starts ``world_size // replica_size`` replicas: zero when it does not). The ``external_pool`` trainer starts no
  local replica.

``verl-ctx run --rehearse`` runs on CPU pools of its own and is not judged here (its check:
``_rehearsal_settings.check_cpus``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import LaunchError

__all__ = ["Pool", "check_resources", "preflight", "resource_pools"]


@dataclass(frozen=True)
class Pool:
    """One resource pool the run will ask Ray for: ``per_node`` accelerators on each of ``nodes`` nodes."""

    name: str
    per_node: int
    nodes: int
    #: The config keys that set ``per_node`` and ``nodes``.
    keys: tuple[str, str]

    @property
    def total(self) -> int:
        return self.per_node * self.nodes

    def __str__(self) -> str:
        return f"{self.name}: {self.keys[0]}={self.per_node} x {self.keys[1]}={self.nodes}"


def _select(config: Any, dotted: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(config, dotted, default=default)


def _int(config: Any, dotted: str, default: int = 0) -> int:
    value = _select(config, dotted, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default  # verl's own checks name a value that is not a number


def resource_pools(config: Any) -> list[Pool]:
    """The pools verl's trainers create for ``config`` (their sizes read as verl reads them)."""
    pools = [
        Pool("global_pool", _int(config, "trainer.n_gpus_per_node"), _int(config, "trainer.nnodes"), _keys("trainer"))
    ]
    if _select(config, "reward.reward_model.enable_resource_pool", False):
        pools.append(
            Pool(
                "reward_pool",
                _int(config, "reward.reward_model.n_gpus_per_node"),
                _int(config, "reward.reward_model.nnodes"),
                _keys("reward.reward_model"),
            )
        )
    if _select(config, "distillation.enabled", False):
        pools.append(
            Pool(
                "teacher_pool",
                _int(config, "distillation.n_gpus_per_node"),
                _int(config, "distillation.nnodes"),
                _keys("distillation"),
            )
        )
    if _select(config, "trainer.use_v1", True) and _mode(config) == "separate_async":
        pools.append(
            Pool(
                "standalone rollout",
                _int(config, "actor_rollout_ref.rollout.n_gpus_per_node"),
                _int(config, "actor_rollout_ref.rollout.nnodes"),
                _keys("actor_rollout_ref.rollout"),
            )
        )
    return pools


def _keys(prefix: str) -> tuple[str, str]:
    return f"{prefix}.n_gpus_per_node", f"{prefix}.nnodes"


def _mode(config: Any) -> str:
    return str(_select(config, "trainer.v1.trainer_mode", "sync")).split("+", 1)[0]


def _replica_pools(config: Any, pools: Sequence[Pool]) -> list[Pool]:
    """The pools verl carves rollout replicas from: the training pool (hybrid replicas, unless
    ``actor_rollout_ref.hybrid_engine=false``) and separate_async's standalone pool; none for the external pool."""
    from .external._checks import TRAINER_MODE

    if _select(config, "trainer.use_v1", True) and _mode(config) == TRAINER_MODE:
        return []
    hybrid = [pools[0]] if _select(config, "actor_rollout_ref.hybrid_engine", True) else []
    return hybrid + [p for p in pools if p.name == "standalone rollout"]


def check_resources(config: Any, total: float, per_node: Sequence[float], *, resource: str = "GPU") -> list[str]:
    """Each way ``config`` does not fit a cluster of ``total`` ``resource`` (``per_node``: each node's count)."""
    pools = resource_pools(config)
    needed = sum(p.total for p in pools)
    problems = []
    have = int(total)
    if needed > have:
        listing = "; ".join(str(p) for p in pools if p.total)
        problems.append(f"this run needs {needed} {resource}(s) ({listing}) and the Ray cluster has {have}")
    largest = sorted((int(n) for n in per_node), reverse=True)
    for pool in pools:
        if not pool.per_node or needed > have:
            continue
        fitting = sum(1 for n in largest if n >= pool.per_node)
        if fitting < pool.nodes:
            problems.append(
                f"{pool} needs {pool.nodes} node(s) with {pool.per_node} {resource}(s) each and the Ray cluster has "
                f"{fitting} (its nodes have {', '.join(map(str, largest)) or 'none'})"
            )
    rollout = "actor_rollout_ref.rollout"
    sizes = [_int(config, f"{rollout}.{k}", 1) for k in _REPLICA_KEYS]
    replica = sizes[0] * sizes[1] * sizes[2]
    for pool in _replica_pools(config, pools):
        if pool.total and replica > pool.total:
            problems.append(
                f"one rollout replica needs {replica} {resource}(s) ({rollout}.tensor_model_parallel_size={sizes[0]} x "
                f"data_parallel_size={sizes[1]} x pipeline_model_parallel_size={sizes[2]}) and the {pool.name} it is "
                f"carved from has {pool.total} ({pool.keys[0]} x {pool.keys[1]}): verl would start no replica there"
            )
    return problems


_REPLICA_KEYS = ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")


def preflight(config: Any) -> None:
    """Refuse, with one ``LaunchError`` naming the numbers and keys, a run the Ray cluster (up) cannot hold."""
    import ray

    resource = "NPU" if str(_select(config, "trainer.device", "cuda")) == "npu" else "GPU"
    total = float(ray.cluster_resources().get(resource, 0))
    per_node = [float(node.get("Resources", {}).get(resource, 0)) for node in ray.nodes() if node.get("Alive")]
    problems = check_resources(config, total, per_node, resource=resource)
    if problems:
        raise _shortfall(problems, resource)


def _shortfall(problems: Sequence[str], resource: str) -> LaunchError:
    lines = "\n".join(f"  - {p}" for p in problems)
    return LaunchError(
        f"preflight: the Ray cluster cannot hold this run (verl would wait for {resource}s that never come, or fail "
        f"minutes later):\n{lines}\nNothing was started. Run where the cluster has them, lower the sizes named above, "
        "or rehearse the launch on CPU first with `verl-ctx run --rehearse`",
        cause=problems[0],
        key=_first_key(problems),
    )


def _first_key(problems: Sequence[str]) -> str | None:
    import re

    found = re.search(r"([a-z_]+(?:\.[a-z_]+)+)=", problems[0])
    return found.group(1) if found else None
