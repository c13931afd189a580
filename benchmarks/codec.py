"""Encode / decode / round trip / bytes for S, M, L against what users would do instead, interleaved."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle
import msgspec

from verl_ctx import decode, encode

from .models import IMPORTABLE, by_value_models, instances, pydantic_path_models, struct_instances
from .timing import Samples, fmt_ratio, fmt_seconds, interleaved, paired_ratio, spread, table

TITLE = "Encode / decode, S / M / L contexts"
# calls per sample and rounds, per size: enough for a stable median on two busy cores
BUDGET = {"S": (2000, 9), "M": (300, 9), "L": (1, 7)}
QUICK = {"S": (500, 5), "M": (100, 5), "L": (1, 3)}
TARGETS = {"S": 0.25, "M": 0.15, "L": 0.09}
WORKER_TARGET = {"S": 0.30}
WORKER_OVER_BARE = 1.3
OURS = "verl-ctx (envelope)"
WORKER = "verl-ctx, worker path (extra_context mapping + role)"
PYDANTIC_PATH = "verl-ctx, compiled=False (pydantic path)"
BASELINE = "cloudpickle of the instance (Ray today)"
BY_VALUE = "cloudpickle, class in __main__ (by value)"
JSON = "model_dump_json / model_validate_json"
LIMIT = "limit: msgspec.Struct, no pydantic"


@dataclass
class Method:
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    size: Callable[[Any], int]
    obj: Any

    def round_trip(self) -> Any:
        return self.decode(self.encode(self.obj))


def _envelope_methods(name: str, obj: Any) -> list[Method]:
    cls = type(obj)
    role = cls.__verl_ctx_roles__[0]

    def to_mapping(o: Any) -> dict[str, Any]:
        return {"verl_ctx": {role: encode(o)}}  # what attach() leaves in a worker's extra_context

    methods = [Method(name, encode, lambda env: decode(env, cls), lambda env: len(env["payload"]), obj)]
    if name == OURS:
        methods.append(
            Method(
                WORKER,
                to_mapping,
                lambda m: decode(m, cls, role=role),
                lambda m: len(m["verl_ctx"][role]["payload"]),
                obj,
            )
        )
    return methods


def methods(ours: Any, plain: Any, struct_obj: Any, by_value_obj: Any) -> list[Method]:
    cls = type(ours)
    struct_decoder = msgspec.msgpack.Decoder(type(struct_obj))
    struct_encoder = msgspec.msgpack.Encoder()
    return [
        *_envelope_methods(OURS, ours),
        *_envelope_methods(PYDANTIC_PATH, plain),
        Method(BASELINE, cloudpickle.dumps, cloudpickle.loads, len, ours),
        Method(BY_VALUE, cloudpickle.dumps, cloudpickle.loads, len, by_value_obj),
        Method(JSON, lambda o: o.model_dump_json(), cls.model_validate_json, len, ours),
        Method(LIMIT, struct_encoder.encode, struct_decoder.decode, len, struct_obj),
    ]


@dataclass
class Result:
    size: str
    method: str
    encode: Samples
    decode: Samples
    round_trip: Samples
    nbytes: int


def measure(quick: bool = False) -> tuple[list[Result], dict[str, str]]:
    budget = QUICK if quick else BUDGET
    ours, plain = instances(IMPORTABLE), instances(pydantic_path_models())
    structs, by_value = struct_instances(), instances(by_value_models())
    results: list[Result] = []
    failures: dict[str, str] = {}
    for kind in ("S", "M", "L"):
        number, rounds = budget[kind]
        usable: list[tuple[Method, Any]] = []
        for method in methods(ours[kind], plain[kind], structs[kind], by_value[kind]):
            try:
                blob = method.encode(method.obj)
                method.decode(blob)
            except Exception as e:  # noqa: BLE001 - a method that cannot carry this context is a result
                failures[f"{kind}|{method.name}"] = f"{type(e).__name__}: {str(e)[:70]}"
                continue
            usable.append((method, blob))
        enc = interleaved({m.name: functools.partial(m.encode, m.obj) for m, _ in usable}, number=number, rounds=rounds)
        dec = interleaved({m.name: functools.partial(m.decode, b) for m, b in usable}, number=number, rounds=rounds)
        rt = interleaved({m.name: m.round_trip for m, _ in usable}, number=number, rounds=rounds)
        for m, blob in usable:
            results.append(Result(kind, m.name, enc[m.name], dec[m.name], rt[m.name], m.size(blob)))
    return results, failures


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    """The markdown table, and verl-ctx's round-trip ratios to cloudpickle per size."""
    results, failures = measure(quick)
    by = {(r.size, r.method): r for r in results}
    rows, figures = [], {}
    notes = []
    for size in ("S", "M", "L"):
        base = by[(size, BASELINE)].round_trip
        for r in [r for r in results if r.size == size]:
            ratio = paired_ratio(r.round_trip, base)
            shown = fmt_ratio(ratio)
            if r.method == OURS:
                figures[size] = ratio[0]
                shown = f"**{shown}** (target ≤ {TARGETS[size]})"
            elif r.method == WORKER:
                figures[f"worker_{size}"] = ratio[0]
                if size in WORKER_TARGET:
                    shown = f"**{shown}** (target ≤ {WORKER_TARGET[size]})"
            rows.append(
                [
                    size,
                    r.method,
                    fmt_seconds(r.encode.median),
                    fmt_seconds(r.decode.median),
                    f"{fmt_seconds(r.round_trip.median)} {spread(r.round_trip)}",
                    f"{r.nbytes:,}",
                    shown,
                ]
            )
        for key, why in failures.items():
            if key.startswith(f"{size}|"):
                rows.append([size, key.split("|", 1)[1], "fails", "", "", "", why])
        worker = paired_ratio(by[(size, WORKER)].decode, by[(size, OURS)].decode)
        figures[f"worker_over_bare_{size}"] = worker[0]
        faster = paired_ratio(by[(size, OURS)].round_trip, by[(size, PYDANTIC_PATH)].round_trip)
        notes.append(
            f"- {size}: worker-path decode / bare-envelope decode {fmt_ratio(worker)} (target ≤ {WORKER_OVER_BARE}); "
            f"compiled round trip / pydantic path {fmt_ratio(faster)}."
        )
    headers = ["size", "method", "encode", "decode", "round trip (IQR)", "bytes", "round trip / cloudpickle (IQR)"]
    text = (
        table(headers, rows)
        + "\n\nRatios are medians of per-round ratios (each round times every method back to back), with their "
        "interquartile range; times are CPU time per call.\n\n"
        + "\n".join(notes)
        + "\n\n"
        + _deferred_collection(quick)
    )
    return text, figures


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

    got = interleaved(
        {"ours": then_collect(lambda: decode(env, cls)), "theirs": then_collect(lambda: cloudpickle.loads(blob))},
        number=1,
        rounds=3 if quick else 5,
    )
    ours, theirs = got["ours"].median, got["theirs"].median
    return (
        f"L decode followed by a full collection, both timed: verl-ctx {fmt_seconds(ours)}, cloudpickle "
        f"{fmt_seconds(theirs)} ({fmt_ratio(paired_ratio(got['ours'], got['theirs']))}). verl-ctx pauses the "
        "garbage collector while it builds a large context; this row charges it the collection it deferred."
    )
