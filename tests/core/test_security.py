"""Hostile input: random and mutated envelopes, oversize and deep payloads only ever raise ContextError."""

from __future__ import annotations

import random
import time

import msgspec
import pytest

from verl_ctx import ContextError, decode, encode
from verl_ctx.envelope import from_text, to_text
from verl_ctx.errors import EnvelopeError

from .models import Everything, Row, Small

FUZZ_CASES = 10_000


# Bytes msgpack parsers trip on: a huge ext length, a huge map length, deep arrays, a reserved byte, an ext.
_HOSTILE = [b"\xc7\xff\x01", b"\xdd\xff\xff\xff\xff", b"\x91" * 50, b"\xc1", b"\xd4\x05\x00"]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        if op < 0.4 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif op < 0.6 and buf:
            del buf[rng.randrange(len(buf)) :]
        elif op < 0.8:
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = rng.choice(
                [b"\xc7\xff\x01", b"\xdd\xff\xff\xff\xff", b"\x91" * 50, b"\xc1", b"\xd4\x05\x00"]
            )
    return bytes(buf)


def _envelope_variants(rng: random.Random, good: dict[str, object]) -> object:
    choice = rng.random()
    env = dict(good)
    if choice < 0.55:
        env["payload"] = _mutate(rng, good["payload"])  # type: ignore[arg-type]
        return env
    if choice < 0.7:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    if choice < 0.85:
        key = rng.choice(sorted(env))
        env[key] = rng.choice([None, 0, -1, "", b"", [], {}, 2**70, "x" * 10, True, 1.5])
        return env
    text = to_text(good)
    cut = rng.randrange(len(text))
    return text[:cut] + rng.choice(["", "=", "!", "A", "\x00"]) + text[cut + 1 :]


@pytest.mark.filterwarnings("ignore::verl_ctx.errors.SchemaSkewWarning")
def test_fuzzed_envelopes_raise_only_context_errors() -> None:
    """10,000 random and mutated envelopes: each decodes or raises a ContextError, none hangs."""
    rng = random.Random(20261130)
    goods = [encode(Everything(rows=[Row(prompt_id=i, weight=i / 3) for i in range(5)], secret="s")), encode(Small())]
    outcomes = {"decoded": 0, "refused": 0}
    for i in range(FUZZ_CASES):
        good = goods[i % 2]
        case = _envelope_variants(rng, good)
        started = time.perf_counter()
        try:
            decode(case, Everything if i % 2 == 0 else Small)
            outcomes["decoded"] += 1
        except ContextError:
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 - the failure we are looking for
            pytest.fail(f"case {i} raised {type(e).__name__}: {e!r} for input {case!r:.200}")
        assert time.perf_counter() - started < 2.0, f"case {i} took too long"
    assert outcomes["refused"] > FUZZ_CASES // 2
    assert outcomes["decoded"] > 0


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
