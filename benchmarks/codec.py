"""Encode / decode / round trip / bytes for S, M, L against what users would do instead."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle
import msgspec

from verl_ctx import decode, encode

from .models import IMPORTABLE, by_value_models, instances, struct_instances
from .timing import fmt_seconds, median_seconds, table

# calls per repetition and repetitions, per size: enough for a stable median on two busy cores
BUDGET = {"S": (2000, 7), "M": (300, 7), "L": (1, 5)}
QUICK = {"S": (500, 5), "M": (100, 5), "L": (1, 3)}
TARGETS = {"S": 0.25, "M": 0.20, "L": 0.10}


@dataclass
class Method:
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    size: Callable[[Any], int]


def methods(kind: str, obj: Any, struct_obj: Any, by_value_obj: Any) -> list[tuple[Method, Any]]:
    cls = type(obj)
    struct_decoder = msgspec.msgpack.Decoder(type(struct_obj))
    struct_encoder = msgspec.msgpack.Encoder()
    return [
        (
            Method(
                "verl-ctx encode/decode (envelope + fingerprint check)",
                encode,
                lambda env: decode(env, cls),
                lambda env: len(env["payload"]),
            ),
            obj,
        ),
        (Method("cloudpickle of the instance (Ray today)", cloudpickle.dumps, cloudpickle.loads, len), obj),
        (Method("cloudpickle, class in __main__ (by value)", cloudpickle.dumps, cloudpickle.loads, len), by_value_obj),
        (
            Method(
                "model_dump_json / model_validate_json", lambda o: o.model_dump_json(), cls.model_validate_json, len
            ),
            obj,
        ),
        (Method("limit: msgspec.Struct, no pydantic", struct_encoder.encode, struct_decoder.decode, len), struct_obj),
    ]


@dataclass
class Result:
    size: str
    method: str
    encode: float = 0.0
    decode: float = 0.0
    round_trip: float = 0.0
    nbytes: int = 0
    error: str = ""


def measure(quick: bool = False) -> list[Result]:
    budget = QUICK if quick else BUDGET
    ours, structs, by_value = instances(IMPORTABLE), struct_instances(), instances(by_value_models())
    results = []
    for kind in ("S", "M", "L"):
        number, repeat = budget[kind]
        for method, obj in methods(kind, ours[kind], structs[kind], by_value[kind]):
            try:
                blob = method.encode(obj)
                method.decode(blob)
            except Exception as e:  # a method that cannot carry this context is a result, not a crash
                results.append(Result(kind, method.name, error=f"{type(e).__name__}: {str(e)[:70]}"))
                continue
            results.append(
                Result(
                    kind,
                    method.name,
                    encode=median_seconds(lambda m=method, o=obj: m.encode(o), number=number, repeat=repeat),
                    decode=median_seconds(lambda m=method, b=blob: m.decode(b), number=number, repeat=repeat),
                    round_trip=median_seconds(
                        lambda m=method, o=obj: m.decode(m.encode(o)), number=number, repeat=repeat
                    ),
                    nbytes=method.size(blob),
                )
            )
    return results


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    """The markdown table, and verl-ctx's round-trip ratio to cloudpickle per size."""
    results = measure(quick)
    baseline = {r.size: r.round_trip for r in results if r.method.startswith("cloudpickle of the instance")}
    rows, ratios = [], {}
    for r in results:
        if r.error:
            rows.append([r.size, r.method, "fails", "", "", "", r.error])
            continue
        ratio = r.round_trip / baseline[r.size]
        shown = f"{ratio:.3f}"
        if r.method.startswith("verl-ctx"):
            ratios[r.size] = ratio
            shown = f"**{ratio:.3f}** (target ≤ {TARGETS[r.size]})"
        rows.append(
            [
                r.size,
                r.method,
                fmt_seconds(r.encode),
                fmt_seconds(r.decode),
                fmt_seconds(r.round_trip),
                f"{r.nbytes:,}",
                shown,
            ]
        )
    headers = ["size", "method", "encode", "decode", "round trip", "bytes", "round trip / cloudpickle"]
    return table(headers, rows) + "\n\n" + _deferred_collection(quick), ratios


def _deferred_collection(quick: bool) -> str:
    """verl-ctx pauses the collector while it builds a large context; show what the collection costs after."""
    obj = instances(IMPORTABLE)["L"]
    env, blob = encode(obj), cloudpickle.dumps(obj)
    cls = type(obj)

    def then_collect(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            keep = fn()
            gc.collect()  # timed: the collections this result will cost, paid now
            del keep

        return run

    repeat = 3 if quick else 5
    ours = median_seconds(then_collect(lambda: decode(env, cls)), number=1, repeat=repeat)
    theirs = median_seconds(then_collect(lambda: cloudpickle.loads(blob)), number=1, repeat=repeat)
    return (
        f"L decode followed by a full collection, both timed: verl-ctx {fmt_seconds(ours)}, cloudpickle "
        f"{fmt_seconds(theirs)} ({ours / theirs:.3f}). verl-ctx pauses the garbage collector while it builds a large "
        "context; this row charges it the collection it deferred."
    )
