"""What decoding a payload will cost, bounded before it is decoded: the number of items is the amplifier.

MessagePack holds an empty map, an empty array, a nil, a zero, a boolean or an empty string in one byte. Python
gives each item a slot of 8 bytes in the container msgspec builds, and another in the copy pydantic validates it
into (``list[Any]``, a model's field dict), and a map or array is a 56-64-byte object besides. So 64 MiB of nils in
an ``Any`` field decode to 512 MiB of list slots, and 64 MiB of empty maps to ~4.6 GB. Before a payload is parsed
its items are counted and charged ``ITEM_COST`` each (``CONTAINER_COST`` more for a map or array), and a payload
whose charge exceeds ``4 * len(payload) + 50 MB`` is refused, whatever the schema (the walk reads the bytes, not
the schema, so an ``Any`` field is bounded as a typed one is).

Scalars that build an object (a float, a large int, a string of two characters or more, a Decimal) are charged their
slot only on the untyped path, and nothing on the typed one: a payload valid for the schema, whoever built it, costs
what its values cost in Python, ~10x its wire size for a table of ordinary rows (``benchmarks/RESULTS.md``, 10^6 rows)
and ~65x for 1-digit Decimals (``benchmarks/errors.py``). Charging what each value builds against 4x would refuse
ordinary tables over ~7 MB, and charging it at all would walk every item of every large payload (0.18 s for 100,000
rows); ``max_bytes`` bounds it instead. On the untyped path a flood of such scalars is still refused by its slots
before it gets far (22 M two-character strings in 64 MiB are 352 MB of slots; 64 MiB of one-character paths too).

How the items are counted, and why so (measured at 64 MiB on a 2-core machine):

* msgspec cannot count without building every item (0.9 s and 512 MiB for 64 MiB of nils, the cost being bounded),
  and decoding into ``msgspec.Raw`` or a typed skeleton builds an object per item too;
* a hand-written walk in Python costs ~0.3 us per item: 20 s for 64 M one-byte items;
* a tokenizing regex (``re.subn`` over every msgpack item form) costs 30-450 ns per item (1.7-16 s);
* one character class (``[...]+``, the regex engine's fast path) matches a run of one-byte items at ~2 ns a byte,
  and ``bytes.translate`` + ``count`` counts the maps and arrays in it in C.

So the count is made in two steps, both bounded: first an upper bound from the byte values alone (``translate``
then ``count``, ~0.2 s at 64 MiB, and only above ~0.7 MB: below, even a payload of empty maps fits); only when that
bound is over the budget is the payload walked item by item: a run of one-byte items is matched and counted in C a
chunk at a time, string and binary bodies are skipped whole, a map or array that declares more items than the
budget has left is refused at its header, and the walk stops as soon as the budget is spent. A flood repeats a
unit (an array of fifteen 2-byte ints, a row): after every kilobyte walked the walk looks for the next copy of the
bytes it stands on, walks one copy, and charges each further copy (compared in C) what the first cost. A flood of
one-byte items, or of repeated multi-byte ones, is refused in 0.2-0.3 s; one of multi-byte items in no repeating
order is a step of the Python loop per item, its time bounded by the budget (about 20 M steps at 64 MiB: 1.4-2.2 s
for numbers, short strings, 1-byte-length strings and extensions, or short runs between them; 3.0 s for empty
str16s, the slowest form; ``benchmarks/errors.py``). Refusing in under a second would take a compiled walk.
"""

from __future__ import annotations

import re

__all__ = [
    "CONTAINER_COST",
    "ITEM_COST",
    "MAP_ENTRY_COST",
    "PayloadCostError",
    "budget_for",
    "check_decode_cost",
    "decode_charge",
]

#: Bytes each decoded item costs at least: its slot in the container msgspec builds, and in the validated copy.
ITEM_COST = 16
#: Bytes a map or array costs besides its slot (an empty list is 56 bytes, an empty dict 64).
CONTAINER_COST = 56
#: Bytes each entry of a map16/32 costs besides its key's and value's slots: a dict keeps a hash and an index for
#: each, and leaves a third of its table empty. Not charged to fixmaps (up to 15 entries: the rows of a table, whose
#: cost is dominated by the map itself).
MAP_ENTRY_COST = 32
_SLACK = 50 * 1024 * 1024

# Per byte value, for the upper bound and the runs: 2 for the header of a map or array (fixmap, fixarray, array16/32,
# map16/32), 1 for any other byte that could start or be a one-byte item, 0 otherwise.
_ONE_BYTE = frozenset([*range(0x00, 0xA1), 0xC0, 0xC2, 0xC3, *range(0xE0, 0x100)])
_CLASS = bytes(2 if 0x80 <= b <= 0x9F or 0xDC <= b <= 0xDF else 1 if b in _ONE_BYTE else 0 for b in range(256))
_HEADER = bytes(1 if c == 2 else 0 for c in _CLASS)

# For the walk, per first byte (``_STEP``): the bytes of an item that starts with it when that is fixed (1 for a
# one-byte item, 1 + its length for a fixstr, 1 + the value's bytes for a number or fixext), else how its size is
# read (the loop tests these codes as literals: a global's lookup per item would cost more than the test).
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED.update({0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17})


def _step(b: int) -> int:
    if b in _ONE_BYTE:
        return 1
    if 0xA1 <= b <= 0xBF:  # fixstr
        return 1 + (b & 0x1F)
    if b in _FIXED:
        return 1 + _FIXED[b]
    if b in (0xC4, 0xC7, 0xD9):  # bin8, ext8, str8: a 1-byte length
        return 0
    if b in (0xC5, 0xC8, 0xDA):  # bin16, ext16, str16: a 2-byte length
        return -3
    if b in (0xC6, 0xC9, 0xDB):  # bin32, ext32, str32: a 4-byte length
        return -4
    if 0xDC <= b <= 0xDF:  # array16/32, map16/32: a declared count
        return -1
    return -2  # 0xC1, never used


_STEP = tuple(map(_step, range(256)))
# A sized item's bytes before its body: its first byte, its length, and for an ext its type byte.
_HEAD = {0xC4: 2, 0xD9: 2, 0xC7: 3, 0xC5: 3, 0xDA: 3, 0xC8: 4, 0xC6: 5, 0xDB: 5, 0xC9: 6}
# A run of one-byte items (positive fixints, fixmap and fixarray headers, the empty fixstr, nil, false, true,
# negative fixints) is matched in C (one character class: the regex engine's fast path), a chunk at a time so the
# walk still stops soon after the budget is spent.
_ONE_BYTE_RUN = re.compile(rb"[\x00-\xa0\xc0\xc2\xc3\xe0-\xff]+")
# A run is matched only after this many of its items were walked: matching costs ~0.4 us, as much as walking ~6
# items, so a flood of short runs (two fixints, then a 2-byte int, over and over) is walked at the loop's speed.
_RUN_MIN = 16
_CHUNK = 1 << 20
# Repeating units (``_repeats``): looked for after every this many bytes walked, found by the next occurrence of
# this many bytes within this many bytes.
_PROBE_SPAN = 1024
_PROBE = 16
_MAX_UNIT = 4096


class PayloadCostError(ValueError):
    """A payload whose decoding would cost far more memory than its size (raised before it is decoded).

    The decoder turns it into an ``EnvelopeError`` ("payload refused"); its message names sizes, never values.
    """


def budget_for(size: int) -> int:
    """The memory a payload of ``size`` bytes may cost to decode: 4 times its size plus 50 MB."""
    return 4 * size + _SLACK


def check_decode_cost(payload: bytes | memoryview, *, typed: bool = False) -> None:
    """Refuse, before decoding, a payload whose items would cost more than ``budget_for`` its size.

    ``typed``: the payload is parsed by a typed decoder (the compiled path: every item must be of the type the schema
    declares there, and the schema has no ``Any``), so an item's slot is the cost of the data the schema asks for (a
    ``list[int]`` of ten million zeros is a real context) and only maps and arrays, whose objects are the amplifier
    a typed schema still lets through (``list[list[int]]`` of empty lists), are charged. The byte-class bound then
    settles ordinary tables at once, where charging items would walk them (0.18 s for 100,000 rows).
    """
    size = len(payload)
    budget = budget_for(size)
    item = 0 if typed else ITEM_COST
    if size * (item + CONTAINER_COST) <= budget:  # up to ~0.7 MB: even all empty maps fits
        return
    data = bytes(payload) if isinstance(payload, memoryview) else payload
    if typed:  # only the maps and arrays are charged: one class counted
        headers, one_byte = data.translate(_HEADER).count(1), 0
    else:
        classes = data.translate(_CLASS)
        headers, one_byte = classes.count(2), classes.count(1)
        del classes
    # Every item starts with its own byte, and an item that is not one byte long takes two at least.
    bound = (headers + one_byte + (size - headers - one_byte) // 2) * item + headers * CONTAINER_COST
    if bound <= budget:
        return
    charge = decode_charge(data, stop_after=budget, item_cost=item)
    if charge > budget:
        raise PayloadCostError(
            f"the payload ({size:,} bytes) holds so many items (each a slot in a list or map, each map or array an "
            f"object besides) that decoding it would take more than {budget // 2**20:,} MiB, the limit for its "
            f"size (4x its size + 50 MiB); it was refused before decoding. A real context this dense is a long "
            "table of empty or tiny values, or of maps and arrays: send it as a count, as fewer and larger values "
            "(a bytes or str field), or through a file the workers read"
        )


def decode_charge(data: bytes, *, stop_after: int, item_cost: int = ITEM_COST) -> int:
    """What decoding ``data`` (a MessagePack stream) is charged, in bytes, counted up to past ``stop_after``.

    A long run of one-byte items (fixints, nil, booleans, empty strings, and the headers of maps and arrays of up to
    15 items, whose items follow as items of their own) is matched and counted in C. A map or array that declares more
    items than the budget has left ends the count at its header. Malformed input ends the count where it stops
    making sense (the decoder reports it afterwards).

    After every ``_PROBE_SPAN`` bytes the walk looks for a repeating unit (``_repeats``): a flood is built by
    repeating a few items (a row, an array of fifteen 2-byte ints), and each repetition of the same bytes parses to
    the same items, so it is charged what the first one was without walking it again.
    """
    walk = _ItemWalk(data, stop_after, item_cost)
    i, n = 0, len(data)
    while i < n and not walk.done:
        i = walk.items(i, n, _PROBE_SPAN)
        while i < n and not walk.done:  # a unit found may repeat inside a longer one: look again where it ended
            moved = _repeats(walk, i)
            if moved == i:
                break
            i = moved
    return walk.charge


class _ItemWalk:
    """The item-by-item walk: ``charge`` so far, ``done`` once the budget is spent or the count must end."""

    __slots__ = ("charge", "cost", "data", "done", "item", "stop_after")

    def __init__(self, data: bytes, stop_after: int, item_cost: int) -> None:
        self.data, self.stop_after, self.item = data, stop_after, item_cost
        self.cost = tuple(item_cost + CONTAINER_COST if h else item_cost for h in _HEADER)
        self.charge, self.done = 0, False

    def items(self, i: int, end: int, span: int) -> int:
        """Walk from ``i`` (an item's first byte) to ``end``, or to the first item boundary ``span`` bytes or more
        further on; return where the walk stands.

        The loop is the whole cost of an aperiodic flood (one pass of it per item), so its common cases take the
        fewest steps: the budget is checked once per call and after each run (an item costs at most
        ``item + CONTAINER_COST``, so a call overshoots it by at most ``span`` such items).
        """
        data, cost, item, stop_after = self.data, self.cost, self.item, self.stop_after
        step, head, run, header = _STEP, _HEAD, _ONE_BYTE_RUN, _HEADER
        charge = self.charge
        limit = min(end, i + span)
        try:
            while i < limit:
                b = data[i]
                s = step[b]
                if s > 1:  # a multi-byte item of a fixed size: a number, a fixstr, a fixext (never a container)
                    charge += item
                    i += s
                elif s == 1:  # a one-byte item, and the one-byte items that follow it
                    charge += cost[b]
                    i += 1
                    run_start = i
                    while i < end and step[b := data[i]] == 1:
                        if i - run_start == _RUN_MIN:  # a long run: the rest of it is matched and counted in C
                            stop = run.match(data, i, min(end, i + _CHUNK)).end()  # type: ignore[union-attr]
                            charge += (stop - i) * item + data[i:stop].translate(header).count(1) * CONTAINER_COST
                            i = stop
                            break
                        charge += cost[b]
                        i += 1
                    if charge > stop_after:
                        break
                elif s == 0:  # str8, bin8, ext8: the body is skipped whole
                    i += head[b] + data[i + 1]
                    charge += item
                elif s == -3:  # str16, bin16, ext16
                    i += head[b] + (data[i + 1] << 8 | data[i + 2])
                    charge += item
                elif s == -4:  # str32, bin32, ext32
                    i += head[b] + int.from_bytes(data[i + 1 : i + 5], "big")
                    charge += item
                elif s == -1:  # array16/32, map16/32: a declared count the budget cannot hold ends the walk
                    width = 2 if b in (0xDC, 0xDE) else 4
                    declared = int.from_bytes(data[i + 1 : i + 1 + width], "big")
                    if b >= 0xDE:  # a map: two items an entry, and the entry itself
                        charge += declared * MAP_ENTRY_COST
                        declared *= 2
                    charge += item + CONTAINER_COST
                    if charge + declared * item > stop_after:  # its items are charged as they come: refused now
                        charge += declared * item
                        break
                    i += 1 + width
                else:  # 0xC1, never used: the decoder reports it
                    self.done = True
                    break
        except IndexError:  # a str/bin/ext cut inside its length: malformed, the decoder reports it
            charge += item
            i = end
        self.charge = charge
        self.done = self.done or charge > stop_after
        return i


def _repeats(walk: _ItemWalk, i: int) -> int:
    """At ``i`` (an item's first byte), skip the repetitions of a repeating unit, charged what its first one was.

    The unit is found by the next occurrence of the ``_PROBE`` bytes at ``i`` within ``_MAX_UNIT`` bytes, then walked
    once: it is a unit only if its items end exactly where the next occurrence begins. The same bytes from an
    item's first byte parse to the same items, so each following copy (compared in C, in doubling blocks) costs what
    the walk charged for the first. Anything else (no occurrence, a unit whose items run past it) leaves the walk
    where the unit's own walk ended: nothing is walked twice.
    """
    data = walk.data
    probe = data[i : i + _PROBE]
    start = data.find(probe, i + 1, i + _MAX_UNIT + _PROBE) if len(probe) == _PROBE else -1
    if start < 0:
        return i
    before = walk.charge
    end = walk.items(i, start, start - i)
    if walk.done or end != start:
        return end
    unit, per_unit = data[i:start], walk.charge - before
    blocks, pos = [unit], start
    while data.startswith(blocks[-1], pos):  # galloping: copies of the unit in doubling blocks
        pos += len(blocks[-1])
        if len(blocks[-1]) < _CHUNK:
            blocks.append(blocks[-1] * 2)
    for block in reversed(blocks[:-1]):  # what is left is fewer copies than the last block: its binary digits
        if data.startswith(block, pos):
            pos += len(block)
    walk.charge += (pos - start) // len(unit) * per_unit
    walk.done = walk.charge > walk.stop_after
    return pos
