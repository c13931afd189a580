"""Across Ray: errors raised in a worker are caught on the driver by class; store references are only ours."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from verl_ctx import encode
from verl_ctx.errors import (
    ContextValidationError,
    EnvelopeError,
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
        from verl_ctx.errors import FieldError

        raise ContextValidationError([FieldError(role="critic", path="x", message="bad")])


@pytest.mark.parametrize(
    ("kind", "cls", "attrs"),
    [
        ("mismatch", SchemaMismatchError, {"role": "critic", "worker_version": 2, "differing_fields": ("x",)}),
        ("missing", MissingContextError, {"role": "ref"}),
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

        def get(self, role: str) -> bytes:
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
    }
    with pytest.raises(EnvelopeError, match="not a verl-ctx store"):
        decode({"verl_ctx": {"critic": ref}}, TableContext)
    assert ray.get(impostor.count.remote()) == 0
    ray.kill(impostor)


def test_a_reference_outside_ray_does_not_start_ray(tmp_path: Any) -> None:
    """Decoding a reference in a process not connected to Ray is a clear error; no Ray is started there."""
    ref = {"verl_ctx_remote": 1, "role": "critic", "store": "verl_ctx_store_0123456789ab", "namespace": "n", "bytes": 1}
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
