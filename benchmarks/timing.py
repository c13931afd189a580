"""Medians of repeated timings, the same way for every method compared.

Before each timed repetition the garbage collector runs (untimed), so one method's garbage is never charged
to the next; inside a repetition each method pays for the collections it triggers and for freeing its
results, as real code would.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any


def median_seconds(fn: Callable[[], Any], *, number: int, repeat: int) -> float:
    """Median over ``repeat`` repetitions of the mean time of ``number`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - started) / number)
    return statistics.median(times)


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.1f} µs"


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
