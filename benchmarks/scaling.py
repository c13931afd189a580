"""Encode and decode time as the table grows from 10^3 to 10^6 rows: is it linear?"""

from __future__ import annotations

import functools
from typing import Any

import cloudpickle

from verl_ctx import decode, encode

from .models import IMPORTABLE, large_rows
from .timing import fmt_seconds, interleaved, table

TITLE = "Scaling with table size"


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    sizes = [10**3, 10**4, 10**5] + ([] if quick else [10**6])
    large = IMPORTABLE["Large"]
    rows: list[list[str]] = []
    per_row: dict[int, float] = {}
    cp_per_row: dict[int, float] = {}
    for n in sizes:
        ctx = large.model_validate({"rows": large_rows(n)})
        env = encode(ctx)
        number = max(1, 10**4 // n)
        rounds = 3 if n >= 10**6 else 5
        got = interleaved(
            {
                "encode": functools.partial(encode, ctx),
                "decode": functools.partial(decode, env, large),
                "cloudpickle": functools.partial(_pickle_round_trip, ctx),
            },
            number=number,
            rounds=rounds,
        )
        enc, dec, pickled = (got[k].median for k in ("encode", "decode", "cloudpickle"))
        per_row[n] = (enc + dec) / n
        cp_per_row[n] = pickled / n
        rows.append(
            [
                f"{n:,}",
                fmt_seconds(enc),
                fmt_seconds(dec),
                f"{(enc + dec) / n * 1e9:.0f} ns",
                f"{pickled / n * 1e9:.0f} ns",
                f"{len(env['payload']):,}",
            ]
        )
        del ctx, env
    first, last = per_row[sizes[0]], per_row[sizes[-1]]
    cp_growth = cp_per_row[sizes[-1]] / cp_per_row[sizes[0]]
    note = (
        f"Per-row cost at {sizes[-1]:,} rows is {last / first:.2f}x that at {sizes[0]:,} (1.00 = linear); "
        f"cloudpickle's grows {cp_growth:.2f}x over the same range. The work per row is constant; the growth is "
        "the allocator and caches (a larger heap, colder memory), which every method here pays."
    )
    headers = ["rows", "encode", "decode", "verl-ctx per row", "cloudpickle per row (round trip)", "payload bytes"]
    return table(headers, rows) + "\n\n" + note, {"per_row_growth": last / first, "cloudpickle_growth": cp_growth}


def _pickle_round_trip(obj: Any) -> Any:
    return cloudpickle.loads(cloudpickle.dumps(obj))
