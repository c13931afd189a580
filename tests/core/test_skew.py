"""Driver/worker skew at one version: decoded with a warning only when no value changes, else a mismatch."""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Annotated, Any, Literal

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator

from verl_ctx import ContextRegistry, RoleContext, decode, encode
from verl_ctx._worker.skew import _compare
from verl_ctx.errors import SchemaMismatchError, SchemaSkewWarning

PLUS_TWO = dt.timezone(dt.timedelta(hours=2))


def _ctx(cls_name: str = "Ctx", /, **fields: Any) -> type[RoleContext]:
    """A critic schema in a registry of its own, so a driver and a worker version can coexist."""
    model: type[RoleContext] = create_model(
        cls_name, __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": ContextRegistry()}, **fields
    )
    return model


class DriverInner(BaseModel):
    a: int = 1
    b: int = 2


class WorkerInner(BaseModel):  # the driver's `b` is unknown here, and pydantic ignores unknown keys
    a: int = 1


def _utc(d: dt.datetime) -> dt.datetime:
    return d.astimezone(dt.timezone.utc)


def _with_bias(w: dict[str, float]) -> dict[str, float]:
    return {**w, "bias": 0.0}


# (what changes, driver fields, worker fields, the path the error must name)
LOSSY = [
    ("'off' -> False", {"flag": (str, "off")}, {"flag": (bool, False)}, "flag"),
    ("1 -> True", {"flag": (int, 1)}, {"flag": (bool, False)}, "flag"),
    ("'3' -> 3", {"n": (str, "3")}, {"n": (int, 0)}, "n"),
    ("1 -> 1.0", {"x": (int, 1)}, {"x": (float, 0.0)}, "x"),
    ("list -> set drops duplicates", {"tags": (list[int], [1, 1, 2])}, {"tags": (set[int], set())}, "tags"),
    (
        "a field only the driver's nested model has",
        {"inner": (DriverInner, DriverInner())},
        {"inner": (WorkerInner, WorkerInner())},
        "inner.b",
    ),
    ("map key 1 -> True", {"by": (dict[int, int], {1: 5})}, {"by": (dict[bool, int], {})}, "by.1"),
    (
        "UTC offset lost",
        {"when": (dt.datetime, dt.datetime(2025, 1, 1, 12, tzinfo=PLUS_TWO))},
        {"when": (Annotated[dt.datetime, AfterValidator(_utc)], dt.datetime(2025, 1, 1))},
        "when",
    ),
    ("-0.0 -> 0.0", {"x": (float, -0.0)}, {"x": (Annotated[float, AfterValidator(lambda v: v + 0.0)], 0.0)}, "x"),
    ("x -> -x", {"x": (int, 5)}, {"x": (Annotated[int, AfterValidator(lambda v: -v)], 5)}, "x"),
    (
        "a validator adds a map entry",
        {"w": (dict[str, float], {"a": 1.0})},
        {"w": (Annotated[dict[str, float], AfterValidator(_with_bias)], {})},
        "w.bias",
    ),
]


@pytest.mark.parametrize(("driver", "worker", "path"), [c[1:] for c in LOSSY], ids=[c[0] for c in LOSSY])
def test_skew_that_changes_a_value_is_a_mismatch(driver: dict[str, Any], worker: dict[str, Any], path: str) -> None:
    """A value the worker's schema would coerce, drop, add or collapse is never decoded with only a warning."""
    Driver, Worker = _ctx(**driver), _ctx(**worker)
    env = encode(Driver())
    with pytest.raises(SchemaMismatchError, match="would change these values") as info:
        decode(env, Worker)
    assert path in str(info.value)


def _scaled(factor: int) -> type[RoleContext]:
    class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
        x: int = 5

        @field_validator("x")
        @classmethod
        def _scale(cls, v: int) -> int:
            return v * factor

    return Ctx


def test_worker_field_validator_that_scales_is_a_mismatch_naming_it() -> None:
    """A worker-only `field_validator` (x -> x*100) is caught, and the error names it."""
    Driver = _ctx(x=(int, 5))
    with pytest.raises(SchemaMismatchError) as info:
        decode(encode(Driver()), _scaled(100))
    message = str(info.value)
    assert "x (type, constraints or validators differ)" in message
    assert (
        "after-validator _scaled.<locals>.Ctx._scale on _scaled.<locals>.Ctx.x (only in the worker's schema)" in message
    )


def test_worker_str_to_lower_is_a_mismatch_naming_the_config() -> None:
    """`str_to_lower=True` on the worker turns "MixedCase" into "mixedcase": a mismatch naming the setting."""
    Driver = _ctx(name=(str, "MixedCase"))

    class Ctx(RoleContext, role="critic", registry=ContextRegistry()):
        model_config = ConfigDict(str_to_lower=True)
        name: str = ""

    with pytest.raises(SchemaMismatchError, match=r"name \(str\)|name") as info:
        decode(encode(Driver()), Ctx)
    assert "model config of test_worker_str_to_lower_is_a_mismatch_naming_the_config.<locals>.Ctx" in str(info.value)
    assert "str_to_lower=True" in str(info.value)


def test_skew_that_changes_nothing_warns_naming_the_validators() -> None:
    """A worker validator that leaves this payload's values as they are decodes, with a warning naming it."""
    Driver = _ctx(x=(int, 0))
    with pytest.warns(SchemaSkewWarning, match=r"after-validator .*<lambda> on Ctx\.x \(only in the worker's schema\)"):
        ctx = decode(encode(Driver()), _ctx(x=(Annotated[int, AfterValidator(lambda v: -v)], 0)))
    assert ctx.x == 0  # type: ignore[attr-defined]


def test_worker_default_for_a_list_item_field_is_lossless() -> None:
    """A field the worker added, with a default, to a model used as a list item is filled and named."""

    class RowV1(BaseModel):
        bonus: float = 0.0

    class RowV2(BaseModel):
        bonus: float = 0.0
        weight: float = 1.0

    Driver = _ctx(table=(list[RowV1], []))
    Worker = _ctx(table=(list[RowV2], []))
    with pytest.warns(SchemaSkewWarning, match=r"filled from the worker's defaults: table\[0\]\.weight"):
        # `_ctx` makes the class at run time, so mypy cannot see its fields: pass them as a mapping.
        ctx = decode(encode(Driver(**{"table": [RowV1(bonus=0.5)]})), Worker)
    assert ctx.table[0].weight == 1.0  # type: ignore[attr-defined]


def test_wire_equal_type_change_is_lossless() -> None:
    """`str` -> `Literal[...]` keeps the value the driver sent: decoded with a warning, not refused."""
    Driver = _ctx(mode=(str, "a"))
    Worker = _ctx(mode=(Literal["a", "b"], "b"))
    with pytest.warns(SchemaSkewWarning, match=r"mode \(type, constraints or validators differ\)"):
        assert decode(encode(Driver()), Worker).mode == "a"  # type: ignore[attr-defined]


def test_same_shape_under_another_name_warns_naming_both() -> None:
    """Equal fingerprints but another `module:QualName`: decoded, with a warning that names both schema ids."""
    Driver = _ctx("CriticContextV0", x=(int, 1))
    Worker = _ctx("CriticContext", x=(int, 1))
    with pytest.warns(SchemaSkewWarning) as caught:
        decode(encode(Driver()), Worker)
    (message,) = [str(w.message) for w in caught]
    assert ":CriticContextV0" in message
    assert ":CriticContext:" in message


def test_equal_schemas_decode_silently() -> None:
    """The same schema on both sides: no warning at all."""
    Driver, Worker = _ctx(x=(int, 1)), _ctx(x=(int, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decode(encode(Driver()), Worker)


def test_sets_compare_as_sets() -> None:
    """A set's item order is its process's hash order: another order is no change, a collapsed duplicate is."""
    changed: list[str] = []
    _compare(["b", "a"], ["a", "b"], {"a", "b"}, "tags", changed, [])
    assert changed == []
    _compare(["a", "a"], ["a"], {"a"}, "tags", changed, [])
    assert changed == ["tags (2 items -> 1 in a set)"]


def test_comparison_is_type_exact() -> None:
    """`1` is not `True` or `1.0`, `-0.0` is not `0.0`, and an offset is part of a datetime."""
    aware = dt.datetime(2025, 1, 1, 12, tzinfo=PLUS_TWO)
    pairs = [(1, True), (1, 1.0), (-0.0, 0.0), ({1: 1}, {True: 1}), (aware, _utc(aware)), ([1], [True])]
    for sent, got in pairs:
        changed: list[str] = []
        _compare(sent, got, None, "v", changed, [])
        assert changed, (sent, got)
    same: list[str] = []
    _compare([float("nan"), aware, {1: "x"}], [float("nan"), aware, {1: "x"}], None, "v", same, [])
    assert same == []


def test_key_added_by_a_validator_is_a_change_not_a_default() -> None:
    """Only a model field filled from its default counts as added; a key a validator put in does not."""

    class Worker(RoleContext, role="critic", registry=ContextRegistry()):
        x: int = 1
        y: int = Field(default=0)

    filled, explicit = Worker(x=1), Worker(x=1, y=0)
    for instance, expect_added in ((filled, ["y"]), (explicit, [])):
        changed: list[str] = []
        added: list[str] = []
        _compare({"x": 1}, {"x": 1, "y": 0}, instance, "", changed, added)
        assert added == expect_added
        assert changed == ([] if expect_added else ["y (added)"])
