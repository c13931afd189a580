"""Encode / decode / round trip / bytes for each shape against what users would do instead, interleaved.

The shapes (``models.py``): S, M, M-typed (UUID/datetime/enum-heavy), M-checked (the same with validators), L and
L-narrow (100,000 rows of 3 scalars).
Besides the main table: verl-ctx against cloudpickle with the garbage collector as each library treats it and
paused for both, and what the value-level skew receipt costs a worker whose schema's fingerprint differs.
"""

from __future__ import annotations

import functools
import gc
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle
import msgspec

from verl_ctx import decode, encode
from verl_ctx._model.fingerprint import schema_info
from verl_ctx._wire.codec import decode_payload
from verl_ctx._worker.skew import check_skew
from verl_ctx.errors import SchemaSkewWarning

from .models import (
    IMPORTABLE,
    SHAPES,
    by_value_models,
    instances,
    pydantic_path_models,
    skewed_models,
    struct_instances,
)
from .timing import Samples, fmt_ratio, fmt_seconds, interleaved, paired_ratio, spread, table

TITLE = "Encode / decode, S / M / L contexts"
# calls per sample and rounds, per size: enough for a stable median on two busy cores
BUDGET = {"S": (2000, 9), "M": (300, 9), "M-typed": (300, 9), "M-checked": (300, 9), "L": (1, 7), "L-narrow": (1, 7)}
QUICK = {"S": (500, 5), "M": (100, 5), "M-typed": (100, 5), "M-checked": (100, 5), "L": (1, 3), "L-narrow": (1, 3)}
# the skew receipt's rows: a skewed decode validates through pydantic, 5-10x a same-schema decode
SKEW_BUDGET = {"S": (500, 7), "M": (60, 7), "M-typed": (60, 7), "M-checked": (60, 7), "L": (1, 5), "L-narrow": (1, 5)}
SKEW_QUICK = {"S": (100, 3), "M": (20, 3), "M-typed": (20, 3), "M-checked": (20, 3), "L": (1, 3), "L-narrow": (1, 3)}
SIZES = tuple(SHAPES)
TARGETS = {"S": 0.25, "M": 0.15, "M-typed": 0.15, "M-checked": 0.15, "L": 0.09, "L-narrow": 0.09}
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
    for kind in SIZES:
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
    for size in SIZES:
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
        + "\n\n"
        + _collector(quick, figures)
        + "\n\n"
        + _skew_receipt(quick, figures)
    )
    return text, figures


def _pickle_round_trip(obj: Any) -> Any:
    return cloudpickle.loads(cloudpickle.dumps(obj))


def _collector(quick: bool, figures: dict[str, float]) -> str:
    """Round trips against cloudpickle with the collector as each library treats it, and paused for both.

    verl-ctx pauses the collector while it builds a context of over 256 KiB (L, L-narrow); cloudpickle leaves
    it on. "Paused for both" runs each sample of both with the collector disabled, so neither pays a collection.
    """
    budget = QUICK if quick else BUDGET
    ours = instances(IMPORTABLE)
    rows = []
    for size in SIZES:
        number, rounds = budget[size]
        obj = ours[size]
        cls = type(obj)
        ours_rt = functools.partial(lambda o, c: decode(encode(o), c), obj, cls)
        theirs_rt = functools.partial(_pickle_round_trip, obj)
        got = interleaved(
            {"ours": ours_rt, "theirs": theirs_rt, "ours paused": ours_rt, "theirs paused": theirs_rt},
            number=number,
            rounds=rounds,
            paused={"ours paused", "theirs paused"},
        )
        each = paired_ratio(got["ours"], got["theirs"])
        both = paired_ratio(got["ours paused"], got["theirs paused"])
        figures[f"each_{size}"], figures[f"paused_{size}"] = each[0], both[0]
        rows.append(
            [
                size,
                fmt_seconds(got["ours"].median),
                fmt_seconds(got["theirs"].median),
                fmt_ratio(each),
                fmt_seconds(got["ours paused"].median),
                fmt_seconds(got["theirs paused"].median),
                fmt_ratio(both),
                f"≤ {TARGETS[size]}",
            ]
        )
    headers = [
        "size",
        "verl-ctx",
        "cloudpickle",
        "ratio, collector as each library does it (IQR)",
        "verl-ctx, paused",
        "cloudpickle, paused",
        "ratio, collector paused for both (IQR)",
        "target",
    ]
    return (
        "Round trip against cloudpickle with the garbage collector treated alike. verl-ctx pauses the collector "
        "while it builds a context of over 256 KiB (L, L-narrow here) and cloudpickle does not: the first ratio "
        "is that, as users get it; the second runs every sample of both with the collector disabled.\n\n"
        + table(headers, rows)
    )


def _skew_receipt(quick: bool, figures: dict[str, float]) -> str:
    """What decoding costs when the worker's schema has another fingerprint (one more defaulted field).

    Such a decode validates the payload through pydantic (not the compiled path), then runs the value-level
    receipt (``check_skew``: the instance encoded again, parsed, and compared value by value, types included,
    with what the driver sent). Timed: the same-schema decode, the skewed decode, and the receipt alone.
    """
    budget = SKEW_QUICK if quick else SKEW_BUDGET
    ours, skewed = instances(IMPORTABLE), skewed_models()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaSkewWarning)  # one per decode; a worker logs it once
        for size in SIZES:
            number, rounds = budget[size]
            obj = ours[size]
            cls, worker = type(obj), skewed[SHAPES[size]]
            env = encode(obj)
            instance, data, info = decode(env, worker), decode_payload(env["payload"]), schema_info(worker)
            got = interleaved(
                {
                    "same": functools.partial(decode, env, cls),
                    "skewed": functools.partial(decode, env, worker),
                    "receipt": functools.partial(check_skew, env, info, worker, instance, data),
                },
                number=number,
                rounds=rounds,
            )
            skew = paired_ratio(got["skewed"], got["same"])
            receipt = paired_ratio(got["receipt"], got["same"])
            share = paired_ratio(got["receipt"], got["skewed"])
            figures[f"skew_{size}"], figures[f"receipt_{size}"] = skew[0], receipt[0]
            rows.append(
                [
                    size,
                    fmt_seconds(got["same"].median),
                    fmt_seconds(got["skewed"].median),
                    fmt_seconds(got["receipt"].median),
                    fmt_ratio(skew),
                    fmt_ratio(receipt),
                    fmt_ratio(share),
                ]
            )
    headers = [
        "size",
        "decode, same schema",
        "decode, worker schema + 1 defaulted field",
        "the receipt alone",
        "skewed / same (IQR)",
        "receipt / same-schema decode (IQR)",
        "receipt / skewed decode (IQR)",
    ]
    return (
        "The value-level skew receipt: decoding with a worker schema whose fingerprint differs (the same model "
        "with one more defaulted field) validates through pydantic, then re-encodes the instance and compares "
        "every value, types included, with the driver's (`check_skew`). It runs only when the fingerprints "
        "differ; a same-schema decode never pays it.\n\n" + table(headers, rows)
    )


def _deferred_collection(quick: bool) -> str:
    """verl-ctx pauses the collector while it builds a large context; show what the collection costs after."""
    built = instances(IMPORTABLE)
    lines = []
    for size in ("L", "L-narrow"):
        obj = built[size]
        env, blob = encode(obj), cloudpickle.dumps(obj)
        cls = type(obj)

        def then_collect(fn: Callable[[], Any]) -> Callable[[], None]:
            def run() -> None:
                keep = fn()
                gc.collect()  # timed: the collections this result will cost, paid now
                del keep

            return run

        got = interleaved(
            {
                "ours": then_collect(functools.partial(decode, env, cls)),
                "theirs": then_collect(functools.partial(cloudpickle.loads, blob)),
            },
            number=1,
            rounds=3 if quick else 5,
        )
        ours, theirs = got["ours"].median, got["theirs"].median
        lines.append(
            f"{size} decode followed by a full collection, both timed: verl-ctx {fmt_seconds(ours)}, cloudpickle "
            f"{fmt_seconds(theirs)} ({fmt_ratio(paired_ratio(got['ours'], got['theirs']))})."
        )
    return (
        " ".join(lines) + " verl-ctx pauses the garbage collector while it builds a large context; these rows "
        "charge it the collection it deferred."
    )
