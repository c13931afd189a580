"""A generated secret hunt: schema shapes that hold a secret, times every output path a context's secret can reach.

Each example draws where a secret sits (``SecretStr``, ``SecretBytes``, ``Secret[str | int | bytes]``; directly, in
an optional, a list, a dict, a tuple, a nested model or a dataclass; with a computed field made from it) and a
secret, then runs every path that prints or writes: the context's ``repr``/``str`` and ``describe``/``redacted``,
the validation error for a wrong input at the secret's place, the skew error of a worker whose type there is no
secret, a checkpoint's files, and the comparison of two checkpoints' contexts. ``tests/secret_hunt.hunt`` looks for
the secret in each output in every encoding (plain, base64, hex, MessagePack, JSON-escaped, repr): none is allowed.
The CLI's own outputs have their hunt (``tests/cli/test_secret_hunt.py``).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, Secret, SecretBytes, SecretStr, computed_field, create_model

from verl_ctx import ContextRegistry, RoleContext, decode, encode, validate
from verl_ctx.errors import ContextError, SchemaMismatchError

from ..budget import budget
from ..secret_hunt import everything_about, hunt

pytest.importorskip("omegaconf")

KINDS = {
    "SecretStr": (SecretStr, str),
    "SecretBytes": (SecretBytes, bytes),
    "Secret[str]": (Secret[str], str),
    "Secret[int]": (Secret[int], int),
    "Secret[bytes]": (Secret[bytes], bytes),
}
HOLDERS = ("direct", "optional", "list", "dict", "tuple", "model", "dataclass")
# What a worker may declare where the driver's schema holds a secret: none of them is a secret.
WORKER_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "list[str]": list[str],
    "Literal": Literal["x"],
    "str, max_length=3": Any,  # replaced below (Annotated needs the Field)
    "Any": Any,
}


def _secret_value(kind: str, token: int) -> Any:
    """A secret of ``kind`` (as the input gives it) and its text as a leak would show it."""
    if KINDS[kind][1] is int:
        return 7_000_000_000 + token  # ten digits: no output holds them by chance
    text = f"sk-live-{token:012x}"
    return text.encode() if KINDS[kind][1] is bytes else text


def _hunted(value: Any) -> dict[str, str | bytes]:
    if isinstance(value, int):
        return {"secret": str(value)}
    return {"secret": value}


def _holder(kind: str, holder: str, reg: ContextRegistry) -> tuple[Any, Any]:
    """The annotation holding a secret of ``kind`` per ``holder``, and how to wrap a value into its input."""
    secret_type = KINDS[kind][0]
    if holder == "direct":
        return secret_type, lambda v: v
    if holder == "optional":
        return Optional[secret_type], lambda v: v  # noqa: UP045 - built at run time
    if holder == "list":
        return list[secret_type], lambda v: [v]  # type: ignore[valid-type]
    if holder == "dict":
        return dict[str, secret_type], lambda v: {"k": v}  # type: ignore[valid-type]
    if holder == "tuple":
        return tuple[int, secret_type], lambda v: (1, v)  # type: ignore[valid-type]
    if holder == "model":
        inner: Any = create_model("Judge", key=(secret_type, ...), url=(str, "http://j"))
        return inner, lambda v: {"key": v}
    box = dataclasses.make_dataclass("Box", [("key", secret_type)])
    return box, lambda v: {"key": v}


def _schema(reg: ContextRegistry, annotation: Any, computed: bool) -> type[RoleContext]:
    body: dict[str, Any] = {"__annotations__": {"s": annotation, "plain": int}, "plain": 1}
    if computed:
        # A computed field made from the secret: what a report or repr must not show (leak 1 of #41).
        header: Any = property(lambda self: f"Bearer {_reveal(self.s)}")
        body["header"] = computed_field(return_type=str)(header)
    return type("HuntContext", (RoleContext,), body, role="actor", registry=reg)


def _reveal(value: Any) -> str:
    """The secret inside ``value``, as a computed field that builds a header from it would read it."""
    if hasattr(value, "get_secret_value"):
        return str(value.get_secret_value())
    if isinstance(value, dict):
        return "".join(_reveal(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return "".join(_reveal(v) for v in value)
    if isinstance(value, BaseModel) or dataclasses.is_dataclass(value):
        return _reveal(getattr(value, "key", ""))
    return ""


def _wrong_input(kind: str, secret: Any) -> Any:
    """An input at the secret's place that fails validation and holds the secret (``Secret[int]`` given text, a
    text secret given inside a list)."""
    if isinstance(secret, int):
        return f"{secret}ab"
    return [secret.decode() if isinstance(secret, bytes) else secret]


HUNT_SETTINGS = settings(
    max_examples=budget(40, 300), deadline=None, suppress_health_check=list(HealthCheck), derandomize=False
)


@HUNT_SETTINGS
@given(
    kind=st.sampled_from(list(KINDS)),
    holder=st.sampled_from(HOLDERS),
    computed=st.booleans(),
    worker=st.sampled_from(list(WORKER_TYPES)),
    token=st.integers(1, 2**40),
    big=st.booleans(),
)
def test_no_output_path_shows_a_secret_of_any_shape(
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    holder: str,
    computed: bool,
    worker: str,
    token: int,
    big: bool,
) -> None:
    from verl_ctx.integrations.verl._checkpoint import Snapshot, compare_snapshots, compare_with_launch

    reg = ContextRegistry("hunt")
    annotation, wrap = _holder(kind, holder, reg)
    schema = _schema(reg, annotation, computed)
    secret = _secret_value(kind, token)
    other = _secret_value(kind, token + 1)
    hunted = {"secret": _hunted(secret)["secret"], "other": _hunted(other)["secret"]}
    found: list[str] = []

    # 1. the validated context, and what describes it
    # An int beyond MessagePack's range sends the encoder down its slow path (leak 5 of #41 was there).
    plain = 2**70 if big else 1
    contexts = validate({"extra_context": {"actor": {"s": wrap(secret), "plain": plain}}}, registry=reg)
    ctx = contexts["actor"]
    shown = [repr(ctx), str(ctx), repr(contexts.describe()), repr(contexts.redacted()), repr(contexts)]
    found += hunt("\n".join(shown), hunted, "repr/describe/redacted")

    # 2. a wrong input at the secret's place
    try:
        validate({"extra_context": {"actor": {"s": wrap(_wrong_input(kind, secret))}}}, registry=reg)
    except ContextError as e:
        found += hunt(everything_about(e), hunted, "validation error")

    # 3. a worker whose type at the secret's place is no secret: refused, the value not shown
    worker_type = Annotated[str, Field(max_length=3)] if worker == "str, max_length=3" else WORKER_TYPES[worker]
    worker_reg = ContextRegistry("hunt-worker")
    worker_schema = type(
        "HuntContext",
        (RoleContext,),
        {"__annotations__": {"s": worker_type, "plain": int}, "plain": 1},
        role="actor",
        registry=worker_reg,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got: Any = decode(encode(ctx), worker_schema)
        except SchemaMismatchError as e:
            found += hunt(everything_about(e), hunted, f"skew error (worker: {worker})")
        except ContextError as e:
            found += hunt(everything_about(e), hunted, f"decode error (worker: {worker})")
        else:
            found.append(f"a worker typing the secret's place {worker} decoded it: {type(got).__name__}")

    # 4. a checkpoint's files, and 5. comparisons of checkpoints and launches with another secret
    folder = tmp_path_factory.mktemp("ckpt")
    salt = b"\x01" * 16
    saved = Snapshot.of({"actor": ctx}, salt=salt)
    saved.write(folder / "global_step_1", global_step=1)
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        found += hunt(path.read_bytes(), hunted, f"checkpoint file {path.name}")
    changed = validate({"extra_context": {"actor": {"s": wrap(other), "plain": plain}}}, registry=reg)["actor"]
    launch = compare_with_launch(saved, {"actor": changed})
    again = compare_snapshots(saved, Snapshot.of({"actor": changed}, salt=salt), {"actor": schema})
    found += hunt(repr(launch) + "\n".join(launch.listing()) + repr(again), hunted, "comparison")

    assert not found, "\n".join(found)


def test_the_hunt_finds_a_secret_an_output_would_show() -> None:
    """The hunt is not blind: the unwrapped value in a plain str is found."""
    secret = _secret_value("SecretStr", 5)
    assert hunt(f"header: Bearer {secret}", {"secret": secret}, "here")
