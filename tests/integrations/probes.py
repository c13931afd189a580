"""Schemas and worker classes the integration tests send through Ray (importable by the workers)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from verl_ctx import ContextRegistry, RoleContext, decode

REGISTRY = ContextRegistry("integration probes")


class Row(BaseModel):
    prompt_id: int
    weight: float


class TableContext(RoleContext, role="critic", registry=REGISTRY):
    """A curriculum table large enough to pass Ray's actor-definition warning when it has many rows."""

    rows: list[Row] = Field(default_factory=list)
    blob: bytes = b""


class PlainProbe:
    """A plain Ray actor carrying envelopes: decodes in its constructor, so a restart decodes again."""

    def __init__(self) -> None:
        self.ctx = decode(self, TableContext)
        self.pid = os.getpid()

    def report(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "rows": len(self.ctx.rows),
            "blob": len(self.ctx.blob),
            "first": self.ctx.rows[0].model_dump() if self.ctx.rows else None,
        }

    def crash(self) -> None:
        os._exit(1)


def describe_mapping(mapping: dict[Any, Any]) -> dict[str, Any]:
    """What each bound worker class in a role_worker_mapping carries, decoded here with the demo schemas."""
    from verl_ctx import decode
    from verl_ctx.integrations.verl._binding import bound_envelopes

    from .contexts import SCHEMAS

    out: dict[str, Any] = {}
    for verl_role, remote_cls in mapping.items():
        cls = remote_cls.__ray_actor_class__
        entry: dict[str, Any] = {
            "class": cls.__name__,  # a bound class keeps the name of the class it extends
            "decoded": {r: repr(decode({"verl_ctx": {r: e}}, SCHEMAS[r])) for r, e in bound_envelopes(cls).items()},
        }
        for attr in ("actor_worker_cls", "ref_worker_cls"):
            inner = getattr(cls, attr, None)
            if inner is not None:
                entry[attr] = sorted(bound_envelopes(inner))
        out[str(verl_role)] = entry
    return out


class LegacyProbeRunner:
    """A legacy BaseTaskRunner's registration steps, run inside a real TaskRunner process."""

    def run(self, config: Any) -> dict[str, Any]:
        self.add_actor_rollout_worker(config)  # type: ignore[attr-defined]  # verl's own method
        self.add_critic_worker(config)  # type: ignore[attr-defined]
        return describe_mapping(self.role_worker_mapping)  # type: ignore[attr-defined]


def legacy_probe_base() -> type:
    from verl.trainer.main_ppo_v0 import BaseTaskRunner

    return type("LegacyProbeRunner", (LegacyProbeRunner, BaseTaskRunner), {"__module__": __name__})


def v1_probe_base(probe: type) -> type:
    """``probe`` on verl's ``TaskRunnerV1`` (its ``run`` first): a v1 runner, bound as one."""
    from verl.trainer.main_ppo import TaskRunnerV1

    return type(probe.__name__, (probe, TaskRunnerV1.__ray_actor_class__), {"__module__": probe.__module__})


class V1ProbeRunner:
    """What TaskRunnerV1.run does up to the trainer, then the v1 trainer's own role_worker_mapping step."""

    def run(self, config: Any) -> dict[str, Any]:
        from verl.trainer.ppo.v1 import get_trainer_cls

        trainer_cls = get_trainer_cls(config.trainer.v1.trainer_mode)
        trainer = object.__new__(trainer_cls)  # its __init__ loads a tokenizer and datasets: not on CPU
        trainer.config = config
        trainer._init_resource_pool_mgr()
        return {
            "trainer_mode": str(config.trainer.v1.trainer_mode),
            "mapping": describe_mapping(trainer.role_worker_mapping),
        }
