"""decode(encode(x)) == x for every promised field type, exactly (types and tz offsets too)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verl_ctx import decode, encode

from .models import Cat, Color, Dog, Everything, Level, Row

tz = st.builds(lambda m: dt.timezone(dt.timedelta(minutes=m)), st.integers(-23 * 60, 23 * 60))
aware = st.datetimes(timezones=tz)
keys = st.integers(-(2**63), 2**64 - 1)

everything = st.builds(
    Everything,
    text=st.text(),
    number=st.integers(-(2**63), 2**64 - 1),
    huge=st.integers(-(2**200), 2**200),
    ratio=st.floats(allow_nan=False),
    flag=st.booleans(),
    when=aware,
    naive=st.datetimes(),
    day=st.dates(),
    clock=st.times(timezones=st.none() | tz),
    span=st.timedeltas(),
    ident=st.uuids(),
    money=st.decimals(allow_nan=False, allow_infinity=False),
    color=st.sampled_from(Color),
    level=st.sampled_from(Level),
    blob=st.binary(),
    pair=st.tuples(st.integers(-100, 100), st.text()),
    many=st.lists(st.integers(-100, 100)).map(tuple),
    tags=st.sets(st.text(max_size=5)),
    frozen=st.frozensets(st.integers(-100, 100)),
    path=st.sampled_from([Path("/a/b"), Path("rel/x.txt"), Path(".")]),
    mode=st.sampled_from(["a", "b"]),
    maybe=st.none() | st.integers(-100, 100),
    either=st.integers(-100, 100) | st.text(),
    pet=st.builds(Cat, lives=st.integers(0, 9)) | st.builds(Dog, good=st.booleans()),
    rows=st.lists(st.builds(Row, prompt_id=st.integers(0, 10**6), weight=st.floats(allow_nan=False)), max_size=5),
    by_id=st.dictionaries(keys, st.builds(Row, prompt_id=st.integers(0, 9), weight=st.just(1.0)), max_size=4),
    by_pair=st.dictionaries(st.tuples(st.integers(-9, 9), st.integers(-9, 9)), st.text(max_size=3), max_size=4),
    stamps=st.lists(aware, max_size=4),
    secret=st.text().map(str),
    secret_bytes=st.binary(),
    meta=st.dictionaries(st.text(max_size=4), st.integers(-100, 100) | st.text(max_size=4) | st.none(), max_size=4),
)


def _offsets(ctx: Everything) -> list[object]:
    return [ctx.when.utcoffset(), ctx.clock.utcoffset(), *(s.utcoffset() for s in ctx.stamps)]


@given(everything)
def test_every_promised_type_round_trips_exactly(ctx: Everything) -> None:
    """Values, their Python types and their UTC offsets all survive the envelope."""
    back = decode(encode(ctx), Everything)
    assert back == ctx
    assert _offsets(back) == _offsets(ctx)
    assert back.secret.get_secret_value() == ctx.secret.get_secret_value()
    assert back.secret_bytes.get_secret_value() == ctx.secret_bytes.get_secret_value()
    for name in type(ctx).model_fields:
        assert type(getattr(back, name)) is type(getattr(ctx, name)), name


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("when", dt.datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=dt.timezone(dt.timedelta(hours=-7)))),
        ("huge", 2**64),
        ("huge", -(2**63) - 1),
        ("huge", 10**80),
        ("blob", b"\xff\x00\xfe"),
        ("ratio", float("inf")),
        ("money", Decimal("1.100")),
        ("ident", uuid.UUID("12345678-1234-5678-1234-567812345678")),
        ("by_id", {2**64 - 1: Row(prompt_id=1, weight=0.5)}),
        ("tags", {"a", "b"}),
        ("pair", (3, "three")),
        ("pet", Dog(good=False)),
        ("naive", dt.datetime(1, 1, 1)),
        ("span", dt.timedelta(days=-3, microseconds=7)),
    ],
)
def test_known_traps_round_trip(field: str, value: object) -> None:
    """Each trap in CODEC_NOTES (tz offsets, ints past 2**64, non-UTF-8 bytes, inf, ...) comes back unchanged."""
    ctx = Everything(**{field: value})
    back = decode(encode(ctx), Everything)
    assert getattr(back, field) == value
    assert type(getattr(back, field)) is type(value)
    if isinstance(value, dt.datetime):
        assert getattr(back, field).utcoffset() == value.utcoffset()


def test_nan_survives() -> None:
    """NaN, which JSON paths turn into null, is still NaN after the trip."""
    back = decode(encode(Everything(ratio=float("nan"))), Everything)
    assert back.ratio != back.ratio


def test_secret_travels_but_is_never_shown() -> None:
    """The worker gets the real secret; the envelope's repr and the instance's repr do not show it."""
    ctx = Everything(secret="hunter2-token")
    env = encode(ctx)
    back = decode(env, Everything)
    assert back.secret.get_secret_value() == "hunter2-token"
    assert "hunter2-token" not in repr(back)
    assert "hunter2-token" not in str(back)


def test_decoded_context_is_frozen() -> None:
    """A worker cannot change its context by accident."""
    back = decode(encode(Everything()), Everything)
    with pytest.raises(ValueError, match="frozen"):
        back.number = 3  # type: ignore[misc]


def test_envelope_holds_plain_types_only() -> None:
    """Every value in the envelope is a str, int, bytes or a dict of str: nothing for pickle to execute."""
    env = encode(Everything())
    assert set(env) == {"verl_ctx_format", "role", "schema_id", "schema_version", "fingerprint", "fields", "payload"}
    for key, value in env.items():
        assert type(value) in (str, int, bytes, dict), key
    assert all(type(k) is str and type(v) is str for k, v in env["fields"].items())


def test_urls_addresses_extras_and_dataclasses_round_trip() -> None:
    """Pydantic URLs, IP addresses, a nested model keeping extra fields, and a dataclass with an offset."""
    import dataclasses
    import ipaddress

    from pydantic import AnyUrl, BaseModel, ConfigDict

    from verl_ctx import ContextRegistry, RoleContext

    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        known: int = 0

    @dataclasses.dataclass
    class Window:
        start: dt.datetime
        label: str = ""

    class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
        url: AnyUrl
        addr: ipaddress.IPv4Address
        net: ipaddress.IPv6Network
        loose: Loose
        window: Window

    tz = dt.timezone(dt.timedelta(hours=9, minutes=30))
    ctx = Ctx(
        url="https://judge.internal:8443/v1?x=1",
        addr="10.1.2.3",
        net="2001:db8::/32",
        loose=Loose(known=1, surprise=[1, 2]),
        window=Window(start=dt.datetime(2026, 3, 1, 8, tzinfo=tz), label="w"),
    )
    back = decode(encode(ctx), Ctx)
    assert back == ctx
    assert back.loose.model_extra == {"surprise": [1, 2]}
    assert back.window.start.utcoffset() == dt.timedelta(hours=9, minutes=30)


def test_datetimes_inside_generic_fields_keep_their_offsets() -> None:
    """``list``/``dict``/``tuple`` fields of aware datetimes keep +05:30 (Python 3.10 took ``list[datetime]`` for a
    class and sent the offset as +00:00)."""
    from verl_ctx import ContextRegistry, RoleContext

    class Stamped(RoleContext, role="critic", registry=ContextRegistry()):
        stamps: list[dt.datetime]
        by_name: dict[str, dt.datetime]
        window: tuple[dt.datetime, dt.datetime]
        maybe: list[dt.datetime] | None = None

    ist = dt.timezone(dt.timedelta(hours=5, minutes=30))
    at = dt.datetime(2026, 3, 1, 8, 15, tzinfo=ist)
    ctx = Stamped(stamps=[at], by_name={"start": at}, window=(at, at), maybe=[at])
    back = decode(encode(ctx), Stamped)
    offsets = [back.stamps[0], back.by_name["start"], *back.window, *(back.maybe or [])]
    assert [s.utcoffset() for s in offsets] == [dt.timedelta(hours=5, minutes=30)] * 5
    assert back == ctx


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pydantic path"])
def test_only_fields_travel_and_a_deleted_one_is_said_at_encode(compiled: bool) -> None:
    """functools.cached_property keeps its value in the instance's __dict__ once read; it is not a field (pydantic's
    model_dump leaves it out), and sent along, the worker refused it as an unknown field of a corrupt payload. A
    field deleted from an instance was a bare KeyError (or the worker's error), now an EnvelopeError at encode."""
    from functools import cached_property

    from pydantic import BaseModel, ConfigDict, Field

    from verl_ctx import ContextRegistry, RoleContext
    from verl_ctx._wire import compiled as compiled_path
    from verl_ctx.errors import EnvelopeError

    class Item(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n: int
        at: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)

        @cached_property
        def double(self) -> int:
            return 2 * self.n

    class Ctx(RoleContext, role="critic", registry=ContextRegistry(), compiled=compiled):
        x: int = 2
        one: Item = Item(n=1)
        rows: list[Item] = Field(default_factory=list)
        by_name: dict[str, Item] = Field(default_factory=dict)

        @cached_property
        def square(self) -> int:
            return self.x**2

    def make() -> Ctx:
        return Ctx(one=Item(n=1), rows=[Item(n=i) for i in range(5)], by_name={"a": Item(n=7)})

    assert (compiled_path.why_not(Ctx) is None) is compiled
    untouched, read = make(), make()
    assert (read.square, read.one.double, read.rows[3].double, read.by_name["a"].double) == (4, 2, 6, 14)
    assert "square" in read.__dict__  # what the encoder must leave behind
    assert encode(read)["payload"] == encode(untouched)["payload"]
    assert decode(encode(read), Ctx) == untouched
    for row in read.rows:  # every row read: the bulk pre-pass, not only the per-row one
        assert row.double == 2 * row.n
    assert encode(read)["payload"] == encode(untouched)["payload"]
    for field in ("at", "n"):  # a field deleted after validation: said at encode, not a KeyError or a worker's error
        broken = make()
        delattr(broken.rows[2], field)
        with pytest.raises(EnvelopeError, match=f"cannot encode .*this Item has no value for {field} "):
            encode(broken)
