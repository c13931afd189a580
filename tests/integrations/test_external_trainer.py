"""ExternalPoolTrainer: verl's real v1 trainer, run on CPU up to the model engine, against a stub pool.

``trainer.init()`` runs verl's own ``PPOTrainer._setup`` (tokenizer, datasets, resource pools, worker groups,
``ActorRolloutRefWorker.init_model``, reward loop, ``LLMServerManager``, ``CheckpointEngineManager``, checkpoint
load) and the trainer's ``on_init_end``. The one stand-in is ``EngineStub``: it stands where ``TrainingWorker``
would build an FSDP/Megatron engine on a GPU (a gloo process group and a few CPU tensors as the model's
parameters). Everything after it is real: verl builds the checkpoint engine from the config the trainer prepared,
``update_weights`` hands it the "engine's" tensors, the ``verl_ctx_disk`` backend writes them, the stub servers
load them. GPU boundary: a real engine's ``get_per_tensor_param`` and real vLLM/SGLang ``load_weights``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import torch
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker
from verl.workers.rollout.llm_server import LLMServerManager

from verl_ctx import ContextRegistry, validate
from verl_ctx.integrations.verl import bind_config, compose_config, make_task_runner
from verl_ctx.integrations.verl.external import TRAINER_MODULE, ExternalRolloutContext, weights_path
from verl_ctx.integrations.verl.external.trainer import ExternalPoolTrainer

from .probes import v1_probe_base
from .servers import ClientHost, start_servers

pytestmark = pytest.mark.ray

# verl 0.9.0's PPOTrainer has no switch to leave local replicas out (no LLMServerManager.create_empty): the
# trainer refuses to start there (test_refused_where_verl_has_no_switch); every other test needs the switch.
HAS_SWITCH = hasattr(LLMServerManager, "create_empty")
needs_switch = pytest.mark.skipif(not HAS_SWITCH, reason="this verl has no _enable_hybrid_replicas switch (0.9.0)")

REG = ContextRegistry("external pool trainer")
NAMESPACE = "trainer_pool"
SERVERS = ["e1", "e2", "e3"]


class PoolRollout(ExternalRolloutContext, role="rollout", registry=REG):
    system_prompt: str = "be brief"


class TinyEngine:
    """The model engine's one method the weight sync uses, with a few CPU tensors as parameters."""

    def get_per_tensor_param(self, **kwargs: Any) -> tuple[Iterator[tuple[str, torch.Tensor]], None]:
        embed = torch.arange(8, dtype=torch.float32).reshape(4, 2)
        params = {"model.embed_tokens.weight": embed, "lm_head.weight": embed, "model.norm.weight": torch.ones(2)}
        return iter(params.items()), None


class EngineStub(TrainingWorker):
    """Stands where TrainingWorker.__init__ builds a model engine on a GPU: a gloo process group, a tiny engine."""

    def __init__(self, config: Any) -> None:
        Worker.__init__(self)
        self.config = config
        if not torch.distributed.is_initialized():
            # verl's RayWorkerGroup set MASTER_ADDR/PORT, RANK, WORLD_SIZE. It picks the port by binding port 0 and
            # letting it go, so on a busy machine another process's connection can take it before gloo binds it
            # (EADDRINUSE, seen in a loaded run): a group of one rank needs no rendezvous, so none is made.
            store = torch.distributed.HashStore() if self.world_size == 1 else None
            torch.distributed.init_process_group("gloo", store=store, rank=self.rank, world_size=self.world_size)
        self._register_dispatch_collect_info(mesh_name="train", dp_rank=self.rank, is_collect=True)
        self.engine = TinyEngine()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def reset(self) -> None:
        """No engine state to reset."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def set_loss_fn(self, loss_fn: Any) -> None:
        self.loss_fn = loss_fn


class StubEngineWorker(ActorRolloutRefWorker):
    """verl's hybrid worker, verl's init_model and update_weights, with the engine stub inside."""

    actor_worker_cls = EngineStub
    ref_worker_cls = EngineStub

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def describe(self) -> dict[str, Any]:
        engine = getattr(self, "checkpoint_engine", None)
        return {
            "role": self.role,
            "rollout engine": getattr(self, "rollout", None) is not None,
            "checkpoint engine": type(engine).__name__ if engine is not None else None,
            "pid": os.getpid(),
        }


class CpuExternalPoolTrainer(ExternalPoolTrainer):
    """The shipped trainer with verl's workers on CPU pools and the engine stub."""

    context_schema = PoolRollout
    resource_pool_manager: Any  # verl's ResourcePoolManager, set by verl's own _init_resource_pool_mgr

    def _init_resource_pool_mgr(self) -> None:
        from verl_ctx.integrations.verl._rehearsal import rehearsal_pool_manager

        super()._init_resource_pool_mgr()  # verl's own, with the trainer's switch
        self.verl_roles = sorted(str(r) for r in self.role_worker_mapping)
        for role, remote in list(self.role_worker_mapping.items()):
            if remote.__ray_actor_class__ is ActorRolloutRefWorker:
                self.role_worker_mapping[role] = ray.remote(StubEngineWorker)
        self.resource_pool_manager = rehearsal_pool_manager(self.resource_pool_manager)


def _config(scratch: Path, **routing: Any) -> Any:
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    args = tiny_run_args(tiny_model(scratch / "model"), tiny_dataset(scratch / "data"))
    config = compose_config(
        [
            *args,
            "algorithm.adv_estimator=grpo",
            "critic.enable=false",  # said outright: verl warns when it infers it from the estimator
            "actor_rollout_ref.actor.use_kl_loss=true",  # a reference policy: verl builds a separate ref worker
            "trainer.v1.trainer_mode=external_pool",
            "trainer.resume_mode=disable",
            f"trainer.default_local_dir={scratch / 'ckpt'}",
            "reward.num_workers=1",
        ]
    )
    spec = {
        "namespace": NAMESPACE,
        "servers": [{"name": n} for n in SERVERS],
        "weight_sync": {"mode": "reload_from_checkpoint", "directory": str(scratch / "weights"), "timeout_s": 60},
        **routing,
    }
    contexts = validate({"extra_context": {"rollout": {"routing": spec}}}, registry=REG)
    bind_config(config, contexts.envelopes())
    return config


@pytest.fixture(scope="module")
def started(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any], Path]]:
    """The trainer after verl's init() (setup, initial weight sync), with its stub pool."""
    scratch = tmp_path_factory.mktemp("external-pool")
    servers = start_servers(SERVERS, NAMESPACE)
    trainer = CpuExternalPoolTrainer(_config(scratch))
    trainer.init()
    yield trainer, servers, scratch
    _release(trainer, None)
    for handle in servers.values():
        ray.kill(handle)


def _loads(servers: dict[str, Any]) -> dict[str, list[tuple[str, int]]]:
    return {n: ray.get(h.report.remote())["loads"] for n, h in servers.items()}


@needs_switch
def test_no_local_inference_engine_is_created(started: tuple[Any, dict[str, Any], Path]) -> None:
    """verl maps Role.Actor and Role.RefPolicy (no rollout role), starts no replica, and no worker has an engine."""
    trainer, _servers, _ = started
    assert trainer.verl_roles == ["actor", "ref"]
    assert trainer.llm_server_manager.get_replicas() == []
    assert trainer.llm_server_manager.server_handles == []
    assert ray.get(trainer.llm_server_manager.global_load_balancer.get_all_servers.remote()) == []
    assert trainer.checkpoint_manager.replicas == []
    actor = trainer.actor_rollout_wg.describe()
    ref = trainer.ref_policy_wg.describe()
    assert actor == [
        {**actor[0], "role": "actor", "rollout engine": False, "checkpoint engine": "DiskCheckpointEngine"}
    ]
    assert ref == [{**ref[0], "role": "ref", "rollout engine": False, "checkpoint engine": None}]
    # verl names each replica's server actors "<prefix>server_<replica>_<node>" (vLLMReplica, SGLangReplica)
    named = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
    assert not {n for n in named if "server_" in n}, named


@needs_switch
def test_the_pool_loads_the_trainers_weights_before_the_first_rollout(
    started: tuple[Any, dict[str, Any], Path],
) -> None:
    """on_init_end: the actor worker wrote version 0 with verl's send path; every server loaded it."""
    trainer, servers, scratch = started
    path = weights_path(str(scratch / "weights"), 0)
    assert _loads(servers) == {key: [(path, 0)] for key in SERVERS}
    written = set(os.listdir(path))  # a Hugging Face model directory: weights, config, tokenizer, our manifest
    assert {"model.safetensors", "config.json", "tokenizer.json", "verl_ctx_weights.json"} <= written
    assert trainer._pending_sync_metrics["verl_ctx/pool/servers_loaded"] == 3.0


@needs_switch
def test_verl_asks_for_a_client_and_gets_one_routed_to_the_pool(started: tuple[Any, dict[str, Any], Path]) -> None:
    """get_llm_client (what TaskRunnerV1 hands the agent loop) routes to the pool, also once pickled elsewhere."""
    from verl_ctx.integrations.verl.external import ExternalLLMServerClient

    trainer, _servers, _ = started
    client = trainer.get_llm_client()
    assert isinstance(client, ExternalLLMServerClient)
    host = ray.remote(num_cpus=0)(ClientHost).remote(client)  # as verl pickles it into AgentLoopWorkerTQ
    served = ray.get(host.ask.remote([f"turn-{i}" for i in range(6)]))
    assert {server for server, _ in served} <= set(SERVERS)
    assert {version for _, version in served} == {0}
    ray.kill(host)


@needs_switch
def test_after_an_update_every_server_serves_the_new_version(started: tuple[Any, dict[str, Any], Path]) -> None:
    """A step's on_step_end pushes its weights: every server loads version 1; the step's metrics say so."""
    trainer, servers, scratch = started
    trainer.global_steps, trainer.timing_raw = 1, {}
    trainer.on_step_end()
    path = weights_path(str(scratch / "weights"), 1)
    assert all(loads[-1] == (path, 1) for loads in _loads(servers).values())
    metrics = trainer._consume_sync_metrics()
    assert metrics["verl_ctx/pool/synced_version"] == 1.0
    assert metrics["verl_ctx/pool/servers_failed"] == 0.0
    assert "update_weights" in trainer.timing_raw


@needs_switch
def test_a_server_failing_to_load_is_reported_and_routed_around(started: tuple[Any, dict[str, Any], Path]) -> None:
    """One server's load fails: the step goes on, the metrics count it, and the clients stop using it."""
    trainer, servers, _ = started
    ray.get(servers["e2"].set.remote(fail_loads="weights do not fit"))
    trainer.global_steps, trainer.timing_raw = 2, {}
    trainer.on_step_end()
    report = trainer.weight_sync.reports[-1]
    assert report.failed == {f"{NAMESPACE}/e2": "load_weights raised RuntimeError: weights do not fit"}
    assert trainer._consume_sync_metrics()["verl_ctx/pool/servers_failed"] == 1.0
    host = ray.remote(num_cpus=0)(ClientHost).remote(trainer.get_llm_client())
    served = ray.get(host.ask.remote([f"after-{i}" for i in range(9)]))
    assert {server for server, _ in served} == {"e1", "e3"}
    assert {version for _, version in served} == {2}
    ray.get(servers["e2"].set.remote(fail_loads=None))
    trainer.global_steps, trainer.timing_raw = 3, {}
    trainer.on_step_end()  # the next sync tries it again; it loads; clients use it again
    ray.get(host.ask.remote(["hears-the-news"]))  # routed with what the client knew, then told e2 is back
    served = ray.get(host.ask.remote([f"later-{i}" for i in range(9)]))
    assert {server for server, _ in served} == set(SERVERS)
    ray.kill(host)


@needs_switch
def test_the_trainer_is_registered_inside_verls_task_runner(ray_cluster: None, tmp_path: Path) -> None:
    """--import registers external_pool in the TaskRunner process; verl looks it up there and maps no rollout."""
    runner = make_task_runner({}, use_v1=True, base=v1_probe_base(ExternalProbeRunner), imports=[TRAINER_MODULE])
    actor = runner.remote()
    found = ray.get(actor.run.remote(_config(tmp_path)))
    ray.kill(actor)
    assert found["mode"] == "external_pool"  # registered as external_pool+verl_ctx; verl's __init__ sees the user's
    assert "ExternalPoolTrainer" in found["classes"]
    assert found["roles"] == ["actor", "ref"]
    assert found["replay buffer"] == "ReplayBuffer"  # verl's synchronous schedule
    assert found["checkpoint engine"] == {
        "backend": "verl_ctx_disk",
        "module": "verl_ctx.integrations.verl.external.disk_engine",
    }


class ExternalProbeRunner:
    """What TaskRunnerV1.run does up to the trainer: look the mode up, build the trainer, let it map roles."""

    def run(self, config: Any) -> dict[str, Any]:
        from verl.trainer.ppo.v1 import get_trainer_cls

        trainer_cls = get_trainer_cls(config.trainer.v1.trainer_mode)
        trainer_cls.context_schema = PoolRollout  # this test's registry, not the default one
        trainer = trainer_cls(config=config)  # verl's __init__ and ours: checks, config, replay buffer
        trainer._init_resource_pool_mgr()
        engine = config.actor_rollout_ref.rollout.checkpoint_engine
        return {
            "mode": str(config.trainer.v1.trainer_mode),
            "classes": [c.__name__ for c in type(trainer).__mro__],
            "roles": sorted(str(r) for r in trainer.role_worker_mapping),
            "replay buffer": type(trainer.replay_buffer).__name__,
            "checkpoint engine": {"backend": engine.backend, "module": engine.custom_backend_module},
        }


@needs_switch
def test_unsupported_settings_are_refused_before_any_worker(tmp_path: Path) -> None:
    """A colocated reward model, legacy trainer or another checkpoint backend: one ConfigError naming each."""
    from omegaconf import open_dict

    from verl_ctx.errors import ConfigError

    config = _config(tmp_path)
    with open_dict(config):
        config.reward.reward_model.enable = True
        config.reward.reward_model.enable_resource_pool = False
        config.actor_rollout_ref.rollout.checkpoint_engine.backend = "nccl"
    with pytest.raises(ConfigError, match=r"(?s)reward_model\.enable_resource_pool=false.*backend=nccl"):
        CpuExternalPoolTrainer(config)


@needs_switch
def test_the_client_reports_weights_versions_seen(started: tuple[Any, dict[str, Any], Path]) -> None:
    """The client the trainer hands out counts outputs per weights version."""
    trainer, _servers, _ = started
    client = trainer.get_llm_client()
    asyncio.run(client.generate("v", prompt_ids=[1], sampling_params={}))
    assert sum(client.versions.values()) == 1


@needs_switch
def test_verl_ctx_run_rehearses_the_external_pool_trainer(tmp_path: Path) -> None:
    """`verl-ctx run --import <trainer> trainer.v1.trainer_mode=external_pool --rehearse`: verl's TaskRunner finds
    the trainer, whose workers are an actor and a ref with no rollout engine, each with its context."""
    import json
    import subprocess
    import sys

    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    from .conftest import REPO

    tiny = tiny_run_args(tiny_model(tmp_path / "model"), tiny_dataset(tmp_path / "data"))
    command = [
        str(Path(sys.executable).with_name("verl-ctx")),
        "run",
        "--rehearse",
        "--format",
        "json",
        "-s",
        "examples.external_servers.contexts",
        "--import",
        TRAINER_MODULE,
        *tiny,
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "trainer.v1.trainer_mode=external_pool",
        "+extra_context.rollout.routing.servers=[{name: llm-0}, {name: llm-1}]",
        f"+extra_context.rollout.routing.weight_sync={{mode: reload_from_checkpoint, directory: {tmp_path / 'w'}}}",
    ]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=480, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    records = {r["role"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])["records"]}
    assert sorted(records) == ["actor", "actor (outer worker)", "ref", "ref (outer worker)"]  # no actor_rollout*


@pytest.mark.skipif(HAS_SWITCH, reason="this verl has the switch: the trainer runs (tests above)")
def test_refused_where_verl_has_no_switch(tmp_path: Path) -> None:
    """On a verl whose trainer always starts local replicas (0.9.0) the trainer says so instead of starting them."""
    from verl_ctx.errors import ConfigError

    with pytest.raises(ConfigError, match=r"needs verl >= 0\.9\.1: .*no LLMServerManager\.create_empty"):
        CpuExternalPoolTrainer(_config(tmp_path))


@needs_switch
def test_a_client_failure_is_what_the_trainer_raises(started: tuple[Any, dict[str, Any], Path]) -> None:
    """A StaleOutputError one of the trainer's clients recorded (as an agent-loop worker's client does before it
    raises) comes back from the trainer's pool state as itself, for fit() to raise instead of verl's symptom."""
    from verl_ctx.errors import StaleOutputError

    trainer, _servers, _scratch = started
    assert trainer.pool_failure() is None
    error = StaleOutputError("no server answered with weights within max_staleness=0 of the trainer's 3")
    ray.get(trainer.pool_state.record_failure.remote(error))
    ray.get(trainer.pool_state.record_failure.remote(StaleOutputError("a later one")))
    found = trainer.pool_failure()
    assert isinstance(found, StaleOutputError)
    assert str(found) == str(error)  # the first one: the cause, not what followed from it


def _release(trainer: Any, agent_loop_manager: Any) -> None:
    """Kill what a trainer started (its CPU placement group above all), for the module's other tests."""
    from ray.util.placement_group import remove_placement_group

    group = getattr(trainer, "actor_rollout_wg", None)
    handles = [*(group._workers if group is not None else []), *getattr(agent_loop_manager, "agent_loop_workers", [])]
    if trainer.pool_state is not None:
        handles.append(trainer.pool_state)
    for handle in handles:
        ray.kill(handle)
    manager = getattr(trainer, "resource_pool_manager", None)
    for pool in getattr(manager, "resource_pool_dict", {}).values():
        for pg in pool.pgs or ():
            remove_placement_group(pg)


class SecondTrainer(CpuExternalPoolTrainer):
    """The module's trainer, built again beside the ``started`` one: Ray refuses a second placement group of the
    same name (verl names it after the pool), so this one's pool is renamed."""

    def _init_resource_pool_mgr(self) -> None:
        super()._init_resource_pool_mgr()
        manager = self.resource_pool_manager
        manager.resource_pool_spec = {f"second_{n}": spec for n, spec in manager.resource_pool_spec.items()}
        manager.mapping = {role: f"second_{n}" for role, n in manager.mapping.items()}


@needs_switch
def test_verls_fit_raises_the_stale_pool_not_its_empty_batch(ray_cluster: None, tmp_path: Path) -> None:
    """verl's real fit, as TaskRunnerV1.run drives it (TransferQueue, trainer.init(), verl's AgentLoopManagerTQ
    from the trainer's clients, fit(manager)), against a pool whose every server answers with weights older than
    max_staleness=0 allows: the agent loop's clients raise StaleOutputError in their workers, verl's replay buffer
    then finds no trajectory to train on, and fit() raises the StaleOutputError with verl's RuntimeError as its
    cause. Nothing of the actor's computation runs: the step fails at sampling, before old_log_prob."""
    import transfer_queue as tq
    from omegaconf import open_dict
    from verl.trainer.main_ppo import TaskRunnerV1

    from verl_ctx.errors import StaleOutputError

    namespace, names = "trainer_pool_stale", SERVERS[:2]
    servers = start_servers(names, namespace)
    config = _config(
        tmp_path, namespace=namespace, servers=[{"name": n} for n in names], max_staleness=0, cooldown_s=0.1
    )
    with open_dict(config):
        config.trainer.val_before_train = False
        config.trainer.total_training_steps = 1
        config.trainer.logger = ["console"]
        config.actor_rollout_ref.rollout.agent.num_workers = 1
        config.transfer_queue.backend.SimpleStorage.num_data_storage_units = 1  # one CPU, not eight
        # verl names reward workers reward_loop_worker_<i> in the job's namespace, where the module's trainer has
        # its own; none is needed: a rollout that never returns is never scored
        config.reward.num_workers = 0
    runner = TaskRunnerV1.__ray_actor_class__()  # verl's TaskRunnerV1, in this process
    tq.init(config.transfer_queue)
    trainer: SecondTrainer | None = None
    manager: Any = None
    try:
        trainer = runner.trainer = SecondTrainer(config)
        runner.config = config
        trainer.init()  # the pool loads version 0
        ray.get([h.set.remote(version=-1) for h in servers.values()])  # ... and answers with older weights
        runner.init_agent_loop_manager()  # verl's: AgentLoopManagerTQ.create(llm_client=trainer.get_llm_client(), ...)
        manager = runner.agent_loop_manager
        with pytest.raises(StaleOutputError) as raised:
            trainer.fit(manager)
        asked = sum(ray.get([h.calls.remote() for h in servers.values()]))
    finally:
        if trainer is not None:
            _release(trainer, manager)
        tq.close()
        for handle in servers.values():
            ray.kill(handle)
    cause = raised.value.__cause__  # verl's symptom, chained
    assert isinstance(cause, RuntimeError), repr(cause)
    assert "no materializable trajectories" in str(cause)
    assert "weights version -1, 1 behind the trainer's 0 (max_staleness=0)" in str(raised.value)
    assert asked > 0  # the agent loop's requests reached the pool
    assert "old_log_prob" not in trainer.timing_raw  # the step failed before any of the actor's computation
