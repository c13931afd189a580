"""The worker side: finding the envelope, the fingerprint handshake, migrations and clear errors."""

from __future__ import annotations

import warnings
from collections.abc import MutableMapping
from types import MappingProxyType
from typing import Any

import msgspec
import pytest
from pydantic import Field, SecretStr

from verl_ctx import ContextRegistry, RoleContext, attach, decode, encode, migration
from verl_ctx._wire import compiled as compiled_module
from verl_ctx._wire.compiled import why_not
from verl_ctx.envelope import RESERVED_KEY, from_text, to_text
from verl_ctx.errors import (
    EnvelopeError,
    MissingContextError,
    SchemaMismatchError,
    SchemaSkewWarning,
)

from .models import Small


class FakeTrainingWorkerConfig:
    """Only the attribute decode() reads; the real verl class is used in tests/integrations."""

    def __init__(self, extra_context: MutableMapping[str, Any]) -> None:
        self.extra_context = extra_context


def test_decode_accepts_every_documented_source() -> None:
    """An envelope, its text, an extra_context mapping, and an object with .extra_context all decode."""
    ctx = Small(lr_scale=2.0)
    env = encode(ctx)
    extra = attach({}, ctx)
    for source in (env, to_text(env), extra, FakeTrainingWorkerConfig(extra)):
        assert decode(source, Small) == ctx


def test_attach_leaves_other_keys_alone() -> None:
    """A recipe's own extra_context entries survive next to ours."""
    extra: dict[str, Any] = {"my_state": {"step": 3}, "other": 1}
    attach(extra, Small())
    assert extra["my_state"] == {"step": 3}
    assert extra["other"] == 1
    assert set(extra[RESERVED_KEY]) == {"actor"}


def test_attach_refuses_to_overwrite_a_foreign_reserved_key() -> None:
    """If a user already keeps something else under 'verl_ctx', we say so instead of clobbering it."""
    with pytest.raises(EnvelopeError, match="reserved"):
        attach({RESERVED_KEY: "mine"}, Small())


def test_text_form_is_json_safe() -> None:
    """The text form survives JSON, as verl's main config does when it is logged to trackers."""
    import json

    text = to_text(encode(Small(token="s3cret")))
    assert json.loads(json.dumps(text)) == text
    assert text.isascii()
    assert decode(text, Small).token.get_secret_value() == "s3cret"  # type: ignore[union-attr]


def test_missing_context_says_how_to_supply_one() -> None:
    """No envelope for the role: the error names the role and how to give it one."""
    with pytest.raises(MissingContextError, match=r"role actor.*attach") as info:
        decode({"something": 1}, Small)
    assert info.value.role == "actor"
    with pytest.raises(MissingContextError, match=r"holds contexts for \[.critic.\]"):
        decode({RESERVED_KEY: {"critic": {}}}, Small)


def test_envelope_of_another_role_is_refused(registry: ContextRegistry) -> None:
    """Handing the critic's envelope to the actor's schema names both roles."""

    class Crit(RoleContext, role="critic", registry=registry):
        pass

    with pytest.raises(EnvelopeError, match=r"role 'critic'.*actor"):
        decode(encode(Crit()), Small)


# Returned as type[RoleContext], so mypy cannot see their fields: callers pass field values as a mapping.
def _pair(registry_a: ContextRegistry, registry_b: ContextRegistry) -> tuple[type[RoleContext], type[RoleContext]]:
    class Driver(RoleContext, role="critic", registry=registry_a):
        value_clip: float = 0.2
        warmup_steps: int = 0

    class Worker(RoleContext, role="critic", registry=registry_b):
        value_clip: float = 0.2
        warmup_steps: int = 0
        shaping: str = "none"  # added on the worker, with a default

    return Driver, Worker


def test_same_version_skew_that_validates_warns_naming_fields() -> None:
    """A worker with an extra defaulted field still decodes, with a warning that names the field."""
    Driver, Worker = _pair(ContextRegistry(), ContextRegistry())
    env = encode(Driver(**{"value_clip": 0.4}))
    with pytest.warns(SchemaSkewWarning, match=r"shaping \(only in the worker's schema\)"):
        ctx = decode(env, Worker)
    assert ctx.value_clip == 0.4  # type: ignore[attr-defined]


def test_same_version_skew_that_does_not_validate_is_a_mismatch() -> None:
    """A driver field the worker does not know is never silently dropped."""
    Driver, Worker = _pair(ContextRegistry(), ContextRegistry())
    env = encode(Worker(**{"shaping": "length_penalty"}))
    with pytest.raises(SchemaMismatchError) as info:
        decode(env, Driver)
    err = info.value
    assert err.differing_fields == ("shaping",)
    assert err.driver_fingerprint == env["fingerprint"]
    assert err.driver_fingerprint[:12] in str(err)
    assert err.worker_fingerprint[:12] in str(err)
    assert "shaping" in str(err)


def test_matching_schemas_decode_without_warning() -> None:
    """The common case is silent."""
    env = encode(Small())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decode(env, Small)


# Returned as type[RoleContext], so mypy cannot see their fields: callers pass field values as a mapping.
def _versions() -> tuple[type[RoleContext], type[RoleContext], type[RoleContext]]:
    class V1(RoleContext, role="critic", version=1, registry=ContextRegistry()):
        clip: float = 0.2

    class V2(RoleContext, role="critic", version=2, registry=ContextRegistry()):
        value_clip: float = 0.2

        @migration(from_version=1)
        def _rename(data: dict[str, Any]) -> dict[str, Any]:
            data["value_clip"] = data.pop("clip")
            return data

    class V3(RoleContext, role="critic", version=3, registry=ContextRegistry()):
        value_clip: float = 0.2
        warmup_steps: int

        @migration(from_version=1)
        def _rename(data: dict[str, Any]) -> dict[str, Any]:
            data["value_clip"] = data.pop("clip")
            return data

        @migration(from_version=2)
        def _warmup(data: dict[str, Any]) -> dict[str, Any]:
            return {**data, "warmup_steps": 10}

    return V1, V2, V3


def test_old_payload_is_upgraded_by_migrations_in_order() -> None:
    """A v1 payload read by a v3 schema goes through both steps, then validation."""
    V1, V2, V3 = _versions()
    ctx = decode(encode(V1(**{"clip": 0.7})), V3)
    assert (ctx.value_clip, ctx.warmup_steps) == (0.7, 10)  # type: ignore[attr-defined]
    assert decode(encode(V1(**{"clip": 0.7})), V2).value_clip == 0.7  # type: ignore[attr-defined]


def test_missing_migration_step_is_a_mismatch() -> None:
    """Without a migration for a step the error says which decorator to add."""

    class V1(RoleContext, role="critic", registry=ContextRegistry()):
        clip: float = 0.2

    class V2NoMigration(RoleContext, role="critic", version=2, registry=ContextRegistry()):
        value_clip: float = 0.2

    with pytest.raises(SchemaMismatchError, match=r"@migration\(from_version=1\)"):
        decode(encode(V1()), V2NoMigration)


def test_newer_driver_than_worker_is_a_mismatch() -> None:
    """A worker cannot downgrade a payload; it is told to deploy the same code."""
    V1, V2, _ = _versions()
    with pytest.raises(SchemaMismatchError, match="newer than this worker") as info:
        decode(encode(V2()), V1)
    assert (info.value.driver_version, info.value.worker_version) == (2, 1)


def test_failing_migration_is_reported_with_its_cause() -> None:
    """A migration that raises becomes a SchemaMismatchError naming the step."""

    class Old(RoleContext, role="critic", registry=ContextRegistry()):
        pass

    class New(RoleContext, role="critic", version=2, registry=ContextRegistry()):
        @migration(from_version=1)
        def _boom(data: dict[str, Any]) -> dict[str, Any]:
            return data["nope"]  # type: ignore[no-any-return]

    with pytest.raises(SchemaMismatchError, match="migration from version 1 failed: KeyError"):
        decode(encode(Old()), New)


def test_tampered_payload_lists_errors_with_secrets_redacted(registry: ContextRegistry) -> None:
    """Bytes edited after encoding fail validation with every error listed, and no secret shown."""
    import msgspec

    class Ctx(RoleContext, role="critic", registry=registry):
        value_clip: float = Field(0.2, gt=0)
        token: SecretStr
        steps: int = 0

    env = encode(Ctx(token="topsecret"))
    env["payload"] = msgspec.msgpack.encode({"value_clip": -1.0, "token": 12345, "steps": "x"})
    with pytest.raises(EnvelopeError, match="corrupt payload") as info:
        decode(env, Ctx)
    paths = [e.path for e in info.value.errors]
    assert paths == ["value_clip", "token", "steps"]
    assert "12345" not in str(info.value)
    assert all(e.role == "critic" for e in info.value.errors)


def test_from_text_refuses_other_formats() -> None:
    """Text from a different envelope format says to align verl-ctx versions."""
    with pytest.raises(EnvelopeError, match="same verl-ctx version"):
        from_text("verl-ctx:9:AAAA")
    with pytest.raises(EnvelopeError, match="not verl-ctx envelope text"):
        from_text("hello")


def test_fingerprints_that_share_a_prefix_are_shown_until_they_differ() -> None:
    """Two fingerprints equal in their first 12 digits are printed long enough to tell them apart."""
    import warnings

    env = encode(Small())
    own = env["fingerprint"]
    env["fingerprint"] = own[:20] + ("0" if own[20] != "0" else "1") + own[21:]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decode(env, Small)
    message = str(caught[0].message)
    assert env["fingerprint"][:24] in message
    assert own[:24] in message


class Compiled(RoleContext, role="actor", registry=ContextRegistry("hot path")):
    """A schema on the compiled path (Small holds a secret, which keeps it on pydantic's)."""

    lr_scale: float = Field(1.0, gt=0)
    name: str = "run"


class _Str(str):
    """A str that is not exactly str (check_envelope's fast path wants exact types; msgspec takes subclasses)."""

    __slots__ = ()


def _outcome(source: object, **kwargs: Any) -> tuple[str, str]:
    try:
        return "ok", repr(decode(source, Compiled, **kwargs))
    except Exception as e:  # noqa: BLE001 - the outcome compared, whatever it is
        return type(e).__name__, str(e).replace("mappingproxy", "dict")  # where it looked names the type


def _general(source: dict[str, Any]) -> Any:
    """The same content as a read-only mapping: decode's hot path takes only dicts, so this takes the general one."""
    return MappingProxyType({k: MappingProxyType(v) if k == RESERVED_KEY else v for k, v in source.items()})


def test_decodes_hot_path_answers_as_the_general_path() -> None:
    """Every edit of an envelope (a key changed, retyped, removed or added, the payload over a limit), given as itself
    or in an extra_context dict: the same instance, or the same error, as the path that finds and checks first."""
    assert why_not(Compiled) is None
    decode(encode(Compiled()), Compiled)  # the hot path needs the compiled decoder a first decode leaves
    env = encode(Compiled(lr_scale=2.0))
    edits: list[dict[str, Any]] = [
        {},
        {"verl_ctx_format": True},
        {"verl_ctx_format": 2},
        {"role": "critic"},
        {"role": b"actor"},
        {"role": _Str("actor"), "fingerprint": _Str(env["fingerprint"])},
        {"fingerprint": env["fingerprint"][:-1] + "0"},
        {"schema_id": env["schema_id"] + "X"},
        {"schema_version": True},
        {"schema_version": float(env["schema_version"])},
        {"schema_version": env["schema_version"] + 1},
        {"fields": list(env["fields"])},
        {"payload": bytearray(env["payload"])},
        {"payload": env["payload"].decode("latin-1")},
        {"payload": env["payload"][:-1]},
        {"payload": b"\xc1"},
        {"extra": 1},
    ]
    for edit in edits:
        edited = {**env, **edit}
        for source in (edited, {RESERVED_KEY: {"actor": edited}}):
            for kwargs in ({}, {"role": "actor"}, {"max_bytes": len(env["payload"]) - 1}):
                assert _outcome(source, **kwargs) == _outcome(_general(source), **kwargs), (edit, source is edited)
    for key in env:
        short = {k: v for k, v in env.items() if k != key}
        assert _outcome(short) == _outcome(_general(short)), key


def test_a_payload_the_compiled_decoder_refuses_is_tried_once_then_pydantic_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A number as text (the mirror wants a float, pydantic's lax mode reads it): one compiled attempt, then
    pydantic's answer."""
    decode(encode(Compiled()), Compiled)
    real = compiled_module.decoders[Compiled]
    assert real is not None
    calls: list[bytes] = []

    def counting(payload: bytes) -> Any:
        calls.append(payload)
        return real(payload)

    monkeypatch.setitem(compiled_module.decoders, Compiled, counting)
    env = encode(Compiled(lr_scale=2.0))
    payload = msgspec.msgpack.encode({**msgspec.msgpack.decode(env["payload"]), "lr_scale": "2.0"})
    assert decode({**env, "payload": payload}, Compiled) == Compiled(lr_scale=2.0)
    assert len(calls) == 1
