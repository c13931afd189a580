"""Hostile input: oversize and deep payloads, payloads naming classes: refused with a ContextError (the random
and mutated inputs are in fuzz.py)."""

from __future__ import annotations

import msgspec
import pytest

from verl_ctx import ContextError, decode, encode
from verl_ctx.envelope import from_text, to_text
from verl_ctx.errors import EnvelopeError

from .models import Small


def test_oversize_payload_is_refused_before_decoding() -> None:
    """The size limit is checked on the bytes, before any decoding work."""
    env = encode(Small())
    env["payload"] = b"\x00" * 1025
    with pytest.raises(EnvelopeError, match="over the 1024-byte limit"):
        decode(env, Small, max_bytes=1024)


def test_oversize_text_is_refused_before_base64_decoding() -> None:
    """The text form is measured before it is unpacked."""
    env = encode(Small(name="x" * 5000))
    with pytest.raises(EnvelopeError, match="over the 1024-byte limit"):
        from_text(to_text(env), max_bytes=1024)


def test_deeply_nested_payload_is_refused() -> None:
    """A payload nested a million levels deep is refused with an EnvelopeError, not a crash."""
    env = encode(Small())
    env["payload"] = b"\x81\xa4meta" + b"\x91" * 1_000_000 + b"\x00"
    with pytest.raises(EnvelopeError, match="maps and arrays"):  # a million arrays in 1 MB: refused unparsed
        decode(env, Small)
    env["payload"] = b"\x81\xa4meta" + b"\x91" * 100_000 + b"\x00"  # within the budget: the decoder's own limit
    with pytest.raises(EnvelopeError, match="nested too deeply"):
        decode(env, Small)


def test_payload_naming_a_class_imports_nothing() -> None:
    """A payload that names a module and class is plain data: nothing is imported or executed."""
    import sys

    env = encode(Small())
    env["payload"] = msgspec.msgpack.encode({"__class__": "os:system", "name": "antigravity"})
    env["schema_id"] = "antigravity:Fly"
    with pytest.raises(ContextError):
        decode(env, Small)
    assert "antigravity" not in sys.modules
