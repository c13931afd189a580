"""The three context sizes of the benchmark, as pydantic schemas and as msgspec Structs (the speed limit).

S: a flat model, 20 leaf values. M: nested, ~200 leaves with datetimes, UUIDs, an enum, lists of
sub-models. L: a 100,000-row table of small sub-models (a curriculum or prompt-weight table). Two more shapes
(#24): M-typed, 193 leaves nearly all UUIDs, datetimes and enum members (20 nested events of 8 such fields, a
dict of datetimes, lists of UUIDs and of enum members); M-checked, the same data in models with a field validator
and a model validator each, as recipe code writes them (#41); L-narrow, 100,000 rows of 3 scalar fields (int, float,
bool: no string that cloudpickle can memoize).

Each set of pydantic classes is defined by ``_define()``. Called at import time, its classes are made
importable here (pickled by reference, as from a recipe's module); ``by_value_models()`` defines fresh ones
that cloudpickle must send by value, as it does for classes in a driver script's ``__main__``;
``pydantic_path_models()`` the same schemas with ``compiled=False`` (verl-ctx's pydantic path, for comparison);
``skewed_models()`` the same schemas under the same names, each top-level one with one more defaulted field: a
worker whose fingerprint differs from the driver's, so that decoding runs the value-level skew receipt.
"""

from __future__ import annotations

import datetime as dt
import enum
import typing
import uuid
from collections.abc import Callable
from typing import Any, cast

import msgspec
from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from verl_ctx import ContextRegistry, RoleContext

L_ROWS = 100_000
_T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _define(compiled: bool = True) -> dict[str, Any]:
    registry = ContextRegistry("benchmarks")

    class Stage(enum.Enum):
        WARMUP = "warmup"
        MAIN = "main"
        COOLDOWN = "cooldown"

    class Status(enum.Enum):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Small(RoleContext, role="small", registry=registry, compiled=compiled):
        lr_scale: float = 1.0
        kl_coef: float = 0.01
        clip_low: float = 0.2
        clip_high: float = 0.28
        entropy_coef: float = 0.0
        warmup_steps: int = 10
        total_steps: int = 1000
        seed: int = 42
        micro_batch: int = 4
        grad_accum: int = 8
        use_kl: bool = True
        use_entropy: bool = False
        normalize_adv: bool = True
        run_name: str = "ppo-run"
        reward_fn: str = "gsm8k"
        tokenizer: str = "Qwen/Qwen2.5-0.5B"
        shaping: str = "none"
        max_len: int = 2048
        temperature: float = 1.0
        top_p: float = 1.0

    class Phase(BaseModel):
        name: str
        stage: Stage
        start: dt.datetime
        ident: uuid.UUID
        weight: float
        steps: int
        tags: list[str]

    class Medium(RoleContext, role="medium", registry=registry, compiled=compiled):
        experiment: str
        created: dt.datetime
        owner: uuid.UUID
        phases: list[Phase]
        weights: dict[str, float]
        flags: list[bool]

    class Row(BaseModel):
        prompt_id: int
        weight: float
        source: str

    class Large(RoleContext, role="large", registry=registry, compiled=compiled):
        rows: list[Row] = Field(default_factory=list)

    class Event(BaseModel):
        ident: uuid.UUID
        parent: uuid.UUID
        owner: uuid.UUID
        stage: Stage
        status: Status
        queued: dt.datetime
        started: dt.datetime
        finished: dt.datetime

    class Typed(RoleContext, role="typed", registry=registry, compiled=compiled):
        run: uuid.UUID
        created: dt.datetime
        stage: Stage
        events: list[Event]
        checkpoints: dict[str, dt.datetime]
        reviewers: list[uuid.UUID]
        statuses: list[Status]

    class Audit(BaseModel):
        """An M-typed event as recipe code writes one: a field validator and a model validator (#41)."""

        ident: uuid.UUID
        parent: uuid.UUID
        owner: uuid.UUID
        stage: Stage
        status: Status
        queued: dt.datetime
        started: dt.datetime
        finished: dt.datetime

        @field_validator("queued", "started", "finished")
        @classmethod
        def _aware(cls, v: dt.datetime) -> dt.datetime:
            if v.tzinfo is None:
                raise ValueError("a time zone is required")
            return v

        @model_validator(mode="after")
        def _ordered(self) -> Audit:
            if not self.queued <= self.started <= self.finished:
                raise ValueError("queued <= started <= finished")
            return self

    class Checked(RoleContext, role="checked", registry=registry, compiled=compiled):
        run: uuid.UUID
        created: dt.datetime
        stage: Stage
        events: list[Audit]
        checkpoints: dict[str, dt.datetime]
        reviewers: list[uuid.UUID]
        statuses: list[Status]

        @field_validator("reviewers")
        @classmethod
        def _distinct(cls, v: list[uuid.UUID]) -> list[uuid.UUID]:
            if len(set(v)) != len(v):
                raise ValueError("a reviewer is listed twice")
            return v

    class Cell(BaseModel):
        uid: int
        score: float
        keep: bool

    class Narrow(RoleContext, role="narrow", registry=registry, compiled=compiled):
        rows: list[Cell] = Field(default_factory=list)

    return {
        "Stage": Stage,
        "Status": Status,
        "Small": Small,
        "Phase": Phase,
        "Medium": Medium,
        "Row": Row,
        "Large": Large,
        "Event": Event,
        "Typed": Typed,
        "Audit": Audit,
        "Checked": Checked,
        "Cell": Cell,
        "Narrow": Narrow,
    }


# The RoleContexts, by shape: S, M, M-typed, M-checked, L, L-narrow.
TOP = ("Small", "Medium", "Typed", "Checked", "Large", "Narrow")


def _make_importable(classes: dict[str, Any]) -> dict[str, Any]:
    for name, cls in classes.items():
        cls.__qualname__ = name
        cls.__module__ = __name__
        globals()[name] = cls
    return classes


IMPORTABLE = _make_importable(_define())


def by_value_models() -> dict[str, Any]:
    """Fresh classes cloudpickle cannot import by name, so it pickles them by value (as for ``__main__``)."""
    return _define()


def pydantic_path_models() -> dict[str, Any]:
    """The same schemas with ``compiled=False``: every decode validates through pydantic."""
    return _define(compiled=False)


def skewed_models() -> dict[str, Any]:
    """The importable schemas as a worker with one more field (``note: str = ""``) in each top-level model sees them.

    Same names (``module:QualName``) and versions, so only the fingerprint differs: decoding the importable
    models' envelopes with these validates the payload and then runs the value-level skew receipt
    (``verl_ctx._worker.skew.check_skew``), which finds every value unchanged and the new field filled by its
    default.
    """
    registry = ContextRegistry("benchmarks, skewed worker")
    out = dict(IMPORTABLE)
    for name in TOP:
        base = IMPORTABLE[name]
        fields: dict[str, Any] = {n: (info.annotation, info) for n, info in base.model_fields.items()}
        cls = create_model(
            name,
            __base__=RoleContext,
            __cls_kwargs__={"role": base.__verl_ctx_roles__[0], "registry": registry},
            note=(str, ""),
            **fields,
        )
        cls.__qualname__, cls.__module__ = base.__qualname__, base.__module__
        out[name] = cls
    return out


# --- the limit: the same shapes as msgspec Structs, no pydantic -------------------------------------


def _as_struct_type(tp: Any, structs: dict[type, type]) -> Any:
    """``tp`` with each pydantic model in it replaced by its Struct (``list[Phase]`` -> ``list[SPhase]``)."""
    if tp in structs:
        return structs[tp]
    args = typing.get_args(tp)
    if not args:
        return tp
    return typing.get_origin(tp)[tuple(_as_struct_type(a, structs) for a in args)]


def _structs_of(*models: type[BaseModel]) -> dict[type, type]:
    """A msgspec Struct per pydantic model, same fields and defaults (models listed inner first)."""
    structs: dict[type, type] = {}
    for model in models:
        fields: list[Any] = []
        for name, info in model.model_fields.items():
            tp = _as_struct_type(info.annotation, structs)
            if info.default_factory is not None:
                factory = cast(Callable[[], Any], info.default_factory)  # these models' factories take no argument
                fields.append((name, tp, msgspec.field(default_factory=factory)))
            elif info.is_required():
                fields.append((name, tp))
            else:
                fields.append((name, tp, info.default))
        structs[model] = msgspec.defstruct(f"S{model.__name__}", fields)
    return structs


# A separate Enum for the Structs: a typed msgspec decoder caches a lookup table on the Enum class, which
# would then break cloudpickle of the pydantic models that share it (CODEC_NOTES trap 8).
_STRUCT_MODELS = _define()
STRUCTS = _structs_of(
    *(
        _STRUCT_MODELS[n]
        for n in ("Small", "Phase", "Medium", "Row", "Large", "Event", "Typed", "Audit", "Checked", "Cell", "Narrow")
    )
)


def medium_data() -> dict[str, Any]:
    """~200 leaves: 20 phases of 9 (3 of them tags), 10 weights, 10 flags, 3 top-level values."""
    return {
        "experiment": "grpo-math",
        "created": _T0,
        "owner": uuid.UUID(int=7),
        "phases": [
            {
                "name": f"phase-{i}",
                "stage": ["warmup", "main", "cooldown"][i % 3],
                "start": _T0 + dt.timedelta(hours=i),
                "ident": uuid.UUID(int=i),
                "weight": i / 20,
                "steps": 100 * i,
                "tags": ["a", "b", str(i)],
            }
            for i in range(20)
        ],
        "weights": {f"source-{i}": i / 10 for i in range(10)},
        "flags": [i % 2 == 0 for i in range(10)],
    }


def typed_data() -> dict[str, Any]:
    """193 leaves, all but the 10 checkpoint names UUIDs, datetimes or enum members: 20 events of 8, 10 checkpoints,
    10 reviewers, 10 statuses, 3 top-level values."""
    stages, statuses = ["warmup", "main", "cooldown"], ["pending", "running", "done", "failed"]
    return {
        "run": uuid.UUID(int=2**100 + 1),
        "created": _T0,
        "stage": "main",
        "events": [
            {
                "ident": uuid.UUID(int=2**64 + i),
                "parent": uuid.UUID(int=2**64 + max(i - 1, 0)),
                "owner": uuid.UUID(int=i % 4),
                "stage": stages[i % 3],
                "status": statuses[i % 4],
                "queued": _T0 + dt.timedelta(minutes=i),
                "started": _T0 + dt.timedelta(minutes=i, seconds=30),
                "finished": _T0 + dt.timedelta(minutes=i + 1, microseconds=i),
            }
            for i in range(20)
        ],
        "checkpoints": {f"step-{100 * i}": _T0 + dt.timedelta(hours=i) for i in range(10)},
        "reviewers": [uuid.UUID(int=2**32 + i) for i in range(10)],
        "statuses": [statuses[i % 4] for i in range(10)],
    }


def large_rows(n: int = L_ROWS) -> list[dict[str, Any]]:
    return [{"prompt_id": i, "weight": (i % 97) / 97, "source": ("gsm8k", "math", "code")[i % 3]} for i in range(n)]


def narrow_rows(n: int = L_ROWS) -> list[dict[str, Any]]:
    return [{"uid": i, "score": (i % 89) / 89, "keep": i % 5 != 0} for i in range(n)]


def data(rows: int = L_ROWS) -> dict[str, dict[str, Any]]:
    """The data of each shape, keyed by shape."""
    return {
        "S": {},
        "M": medium_data(),
        "M-typed": typed_data(),
        "M-checked": typed_data(),
        "L": {"rows": large_rows(rows)},
        "L-narrow": {"rows": narrow_rows(rows)},
    }


# shape -> its RoleContext's name
SHAPES = dict(zip(("S", "M", "M-typed", "M-checked", "L", "L-narrow"), TOP, strict=True))


def instances(classes: dict[str, Any], rows: int = L_ROWS) -> dict[str, Any]:
    """One instance of ``classes`` (pydantic) per shape, built from the same data."""
    return {shape: classes[SHAPES[shape]].model_validate(d) for shape, d in data(rows).items()}


def struct_instances(rows: int = L_ROWS) -> dict[str, Any]:
    return {shape: msgspec.convert(d, STRUCTS[_STRUCT_MODELS[SHAPES[shape]]]) for shape, d in data(rows).items()}
