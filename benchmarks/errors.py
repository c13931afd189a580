"""Hostile payloads at the size limit (issue #11, item 6): what refusing each costs, in a fresh process.

Each case is a payload just under ``DEFAULT_MAX_BYTES`` (64 MiB) in an envelope that names the right schema, so
it reaches validation: the most work a sender can make a worker do. A child process reads it, decodes it and
reports the time to the ``EnvelopeError``, the peak RSS it added, how many errors it listed and counted, and the
length of the message.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec
from pydantic import BaseModel, Field

from verl_ctx import ContextRegistry, RoleContext

from .memory import peak_mib
from .timing import fmt_seconds, table

TITLE = "Hostile payloads at the 64 MiB limit: time and memory of the refusal"
REPO = Path(__file__).resolve().parents[1]
LIMIT = 64 * 1024 * 1024
_REGISTRY = ContextRegistry("benchmark errors")


class Item(BaseModel):
    prompt_id: int
    weight: float
    source: str


class Hostile(RoleContext, role="critic", registry=_REGISTRY):
    """A schema with the shapes a hostile sender can inflate: a list of models, a map, a list of lists."""

    rows: list[Item] = Field(default_factory=list)
    weights: dict[str, float] = Field(default_factory=dict)
    grid: list[list[int]] = Field(default_factory=list)
    step: int = 0
    name: str = ""


class Scalars(RoleContext, role="rollout", registry=_REGISTRY):
    """Typed lists of scalars that each build a Python object: valid floods, decoded, their memory measured."""

    words: list[str] = Field(default_factory=list)
    times: list[dt.datetime] = Field(default_factory=list)
    ids: list[int] = Field(default_factory=list)
    amounts: list[Decimal] = Field(default_factory=list)
    spans: list[dt.timedelta] = Field(default_factory=list)


class Paths(RoleContext, role="reward", registry=_REGISTRY):
    """A type the compiled codec does not take (pydantic's path, every item charged its slot): one-character paths."""

    places: list[PurePosixPath] = Field(default_factory=list)


class Untyped(RoleContext, role="actor", registry=_REGISTRY):
    """An ``Any`` field: the untyped parse, where every item a flood holds is charged before decoding (#23)."""

    free: Any = None


def _fill(size: int, unit: bytes) -> int:
    """How many ``unit`` entries fit in ``size`` bytes (leaving room for the rest of the payload)."""
    return (size - 4096) // len(unit)


def _map(entries: dict[bytes, bytes], extra: bytes = b"", extra_count: int = 0) -> bytes:
    """A MessagePack map from already-encoded keys and values, plus ``extra_count`` pre-encoded entries."""
    n = len(entries) + extra_count
    return b"\xdf" + n.to_bytes(4, "big") + b"".join(k + v for k, v in entries.items()) + extra


def _fields(**overrides: object) -> dict[bytes, bytes]:
    enc = msgspec.msgpack.encode
    values: dict[str, object] = {"rows": [], "weights": {}, "grid": [], "step": 0, "name": ""}
    values.update(overrides)
    return {enc(k): v if isinstance(v, bytes) else enc(v) for k, v in values.items()}


def _array(unit: bytes, count: int) -> bytes:
    return b"\xdd" + count.to_bytes(4, "big") + unit * count


def _entries(prefix: str, value: bytes, count: int) -> bytes:
    """``count`` map entries ``"<prefix>0000000": value`` (8-character keys), already encoded."""
    return b"".join(b"\xa8" + f"{prefix}{i:07d}".encode() + value for i in range(count))


def _str(raw: bytes) -> bytes:
    return b"\xdb" + len(raw).to_bytes(4, "big") + raw


def _valid_then_bad(good: bytes, bad: bytes, size: int) -> bytes:
    n = _fill(size, good)
    return b"\xdd" + n.to_bytes(4, "big") + good * (n - 1) + bad


# Floods with no repeating unit (every item a step of the walk that counts them), as arrays of 15 items whose bytes
# are drawn at random from each column's values. tests/core/test_hostile.py times some of them against each other.
_ANY, _FIXINT = bytes(range(256)), bytes(range(128))
APERIODIC = {
    "random uint8s": [b"\xcc", _ANY] * 15,
    "empty str8s and bin8s": [b"\xd9\xc4", b"\x00"] * 15,
    "empty str16s and bin16s": [b"\xda\xc5", b"\x00", b"\x00"] * 15,
    "two fixints, then a uint8": [_FIXINT, _FIXINT, b"\xcc", _ANY] * 5,
    "empty ext8s of random types": [b"\xc7", b"\x00", _FIXINT] * 15,
}


def aperiodic_flood(columns: list[bytes], size: int) -> bytes:
    """An array32 of arrays of 15 items (``columns``: each byte's possible values), just under ``size`` bytes."""
    rng = random.Random(0)
    width = 1 + len(columns)
    arrays = (size - 4096) // width
    data = bytearray(arrays * width)
    data[0::width] = b"\x9f" * arrays
    for k, values in enumerate(columns, start=1):
        data[k::width] = rng.randbytes(arrays).translate(bytes(values[b % len(values)] for b in range(256)))
    return b"\xdd" + arrays.to_bytes(4, "big") + bytes(data)


def _in_any_field(columns: list[bytes], size: int) -> bytes:
    return b"\x81" + msgspec.msgpack.encode("free") + aperiodic_flood(columns, size)


def _floods(size: int) -> dict[str, Callable[[], bytes]]:
    """Payloads for ``Untyped``: floods of small items in its ``Any`` field, refused before decoding."""
    cases: dict[str, Callable[[], bytes]] = {
        f"flood in an Any field, no repeating unit: {name}": functools.partial(_in_any_field, cols, size)
        for name, cols in APERIODIC.items()
    }
    cases["flood in an Any field: nils in arrays of 15"] = functools.partial(_in_any_field, [b"\xc0"] * 15, size)
    return cases


def _cases(size: int) -> dict[str, Callable[[], bytes]]:
    enc = msgspec.msgpack.encode
    bad_row = enc({"prompt_id": "x", "weight": "y", "source": 1})
    good_row = enc({"prompt_id": 1, "weight": 0.5, "source": "s"})
    n_unknown, n_values = _fill(size, b"\xa8k0000000\x00"), _fill(size, b"\xa8w0000000\xa1x")
    return {
        "every row of a list of models invalid": lambda: _map(_fields(rows=_array(bad_row, _fill(size, bad_row)))),
        "valid rows, then one invalid at the end": lambda: _map(_fields(rows=_valid_then_bad(good_row, bad_row, size))),
        "millions of unknown top-level keys": lambda: _map(_fields(), _entries("k", b"\x00", n_unknown), n_unknown),
        "every value of a map invalid": lambda: _map(
            _fields(weights=b"\xdf" + n_values.to_bytes(4, "big") + _entries("w", b"\xa1x", n_values))
        ),
        "every cell of a list of lists invalid": lambda: _map(
            _fields(grid=_array(_array(b"\xa1x", 1000), _fill(size, b"\xa1x" * 1000 + b"\xdd\x00\x00\x00\x00")))
        ),
        "one string of the whole size where an int goes": lambda: _map(_fields(step=_str(b"7" * (size - 4096)))),
        "nested 100,000 lists deep": lambda: _map(_fields(grid=b"\x91" * 100_000 + b"\x00")),
    }


def _valid(cls: type[RoleContext], **fields: Any) -> bytes:
    """The payload of a valid ``cls`` holding ``fields`` (built without validating: millions of values)."""
    from verl_ctx._wire.codec import encode_payload

    return encode_payload(cls.model_construct(**fields))


def _scalar_floods(size: int) -> dict[str, tuple[Callable[[], bytes], str]]:
    """Valid payloads of ~``size`` bytes whose every item builds a Python object: what decoding them costs beyond
    the budget's bound (README: "Beyond that, each value costs what Python builds for it")."""
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    size -= 1024  # room for the map, the field names and the array headers: every payload stays under the limit
    times = size // 6  # a datetime of whole seconds is a 6-byte timestamp (fixext 4)
    return {
        "2-character strings in a list[str]": (lambda: _valid(Scalars, words=["ab"] * (size // 3)), "Scalars"),
        "datetimes in a list[datetime]": (
            lambda: _valid(Scalars, times=[t0 + dt.timedelta(seconds=i) for i in range(times)]),
            "Scalars",
        ),
        "ints past 2^32 in a list[int]": (
            lambda: _valid(Scalars, ids=list(range(2**40, 2**40 + size // 9))),
            "Scalars",
        ),
        "datetimes in an Any field": (
            lambda: _valid(Untyped, free=[t0 + dt.timedelta(seconds=i) for i in range(times)]),
            "Untyped",
        ),
        "3-character strings in an Any field": (lambda: _valid(Untyped, free=["abc"] * (size // 4)), "Untyped"),
        # The kinds that cost the most per payload byte: each a 2-5-byte item that builds an object of 50-110 bytes.
        "1-digit Decimals in a list[Decimal]": (lambda: _valid(Scalars, amounts=[Decimal(1)] * (size // 2)), "Scalars"),
        "1-second timedeltas in a list[timedelta]": (
            lambda: _valid(Scalars, spans=[dt.timedelta(seconds=1)] * (size // 5)),  # "PT1S": a 5-byte fixstr
            "Scalars",
        ),
        "3-byte ints (256-65535) in a list[int]": (lambda: _valid(Scalars, ids=[1000] * (size // 3)), "Scalars"),
        "1-character paths in a list[PurePosixPath]": (
            lambda: _valid(Paths, places=[PurePosixPath("a")] * (size // 2)),
            "Paths",
        ),
    }


def child(path: str, schema: str = "Hostile") -> None:
    """Decode the payload in ``path`` inside an envelope for ``schema``; print what the refusal cost."""
    from verl_ctx import decode, encode
    from verl_ctx.errors import ContextError

    schemas: dict[str, type[RoleContext]] = {"Untyped": Untyped, "Scalars": Scalars, "Hostile": Hostile, "Paths": Paths}
    cls = schemas[schema]
    env = encode(cls())
    payload = Path(path).read_bytes()
    before = peak_mib()
    started = time.perf_counter()
    try:
        decode({**env, "payload": payload}, cls)
        outcome, listed, message = "accepted", 0, ""
    except ContextError as e:
        outcome, listed, message = type(e).__name__, len(getattr(e, "errors", ()) or ()), str(e)
    elapsed = time.perf_counter() - started
    peak = peak_mib()
    more = message.rsplit("... and ", 1)[1].split(" ", 1)[0] if "... and " in message else "0"
    print(
        json.dumps(
            {
                "outcome": outcome,
                "seconds": elapsed,
                "added_mib": peak - before,
                "listed": listed,
                "more": int(more),
                "message": len(message),
                "payload": len(payload),
            }
        )
    )


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    size = 8 * 1024 * 1024 if quick else LIMIT
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rows, worst_s, worst_mib, worst_valid = [], 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(name, make, "Hostile") for name, make in _cases(size).items()]
        cases += [(name, make, "Untyped") for name, make in _floods(size).items()]
        cases += [(f"valid: {name}", make, schema) for name, (make, schema) in _scalar_floods(size).items()]
        for name, make, schema in cases:
            path = Path(tmp) / "payload.msgpack"
            payload = make()
            assert len(payload) <= LIMIT, (name, len(payload))
            path.write_bytes(payload)
            del payload
            out = subprocess.run(
                [sys.executable, "-c", f"from benchmarks.errors import child; child({str(path)!r}, {schema!r})"],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
                env=env,
            )
            got = json.loads(out.stdout.strip().splitlines()[-1])
            added = f"+{got['added_mib']:.0f} MiB"
            if name.startswith("valid: "):  # decoded: what it costs against its size, not a refusal's cost
                times_payload = got["added_mib"] * 2**20 / got["payload"]
                worst_valid = max(worst_valid, times_payload)
                added += f" ({times_payload:.1f}x the payload)"
            else:
                worst_s, worst_mib = max(worst_s, got["seconds"]), max(worst_mib, got["added_mib"])
            counted = f"{got['listed']}" + (f" (+ {got['more']:,} counted)" if got["more"] else "")
            rows.append(
                [
                    name,
                    f"{got['payload'] / 2**20:.1f} MiB",
                    got["outcome"],
                    fmt_seconds(got["seconds"]),
                    added,
                    counted,
                    f"{got['message']:,} chars",
                ]
            )
    headers = ["payload", "size", "outcome", "time to refuse or decode", "peak RSS added", "errors listed", "message"]
    note = (
        f"\n\nWorst case: {fmt_seconds(worst_s)} and +{worst_mib:.0f} MiB (on top of the payload bytes themselves). "
        "Lists, sets, tuples and maps stop at their first bad item above 64 KiB; unknown keys past the first 50 are "
        "counted, not validated; at most 50 errors are listed. A flood of small items in an `Any` field is refused "
        "before decoding, once its items are counted past 4x the payload + 50 MiB: one of one-byte items is matched "
        "in C; one with no repeating unit takes a step of the Python walk per item (#23's target of 1 s would take "
        "a compiled walk). The `valid:` rows are payloads a context really holds, decoded: each value costs what "
        f"Python builds for it, beyond the bound on maps, arrays and slots (worst {worst_valid:.1f}x the payload)."
    )
    figures = {"errors_worst_s": worst_s, "errors_worst_mib": worst_mib, "valid_flood_worst_x": worst_valid}
    return table(headers, rows) + note, figures
