"""verl_ctx._redact: the secrets a process learnt are masked in every text it writes, in every encoding."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Secret, SecretBytes, SecretStr

from verl_ctx import _redact
from verl_ctx._field_errors import MASK

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
