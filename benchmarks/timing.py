"""Interleaved timing: every candidate is measured once per round (A B C, then C B A, ...), medians with spread.

Measuring one method after another lets the machine's state drift between them (another process starting, the
heap growing), which is what made ratios swing between runs. Here each round times every candidate back to
back, alternating the order, and a ratio is taken *within* each round (paired) before the median: drift that
hits a whole round cancels out.

Times are CPU time of this process (``time.process_time``): on a shared machine, time spent descheduled is not
charged to whichever candidate happened to be running. Before each timed sample the garbage collector runs
(untimed), so one candidate's garbage is never charged to the next; inside a sample each candidate pays for the
collections it triggers and for freeing its results, as real code would; or, for the candidates named in
``paused``, runs the whole sample with the collector disabled (to treat two libraries' collections alike).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Samples:
    """Per-round times of one candidate (seconds per call)."""

    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def interleaved(
    candidates: dict[str, Callable[[], Any]], *, number: int, rounds: int, paused: Collection[str] = ()
) -> dict[str, Samples]:
    """``rounds`` samples of each candidate (mean of ``number`` calls each), taken round-robin.

    The candidates named in ``paused`` run each sample with the garbage collector disabled (``gc.disable()``
    before the clock starts, re-enabled after it stops): no collection is charged to them, whatever the code
    measured does with the collector itself.
    """
    out = {name: Samples() for name in candidates}
    order = list(candidates.items())
    for r in range(rounds):
        for name, fn in order if r % 2 == 0 else reversed(order):
            gc.collect()
            enabled = gc.isenabled()
            if name in paused:
                gc.disable()
            try:
                started = time.process_time()
                for _ in range(number):
                    fn()
                out[name].times.append((time.process_time() - started) / number)
            finally:
                if enabled:
                    gc.enable()
    return out


def paired_ratio(a: Samples, b: Samples) -> tuple[float, float, float]:
    """Median of the per-round ratios a/b, and their quartiles (the spread)."""
    ratios = sorted(x / y for x, y in zip(a.times, b.times, strict=True))
    return statistics.median(ratios), _quantile(ratios, 0.25), _quantile(ratios, 0.75)


def spread(samples: Samples) -> str:
    """The interquartile range as a percentage of the median: ``±3%``."""
    times = sorted(samples.times)
    half = (_quantile(times, 0.75) - _quantile(times, 0.25)) / 2
    return f"±{100 * half / statistics.median(times):.0f}%"


def fmt_ratio(ratio: tuple[float, float, float]) -> str:
    median, low, high = ratio
    return f"{median:.3f} ({low:.3f}-{high:.3f})"


def _quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    pos = q * (len(values) - 1)
    low = int(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)


def median_seconds(fn: Callable[[], Any], *, number: int, repeat: int) -> float:
    """Median over ``repeat`` repetitions of the mean CPU time of ``number`` calls of ``fn`` (one candidate)."""
    return interleaved({"only": fn}, number=number, rounds=repeat)["only"].median


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.2f} µs" if s < 1e-5 else f"{s * 1e6:.1f} µs"


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
