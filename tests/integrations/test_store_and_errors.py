"""Across Ray: errors raised in a worker are caught on the driver by class; store references are only ours."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from verl_ctx import encode
from verl_ctx.errors import (
    ContextValidationError,
    EnvelopeError,
    LaunchError,
    MissingContextError,
    SchemaMismatchError,
)
from verl_ctx.integrations.verl import bind_worker_cls, offload

from .conftest import REPO
from .probes import PlainProbe, Row, TableContext

pytestmark = pytest.mark.ray


class Raiser:
    """A Ray actor that raises a given verl-ctx error, as a worker decoding a bad context would."""

    def raise_(self, kind: str) -> None:
        if kind == "mismatch":
            raise SchemaMismatchError(
                "skew",
                role="critic",
                driver_fingerprint="a" * 64,
                worker_fingerprint="b" * 64,
                driver_version=1,
                worker_version=2,
                differing_fields=("x",),
            )
        if kind == "missing":
            raise MissingContextError("no context", role="ref")
        if kind == "launch":
            raise LaunchError("verl refused", cause="AssertionError: boom", key="trainer.n_gpus_per_node")
        from verl_ctx.errors import FieldError

        raise ContextValidationError([FieldError(role="critic", path="x", message="bad")])


@pytest.mark.parametrize(
    ("kind", "cls", "attrs"),
    [
        ("mismatch", SchemaMismatchError, {"role": "critic", "worker_version": 2, "differing_fields": ("x",)}),
        ("missing", MissingContextError, {"role": "ref"}),
        ("launch", LaunchError, {"verl_cause": "AssertionError: boom", "key": "trainer.n_gpus_per_node"}),
        ("invalid", ContextValidationError, {}),
    ],
)
def test_worker_errors_are_caught_on_the_driver_by_class(
    ray_cluster: None, kind: str, cls: type[Exception], attrs: dict[str, Any]
) -> None:
    """`except SchemaMismatchError` on the driver catches what a worker raised, attributes intact."""
    import ray

    actor = ray.remote(Raiser).remote()
    with pytest.raises(cls) as info:
        ray.get(actor.raise_.remote(kind))
    ray.kill(actor)
    for name, value in attrs.items():
        assert getattr(info.value, name) == value


def test_a_killed_store_is_reported_as_killed_not_as_a_dead_driver(ray_cluster: None) -> None:
    """When the store actor is gone while the driver lives, the worker's error says the store no longer exists."""
    import ray

    ctx = TableContext(rows=[Row(prompt_id=1, weight=1.0)])
    envelopes = offload({"critic": encode(ctx)}, always=["critic"])
    ref = envelopes["critic"]
    ray.kill(ray.get_actor(ref["store"], namespace=ref["namespace"]))
    actor = ray.remote(bind_worker_cls(PlainProbe, envelopes)).remote()
    with pytest.raises(Exception, match="no longer exists") as info:
        ray.get(actor.report.remote())
    assert "has exited" not in str(info.value)


def test_a_reference_to_an_impostor_actor_is_refused_without_calling_it(ray_cluster: None) -> None:
    """An actor that takes a store's name but is not verl-ctx's store is never asked for anything."""
    import ray

    from verl_ctx import decode

    class Impostor:
        def __init__(self) -> None:
            self.calls = 0

        def get(self, role: str, limit: int | None = None) -> bytes:
            self.calls += 1
            return b""

        def count(self) -> int:
            return self.calls

    impostor = ray.remote(Impostor).options(name="verl_ctx_store_0123456789ab").remote()
    namespace = ray.get_runtime_context().namespace
    ref = {
        "verl_ctx_remote": 1,
        "role": "critic",
        "store": "verl_ctx_store_0123456789ab",
        "namespace": namespace,
        "bytes": 1,
        "actor_id": impostor._actor_id.hex(),
    }
    with pytest.raises(EnvelopeError, match="not a verl-ctx store"):
        decode({"verl_ctx": {"critic": ref}}, TableContext)
    assert ray.get(impostor.count.remote()) == 0
    ray.kill(impostor)


# Run as another Ray job on the same cluster: an actor whose class claims to be verl-ctx's store, whose reply
# writes a marker file when it is unpickled. It is detached so it outlives this job, as an attacker's would.
IMPOSTOR_JOB = """
import pathlib, sys, ray
ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False)
MARKER = sys.argv[3]

class Boom:
    def __reduce__(self):
        return (pathlib.Path.write_text, (pathlib.Path(MARKER), "unpickled"))

class EnvelopeStore:
    def get(self, role, limit=None):
        return Boom()

EnvelopeStore.__module__ = "verl_ctx.integrations.verl._store"
actor = ray.remote(EnvelopeStore).options(name=sys.argv[4], lifetime="detached").remote()
print("ACTOR_ID=" + actor._actor_id.hex(), flush=True)
"""


def _marked_actor_id(stdout: str, stderr: str) -> str:
    found = re.search(r"ACTOR_ID=([0-9a-f]+)", stdout)
    assert found is not None, f"the impostor job printed no actor id:\n{stdout[-2000:]}\n{stderr[-2000:]}"
    return found.group(1)


def test_a_store_of_another_job_claiming_our_class_is_refused_before_its_reply_is_unpickled(
    ray_cluster: None, tmp_path: Any
) -> None:
    """Another Ray job's actor, named and classed as a verl-ctx store and named by a reference that records its
    very id, is refused before any reply of it is unpickled (its reply would write a marker file)."""
    import ray

    from verl_ctx import decode

    marker = tmp_path / "marker"
    name, namespace = "verl_ctx_store_0a0a0a0a0a0a", ray.get_runtime_context().namespace
    out = subprocess.run(
        [sys.executable, "-c", IMPOSTOR_JOB, ray.get_runtime_context().gcs_address, namespace, str(marker), name],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    ref = {
        "verl_ctx_remote": 1,
        "role": "critic",
        "store": name,
        "namespace": namespace,
        "bytes": 1,
        # Ray prints its own text to stdout too, before and after ours and not always ending in a newline: the id is
        # found by its marker wherever it is.
        "actor_id": _marked_actor_id(out.stdout, out.stderr),
    }
    impostor = ray.get_actor(name, namespace=namespace)
    try:
        with pytest.raises(EnvelopeError, match="not by this job"):
            decode({"verl_ctx": {"critic": ref}}, TableContext)
        assert not marker.exists()
    finally:
        ray.kill(impostor)


class _Boom:
    """Unpickling it writes its marker file: proof a reply was unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        import pathlib

        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "unpickled"))


class _SameJobImpostor:
    """An actor of this very job whose class claims to be verl-ctx's store (the identity checks pass)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def get(self, role: str, limit: int | None = None) -> Any:
        if limit == 1000:
            return b"\x00" * (64 * 2**20)  # bytes over the reader's limit
        if limit == 2000:
            raise RuntimeError("from the impostor")
        return _Boom(self.marker)


_SameJobImpostor.__module__ = "verl_ctx.integrations.verl._store"
_SameJobImpostor.__name__ = _SameJobImpostor.__qualname__ = "EnvelopeStore"


def test_a_store_reply_is_read_as_bytes_only_never_unpickled(ray_cluster: None, tmp_path: Any) -> None:
    """An actor of this job that passes every identity check (its class named as the store's, the reference recording
    its id): an object reply is refused without unpickling it (unpickled, it would write a marker file), so is an
    exception it raises, and bytes over the reader's limit are refused before they are copied out of Ray's store."""
    import ray

    from verl_ctx import decode

    marker = tmp_path / "marker"
    name, namespace = "verl_ctx_store_0b0b0b0b0b0b", ray.get_runtime_context().namespace
    actor = ray.remote(_SameJobImpostor).options(name=name).remote(str(marker))
    try:
        ref = {
            "verl_ctx_remote": 1,
            "role": "critic",
            "store": name,
            "namespace": namespace,
            "bytes": 1,
            "actor_id": actor._actor_id.hex(),
        }
        source = {"verl_ctx": {"critic": ref}}
        with pytest.raises(EnvelopeError, match="a serialized Python object, not envelope bytes; refused without"):
            decode(source, TableContext)
        with pytest.raises(EnvelopeError, match=r"an error \(TASK_EXECUTION_EXCEPTION\)"):
            decode(source, TableContext, max_bytes=2000)
        with pytest.raises(EnvelopeError, match=r"over the 1000-byte limit \(not copied\)"):
            decode(source, TableContext, max_bytes=1000)
        assert not marker.exists()
    finally:
        ray.kill(actor)


def test_a_store_name_taken_again_after_the_store_is_gone_is_refused(ray_cluster: None) -> None:
    """A reference records its store's actor id: an actor re-created under a dead store's name is not asked."""
    import ray

    from verl_ctx import decode
    from verl_ctx.integrations.verl._store import EnvelopeStore

    ctx = TableContext(rows=[Row(prompt_id=1, weight=1.0)])
    ref = offload({"critic": encode(ctx)}, always=["critic"])["critic"]
    ray.kill(ray.get_actor(ref["store"], namespace=ref["namespace"]))
    again = ray.remote(EnvelopeStore).options(name=ref["store"], namespace=ref["namespace"]).remote()
    ray.get(again.put.remote("critic", b"\x80"))
    with pytest.raises(EnvelopeError, match="not the store the reference records"):
        decode({"verl_ctx": {"critic": ref}}, TableContext)
    ray.kill(again)


def test_a_reference_over_the_reader_limit_is_refused_before_anything_is_fetched(ray_cluster: None) -> None:
    """A store's envelope over ``max_bytes`` is refused by its size: by the reference's claim, or by the store."""
    from verl_ctx import decode

    ctx = TableContext(rows=[Row(prompt_id=i, weight=1.0) for i in range(2000)])
    ref = offload({"critic": encode(ctx)}, always=["critic"])["critic"]
    with pytest.raises(EnvelopeError, match="over the 1000-byte limit"):
        decode({"verl_ctx": {"critic": ref}}, TableContext, max_bytes=1000)
    understated = {**ref, "bytes": 1}  # a reference that lies about the size: the store sends only the size
    with pytest.raises(EnvelopeError, match=r"over the 1000-byte limit \(not fetched\)"):
        decode({"verl_ctx": {"critic": understated}}, TableContext, max_bytes=1000)
    assert decode({"verl_ctx": {"critic": ref}}, TableContext) == ctx


def test_a_reference_outside_ray_does_not_start_ray(tmp_path: Any) -> None:
    """Decoding a reference in a process not connected to Ray is a clear error; no Ray is started there."""
    ref = {
        "verl_ctx_remote": 1,
        "role": "critic",
        "store": "verl_ctx_store_0123456789ab",
        "namespace": "n",
        "bytes": 1,
        "actor_id": "ab" * 16,
    }
    code = (
        "import sys, msgspec\n"
        "from verl_ctx import decode\n"
        "from verl_ctx.errors import MissingContextError\n"
        "from tests.integrations.probes import TableContext\n"
        f"ref = msgspec.msgpack.decode({msgspec.msgpack.encode(ref)!r})\n"
        "try:\n    decode({'verl_ctx': {'critic': ref}}, TableContext)\n"
        "except MissingContextError as e:\n    print('REFUSED', e)\n"
        "import ray\nprint('RAY', ray.is_initialized())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "REFUSED" in out.stdout, out.stderr[-2000:]
    assert "not connected to Ray" in out.stdout
    assert "RAY False" in out.stdout
