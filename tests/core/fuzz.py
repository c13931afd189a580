"""The fuzz campaign: mutated envelopes, texts, store references, raw bytes and config sections.

Every input must decode (or validate) or raise a ``ContextError``; anything else is a defect. The tests run a
few thousand cases per CI run (``test_fuzz.py``); ``python -m tests.core.fuzz N [SEED]`` runs a larger campaign
and prints its figures: inputs tried, outcomes by exception type, worst time for one input, peak RSS.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import random
import resource
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pydantic
from pydantic import SecretBytes, SecretStr
from typing_extensions import TypedDict

from verl_ctx import ContextError, ContextRegistry, RoleContext, decode, encode, validate
from verl_ctx.envelope import to_text
from verl_ctx.errors import SchemaSkewWarning

from .models import REGISTRY, Everything, Row, Small

# Bytes msgpack parsers trip on: a huge ext length, a huge map length, deep arrays, a reserved byte, an ext.
HOSTILE_BYTES = [b"\xc7\xff\x01", b"\xdd\xff\xff\xff\xff", b"\x91" * 50, b"\xc1", b"\xd4\x05\x00"]
JUNK: list[Any] = [None, 0, -1, "", b"", [], {}, 2**70, "x" * 10, True, 1.5, float("nan"), {"verl_ctx": 1}]
TEXT_EDITS = ["", "=", "!", "A", "\x00", "verl-ctx:1:", "é"]


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One to six byte-level edits: overwrite, truncate, insert random bytes or a hostile sequence."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        if op < 0.4 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif op < 0.6 and buf:
            del buf[rng.randrange(len(buf)) :]
        else:
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = (
                bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) if op < 0.8 else rng.choice(HOSTILE_BYTES)
            )
    return bytes(buf)


def edit_text(rng: random.Random, text: str) -> str:
    cut = rng.randrange(len(text))
    return text[:cut] + rng.choice(TEXT_EDITS) + text[cut + 1 :]


def envelope_case(rng: random.Random, good: dict[str, Any]) -> Any:
    """A good envelope with its payload mutated, one field replaced by junk, or random bytes."""
    env = dict(good)
    choice = rng.random()
    if choice < 0.6:
        env["payload"] = mutate(rng, good["payload"])
        return env
    if choice < 0.85:
        env[rng.choice(sorted(env))] = rng.choice(JUNK)
        return env
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))


def reference_text(ref: dict[str, Any]) -> str:
    return "verl-ctx:1:" + base64.b64encode(msgspec.msgpack.encode(ref)).decode()


GOOD_REF = {
    "verl_ctx_remote": 1,
    "role": "critic",
    "store": "verl_ctx_store_0123456789ab",
    "namespace": "n",
    "bytes": 3,
    "actor_id": "ab" * 16,
}


def reference_case(rng: random.Random) -> Any:
    """A store reference with one field junk or its text edited, or in a slot of a mapping (never a live store)."""
    ref = dict(GOOD_REF)
    if rng.random() < 0.5:
        ref[rng.choice(sorted(ref))] = rng.choice([j for j in JUNK if j != 2**70])  # msgpack's ints stop at 2**64
        return {"verl_ctx": {"critic": reference_text(ref)}} if rng.random() < 0.5 else reference_text(ref)
    ref["store"] = "verl_ctx_store_" + "".join(rng.choice("0123456789abcdef/.:") for _ in range(rng.randint(0, 20)))
    return edit_text(rng, reference_text(ref))


def slot_case(rng: random.Random, good: dict[str, Any], text: str) -> Any:
    """What a worker holds: an ``extra_context`` mapping or verl-ctx's own slot, holding an edited or junk context."""
    value = rng.choice([envelope_case(rng, good), edit_text(rng, text), rng.choice(JUNK), text])
    role = rng.choice([good["role"]] * 3 + ["reward", "", "critic.x"])
    return rng.choice([{"extra_context": {role: value}}, {"verl_ctx": {role: value}}, {"extra_context": value}])


def section_case(rng: random.Random, depth: int = 0) -> Any:
    """A config section for ``Everything``: right keys, typos, junk values, nesting."""
    keys = [*Everything.model_fields, "txet", "rows", "extra", "__class__", "model_config"]
    if depth > 3 or rng.random() < 0.3:
        return rng.choice([*JUNK, "2024-01-01T00:00:00+05:30", "a", "b", "red", 10**30, -(2**64), "1e400"])
    return {rng.choice(keys): section_case(rng, depth + 1) for _ in range(rng.randint(0, 5))}


@dataclass
class Report:
    """What a campaign saw."""

    tried: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    worst_s: float = 0.0  # CPU seconds of the slowest case
    worst_kind: str = ""
    peak_rss_mib: float = 0.0
    defects: list[str] = field(default_factory=list)


def campaign(n: int, seed: int) -> Report:
    """``n`` inputs of five kinds in turn, each decoded or validated; a defect is any other exception."""
    rng = random.Random(seed)
    goods = [encode(Everything(rows=[Row(prompt_id=i, weight=i / 3) for i in range(5)], secret="s")), encode(Small())]
    texts = [to_text(g) for g in goods]
    kinds: list[tuple[str, Callable[[int], tuple[Any, Callable[[Any], Any]]]]] = [
        ("envelope", lambda i: (envelope_case(rng, goods[i % 2]), _decoder(i))),
        ("text", lambda i: (edit_text(rng, texts[i % 2]), _decoder(i))),
        ("reference", lambda i: (reference_case(rng), _decoder(0))),
        ("worker slot", lambda i: (slot_case(rng, goods[i % 2], texts[i % 2]), _decoder(i))),
        ("config section", lambda i: ({"extra_context": {"critic": section_case(rng)}}, _validator)),
    ]
    report = Report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaSkewWarning)  # an edited fingerprint that still decodes
        # One-time costs stay out of the worst time: a well-formed reference makes the reader import Ray.
        for warm in (reference_text(GOOD_REF), texts[0]):
            with contextlib.suppress(ContextError):
                decode(warm, Everything)
        for i in range(n):
            kind, make = kinds[i % len(kinds)]
            case, run = make(i // len(kinds))
            started = time.process_time()
            try:
                run(case)
                outcome = "accepted"
            except ContextError as e:
                outcome = type(e).__name__
            except Exception as e:  # noqa: BLE001 - the defect we look for
                outcome = f"DEFECT {type(e).__name__}"
                report.defects.append(f"{kind} case {i}: {type(e).__name__}: {e!r:.300}")
            _record(report, kind, outcome, started)
    report.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def _decoder(i: int) -> Callable[[Any], Any]:
    schema = Everything if i % 2 == 0 else Small
    return lambda case: decode(case, schema)


def _validator(case: Any) -> Any:
    return validate(case, registry=REGISTRY)


# --- secrets in every shape a schema can hold them, and deep `Any` values ---------------------------------------

SECRET_REGISTRY = ContextRegistry("fuzz-secrets")
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+="


def secret_token(rng: random.Random) -> str:
    """A recognizable random token with the characters base64 and shells care about (``/``, ``+``, ``=``)."""
    return "sk/" + "".join(rng.choice(_TOKEN_CHARS) for _ in range(rng.randint(12, 40))) + "+="


@dataclasses.dataclass
class PlainHolder:
    """A stdlib dataclass holding secrets."""

    key: SecretStr
    raw: SecretBytes = dataclasses.field(default_factory=lambda: SecretBytes(b""))


@pydantic.dataclasses.dataclass
class PydanticHolder:
    """A pydantic dataclass holding secrets."""

    key: SecretStr
    generic: pydantic.Secret[str] | None = None


class DictHolder(TypedDict):
    """A TypedDict holding a secret."""

    key: SecretStr
    n: int


class Inner(pydantic.BaseModel):
    key: SecretStr
    below: Inner | None = None


class SecretShapes(RoleContext, role="critic", registry=SECRET_REGISTRY):
    """Every container shape the schema supports, each able to hold a secret; `deep` is any value."""

    plain: PlainHolder | None = None
    pyd: PydanticHolder | None = None
    td: DictHolder | None = None
    generic: pydantic.Secret[str] | None = None
    listed: list[SecretStr] = pydantic.Field(default_factory=list)
    mapped: dict[str, SecretBytes] = pydantic.Field(default_factory=dict)
    tupled: tuple[SecretStr, ...] = ()
    queued: collections.deque[SecretStr] = pydantic.Field(default_factory=collections.deque)
    nested: Inner | None = None
    deep: Any = None


def _nest(rng: random.Random, leaf: Any, depth: int) -> Any:
    """``leaf`` inside ``depth`` random lists and single-key maps."""
    for _ in range(depth):
        leaf = [leaf] if rng.random() < 0.5 else {rng.choice("abc"): leaf}
    return leaf


def secret_instance(rng: random.Random) -> tuple[SecretShapes, list[str]]:
    """A ``SecretShapes`` with a fresh secret in a random subset of its shapes, and those secrets."""
    secrets: list[str] = []

    def token() -> str:
        secrets.append(secret_token(rng))
        return secrets[-1]

    values: dict[str, Any] = {}
    makers: dict[str, Callable[[], Any]] = {
        "plain": lambda: PlainHolder(key=SecretStr(token()), raw=SecretBytes(token().encode())),
        "pyd": lambda: PydanticHolder(key=SecretStr(token()), generic=pydantic.Secret[str](token())),
        "td": lambda: DictHolder(key=SecretStr(token()), n=rng.randint(0, 9)),
        "generic": lambda: pydantic.Secret[str](token()),
        "listed": lambda: [SecretStr(token()) for _ in range(rng.randint(1, 3))],
        "mapped": lambda: {f"k{i}": SecretBytes(token().encode()) for i in range(rng.randint(1, 3))},
        "tupled": lambda: tuple(SecretStr(token()) for _ in range(rng.randint(1, 3))),
        "queued": lambda: collections.deque(SecretStr(token()) for _ in range(rng.randint(1, 3))),
        "nested": lambda: _inner(rng.randint(1, 80), token),
    }
    for name in rng.sample(sorted(makers), rng.randint(1, len(makers))):
        values[name] = makers[name]()
    return SecretShapes(**values), secrets


def _inner(depth: int, token: Callable[[], str]) -> Inner:
    node = Inner(key=SecretStr(token()))
    for _ in range(depth - 1):
        node = Inner(key=SecretStr(token()), below=node)
    return node


def _leaks(text: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s in text or base64.b64encode(s.encode()).decode().rstrip("=") in text]


def secret_campaign(n: int, seed: int) -> Report:
    """``n`` cases: a context with secrets in random shapes (or a deep ``Any`` value) encoded, decoded back equal,
    its payload mutated and decoded again; no secret appears in any repr, str or error, in clear or base64."""
    rng = random.Random(seed)
    report = Report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaSkewWarning)
        for i in range(n):
            started = time.process_time()
            kind = "deep Any" if i % 4 == 3 else "secret shapes"
            try:
                outcome = _deep_case(rng) if kind == "deep Any" else _secret_case(rng, report, i)
            except Exception as e:  # noqa: BLE001 - the defect we look for
                outcome = f"DEFECT {type(e).__name__}"
                report.defects.append(f"{kind} case {i}: {type(e).__name__}: {str(e)[:300]}")
            _record(report, kind, outcome, started)
    report.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def _secret_case(rng: random.Random, report: Report, i: int) -> str:
    ctx, secrets = secret_instance(rng)
    for text in (repr(ctx), str(ctx)):
        if leaked := _leaks(text, secrets):
            report.defects.append(f"secret case {i}: repr/str shows {len(leaked)} secret(s)")
    env = encode(ctx)
    if leaked := _leaks(repr({k: v for k, v in env.items() if k != "payload"}), secrets):
        report.defects.append(f"secret case {i}: the envelope's fields show {len(leaked)} secret(s)")
    back = decode(env, SecretShapes)
    if back != ctx:
        report.defects.append(f"secret case {i}: decoded context differs from the encoded one")
    if leaked := _leaks(repr(back), secrets):
        report.defects.append(f"secret case {i}: the decoded repr shows {len(leaked)} secret(s)")
    bad = dict(env)
    bad["payload"] = mutate(rng, env["payload"])
    try:
        decode(bad, SecretShapes)
    except ContextError as e:
        if leaked := _leaks(f"{e}\n{e!r}\n{getattr(e, 'errors', '')!r}", secrets):
            report.defects.append(f"secret case {i}: {type(e).__name__} shows {len(leaked)} secret(s)")
        return "mutated: " + type(e).__name__
    return "mutated: accepted"


def _deep_case(rng: random.Random) -> str:
    """An `Any` value nested up to ~600 deep: encodes and decodes back equal, or is a ContextError, never another."""
    value = _nest(rng, rng.choice([None, 0, "x", 1.5, [], {}]), rng.randint(1, 600))
    try:
        env = encode(SecretShapes(deep=value))
    except ContextError as e:
        return "encode: " + type(e).__name__
    try:
        back = decode(env, SecretShapes)
    except ContextError as e:
        return "decode: " + type(e).__name__
    if back.deep != value:
        raise AssertionError("a deep Any value decoded differently")
    try:
        validate({"extra_context": {"critic": {"deep": value}}}, registry=SECRET_REGISTRY)
    except ContextError as e:
        return "round trip, validate: " + type(e).__name__
    return "round trip"


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    seed = int(argv[1]) if len(argv) > 1 else random.SystemRandom().randrange(2**32)
    started = time.perf_counter()
    defects = 0
    for name, run in (("mutations", campaign), ("secrets and deep Any", secret_campaign)):
        report = run(n if run is campaign else max(1, n // 20), seed)
        print(f"{name}: {report.tried:,} inputs (seed {seed}) in {time.perf_counter() - started:.1f} s")
        for outcome, count in sorted(report.outcomes.items()):
            print(f"  {count:>8,}  {outcome}")
        print(f"worst CPU time for one input: {report.worst_s * 1000:.1f} ms ({report.worst_kind})")
        print(f"peak RSS of the process: {report.peak_rss_mib:.0f} MiB")
        for defect in report.defects[:20]:
            print("DEFECT", defect)
        defects += len(report.defects)
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def _record(report: Report, kind: str, outcome: str, started: float) -> None:
    """Count one case's outcome and keep the slowest case's time and kind.

    The time is the process's CPU time, not the wall clock: what the case cost is what a slow path or a blow-up
    shows, and a busy machine (other jobs on the same cores) stretches the wall clock of any case past a bound.
    """
    took = time.process_time() - started
    if took > report.worst_s:
        report.worst_s, report.worst_kind = took, kind
    report.outcomes[f"{kind}: {outcome}"] += 1
    report.tried += 1
