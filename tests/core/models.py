"""Schemas the core tests share: every field type the envelope promises to round-trip."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretBytes, SecretStr

from verl_ctx import ContextRegistry, RoleContext

REGISTRY = ContextRegistry("core test models")


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Row(BaseModel):
    prompt_id: int
    weight: float
    tag: str = ""


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = True


class Everything(RoleContext, role="critic", registry=REGISTRY):
    """One field per promised type."""

    text: str = "x"
    number: int = 1
    huge: int = 0
    ratio: float = 0.5
    flag: bool = False
    nothing: None = None
    when: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    naive: dt.datetime = dt.datetime(2024, 1, 1)
    day: dt.date = dt.date(2024, 1, 1)
    clock: dt.time = dt.time(12, 0)
    span: dt.timedelta = dt.timedelta(seconds=1)
    ident: uuid.UUID = uuid.UUID(int=0)
    money: Decimal = Decimal("0")
    color: Color = Color.RED
    level: Level = Level.LOW
    blob: bytes = b""
    pair: tuple[int, str] = (0, "")
    many: tuple[int, ...] = ()
    tags: set[str] = Field(default_factory=set)
    frozen: frozenset[int] = frozenset()
    path: Path = Path("/tmp")
    mode: Literal["a", "b"] = "a"
    maybe: int | None = None
    either: int | str = 0
    pet: Annotated[Cat | Dog, Field(discriminator="kind")] = Cat()
    rows: list[Row] = Field(default_factory=list)
    by_id: dict[int, Row] = Field(default_factory=dict)
    by_pair: dict[tuple[int, int], str] = Field(default_factory=dict)
    stamps: list[dt.datetime] = Field(default_factory=list)
    secret: SecretStr = SecretStr("")
    secret_bytes: SecretBytes = SecretBytes(b"")
    meta: dict[str, Any] = Field(default_factory=dict)


class Small(RoleContext, role="actor", registry=REGISTRY):
    lr_scale: float = Field(1.0, gt=0)
    name: str = "run"
    token: SecretStr | None = None
