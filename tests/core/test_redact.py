"""verl_ctx._secrets.redact: the secrets a process learnt are masked in every text it writes, in every encoding."""

from __future__ import annotations

import base64
import io
import json
import logging
import pickle
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Secret, SecretBytes, SecretStr

from verl_ctx import ContextRegistry, RoleContext, decode, encode, validate
from verl_ctx._secrets import redact as _redact
from verl_ctx._secrets.redact import MASK
from verl_ctx.errors import ConfigError, LiteralSecretWarning, SchemaMismatchError

SECRET = "sk-judge-5b1f0e7d"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    _redact.forget_all()
    yield
    _redact.forget_all()


class Judge(BaseModel):
    url: str = "http://judge"
    key: SecretStr | None = None
    pin: Secret[int] | None = None
    blob: SecretBytes | None = None


def test_the_secrets_of_a_value_are_found_at_any_depth() -> None:
    value = {"judges": [Judge(key=SecretStr(SECRET), pin=Secret[int](4321), blob=SecretBytes(b"raw-bytes"))]}
    assert sorted(_redact.secret_values(value)) == sorted([SECRET, "4321", "raw-bytes"])


@pytest.mark.parametrize(
    "shown",
    [
        f"key={SECRET}",
        json.dumps({"header": f"Bearer {SECRET}\n"}),
        SECRET.encode().hex(),
        base64.b64encode(SECRET.encode()).decode(),
        base64.b64encode(b"prefix:" + SECRET.encode() + b":suffix").decode(),
        base64.urlsafe_b64encode(b"xy" + SECRET.encode()).decode(),
        base64.b64encode(b"x" + SECRET.encode() + b"!").decode(),
    ],
    ids=["plain", "json-escaped", "hex", "base64", "base64 inside", "urlsafe at offset 2", "base64 at offset 1"],
)
def test_a_learnt_secret_is_masked_in_every_encoding(shown: str) -> None:
    before = _redact.redact(shown)
    assert before == shown  # nothing learnt yet: untouched
    _redact.learn(Judge(key=SecretStr(SECRET)))
    after = _redact.redact(shown)
    assert after != shown
    for form in (SECRET, SECRET.encode().hex(), base64.b64encode(SECRET.encode()).decode()[:12]):
        assert form not in after
    # What is left of a base64 text says nothing of the secret: at most a group of 4 characters around each end.
    assert MASK in after


def test_short_values_are_not_learnt() -> None:
    """Masking every '42' would point at the secret, not hide it."""
    _redact.learn({"pin": Secret[int](42)})
    assert _redact.redact("step 42 of 420") == "step 42 of 420"


def test_the_stream_masks_a_secret_written_in_pieces_on_one_line() -> None:
    _redact.learn(SecretStr(SECRET))
    out = io.StringIO()
    stream = _redact.RedactingStream(out)
    stream.write("Authorization: Bearer ")
    stream.write(SECRET[:5])
    stream.write(SECRET[5:] + "\nnext line")
    stream.flush()
    assert out.getvalue() == f"Authorization: Bearer {MASK}\nnext line"


KEYED = ContextRegistry()


class Keyed(RoleContext, role="reward", registry=KEYED):
    judge_url: str = "http://judge"
    api_key: SecretStr


def test_every_error_and_warning_message_is_redacted_when_made_and_when_shown() -> None:
    """No path that builds a message has to remember: the error and warning classes redact it themselves."""
    made_before = ConfigError(f"could not reach the judge with {SECRET}")
    validate({"extra_context": {"reward": {"api_key": SECRET}}}, registry=KEYED)
    made_after = SchemaMismatchError(
        f"header Bearer {SECRET}",
        role="reward",
        driver_fingerprint="a",
        worker_fingerprint="b",
        driver_version=1,
        worker_version=1,
    )
    warned = LiteralSecretWarning(f"given as {SECRET}", role="reward", path="extra_context.reward.api_key")
    for shown in (made_before, made_after, warned):
        assert SECRET not in str(shown)
        assert MASK in str(shown)
    # What is pickled to another process (a worker's error caught by class on the driver) holds no secret either.
    assert SECRET.encode() not in pickle.dumps(made_after)
    assert SECRET not in str(pickle.loads(pickle.dumps(made_before)))


def test_a_worker_learns_the_secrets_it_decodes() -> None:
    """decode teaches the worker's process its context's secrets: its later messages and logs mask them."""
    payload = encode(Keyed(api_key=SecretStr(SECRET)))
    _redact.forget_all()  # a worker process: it never validated anything
    decode(payload, Keyed)
    assert SECRET not in str(ConfigError(f"the judge refused key {SECRET}"))


def test_verl_ctx_loggers_and_resume_notes_are_redacted(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    _redact.learn(Keyed(api_key=SecretStr(SECRET)))
    log = _redact.logger("verl_ctx.test")
    with caplog.at_level(logging.INFO, logger="verl_ctx.test"):
        log.warning("server said %s", f"Bearer {SECRET}")
    assert caplog.records
    assert SECRET not in caplog.text
    assert MASK in caplog.text
    _redact.say(f"verl-ctx: resumed with {SECRET}")
    assert SECRET not in capsys.readouterr().out


def test_a_contexts_repr_and_str_go_through_the_redaction() -> None:
    """A context's repr and str mask its secrets wherever they show up in it (here: a value made from the key and
    kept in a plain field, which pydantic would print)."""

    class Echo(RoleContext, role="critic", registry=ContextRegistry()):
        api_key: SecretStr
        note: str

    ctx = Echo(api_key=SecretStr(SECRET), note=f"configured with {SECRET}")
    for shown in (repr(ctx), str(ctx), f"{ctx!r}"):
        assert SECRET not in shown
        assert "configured with" in shown
