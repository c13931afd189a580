"""Concurrent decodes from several threads give identical results."""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

from verl_ctx import decode, encode

from .models import Everything, Row


def test_concurrent_decodes_are_identical() -> None:
    """Eight threads decoding small and large envelopes at once all get the same values."""
    small = encode(Everything(text="s"))
    large = encode(Everything(rows=[Row(prompt_id=i, weight=float(i)) for i in range(50_000)]))
    expected = {id(small): decode(small, Everything), id(large): decode(large, Everything)}
    jobs = [small, large] * 16
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda env: (id(env), decode(env, Everything)), jobs))
    assert all(result == expected[key] for key, result in results)
    assert gc.isenabled(), "the garbage collector is back on once the last large decode ends"


def test_large_decode_leaves_the_processs_frozen_objects_alone() -> None:
    """A process that froze objects before a fork keeps them frozen across a large decode.

    Checked on one frozen object, not on ``gc.get_freeze_count()``: a frozen object that anything frees
    meanwhile (a cache entry replaced, a weak reference dying) lowers the count, so an exact count is a
    flaky proof. ``gc.get_objects()`` lists generations 0-2 only, so a frozen object is absent from it
    until an unfreeze moves it back.
    """
    large = encode(Everything(rows=[Row(prompt_id=i, weight=float(i)) for i in range(50_000)]))
    kept: list[object] = [[] for _ in range(10)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert not _is_collectable(kept), "gc.freeze() moved it to the permanent generation"
        assert decode(large, Everything).rows[-1].prompt_id == 49_999
        assert not _is_collectable(kept), "the decode released the process's frozen objects"
        assert gc.get_freeze_count() <= frozen, "the decode froze the objects it built"
    finally:
        gc.unfreeze()
    assert _is_collectable(kept)


def _is_collectable(obj: object) -> bool:
    """Whether ``obj`` is in one of the collector's generations, i.e. not frozen."""
    return any(candidate is obj for candidate in gc.get_objects())
