"""Weights in step and staleness visible: the disk checkpoint engine, pushes to the pool, the clients' judgement.

The engine is verl's checkpoint-engine send half (``CheckpointEngineRegistry``); here it gets CPU tensors where
the actor's model engine would hand it its parameters (the GPU boundary). Pool servers are real Ray actors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verl_ctx.errors import ServerUnavailableError, StaleOutputError
from verl_ctx.integrations.verl.external import ExternalRouting, weights_path

from .servers import ClientHost, start_servers

NAMESPACE = "weights_pool"


def _engine(directory: Path, *, is_master: bool = True, bucket_size: int = 1 << 20, **kwargs: Any) -> Any:
    """The backend exactly as verl's actor worker builds it from rollout.checkpoint_engine."""
    from verl.checkpoint_engine.base import CheckpointEngineRegistry
    from verl.utils.import_utils import import_external_libs

    from verl_ctx.integrations.verl.external._checks import DISK_BACKEND, DISK_ENGINE_MODULE

    import_external_libs(DISK_ENGINE_MODULE)
    return CheckpointEngineRegistry.new(
        DISK_BACKEND, is_master=is_master, bucket_size=bucket_size, directory=str(directory), **kwargs
    )


def _send(engine: Any, weights: Any, version: int) -> dict[str, float]:
    return asyncio.run(engine.send_weights(weights, global_steps=version))


def test_written_weights_load_as_the_same_hugging_face_model(tmp_path: Path) -> None:
    """A tiny Llama's parameters, sent as the actor sends them, load back with transformers unchanged."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    from verl_ctx.testing import tiny_model

    model_dir = tiny_model(tmp_path / "model")
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    config.tie_word_embeddings = True
    config.save_pretrained(model_dir)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    engine = _engine(tmp_path / "weights", bucket_size=4096, model_dir=str(model_dir))  # small: several shards
    metrics = _send(engine, iter(model.state_dict().items()), version=3)
    path = Path(weights_path(str(tmp_path / "weights"), 3))
    manifest = json.loads((path / "verl_ctx_weights.json").read_text())
    assert manifest["version"] == 3
    assert len(manifest["files"]) > 1
    assert (path / "model.safetensors.index.json").exists()
    assert (path / "config.json").exists()
    assert (path / "tokenizer.json").exists()
    assert metrics["verl_ctx/weight_sync/bytes"] == manifest["bytes"]
    loaded = AutoModelForCausalLM.from_pretrained(path)
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    assert [p.name for p in (tmp_path / "weights").iterdir()] == ["version_3"]  # no partial directory left


def test_only_rank_0_writes_and_old_versions_are_pruned(tmp_path: Path) -> None:
    """Other ranks walk the generator and write nothing; keep_last newest versions stay; a repeat replaces."""
    import torch

    walked = []

    def weights(tag: float) -> Iterator[tuple[str, Any]]:
        for name in ("a.weight", "b.bias"):
            walked.append(name)
            yield name, torch.full((2, 2), tag, dtype=torch.bfloat16)

    directory = tmp_path / "w"
    assert _send(_engine(directory, is_master=False), weights(1.0), version=1) == {}
    assert walked == ["a.weight", "b.bias"]
    assert not directory.exists()
    master = _engine(directory, keep_last=2)
    for version in (1, 2, 3, 3):
        _send(master, weights(float(version)), version=version)
    assert sorted(p.name for p in directory.iterdir()) == ["version_2", "version_3"]
    from safetensors.torch import load_file

    written = load_file(str(directory / "version_3" / "model.safetensors"))
    assert written["a.weight"].dtype == torch.bfloat16
    assert float(written["a.weight"][0, 0]) == 3.0
    with pytest.raises(ValueError, match="needs global_steps"):
        asyncio.run(master.send_weights(weights(0.0)))


# ------------------------------------------------------------------------- pool pushes (real Ray actors)


def _routing(tmp_path: Path, names: list[str], **extra: Any) -> ExternalRouting:
    sync = {"mode": "reload_from_checkpoint", "directory": str(tmp_path / "w"), "timeout_s": 5.0}
    sync.update(extra.pop("weight_sync", {}))
    return ExternalRouting.model_validate(
        {"namespace": NAMESPACE, "servers": [{"name": n} for n in names], "weight_sync": sync, **extra}
    )


def _writer(tmp_path: Path) -> Any:
    """What the trainer's actor does on a push: the real engine writes version N under weights_path()."""
    import torch

    engine = _engine(tmp_path / "w")

    def write(version: int, path: str) -> None:
        _send(engine, iter([("w", torch.full((2,), float(version)))]), version)
        assert os.path.isdir(path)

    return write


@pytest.fixture(scope="module")
def servers(ray_cluster: None) -> Iterator[dict[str, Any]]:
    """Three stub servers for the module's tests: each starts a process that imports torch (~5 s of CPU)."""
    import ray

    handles = start_servers([f"weights-{i}" for i in range(3)], NAMESPACE)
    yield handles
    for h in handles.values():
        ray.kill(h)


@pytest.fixture
def pool(servers: dict[str, Any]) -> dict[str, Any]:
    """The module's servers, each as just started (no calls, no loads, version 0, no faults)."""
    import ray

    ray.get([h.reset.remote() for h in servers.values()])
    return servers


def _push(routing: ExternalRouting, tmp_path: Path, version: int) -> tuple[Any, Any]:
    from verl_ctx.integrations.verl.external._pool_state import start_pool_state
    from verl_ctx.integrations.verl.external._weight_sync import PoolWeightSync

    state = start_pool_state(0)
    sync = PoolWeightSync(routing, state, _writer(tmp_path))
    return sync, sync.push(version)


@pytest.mark.ray
def test_after_a_push_every_server_serves_the_new_version(pool: dict[str, Any], tmp_path: Path) -> None:
    """Each server got load_weights(path, version) for the version written, and the pool state says so."""
    import ray

    names = list(pool)
    sync, report = _push(_routing(tmp_path, names), tmp_path, version=7)
    path = weights_path(str(tmp_path / "w"), 7)
    assert report.loaded == tuple(f"{NAMESPACE}/{n}" for n in names)
    assert report.failed == {}
    assert [ray.get(h.report.remote())["loads"] for h in pool.values()] == [[(path, 7)]] * 3
    assert ray.get(sync.pool_state.snapshot.remote()) == (7, {})


@pytest.mark.ray
def test_a_server_that_fails_to_load_is_reported_and_routed_around(
    pool: dict[str, Any], tmp_path: Path, verl_config: Any, logged: pytest.LogCaptureFixture
) -> None:
    """A failing, a hanging and a missing server are named with why; clients then avoid the failed ones."""
    import ray

    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    broken, hanging, healthy = list(pool)
    ray.get(pool[broken].set.remote(fail_loads="CUDA out of memory"))
    ray.get(pool[hanging].set.remote(hang_loads=True))
    routing = _routing(
        tmp_path, [broken, hanging, healthy, "ghost"], weight_sync={"timeout_s": 1.0}, policy="round_robin"
    )
    sync, report = _push(routing, tmp_path, version=2)
    assert report.loaded == (f"{NAMESPACE}/{healthy}",)
    assert report.failed == {
        f"{NAMESPACE}/{broken}": "load_weights raised RuntimeError: CUDA out of memory",
        f"{NAMESPACE}/{hanging}": "load_weights did not finish within weight_sync.timeout_s=1.0",
        f"{NAMESPACE}/ghost": report.failed[f"{NAMESPACE}/ghost"],
    }
    assert "no Ray actor named 'ghost'" in report.failed[f"{NAMESPACE}/ghost"]
    assert "3 server(s) failed to load and are routed around" in logged.text
    # the progress line is visible at verl's default log level (WARNING), not only the failures
    assert f"weights version 2 ({routing.weight_sync.directory}/version_2): 1 server(s) loaded in" in logged.text
    client = ExternalLLMServerClient(verl_config, routing=routing, pool_state=sync.pool_state)
    host = ray.remote(num_cpus=0)(ClientHost).remote(client)  # the client lives in another process, as in verl
    served = ray.get(host.ask.remote([f"r{i}" for i in range(8)]))
    assert set(served) == {(healthy, 2)}  # outputs of excluded servers, if any went there first, are discarded
    ray.kill(host)


@pytest.mark.ray
def test_too_few_servers_on_the_new_weights_stops_training(pool: dict[str, Any], tmp_path: Path) -> None:
    """Below weight_sync.min_servers the push raises ServerUnavailableError naming each failure."""
    import ray

    first, second, _ = list(pool)
    ray.get(pool[first].set.remote(fail_loads="disk full"))
    routing = _routing(tmp_path, [first, second], weight_sync={"min_servers": 2})
    with pytest.raises(
        ServerUnavailableError,
        match=rf"(?s)only 1 of 2 .*version 4.*{first}: load_weights raised RuntimeError: disk full",
    ):
        _push(routing, tmp_path, version=4)


# ----------------------------------------------------------------------------------------- staleness


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Warnings of the `verl_ctx.external` logger, even after another test's Hydra run disabled existing loggers."""
    log = logging.getLogger("verl_ctx.external")
    disabled, log.disabled = log.disabled, False
    with caplog.at_level(logging.WARNING, logger="verl_ctx.external"):
        yield caplog
    log.disabled = disabled


def _stale_events(state: Any, expected: int) -> tuple[int, int]:
    """(stale events, worst staleness) the trainer's state received; clients report fire-and-forget."""
    import time

    import ray

    total, worst = 0, 0
    deadline = time.monotonic() + 20
    while total < expected and time.monotonic() < deadline:
        stats = ray.get(state.take_stats.remote())
        total, worst = total + stats["stale_outputs"], max(worst, stats["worst"])
        time.sleep(0.05)
    return total, worst


def _stale_setup(pool: dict[str, Any], tmp_path: Path, on_stale: str) -> tuple[ExternalRouting, Any, str, str]:
    """Pool state at version 5; one server still on version 2 (e.g. restarted from its initial weights)."""
    import ray

    from verl_ctx.integrations.verl.external._pool_state import start_pool_state

    stale, fresh, _ = list(pool)
    ray.get(pool[stale].set.remote(version=2))
    ray.get(pool[fresh].set.remote(version=5))
    routing = _routing(tmp_path, [stale, fresh], max_staleness=1, on_stale=on_stale, policy="round_robin", retries=1)
    state = start_pool_state(5)
    return routing, state, stale, fresh


@pytest.mark.ray
def test_stale_outputs_are_never_returned_when_on_stale_is_error(
    pool: dict[str, Any], tmp_path: Path, verl_config: Any
) -> None:
    """Outputs older than max_staleness move to a fresh server; with none left StaleOutputError says why."""
    import ray

    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    routing, state, _stale, fresh = _stale_setup(pool, tmp_path, "error")
    client = ExternalLLMServerClient(verl_config, routing=routing, pool_state=state)
    host = ray.remote(num_cpus=0)(ClientHost).remote(client)
    assert set(ray.get(host.ask.remote([f"q{i}" for i in range(6)]))) == {(fresh, 5)}
    assert ray.get(host.stale_outputs.remote()) == 3  # the three first sent to it, each then retried
    assert _stale_events(state, expected=3) == (3, 3)
    ray.get(pool[fresh].set.remote(version=3))  # now both behind by more than 1
    lonely = ExternalLLMServerClient(verl_config, routing=routing, pool_state=state)
    with pytest.raises(StaleOutputError, match=r"generated with weights version 3, 2 behind the trainer's 5") as raised:
        asyncio.run(lonely.generate("late", prompt_ids=[1], sampling_params={}))
    recorded = ray.get(state.failure.remote())  # what the trainer raises on the driver instead of verl's symptom
    assert isinstance(recorded, StaleOutputError)
    assert str(recorded) == str(raised.value)
    ray.kill(host)


@pytest.mark.ray
def test_stale_outputs_are_counted_and_logged_when_on_stale_is_count(
    pool: dict[str, Any], tmp_path: Path, verl_config: Any, logged: pytest.LogCaptureFixture
) -> None:
    """With on_stale=count stale outputs are returned, counted by the client and the trainer's state, logged once."""

    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    routing, state, _stale, _fresh = _stale_setup(pool, tmp_path, "count")
    client = ExternalLLMServerClient(verl_config, routing=routing, pool_state=state)

    async def ask(n: int) -> list[Any]:
        return list(
            await asyncio.gather(*(client.generate(f"c{i}", prompt_ids=[1], sampling_params={}) for i in range(n)))
        )

    outputs = asyncio.run(ask(6))
    assert sorted(o.extra_fields["global_steps"] for o in outputs) == [2, 2, 2, 5, 5, 5]
    assert client.stale_outputs == 3
    assert client.versions == {2: 3, 5: 3}
    assert logged.text.count("stale output from") == 1
    assert "2 behind" not in logged.text
    assert "3 behind the trainer's 5" in logged.text
    assert _stale_events(state, expected=3) == (3, 3)


@pytest.mark.ray
def test_without_a_pool_state_the_newest_version_seen_is_the_reference(
    pool: dict[str, Any], tmp_path: Path, verl_config: Any
) -> None:
    """A client built outside the trainer judges each output against the newest version its servers reported."""
    import ray

    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    routing, _state, stale, _fresh = _stale_setup(pool, tmp_path, "count")
    client = ExternalLLMServerClient(verl_config, routing=routing)
    asyncio.run(client.generate("x1", prompt_ids=[1], sampling_params={}))  # round robin: stale first (2)
    asyncio.run(client.generate("x2", prompt_ids=[1], sampling_params={}))  # fresh (5): now the reference
    asyncio.run(client.generate("x3", prompt_ids=[1], sampling_params={}))  # stale again: 3 behind
    assert client.stale_outputs == 1
    assert ray.get(pool[stale].calls.remote()) == 2
