"""Worker classes for the Ray benchmark (importable by the workers)."""

from __future__ import annotations

import resource
from typing import Any

from pydantic import BaseModel, Field
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import TrainingWorker

from verl_ctx import ContextRegistry, RoleContext, decode

_REG = ContextRegistry("benchmark probes")


class CriticContext(RoleContext, role="critic", registry=_REG):
    """The typed context of the spawn benchmark (a recipe's critic settings)."""

    value_clip: float = 0.2
    shaping: str = "none"


class ReadingTrainingWorker(TrainingWorker):
    """A TrainingWorker that decodes its typed context from ``config.extra_context``, then stops before the engine."""

    def __init__(self, config: Any) -> None:
        Worker.__init__(self)  # TrainingWorker.__init__ would start a process group and a model engine here
        self.seen = decode(config, CriticContext).model_dump()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def report(self) -> dict[str, Any]:
        return self.seen


class RawDictTrainingWorker(TrainingWorker):
    """The baseline: a TrainingWorker reading a plain dict from extra_context (what verl offers today)."""

    def __init__(self, config: Any) -> None:
        Worker.__init__(self)
        self.seen = dict(config.extra_context["critic"])

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def report(self) -> dict[str, Any]:
        return self.seen


class Row(BaseModel):
    prompt_id: int
    weight: float


class BigContext(RoleContext, role="critic", registry=ContextRegistry("benchmark probes, large")):
    rows: list[Row] = Field(default_factory=list)
    blob: bytes = b""


def table_context(nbytes: int) -> BigContext:
    """A context of about ``nbytes``: a 10,000-row table and a blob."""
    return BigContext(rows=[Row(prompt_id=i, weight=i / 3) for i in range(10_000)], blob=b"\x07" * nbytes)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class TableProbe:
    def __init__(self) -> None:
        self.baseline = _rss_mib()
        self.ctx = decode(self, BigContext)  # from the envelopes (references) the bound class carries

    def report(self) -> dict[str, Any]:
        return {
            "rows": len(self.ctx.rows),
            "blob": len(self.ctx.blob),
            "peak_rss_mib": _rss_mib(),
            "baseline_rss_mib": self.baseline,
        }
