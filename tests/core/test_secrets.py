"""Secrets never appear in an error, a warning, provenance, or anything kept on an exception, in any decodable form."""

from __future__ import annotations

import base64
import collections
import datetime as dt
from typing import Annotated, Any, Literal

import msgspec
import pytest
from pydantic import BaseModel, Field, Secret, SecretBytes, SecretStr, create_model

from verl_ctx import ContextRegistry, RoleContext, decode, encode, validate
from verl_ctx.errors import ContextError, ContextValidationError, SchemaDefinitionError, SchemaMismatchError

from ..secret_hunt import everything_about

SECRET = "sk-live-4f8a1c"


def _assert_clean(text: str) -> None:
    assert SECRET not in text
    assert base64.b64encode(SECRET.encode()).decode()[:12] not in text


@pytest.fixture
def reg() -> ContextRegistry:
    return ContextRegistry("secrets")


def _validate_error(reg: ContextRegistry, section: dict[str, Any]) -> ContextValidationError:
    with pytest.raises(ContextValidationError) as info:
        validate({"extra_context": section}, registry=reg)
    return info.value


def test_mistyped_secret_field_is_not_echoed(reg: ContextRegistry) -> None:
    """`judge_tokn=sk-...` (the field is judge_token): an unknown field is said by type and length only."""

    class C(RoleContext, role="critic", registry=reg):
        judge_token: SecretStr | None = None

    err = _validate_error(reg, {"critic": {"judge_tokn": SECRET}})
    _assert_clean(everything_about(err))
    (field,) = err.errors
    assert field.input == f"<str, length {len(SECRET)}, not shown>"
    assert field.hint == "did you mean 'judge_token'?"


@pytest.mark.parametrize(
    ("annotation", "constraints", "value"),
    [
        (list[SecretStr], {"max_length": 2}, [SECRET, SECRET, SECRET]),
        (dict[str, SecretStr], {"max_length": 2}, {"a": SECRET, "b": SECRET, "c": SECRET}),
        (int | SecretStr, {}, [SECRET]),  # a union that may hold one; neither member accepts a list
    ],
    ids=["list over max_length", "dict over max_length", "union"],
)
def test_containers_and_unions_that_may_hold_a_secret_are_not_echoed(
    reg: ContextRegistry, annotation: Any, constraints: dict[str, Any], value: Any
) -> None:
    """A value whose type can hold a secret is withheld whatever the error (length, type, union member)."""
    create_model(
        "C",
        __base__=RoleContext,
        __cls_kwargs__={"role": "critic", "registry": reg},
        x=(annotation | None, Field(None, **constraints)),
    )
    err = _validate_error(reg, {"critic": {"x": value}})
    _assert_clean(everything_about(err))


def test_nested_secret_in_a_wrong_shape_is_not_echoed(reg: ContextRegistry) -> None:
    """A section given a non-mapping where a model holding a secret is expected is withheld too."""

    class Judge(BaseModel):
        key: SecretBytes

    class C(RoleContext, role="critic", registry=reg):
        judge: Judge

    err = _validate_error(reg, {"critic": {"judge": SECRET}})
    _assert_clean(everything_about(err))


def test_no_pydantic_error_is_kept_on_the_exception(reg: ContextRegistry) -> None:
    """pydantic's ValidationError holds the inputs: it is neither the cause nor the suppressed context."""

    class C(RoleContext, role="critic", registry=reg):
        token: SecretStr
        n: int = Field(0, ge=0)

    err = _validate_error(reg, {"critic": {"token": SECRET, "n": -1}})
    assert err.__context__ is None
    assert err.__cause__ is None
    _assert_clean(everything_about(err))


def test_skew_that_drops_a_secret_field_names_it_without_its_value() -> None:
    """The worker's schema renamed the secret field: the mismatch names the field, never the driver's value."""

    class Driver(RoleContext, role="critic", registry=ContextRegistry()):
        judge_token: SecretStr

    class Worker(RoleContext, role="critic", registry=ContextRegistry()):
        api_token: SecretStr | None = None

    env = encode(Driver(judge_token=SECRET))
    with pytest.raises(SchemaMismatchError) as info:
        decode(env, Worker)
    assert "judge_token" in str(info.value)
    _assert_clean(everything_about(info.value))


@pytest.mark.parametrize(
    "worker_type",
    [int, list[str], Literal["a", "b"], Annotated[str, Field(max_length=5)], str, Any],
    ids=["int", "list[str]", "Literal", "str with max_length", "str", "Any"],
)
def test_a_driver_secret_met_by_a_worker_type_that_is_no_secret_is_a_mismatch_without_its_value(
    worker_type: Any,
) -> None:
    """The worker's schema types the driver's SecretStr as something else: refused, and neither the error (a
    validation failure of the worker's type) nor a decoded value shows the driver's secret."""

    class Driver(RoleContext, role="critic", registry=ContextRegistry()):
        token: SecretStr

    worker = create_model(
        "Worker", __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": ContextRegistry()},
        token=(worker_type, None),
    )  # fmt: skip
    env = encode(Driver(token=SECRET))
    with pytest.raises(SchemaMismatchError) as info:
        decode(env, worker)
    assert "token" in str(info.value)
    _assert_clean(everything_about(info.value))


def test_a_failing_migration_is_named_without_its_message() -> None:
    """An exception raised by a user's migration may quote the payload: its type and place are said, not its text."""

    class V1(RoleContext, role="critic", registry=ContextRegistry()):
        token: SecretStr

    class V2(RoleContext, role="critic", version=2, registry=ContextRegistry()):
        token: SecretStr

        @staticmethod
        def _boom(data: dict[str, Any]) -> dict[str, Any]:
            raise ValueError(f"cannot migrate {data['token']}")

    V2.__verl_ctx_migrations__ = {1: V2._boom}
    with pytest.raises(SchemaMismatchError, match="ValueError") as info:
        decode(encode(V1(token=SECRET)), V2)
    _assert_clean(everything_about(info.value))


def test_describe_and_redacted_values_mask_secrets(reg: ContextRegistry) -> None:
    """Provenance and the redacted values verl prints and tracks hold stars where a secret was."""

    class Judge(BaseModel):
        keys: list[SecretStr] = []

    class C(RoleContext, role="critic", registry=reg):
        judge: Judge = Judge()
        token: SecretStr | None = None

    contexts = validate({"extra_context": {"critic": {"token": SECRET, "judge": {"keys": [SECRET]}}}}, registry=reg)
    _assert_clean(repr(contexts.describe()) + repr(contexts.redacted()) + repr(contexts))
    assert contexts.secret_roles() == {"critic"}


def test_a_value_a_cached_property_made_from_a_secret_is_not_shown(reg: ContextRegistry) -> None:
    """A cached_property keeps its value in __dict__ once read; made from a secret, it is as secret, and it is not a
    field: the redacted values verl prints and tracks show fields only."""
    from functools import cached_property

    class C(RoleContext, role="critic", registry=reg):
        token: SecretStr = SecretStr("")

        @cached_property
        def header(self) -> str:
            return f"Bearer {self.token.get_secret_value()}"

    contexts = validate({"extra_context": {"critic": {"token": SECRET}}}, registry=reg)
    critic = contexts["critic"]
    assert isinstance(critic, C)
    assert critic.header == f"Bearer {SECRET}"  # read: now in the instance's __dict__
    assert contexts.redacted() == {"critic": {"token": "**********"}}
    _assert_clean(repr(contexts.describe()) + repr(contexts.redacted()))


def test_a_computed_field_of_a_context_holding_a_secret_is_not_in_its_repr(reg: ContextRegistry) -> None:
    """A @computed_field made from a secret (an Authorization header): repr and str of the context, which rehearsal
    reports, logs and tracebacks print, do not show it; its fields are shown as pydantic shows them."""
    from pydantic import computed_field

    class C(RoleContext, role="critic", registry=reg):
        token: SecretStr | None = None
        timeout_s: float = 5.0

        @computed_field  # type: ignore[prop-decorator]
        @property
        def header(self) -> str:
            return f"Bearer {self.token.get_secret_value() if self.token else ''}"

    critic = validate({"extra_context": {"critic": {"token": SECRET}}}, registry=reg)["critic"]
    assert isinstance(critic, C)
    _assert_clean(repr(critic) + str(critic) + repr([critic]))
    assert "timeout_s=5.0" in repr(critic)
    assert "header=<computed from a context that holds a secret: not shown>" in repr(critic)
    unset = C()  # no secret held: nothing to hide
    assert "header='Bearer '" in repr(unset)


@pytest.mark.parametrize(
    ("annotation", "value"),
    [(Secret[int], "12ab98765"), (Secret[str], 123456789), (Secret[str], ["sk-in-a-list-0123"])],
    ids=["Secret[int] given text", "Secret[str] given an int", "Secret[str] given a list"],
)
def test_a_pydantic_secret_of_any_type_given_a_wrong_input_is_not_echoed(
    reg: ContextRegistry, annotation: Any, value: Any
) -> None:
    """pydantic.Secret[T] is a secret like SecretStr: a wrong input is said by type and length, never shown."""
    create_model("C", __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": reg}, pin=(annotation, None))
    err = _validate_error(reg, {"critic": {"pin": value}})
    text = everything_about(err) + repr(err.errors)
    assert str(value[0] if isinstance(value, list) else value) not in text
    (field,) = err.errors
    assert field.input is not None
    assert field.input.endswith("not shown>")


def test_edited_payload_error_withholds_secret_inputs() -> None:
    """A payload whose secret field was edited to another type is refused without showing what came."""

    class C(RoleContext, role="critic", registry=ContextRegistry()):
        token: SecretStr

    env = encode(C(token="x"))
    env["payload"] = msgspec.msgpack.encode({"token": [SECRET]})
    with pytest.raises(ContextError) as info:
        decode(env, C)
    _assert_clean(everything_about(info.value))


#: Values for ``_secret_in_a_dataclass_schemas``: the secret in a stdlib dataclass, a pydantic one, and nested.
DATACLASS_SECRETS = {
    "critic": {"judge": {"key": SECRET}},
    "reward": {"judge": {"key": SECRET}},
    "actor": {"deep": {"inner": {"a": [{"key": SECRET}]}}},
}


def _secret_in_a_dataclass_schemas(reg: ContextRegistry) -> dict[str, type[RoleContext]]:
    import dataclasses

    import pydantic

    @dataclasses.dataclass
    class StdlibKey:
        key: SecretStr

    @pydantic.dataclasses.dataclass
    class PydanticKey:
        key: SecretStr

    class Deep(BaseModel):
        inner: dict[str, list[StdlibKey]]

    class InStdlib(RoleContext, role="critic", registry=reg):
        judge: StdlibKey

    class InPydantic(RoleContext, role="reward", registry=reg):
        judge: PydanticKey

    class Nested(RoleContext, role="actor", registry=reg):
        deep: Deep

    return {"critic": InStdlib, "reward": InPydantic, "actor": Nested}


def test_a_secret_inside_a_dataclass_is_a_secret_everywhere(reg: ContextRegistry) -> None:
    """A SecretStr in a stdlib or pydantic dataclass (at any depth): the context travels by reference only, and
    its redacted values (what verl prints and tracks, checkpoints' contexts.json) hold no trace of it."""
    _secret_in_a_dataclass_schemas(reg)
    contexts = validate({"extra_context": DATACLASS_SECRETS}, registry=reg)
    assert contexts.secret_roles() == {"critic", "reward", "actor"}
    _assert_clean(repr(contexts.redacted()))
    assert contexts.redacted()["critic"] == {"judge": {"key": "**********"}}


def test_a_value_of_any_depth_is_looked_through_for_secrets() -> None:
    """The value walk is iterative: a secret 10,000 lists deep is found, a plain value as deep is not a secret."""
    from verl_ctx._secrets.plan import holds_secret

    plain: Any = "plain"
    hidden: Any = SecretStr(SECRET)
    for _ in range(10_000):
        plain, hidden = [plain], [hidden]
    assert holds_secret(hidden)
    assert not holds_secret(plain)


def test_a_checkpoint_of_a_dataclass_secret_holds_it_in_no_file(reg: ContextRegistry, tmp_path: Any) -> None:
    """The files a checkpoint saves (contexts.json, envelopes.json, history) hold no form of a dataclass's secret."""
    pytest.importorskip("omegaconf")
    from verl_ctx.integrations.verl._checkpoint import Snapshot

    _secret_in_a_dataclass_schemas(reg)
    contexts = validate({"extra_context": DATACLASS_SECRETS}, registry=reg)
    Snapshot.of(contexts, salt=b"0" * 16).write(tmp_path / "global_step_1", global_step=1)
    written = [p for p in (tmp_path / "global_step_1").rglob("*") if p.is_file()]
    assert written
    for path in written:
        _assert_clean(path.read_text(errors="replace"))
        assert SECRET.encode().hex() not in path.read_text(errors="replace")


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (collections.deque[SecretStr], [SECRET]),
        (collections.deque[SecretBytes], [SECRET.encode()]),
        (Secret[str], SECRET),
        (Secret[int], 4242424242),
        (dict[str, Secret[bytes]], {"k": SECRET.encode()}),
        (tuple[int, collections.deque[Secret[str]]], (1, [SECRET])),
    ],
    ids=["deque[SecretStr]", "deque[SecretBytes]", "Secret[str]", "Secret[int]", "dict of Secret[bytes]", "nested"],
)
def test_every_secret_shape_reaches_the_worker_as_itself_never_as_stars(
    reg: ContextRegistry, annotation: Any, value: Any
) -> None:
    """deque[SecretStr], pydantic.Secret[T] and the like decode to the secret the driver held, never to stars."""
    model: Any = create_model(
        "Shape", __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": reg}, x=annotation
    )
    ctx = model.model_validate({"x": value})
    decoded = decode(encode(ctx), model)
    assert decoded == ctx  # secrets compare by their secret values
    assert "**********" not in repr(_reveal(dict(decoded)["x"]))


def _reveal(value: Any) -> Any:
    if hasattr(value, "get_secret_value"):
        return _reveal(value.get_secret_value())
    if isinstance(value, dict):
        return {_reveal(k): _reveal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, collections.deque)):
        return [_reveal(v) for v in value]
    return value


@pytest.mark.parametrize(
    "annotation",
    [Secret[list[int]], Secret[dict[str, str]], list[Secret[dt.datetime]]],
    ids=["Secret[list]", "Secret[dict]", "Secret[datetime]"],
)
def test_a_secret_the_encoder_cannot_carry_is_refused_when_the_class_is_declared(
    reg: ContextRegistry, annotation: Any
) -> None:
    """A secret whose value would not travel as itself is a SchemaDefinitionError at class creation, naming it."""
    with pytest.raises(SchemaDefinitionError, match=r"x(\[\*\])?: pydantic.Secret of a '\w+' value"):
        create_model("Lossy", __base__=RoleContext, __cls_kwargs__={"role": "critic", "registry": reg}, x=annotation)


def test_which_paths_hold_a_secret_is_read_from_the_schema_at_any_depth(reg: ContextRegistry) -> None:
    """Models, dataclasses, TypedDicts, containers, unions and recursion: every path a secret can sit at is found,
    and a context whose secret sits deeper than a value walk looks still holds a secret."""
    import dataclasses

    from typing_extensions import TypedDict

    from verl_ctx._secrets.plan import holds_secret, secret_plan

    @dataclasses.dataclass
    class Key:
        key: SecretStr

    class Keys(TypedDict):
        by_name: dict[str, Key]

    class Node(BaseModel):
        children: list[Node] = Field(default_factory=list)
        token: Secret[str] | None = None

    class Holder(RoleContext, role="critic", registry=reg):
        keys: Keys | None = None
        tree: Node = Node()
        pairs: tuple[int, SecretBytes] | None = None
        plain: list[int] = Field(default_factory=list)

    assert set(secret_plan(Holder).paths) == {
        "keys.by_name{*}.key",
        "tree.children[*].**",
        "tree.token",
        "pairs[1]",
    }
    deep = Node(token=SECRET)
    for _ in range(200):
        deep = Node(children=[deep])
    assert holds_secret(Holder(tree=deep))
    assert not holds_secret(Holder(plain=[1, 2]))


def test_a_checkpoint_of_a_context_with_an_int_beyond_messagepack_seals_its_secret(
    reg: ContextRegistry, tmp_path: Any
) -> None:
    """An int msgpack cannot hold sends the payload down the codec's slow path; the secret is sealed there too
    (the slow path used to unwrap secrets before the sealing saw them: the checkpoint held the key in clear)."""
    pytest.importorskip("omegaconf")
    from verl_ctx.integrations.verl._checkpoint import Snapshot

    class BigIntSecretContext(RoleContext, role="actor", registry=reg):
        key: SecretStr
        pin: Secret[bytes]
        counter: int

    contexts = validate(
        {"extra_context": {"actor": {"key": SECRET, "pin": SECRET + "-pin", "counter": 2**70}}}, registry=reg
    )
    snapshot = Snapshot.of(contexts, salt=b"0" * 16)
    assert snapshot.values("actor")["counter"] == 2**70
    snapshot.write(tmp_path / "global_step_1", global_step=1)
    written = [p for p in (tmp_path / "global_step_1").rglob("*") if p.is_file()]
    assert written
    for path in written:
        text = path.read_text(errors="replace")
        _assert_clean(text)
        assert SECRET.encode().hex() not in text


def test_a_corrupt_payloads_key_that_holds_a_secret_is_not_in_the_error_path() -> None:
    """A payload edited so that a map key holds the secret (an array key, read as a tuple, at a model's place): the
    error names the place by the key's type, never its text (a fresh fuzz seed found the key in the path)."""
    import msgspec

    from verl_ctx.errors import EnvelopeError

    reg = ContextRegistry("corrupt-key")

    class KeyedContext(RoleContext, role="critic", registry=reg):
        token: SecretStr = SecretStr("x")

    env = dict(encode(KeyedContext(token=SecretStr(SECRET))))
    env["payload"] = msgspec.msgpack.encode({"token": SECRET, (SECRET,): 1})
    with pytest.raises(EnvelopeError) as caught:
        decode(env, KeyedContext)
    _assert_clean(everything_about(caught.value))
    assert "key, not shown>" in str(caught.value)
