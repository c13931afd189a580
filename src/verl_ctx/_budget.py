"""What decoding a payload will cost, bounded before it is decoded: containers are the amplifier.

MessagePack holds an empty map or array in one byte; Python builds it as a 56-64-byte object plus its slot in the
parent, so 64 MiB of empty maps decode to ~4.6 GB (and pydantic then validates each). Scalars amplify far less
(a float is 9 bytes on the wire and ~32 in memory; a string costs its length plus ~50 bytes, and its bytes
are on the wire too). So before a payload is parsed its containers are counted, and a payload whose containers
alone would cost more than ``4 * len(payload) + 50 MB`` is refused.

The count is made in two steps, both bounded: every byte that could be a container's header is counted in C
(``bytes.translate`` then ``count``: ~0.2 s at 64 MiB); only when that upper bound is over budget (the payload is
made of containers, or holds binary data whose bytes look like headers) is the payload walked item by item,
skipping string and binary bodies whole, and the walk stops as soon as the budget is spent.
"""

from __future__ import annotations

import re

__all__ = ["CONTAINER_COST", "PayloadCostError", "budget_for", "check_decode_cost", "container_count"]

#: Bytes of Python memory one decoded container costs at least (an empty dict is 64, a list 56, plus its slot).
CONTAINER_COST = 72
_SLACK = 50 * 1024 * 1024

# 1 for each byte value that is a container's header: fixmap, fixarray, array16/32, map16/32.
_HEADER = bytes(1 if 0x80 <= b <= 0x9F or 0xDC <= b <= 0xDF else 0 for b in range(256))

# For the walk: per first byte, (kind, bytes of the header after the first, fixed body bytes).
# kind 0: scalar with a fixed size; 1: container with an inline count; 2: container with a counted header;
# 3: str/bin/ext with a length field of `extra` bytes (ext adds one type byte).
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED.update({0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17})
# One-byte items: positive fixints, fixmap and fixarray headers, the empty fixstr, nil, false, true, negative fixints.
# A run of them is skipped and counted in C (one character class: the regex engine's fast path), a chunk at a time
# so the count still stops soon after the budget is spent.
_ONE_BYTE_RUN = re.compile(rb"[\x00-\xa0\xc0\xc2\xc3\xe0-\xff]+")
_CHUNK = 1 << 20
_LENGTH = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC7: 1, 0xC8: 2, 0xC9: 4}


class PayloadCostError(ValueError):
    """A payload whose decoding would cost far more memory than its size (raised before it is decoded)."""


def budget_for(size: int) -> int:
    """The memory a payload of ``size`` bytes may cost to decode: 4 times its size plus 50 MB."""
    return 4 * size + _SLACK


def check_decode_cost(payload: bytes | memoryview) -> None:
    """Refuse, before decoding, a payload whose containers alone would cost more than ``budget_for`` its size."""
    size = len(payload)
    budget = budget_for(size)
    if size * CONTAINER_COST <= budget:  # up to ~0.7 MB: even all containers fits
        return
    data = bytes(payload) if isinstance(payload, memoryview) else payload
    if data.translate(_HEADER).count(1) * CONTAINER_COST <= budget:
        return
    limit = budget // CONTAINER_COST
    count = container_count(data, stop_after=limit)
    if count > limit:
        raise PayloadCostError(
            f"the payload ({size:,} bytes) holds more than {limit:,} maps and arrays: decoding it would take more "
            f"than {budget // 2**20:,} MiB (4x its size + 50 MiB). Refused before decoding; a real context this "
            "dense is a table of empty rows: send it as a count, or as fewer, larger values"
        )


def container_count(data: bytes, *, stop_after: int) -> int:
    """The maps and arrays in ``data`` (a MessagePack stream), counted up to past ``stop_after``.

    A run of one-byte items (fixints, nil, booleans, empty strings, and the headers of maps and arrays of up to 15
    items, whose items follow as items of their own) is skipped and counted in C. Malformed input ends the count
    where it stops making sense (the decoder reports it afterwards).
    """
    count, i, n = 0, 0, len(data)
    fixed, length, run = _FIXED, _LENGTH, _ONE_BYTE_RUN
    while i < n:
        b = data[i]
        if b <= 0xA0 or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):
            end = run.match(data, i, min(n, i + _CHUNK)).end()  # type: ignore[union-attr]  # data[i] matches
            count += data[i:end].translate(_HEADER).count(1)
            if count > stop_after:
                return count
            i = end
            continue
        i += 1
        if b <= 0xBF:  # fixstr
            i += b & 0x1F
            continue
        if 0xDC <= b <= 0xDF:  # array16/32, map16/32: items follow inline
            count += 1
            if count > stop_after:
                return count
            i += 2 if b in (0xDC, 0xDE) else 4
            continue
        skip = fixed.get(b)
        if skip is not None:
            i += skip
            continue
        width = length.get(b)
        if width is None:  # 0xC1, never used
            return count
        body = int.from_bytes(data[i : i + width], "big")
        i += width + body + (1 if b in (0xC7, 0xC8, 0xC9) else 0)
    return count
