"""The fuzz campaign: mutated envelopes, texts, store references, raw bytes and config sections.

Every input must decode (or validate) or raise a ``ContextError``; anything else is a defect. The tests run a
few thousand cases per CI run (``test_fuzz.py``); ``python -m tests.core.fuzz N [SEED]`` runs a larger campaign
and prints its figures: inputs tried, outcomes by exception type, worst time for one input, peak RSS.
"""

from __future__ import annotations

import base64
import contextlib
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

from verl_ctx import ContextError, decode, encode, validate
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
    worst_s: float = 0.0
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
            started = time.perf_counter()
            try:
                run(case)
                outcome = "accepted"
            except ContextError as e:
                outcome = type(e).__name__
            except Exception as e:  # noqa: BLE001 - the defect we look for
                outcome = f"DEFECT {type(e).__name__}"
                report.defects.append(f"{kind} case {i}: {type(e).__name__}: {e!r:.300}")
            took = time.perf_counter() - started
            if took > report.worst_s:
                report.worst_s, report.worst_kind = took, kind
            report.outcomes[f"{kind}: {outcome}"] += 1
            report.tried += 1
    report.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return report


def _decoder(i: int) -> Callable[[Any], Any]:
    schema = Everything if i % 2 == 0 else Small
    return lambda case: decode(case, schema)


def _validator(case: Any) -> Any:
    return validate(case, registry=REGISTRY)


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    seed = int(argv[1]) if len(argv) > 1 else random.SystemRandom().randrange(2**32)
    started = time.perf_counter()
    report = campaign(n, seed)
    print(f"{report.tried:,} inputs (seed {seed}) in {time.perf_counter() - started:.1f} s")
    for outcome, count in sorted(report.outcomes.items()):
        print(f"  {count:>8,}  {outcome}")
    print(f"worst time for one input: {report.worst_s * 1000:.1f} ms ({report.worst_kind})")
    print(f"peak RSS of the process: {report.peak_rss_mib:.0f} MiB")
    for defect in report.defects[:20]:
        print("DEFECT", defect)
    return 1 if report.defects else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
