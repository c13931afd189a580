"""Hostile payloads at the size limit (issue #11, item 6): what refusing each costs, in a fresh process.

Each case is a payload just under ``DEFAULT_MAX_BYTES`` (64 MiB) in an envelope that names the right schema, so
it reaches validation: the most work a sender can make a worker do. A child process reads it, decodes it and
reports the time to the ``EnvelopeError``, the peak RSS it added, how many errors it listed and counted, and the
length of the message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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


def child(path: str) -> None:
    """Decode the payload in ``path`` inside an envelope for ``Hostile``; print what the refusal cost."""
    from verl_ctx import decode, encode
    from verl_ctx.errors import ContextError

    env = encode(Hostile())
    payload = Path(path).read_bytes()
    before = peak_mib()
    started = time.perf_counter()
    try:
        decode({**env, "payload": payload}, Hostile)
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
    rows, worst_s, worst_mib = [], 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in _cases(size).items():
            path = Path(tmp) / "payload.msgpack"
            payload = make()
            assert len(payload) <= LIMIT, (name, len(payload))
            path.write_bytes(payload)
            del payload
            out = subprocess.run(
                [sys.executable, "-c", f"from benchmarks.errors import child; child({str(path)!r})"],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
                env=env,
            )
            got = json.loads(out.stdout.strip().splitlines()[-1])
            worst_s, worst_mib = max(worst_s, got["seconds"]), max(worst_mib, got["added_mib"])
            counted = f"{got['listed']}" + (f" (+ {got['more']:,} counted)" if got["more"] else "")
            rows.append(
                [
                    name,
                    f"{got['payload'] / 2**20:.1f} MiB",
                    got["outcome"],
                    fmt_seconds(got["seconds"]),
                    f"+{got['added_mib']:.0f} MiB",
                    counted,
                    f"{got['message']:,} chars",
                ]
            )
    headers = ["hostile payload", "size", "outcome", "time to refuse", "peak RSS added", "errors listed", "message"]
    note = (
        f"\n\nWorst case: {fmt_seconds(worst_s)} and +{worst_mib:.0f} MiB (on top of the payload bytes themselves). "
        "Lists, sets, tuples and maps stop at their first bad item above 64 KiB; unknown keys past the first 50 are "
        "counted, not validated; at most 50 errors are listed."
    )
    return table(headers, rows) + note, {"errors_worst_s": worst_s, "errors_worst_mib": worst_mib}
