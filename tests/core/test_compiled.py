"""The compiled codec path answers exactly as pydantic: acceptance, values (types, order, fields set, offsets), errors.

Schemas are generated from the compiled type list (as cattrs generates attrs classes), payloads from their
instances and from mutations of those (wrong types, big ints, NaN, text dates, unknown, missing, reordered and
repeated keys). For every payload the compiled decoder either refuses it or returns what pydantic's validator
returns from the same bytes; ``decode()`` with the compiled path on and off gives the same result or error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Generic, Literal, Optional, TypeVar, cast

import cloudpickle
import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from msgspec.msgpack import Ext
from pydantic import (
    AfterValidator,
    AnyUrl,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    RootModel,
    SecretStr,
    ValidationError,
    WrapValidator,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)

from verl_ctx import ContextRegistry, RoleContext, decode, encode
from verl_ctx._wire import compiled, generated
from verl_ctx._wire.codec import decode_payload, encode_payload
from verl_ctx._wire.msgpack import encoder as _encoder
from verl_ctx._wire.msgpack import prepare_all as _prepare_all
from verl_ctx.errors import EnvelopeError, SchemaDefinitionError

# Generated defaults holding bytes have no JSON Schema form; the fingerprint says so, which is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.json_schema.PydanticJsonSchemaWarning")

REFUSED = object()
_UTC = dt.timezone.utc
# Each example builds a schema class: a few milliseconds. Twice the profile's count keeps CI near 10 s.
EXAMPLES = settings(max_examples=2 * settings().max_examples)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(str, enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class Count(enum.Enum):
    ONE = 1
    TWO = 2


# --- the generated schemas ---------------------------------------------------------------------------------

zones = st.sampled_from(
    [None, _UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), dt.timezone(-dt.timedelta(hours=7))]
)
texts = st.text(st.characters(exclude_categories=cast(Any, ("Cs",))), max_size=6)  # no lone surrogates
# A default dict with a "$ref" key breaks pydantic's own JSON Schema generation (a KeyError; pydantic #12145's
# family): such a schema is refused with a SchemaDefinitionError (tests/core/test_fingerprint.py), not compiled.
dict_keys = texts.filter(lambda key: key != "$ref")


def _ints(bounds: dict[str, int]) -> st.SearchStrategy[int]:
    low = bounds.get("ge", bounds["gt"] + 1 if "gt" in bounds else -(2**70))
    high = bounds.get("le", bounds["lt"] - 1 if "lt" in bounds else 2**70)
    step = bounds.get("multiple_of", 1)
    return st.integers(-(-low // step), high // step).map(lambda k: k * step)


_INT_BOUNDS: list[dict[str, Any]] = [{}, {"ge": 0}, {"gt": -5, "lt": 1000}, {"le": 10}, {"multiple_of": 3, "ge": -99}]
_FLOAT_BOUNDS: list[dict[str, Any]] = [{}, {"gt": 0.0}, {"ge": -1.5, "le": 1.5}, {"lt": 1e300}]


def _floats(bounds: dict[str, float]) -> st.SearchStrategy[float]:
    return st.floats(
        min_value=bounds.get("ge", bounds.get("gt")),
        max_value=bounds.get("le", bounds.get("lt")),
        exclude_min="gt" in bounds,
        exclude_max="lt" in bounds,
        allow_nan=not bounds,
    )


# A leaf: (annotation, value strategy, hashable).
LEAVES: list[tuple[Any, st.SearchStrategy[Any], bool]] = [
    *((Annotated[int, Field(**b)], _ints(b), True) for b in _INT_BOUNDS),
    *((Annotated[float, Field(**b)], _floats(b), True) for b in _FLOAT_BOUNDS),
    (bool, st.booleans(), True),
    (str, texts, True),
    (Annotated[str, Field(min_length=1, max_length=3)], texts.filter(lambda s: 1 <= len(s) <= 3), True),
    (bytes, st.binary(max_size=17), True),
    (Annotated[bytes, Field(max_length=4)], st.binary(max_size=4), True),
    (None, st.none(), True),
    (uuid.UUID, st.uuids(), True),
    (dt.datetime, st.datetimes(timezones=zones), False),
    (dt.date, st.dates(), False),
    (dt.time, st.times(timezones=st.none() | st.just(_UTC)), False),
    (dt.timedelta, st.timedeltas(), False),
    (decimal.Decimal, st.decimals(allow_nan=False, allow_infinity=False, places=3), False),
    (Color, st.sampled_from(Color), True),
    (Level, st.sampled_from(Level), True),
    (Mode, st.sampled_from(Mode), True),
    (Count, st.sampled_from(Count), True),
    (Literal["a", "b"], st.sampled_from(["a", "b"]), True),
    (Literal[1, 7], st.sampled_from([1, 7]), True),
]
leaves = st.sampled_from(LEAVES)


@st.composite
def fields_of(draw: st.DrawFn, depth: int) -> tuple[Any, st.SearchStrategy[Any]]:
    """One field: its annotation and a strategy for its valid values (models as dicts)."""
    kind = draw(
        st.sampled_from(["leaf"] * 4 + (["list", "tuple", "set", "dict", "optional", "model"] if depth else []))
    )
    if kind == "leaf":
        tp, values, _ = draw(leaves)
        return tp, values
    if kind == "set":
        tp, values, _ = draw(st.sampled_from([leaf for leaf in LEAVES if leaf[2] and leaf[0] is not None]))
        frozen = draw(st.booleans())
        return (frozenset if frozen else set)[tp], st.frozensets(values, max_size=4).map(frozenset if frozen else set)
    if kind == "model":
        cls, values = draw(models(depth - 1))
        return cls, values
    tp, values = draw(fields_of(depth - 1))
    if kind == "list":
        bounds: dict[str, Any] = draw(st.sampled_from([{}, {"min_length": 1}, {"max_length": 3}]))
        lists = st.lists(values, min_size=bounds.get("min_length", 0), max_size=bounds.get("max_length", 4))
        return Annotated[list[tp], Field(**bounds)], lists  # type: ignore[valid-type]
    if kind == "tuple":
        return tuple[tp, ...], st.lists(values, max_size=3).map(tuple)  # type: ignore[valid-type]
    if kind == "dict":
        keys = draw(st.sampled_from([(str, dict_keys), (int, st.integers(-(2**63), 2**64 - 1))]))
        return dict[keys[0], tp], st.dictionaries(keys[1], values, max_size=3)  # type: ignore[valid-type]
    return Optional[tp], st.none() | values  # noqa: UP045 - tp may be None itself


_names = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]), min_size=1, max_size=4, unique=True)


@st.composite
def models(draw: st.DrawFn, depth: int) -> tuple[type[BaseModel], st.SearchStrategy[Any]]:
    """A nested model (extra ignored or forbidden, frozen or not) and a strategy for its values as dicts."""
    fields = {name: draw(fields_of(depth)) for name in draw(_names)}
    config = ConfigDict(extra=draw(st.sampled_from(["ignore", "forbid"])), frozen=draw(st.booleans()))
    definitions: dict[str, Any] = {n: (tp, ...) for n, (tp, _) in fields.items()}
    cls = create_model(f"N{depth}", __config__=config, **definitions)
    return cls, st.fixed_dictionaries({n: v for n, (_, v) in fields.items()})


@st.composite
def schemas(draw: st.DrawFn) -> tuple[type[RoleContext], st.SearchStrategy[RoleContext]]:
    """A RoleContext of generated fields (some with defaults) and a strategy for its instances."""
    fields = {name: draw(fields_of(2)) for name in draw(_names)}
    definitions: dict[str, Any] = {}
    for name, (tp, values) in fields.items():
        definitions[name] = (tp, draw(values) if draw(st.booleans()) else ...)
    cls = create_model(
        "Ctx",
        __base__=RoleContext,
        __cls_kwargs__={"role": "critic", "registry": ContextRegistry("compiled tests")},
        **definitions,
    )
    values = st.fixed_dictionaries({n: v for n, (_, v) in fields.items()})
    return cls, values.map(cls.model_validate)


# --- the two answers ---------------------------------------------------------------------------------------


def pydantic_answer(cls: type[BaseModel], payload: bytes) -> Any:
    """What the pydantic path returns for ``payload``: an instance, or REFUSED (undecodable or invalid)."""
    try:
        data = decode_payload(payload)
    except (msgspec.DecodeError, ValueError, OverflowError, RecursionError):
        return REFUSED
    try:
        return cls.__pydantic_validator__.validate_python(data, strict=False, by_name=True)
    except ValidationError:
        return REFUSED


def compiled_answer(cls: type[BaseModel], payload: bytes) -> Any:
    decoder = compiled.decoder_for(cls)
    assert decoder is not None, compiled.why_not(cls)
    try:
        return decoder(payload)
    except compiled.Refused:
        return REFUSED


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """Equal, of exactly the same types all the way down: key order, fields set, offsets, tzinfo classes, -0.0."""
    assert type(a) is type(b), where
    if isinstance(a, BaseModel):
        assert list(a.__dict__) == list(b.__dict__), where
        assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__, where
        assert type(a.__pydantic_fields_set__) is set, where
        assert a.__pydantic_fields_set__ is not b.__pydantic_fields_set__, where
        assert a.__pydantic_extra__ == b.__pydantic_extra__, where
        assert a.__pydantic_private__ == b.__pydantic_private__, where
        for key in a.__dict__:
            assert_same(a.__dict__[key], b.__dict__[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert len(a) == len(b), where
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            assert_same(ka, kb, f"{where} key")
            assert_same(va, vb, f"{where}[{ka!r}]")
    elif isinstance(a, (set, frozenset)):
        assert sorted(map(repr, a)) == sorted(map(repr, b)), where
    elif isinstance(a, float):
        assert repr(a) == repr(b), where  # NaN and -0.0 included
    elif isinstance(a, (dt.datetime, dt.time)):
        assert repr(a) == repr(b), where  # the tzinfo's class and value, and the fold
        assert type(a.tzinfo) is type(b.tzinfo), where
        assert a.utcoffset() == b.utcoffset(), where
    else:
        assert a == b, where
        assert repr(a) == repr(b), where


def _has_big_int(value: Any) -> bool:
    """Whether an int msgpack cannot hold is in ``value`` (it travels as an extension the mirror refuses)."""
    if isinstance(value, BaseModel):
        return any(_has_big_int(v) for v in value.__dict__.values())
    if isinstance(value, dict):
        return any(_has_big_int(k) or _has_big_int(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_big_int(v) for v in value)
    return type(value) is int and not -(2**63) <= value <= 2**64 - 1


def _old_encode(instance: BaseModel) -> bytes:
    """The encoder as it was before the compiled path: msgspec with the hook."""
    try:
        return _encoder.encode(instance)
    except OverflowError:
        return _encoder.encode(_prepare_all(instance))


# --- mutations of a payload --------------------------------------------------------------------------------

_TEXTS = [
    "2024-01-01T00:00:00",
    "2024-01-01T00:00:00Z",
    "2024-01-01T00:00:00+00:00",
    "2024-01-01T00:00:00+05:30",
    "2024-01-01 00:00:00",
    "2024-01-01T00:00:00.1234567",
    "2024-01-01",
    "2024-02-30",
    "1700000000",
    "12:30",
    "12:30:00+01:00",
    "P1D",
    "P1DT2H",
    "1",
    "1.5",
    "-0",
    "nan",
    "NaN",
    "inf",
    "Infinity",
    "1e3",
    "1_000",
    " 1 ",
    "0x10",
    "true",
    "red",
    "RED",
    "fast",
    "a",
    "12345678-1234-5678-1234-567812345678",
    "{12345678-1234-5678-1234-567812345678}",
    "12345678123456781234567812345678",
    "",
]
hostile = st.one_of(
    st.integers(-(2**70), 2**70).map(lambda i: i if -(2**63) <= i <= 2**64 - 1 else Ext(2, str(i).encode())),
    st.sampled_from([0, 1, 2, 3, 7, -1, 2**63, 2**64 - 1, True, False, None]),
    st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([float("nan"), -0.0, 0.0, 1.0]),
    st.sampled_from(_TEXTS) | texts,
    st.binary(max_size=17),
    st.datetimes(timezones=st.none() | st.just(_UTC)),
    st.sampled_from([Ext(1, b"2024-01-01T00:00:00+05:00"), Ext(1, b"garbage"), Ext(2, b"12"), Ext(9, b"x")]),
    st.lists(st.integers(-3, 3) | texts, max_size=3),
    st.dictionaries(texts | st.integers(-3, 3), st.integers(-3, 3) | texts, max_size=3),
)


def _raw(payload: bytes) -> Any:
    return msgspec.msgpack.decode(payload, ext_hook=lambda code, data: Ext(code, bytes(data)))


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            _containers(child, out)
    return out


def _map_with_repeats(items: list[tuple[Any, Any]]) -> bytes:
    """MessagePack of a map that may repeat a key (Python dicts cannot)."""
    n = len(items)
    head = bytes([0x80 | n]) if n < 16 else b"\xde" + n.to_bytes(2, "big")
    return head + b"".join(msgspec.msgpack.encode(k) + msgspec.msgpack.encode(v) for k, v in items)


@st.composite
def mutated(draw: st.DrawFn, payload: bytes) -> bytes:
    data = _raw(payload)
    if draw(st.integers(0, 9)) == 0 and isinstance(data, dict) and data:
        items = list(data.items())
        key, _ = draw(st.sampled_from(items))
        items.insert(draw(st.integers(0, len(items))), (key, draw(hostile)))
        return _map_with_repeats(items)
    for _ in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from(_containers(data, [])))
        op = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add", "reorder", "empty"]))
        if isinstance(node, list):
            if node and op in ("replace", "drop", "add"):
                i = draw(st.integers(0, len(node) - 1))
                if op == "drop":
                    del node[i]
                else:
                    node.insert(i, draw(hostile)) if op == "add" else node.__setitem__(i, draw(hostile))
            elif op == "reorder":
                node.reverse()
            elif op == "empty":
                node.clear()
        elif node:
            key = draw(st.sampled_from(list(node)))
            if op == "replace":
                node[key] = draw(hostile)
            elif op == "drop":
                del node[key]
            elif op == "add":
                node[draw(texts | st.integers(-3, 3) | st.just("zz"))] = draw(hostile)
            elif op == "reorder":
                items = list(node.items())[::-1]
                node.clear()
                node.update(items)
    return msgspec.msgpack.encode(data)


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the outcome compared, whatever it is
        return (type(e).__name__, str(e))


def assert_same_outcome(a: tuple[str, Any], b: tuple[str, Any]) -> None:
    assert a[0] == b[0]
    if a[0] == "ok":
        assert_same(a[1], b[1])
    else:
        assert a[1] == b[1]  # the message, with its error list


# --- the properties ----------------------------------------------------------------------------------------


@EXAMPLES
@given(st.data())
def test_valid_instances_decode_as_pydantic_and_encode_to_the_same_bytes(data: st.DataObject) -> None:
    """For generated schemas and instances: the bytes are the hook's, and the compiled answer is pydantic's."""
    cls, instances = data.draw(schemas())
    assert compiled.why_not(cls) is None
    instance = data.draw(instances)
    payload = encode_payload(instance)
    assert payload == _old_encode(instance)
    fast, slow = compiled_answer(cls, payload), pydantic_answer(cls, payload)
    assert slow is not REFUSED
    event("refused (an int past 64 bits)" if fast is REFUSED else "compiled")
    if fast is REFUSED:
        assert _has_big_int(instance)  # the only valid payloads the mirror leaves to pydantic
    else:
        assert_same(fast, slow)
        assert fast == instance or "nan" in repr(instance)  # the round trip gives back what was sent (NaN != NaN)


@EXAMPLES
@given(st.data())
def test_mutated_payloads_get_pydantics_answer_and_errors(data: st.DataObject) -> None:
    """Wrong types, big ints, NaN, text dates, unknown/missing/reordered/repeated keys: refused, or pydantic's value."""
    cls, instances = data.draw(schemas())
    env = encode(data.draw(instances))
    for _ in range(4):
        bad = data.draw(mutated(env["payload"]))
        fast, slow = compiled_answer(cls, bad), pydantic_answer(cls, bad)
        event(
            f"mutated: compiled {'refused' if fast is REFUSED else 'accepted'}, "
            f"pydantic {'refused' if slow is REFUSED else 'accepted'}"
        )
        if fast is not REFUSED:
            assert slow is not REFUSED
            assert_same(fast, slow)
    # Through decode(): the same instance, or the same error with the same error list, with the compiled path off.
    bad_env = {**env, "payload": bad}
    on = _outcome(lambda: decode(bad_env, cls))
    with pydantic_path(cls):
        off = _outcome(lambda: decode(bad_env, cls))
    assert_same_outcome(on, off)


class pydantic_path:
    """Within it, ``cls`` decodes through pydantic only (its compiled decoder is set aside)."""

    def __init__(self, cls: type[BaseModel]) -> None:
        self.cls = cls

    def __enter__(self) -> None:
        compiled.decoder_for(self.cls)
        self.saved = compiled.decoders[self.cls]
        compiled.decoders[self.cls] = None

    def __exit__(self, *exc: object) -> None:
        compiled.decoders[self.cls] = self.saved


# --- named cases -------------------------------------------------------------------------------------------

REG = ContextRegistry("compiled named cases")


class Row(BaseModel):
    prompt_id: int
    weight: float = Field(ge=0)
    tag: str = ""


class Stamped(BaseModel):
    at: dt.datetime
    n: int = 0


class Table(RoleContext, role="critic", registry=REG):
    rows: list[Row] = Field(default_factory=list)
    stamps: list[Stamped] = Field(default_factory=list)
    by_id: dict[int, Row] = Field(default_factory=dict)
    ratio: float = Field(0.5, gt=0)
    when: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=_UTC)
    big: int = 0
    color: Color = Color.RED


def _fields(payload: bytes, **changes: Any) -> bytes:
    """The payload with some top-level values replaced (kept in field order)."""
    data = _raw(payload)
    data.update(changes)
    return msgspec.msgpack.encode(data)


def _agree(cls: type[BaseModel], payload: bytes) -> Any:
    """Assert both paths agree on ``payload``; the compiled answer (or REFUSED)."""
    fast, slow = compiled_answer(cls, payload), pydantic_answer(cls, payload)
    if fast is not REFUSED:
        assert slow is not REFUSED
        assert_same(fast, slow)
    return fast


def _same_through_decode(env: dict[str, Any], cls: type[RoleContext]) -> tuple[str, Any]:
    on = _outcome(lambda: decode(env, cls))
    with pydantic_path(cls):
        assert_same_outcome(on, _outcome(lambda: decode(env, cls)))
    return on


def test_every_benchmark_and_test_schema_that_can_be_compiled_is() -> None:
    """The schemas this project measures and tests with qualify; a reason is given for the ones that do not."""
    from benchmarks.models import IMPORTABLE

    from .models import Everything, Small

    for cls in (IMPORTABLE["Small"], IMPORTABLE["Medium"], IMPORTABLE["Large"], Table):
        assert compiled.why_not(cls) is None, cls
    assert "Small.token" in (compiled.why_not(Small) or "")  # a SecretStr: the pydantic path
    assert compiled.why_not(Everything)  # paths, unions, Any, secrets


def test_nan_against_a_float_bound_is_pydantics_error() -> None:
    """NaN where the field says gt=0: the mirror refuses, and decode() reports pydantic's error."""
    env = encode(Table())
    payload = _fields(env["payload"], ratio=float("nan"))
    assert _agree(Table, payload) is REFUSED
    outcome = _same_through_decode({**env, "payload": payload}, Table)
    assert outcome[0] == "EnvelopeError"
    assert "ratio" in outcome[1]
    assert "greater than 0" in outcome[1]
    nan_row = _fields(env["payload"], rows=[{"prompt_id": 1, "weight": float("nan"), "tag": ""}])
    assert _agree(Table, nan_row) is REFUSED  # ge=0 refuses NaN too


def test_ints_past_64_bits_round_trip_through_pydantic() -> None:
    """2**64, -(2**63)-1 and such dict keys travel as extensions: refused by the mirror, decoded by pydantic."""
    for ctx in (
        Table(big=2**64),
        Table(big=-(2**63) - 1),
        Table(by_id={2**64: Row(prompt_id=1, weight=1.0)}),
        Table(rows=[Row(prompt_id=2**70, weight=0.0)]),
    ):
        env = encode(ctx)
        assert _agree(Table, env["payload"]) is REFUSED
        assert decode(env, Table) == ctx
    edge = Table(big=2**64 - 1, by_id={-(2**63): Row(prompt_id=2**64 - 1, weight=0.0)})
    assert _agree(Table, encode(edge)["payload"]) == edge  # the limits themselves are native


def test_non_utc_datetimes_keep_their_offsets_and_tzinfo_class() -> None:
    """+05:30 at the top, -07:00 and naive in a list of rows: decoded by the compiled path, offsets intact."""
    ist, pdt = dt.timezone(dt.timedelta(hours=5, minutes=30)), dt.timezone(-dt.timedelta(hours=7))
    ctx = Table(
        when=dt.datetime(2024, 5, 1, 12, tzinfo=ist),
        stamps=[Stamped(at=dt.datetime(2024, 5, 1, tzinfo=pdt)), Stamped(at=dt.datetime(2024, 5, 2))],
    )
    env = encode(ctx)
    assert env["payload"] == _old_encode(ctx)
    back = _agree(Table, env["payload"])
    assert back == ctx
    assert back.when.utcoffset() == ist.utcoffset(None)
    assert type(back.when.tzinfo) is dt.timezone
    assert [s.at.utcoffset() for s in back.stamps] == [pdt.utcoffset(None), None]


def test_datetime_text_is_read_by_pydantics_parser() -> None:
    """Text where a datetime goes (a hand-made payload) is parsed by pydantic: its TzInfo, its rounding, its errors."""
    env = encode(Table())
    for text in (
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00+05:30",
        "2024-01-01 10:00",
        "2024-01-01T00:00:00.1234567",
    ):
        back = _agree(Table, _fields(env["payload"], when=text))
        assert back is not REFUSED, text
    assert _agree(Table, _fields(env["payload"], when="2024-02-30")) is REFUSED
    assert _agree(Table, _fields(env["payload"], when=1_700_000_000)) is not REFUSED  # pydantic reads unix time


def test_dict_keys_must_be_of_the_declared_type() -> None:
    """Int keys decode; text keys for a dict[int, ...] are pydantic's to convert, bool keys its to judge."""
    ctx = Table(by_id={3: Row(prompt_id=3, weight=0.5), -1: Row(prompt_id=0, weight=0.0)})
    env = encode(ctx)
    assert _agree(Table, env["payload"]) == ctx
    row = {"prompt_id": 1, "weight": 1.0, "tag": ""}
    assert _agree(Table, _fields(env["payload"], by_id={"7": row})) is REFUSED
    assert decode({**env, "payload": _fields(env["payload"], by_id={"7": row})}, Table).by_id == {7: Row(**row)}
    _agree(Table, _fields(env["payload"], by_id={True: row}))


def test_key_order_unknown_missing_and_repeated_fields() -> None:
    """Reordered keys give __dict__ in field order; unknown or missing ones, and repeats, get pydantic's answer."""
    env = encode(Table(rows=[Row(prompt_id=1, weight=2.0)]))
    data = _raw(env["payload"])
    reordered = msgspec.msgpack.encode(dict(reversed(list(data.items()))))
    back = _agree(Table, reordered)
    assert back is not REFUSED
    assert list(back.__dict__) == list(Table.model_fields)
    row = {"tag": "t", "weight": 1.0, "prompt_id": 4}  # a nested row, keys reversed
    back = _agree(Table, _fields(env["payload"], rows=[row]))
    assert list(back.rows[0].__dict__) == ["prompt_id", "weight", "tag"]
    assert _agree(Table, _fields(env["payload"], rows=[{**row, "extra": 1}])) is REFUSED  # Row ignores it: pydantic
    assert pydantic_answer(Table, _fields(env["payload"], rows=[{**row, "extra": 1}])) is not REFUSED
    assert _agree(Table, _fields(env["payload"], surprise=1)) is REFUSED
    missing = msgspec.msgpack.encode({k: v for k, v in data.items() if k != "big"})
    assert _agree(Table, missing) is REFUSED
    assert pydantic_answer(Table, missing).model_fields_set == set(data) - {"big"}
    repeated = _map_with_repeats([*data.items(), ("big", 5)])
    back = _agree(Table, repeated)
    assert back.big == 5


def test_unknown_value_in_an_ignored_field_that_does_not_decode_is_refused() -> None:
    """An unknown key whose value is an undecodable extension: pydantic's path calls the payload corrupt, so do we."""
    env = encode(Table(rows=[Row(prompt_id=1, weight=2.0)]))
    bad = _fields(env["payload"], rows=[{"prompt_id": 1, "weight": 2.0, "tag": "", "zz": Ext(1, b"garbage")}])
    assert _agree(Table, bad) is REFUSED
    outcome = _same_through_decode({**env, "payload": bad}, Table)
    assert outcome[0] == "EnvelopeError"
    assert "corrupt payload" in outcome[1]


def test_lists_of_rows_with_odd_members_encode_as_the_hook_does() -> None:
    """A subclass instance, or a row with a non-UTC datetime, in a list: the same bytes as the hook's."""

    class Wider(Row):
        note: str = "n"

    ist = dt.timezone(dt.timedelta(hours=5, minutes=30))
    ctx = Table.model_construct(
        rows=[Row(prompt_id=1, weight=1.0), Wider(prompt_id=2, weight=2.0)],
        stamps=[Stamped(at=dt.datetime(2024, 1, 1, tzinfo=_UTC)), Stamped(at=dt.datetime(2024, 1, 1, tzinfo=ist))],
        **{k: v for k, v in Table().__dict__.items() if k not in ("rows", "stamps")},
    )
    assert encode_payload(ctx) == _old_encode(ctx)


def test_large_lists_are_built_in_bulk_and_fall_back_row_by_row() -> None:
    """5,000 rows decode in bulk; one text datetime among them sends that list through the per-row builder."""
    ctx = Table(
        rows=[Row(prompt_id=i, weight=i / 7) for i in range(5000)], stamps=[Stamped(at=dt.datetime(2024, 1, 1))] * 3
    )
    env = encode(ctx)
    assert _agree(Table, env["payload"]) == ctx
    stamps = [{"at": dt.datetime(2024, 1, 1, tzinfo=_UTC), "n": 0}, {"at": "2024-01-01T00:00:00Z", "n": 1}]
    back = _agree(Table, _fields(env["payload"], stamps=stamps))
    assert type(back.stamps[1].at.tzinfo) is not dt.timezone  # pydantic's TzInfo


def test_both_bulk_builders_build_what_pydantic_builds() -> None:
    """pydantic-core's list builder and the slot-setter fallback (a pydantic-core that cannot be given a
    prebuilt-free schema) make the same instances as validation: values, exact types, fields set, extra, private."""
    data = [{"prompt_id": i, "weight": i / 3, "tag": f"t{i}"} for i in range(50)]
    mirror = msgspec.defstruct("RowMirror", [("prompt_id", int), ("weight", float), ("tag", str)])
    structs = [mirror(**row) for row in data]
    by_core = generated._list_maker(Row)
    assert by_core is not None
    shared = set(Row.model_fields)
    triples = [(msgspec.structs.asdict(s), None, shared) for s in structs]
    for built in (by_core(triples), generated._by_slots(Row)(structs, set(Row.model_fields))):
        expected = [Row.model_validate(row) for row in data]
        assert built == expected
        for got, want in zip(built, expected, strict=True):
            assert type(got) is Row
            assert list(got.__dict__) == list(want.__dict__)
            assert got.model_fields_set == want.model_fields_set
            assert (got.__pydantic_extra__, got.__pydantic_private__) == (None, None)
        assert len({id(row.model_fields_set) for row in built}) == 1  # one set per list, not 216 bytes a row
        _behave_alike(built, expected)


def _behave_alike(built: list[Row], expected: list[Row]) -> None:
    """What pydantic does to rows (assignment, copies, pickling) leaves bulk-built rows as it leaves its own."""
    import copy
    import pickle

    def seen(rows: list[Row]) -> list[Any]:
        return [(row.model_dump(), row.model_fields_set, row.model_dump(exclude_unset=True)) for row in rows]

    for rows in (built, expected):
        rows[1].tag = "changed"  # adds a field the shared set holds: every other row is as it was
        rows.append(rows[2].model_copy(update={"weight": 9.0}))
        rows[-1].tag = "copied"
        rows.append(copy.deepcopy(rows[3]))
        rows[-1].prompt_id = -1
        rows.extend(pickle.loads(pickle.dumps(rows[4:6])))
        rows[-1].weight = 7.0
    assert seen(built) == seen(expected)
    assert (built[0].tag, built[2].weight, built[5].weight) == ("t0", 2 / 3, 5 / 3)


def test_rows_share_a_fields_set_within_one_decoded_list_only() -> None:
    """The models of a list (or of a dict's values) built in bulk share one fields set: a fresh one per container
    and per decode, never the class's."""
    rows = [Row(prompt_id=i, weight=i, tag="x") for i in range(10)]
    env = encode(Table(rows=rows, by_id=dict(enumerate(rows))))
    first, second = decode(env, Table), decode(env, Table)
    assert first.rows[0].model_fields_set is first.rows[9].model_fields_set
    assert first.by_id[0].model_fields_set is first.by_id[9].model_fields_set
    assert first.rows[0].model_fields_set is not first.by_id[0].model_fields_set
    assert first.rows[0].model_fields_set is not second.rows[0].model_fields_set
    assert first.rows[0].model_fields_set == set(Row.model_fields)
    first.rows[0].model_fields_set.discard("tag")  # by hand, which pydantic never does: this list only
    assert second.rows[0].model_fields_set == set(Row.model_fields)


def test_hostile_payload_of_bad_rows_is_refused_quickly_with_a_bounded_error_list() -> None:
    """400,000 bad rows (6 MB): the mirror stops at the first and pydantic fails fast, so three errors, not 1.2 M."""
    import time

    env = encode(Table())
    bad = _fields(env["payload"], rows=[{"prompt_id": "x", "weight": -1, "tag": 0}] * 400_000)
    started = time.perf_counter()
    with pytest.raises(EnvelopeError, match="does not validate") as caught:
        decode({**env, "payload": bad}, Table)
    assert time.perf_counter() - started < 10
    assert [e.path for e in caught.value.errors] == ["rows[0].prompt_id", "rows[0].weight", "rows[0].tag"]
    assert "more" not in str(caught.value)


def test_millions_of_unknown_keys_cost_a_count_not_an_error_each() -> None:
    """200,000 unknown top-level keys: the same first 50 errors and the same count as pydantic's full list."""
    import tracemalloc

    env = encode(Table())
    unknown = {f"k{i:07d}": i for i in range(200_000)}
    bad = _fields(env["payload"], big="x", **unknown)
    tracemalloc.start()
    try:
        with pytest.raises(EnvelopeError) as caught:
            decode({**env, "payload": bad}, Table)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60 * 2**20  # the payload's own dict is ~25 MiB; 200,000 error records were ~150 MiB
    with pytest.raises(ValidationError) as full:
        Table.__pydantic_validator__.validate_python(decode_payload(bad), strict=False, by_name=True)
    expected = [".".join(map(str, e["loc"])) for e in full.value.errors()[:50]]
    assert [e.path for e in caught.value.errors] == expected
    assert str(caught.value).endswith(f"... and {full.value.error_count() - 50} more")


# --- what qualifies, and the escape hatch -----------------------------------------------------------------

T = TypeVar("T")


class Box(BaseModel, Generic[T]):
    item: T


def _not_compiled() -> list[tuple[str, Callable[[], type[RoleContext]], str]]:
    def make(name: str, **fields: Any) -> Callable[[], type[RoleContext]]:
        def build() -> type[RoleContext]:
            return create_model(
                name, __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": ContextRegistry()}, **fields
            )

        return build

    def with_body(name: str, body: dict[str, Any], base: Any = RoleContext) -> Callable[[], type[RoleContext]]:
        def build() -> type[RoleContext]:
            return type(name, (base,), body, role="critic", registry=ContextRegistry())

        return build

    class Private(BaseModel):
        _seen: int = PrivateAttr(0)
        x: int = 0

    class Shown(BaseModel):
        x: int = 0

        @field_serializer("x")
        def _show(self, v: int) -> int:
            return v

    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")

    class Init(BaseModel):
        x: int = 0

        def __init__(self, **data: Any) -> None:
            super().__init__(**data)

    class Node(BaseModel):
        child: Node | None = None

    return [
        ("plain validator", make("V", x=(Annotated[int, PlainValidator(int)], 0)), "function-plain"),
        ("serializer", make("Se", x=(Shown, Shown())), "serializ"),
        ("private attribute", make("P", x=(Private, Private())), "private"),
        ("custom __init__", make("I", x=(Init, Init())), "__init__"),
        ("generic", make("G", x=(Box[int], Box[int](item=1))), "generic"),
        ("RootModel", make("R", x=(RootModel[int], RootModel[int](1))), "RootModel"),
        ("extra=allow", make("L", x=(Loose, Loose())), "extra"),
        ("alias", make("A", x=(int, Field(0, alias="y"))), "alias"),
        ("union", make("U", x=(int | str, 0)), "union"),
        ("Any", make("Y", x=(Any, 0)), "any"),
        ("SecretStr", make("S", x=(SecretStr, SecretStr(""))), ""),
        ("URL", make("W", x=(AnyUrl, "https://a.b")), ""),
        ("pattern", make("Pa", x=(Annotated[str, Field(pattern="a+")], "a")), "pattern"),
        ("allow_inf_nan", make("N", x=(Annotated[float, Field(allow_inf_nan=False)], 0.0)), "inf"),
        ("float multiple_of", make("M", x=(Annotated[float, Field(multiple_of=0.1)], 0.0)), "multiple_of"),
        ("dict min_length", make("D", x=(Annotated[dict[str, int], Field(min_length=1)], {"a": 1})), "min_length"),
        ("recursive model", make("Rc", x=(Node, Node())), "recursive"),
        (
            "str_strip_whitespace",
            with_body(
                "Ws", {"__annotations__": {"x": str}, "x": "", "model_config": ConfigDict(str_strip_whitespace=True)}
            ),
            "str_strip_whitespace",
        ),
        (
            "compiled=False",
            lambda: type(
                "Off",
                (RoleContext,),
                {"__annotations__": {"x": int}, "x": 0},
                role="critic",
                registry=ContextRegistry(),
                compiled=False,
            ),
            "compiled=False",
        ),
    ]


UTC = dt.timezone.utc


def test_declared_validators_are_compiled_through_and_run_only_on_the_driver() -> None:
    """A payload of the driver's own fingerprint holds what its validators made: the compiled decoder checks the
    types inside field, model and Annotated validators without running them again, and builds what pydantic's
    trusted path builds (a validator that doubles would double again if it ran)."""
    calls: list[str] = []

    def doubled(v: int) -> int:
        calls.append("after")
        return v * 2

    def kept(v: Any, handler: Any) -> Any:
        calls.append("wrap")
        return handler(v)

    class Event(BaseModel):
        ident: uuid.UUID
        at: dt.datetime
        n: Annotated[int, AfterValidator(doubled)] = 0
        tag: Annotated[str, BeforeValidator(str), WrapValidator(kept)] = ""

        @model_validator(mode="after")
        def _ordered(self) -> Event:
            calls.append("model")
            return self

    class Audited(RoleContext, role="critic", registry=ContextRegistry()):
        events: list[Event] = Field(default_factory=list)
        limit: int = 1

        @field_validator("limit")
        @classmethod
        def _plus_one(cls, v: int) -> int:
            calls.append("field")
            return v + 1

        @model_validator(mode="before")
        @classmethod
        def _seen(cls, v: Any) -> Any:
            calls.append("before")
            return v

    assert compiled.why_not(Audited) is None
    sent = Audited(
        events=[
            Event(ident=uuid.UUID(int=i), at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), n=i) for i in range(3)
        ],
        limit=5,
    )
    calls.clear()
    got = compiled_answer(Audited, encode_payload(sent))
    assert got == sent
    assert got.limit == 6
    assert [e.n for e in got.events] == [0, 2, 4]
    assert calls == []


@pytest.mark.parametrize(("what", "make", "reason"), _not_compiled(), ids=[c[0] for c in _not_compiled()])
def test_what_is_not_proven_keeps_the_pydantic_path(
    what: str, make: Callable[[], type[RoleContext]], reason: str
) -> None:
    """Validators, serializers, private attributes, generics, unions, Any...: not compiled; the reason says why."""
    cls = make()
    why = compiled.why_not(cls)
    assert why is not None
    assert reason.lower() in why.lower(), why
    assert compiled.decoder_for(cls) is None
    assert compiled.encoder_for(cls) is None


def test_compiled_false_is_inherited_and_can_be_turned_back_on() -> None:
    """The class keyword: a subclass keeps its base's choice unless it says otherwise; only True/False are taken."""

    class Base(RoleContext, compiled=False):
        x: int = 0

    class Child(Base, role="critic", registry=ContextRegistry()):
        pass

    class Again(Base, role="critic", registry=ContextRegistry(), compiled=True):
        pass

    assert compiled.decoder_for(Child) is None
    assert compiled.decoder_for(Again) is not None
    assert decode(encode(Child(x=3)), Child) == Child(x=3)
    with pytest.raises(SchemaDefinitionError, match="compiled="):

        class Bad(RoleContext, role="critic", registry=ContextRegistry(), compiled="no"):
            x: int = 0


def test_enum_classes_stay_picklable_by_value() -> None:
    """msgspec caches a lookup table on an Enum it decodes; the compiled path leaves none: cloudpickle still works."""

    class Phase(enum.Enum):
        WARM = "warm"
        MAIN = "main"

    class WithPhase(RoleContext, role="critic", registry=ContextRegistry()):
        phase: Phase = Phase.WARM
        phases: list[Phase] = Field(default_factory=list)

    ctx = WithPhase(phase=Phase.MAIN, phases=[Phase.WARM])
    assert compiled_answer(WithPhase, encode(ctx)["payload"]) == ctx
    assert "__msgspec_cache__" not in vars(Phase)
    assert cloudpickle.loads(cloudpickle.dumps(Phase)).MAIN.value == "main"


def test_a_rebuilt_schema_is_compiled_again() -> None:
    """model_rebuild(force=True) drops the compiled decoder; the next decode answers as the rebuilt validator."""

    class Late(RoleContext, role="critic", registry=ContextRegistry()):
        x: int = 0

    first = compiled.decoder_for(Late)
    assert first is not None
    assert Late.model_rebuild(force=True) is not False
    assert Late not in compiled.decoders
    assert compiled.decoder_for(Late) is not first
    assert decode(encode(Late(x=2)), Late) == Late(x=2)
