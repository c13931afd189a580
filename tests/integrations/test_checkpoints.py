"""Contexts saved with verl's checkpoints and checked on resume, through real verl trainer classes in a Ray process.

Each launch goes through ``prepare`` (what ``verl-ctx run`` does: the critic's context on the TaskRunner class, the
reward's, which holds a secret, as a store reference in the config); the trainer class is the one the v1 or
legacy TaskRunner builds from it. In a separate Ray process (standing for the TaskRunner) the trainer is made
with ``object.__new__`` (its ``__init__`` builds tokenizers and datasets) and verl's own ``_save_checkpoint`` /
``_load_checkpoint`` run. Stubbed, because they need GPUs and weights: the actor and critic worker groups (their
``save_checkpoint`` makes the directory, ``load_checkpoint`` leaves a marker). Real: verl's config, trainer
classes and checkpoint code, torchdata's ``StatefulDataLoader``, the v1 ``CheckpointCallback``, Ray, the store.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel, Field, SecretStr

from verl_ctx import ContextRegistry, ContextSet, RoleContext, migration
from verl_ctx.envelope import from_text
from verl_ctx.errors import ContextChangedError

pytestmark = pytest.mark.ray

SECRET = "sk-ckpt-3e9d1c0b57"
OTHER_SECRET = "sk-ckpt-rotated-a4f2"

# Two registries: the same role at two schema versions, as two releases of a recipe would declare it.
OLD, NEW = ContextRegistry("checkpoint tests, release 1"), ContextRegistry("checkpoint tests, release 2")


class Judge(BaseModel):
    url: str = "http://judge:8000"
    api_key: SecretStr | None = None


class RewardContext(RoleContext, role="reward", registry=OLD):
    judge: Judge = Field(default_factory=Judge)


class CriticV1(RoleContext, role="critic", registry=OLD):
    clip: float = Field(0.2, gt=0)


class CriticV2(RoleContext, role="critic", version=2, registry=NEW):
    value_clip: float = Field(0.2, gt=0)

    @migration(from_version=1)
    def _renamed(data: dict[str, Any]) -> dict[str, Any]:
        data["value_clip"] = data.pop("clip")
        return data


def contexts(critic: RoleContext, secret: str = SECRET) -> ContextSet:
    return ContextSet({"critic": critic, "reward": RewardContext(judge=Judge(api_key=SecretStr(secret)))})


def drive(trainer_cls: type, config: Any, save_at: tuple[int, ...] = (), builds: bool = False) -> dict[str, Any]:
    """In a Ray worker: verl's _load_checkpoint (as trainer setup calls it), then _save_checkpoint at each step;
    with ``builds``, the method that builds the worker groups instead (v1 ``init``, legacy ``init_workers``)."""
    from torchdata.stateful_dataloader import StatefulDataLoader  # type: ignore[import-untyped]

    class WorkerGroup:  # stands for actor_rollout_wg / critic_wg: the real ones run FSDP/Megatron on GPUs
        def save_checkpoint(self, local_path: str, *args: Any, **kwargs: Any) -> None:
            os.makedirs(local_path, exist_ok=True)

        def load_checkpoint(self, local_path: str, **kwargs: Any) -> None:
            Path(local_path, "LOADED").touch()

    trainer: Any = object.__new__(trainer_cls)
    trainer.config = config
    trainer.global_steps = 0
    trainer.use_critic = True
    trainer.actor_rollout_wg = trainer.critic_wg = WorkerGroup()
    trainer.train_dataloader = StatefulDataLoader(list(range(8)), batch_size=2)
    trainer.trainer_mode = "sync"  # v1: no TransferQueue checkpoint
    if bool(config.trainer.use_v1) and importlib.util.find_spec("verl.trainer.ppo.checkpoint_callback"):
        # verl 0.9.1's v1 trainer calls a checkpoint callback after each save; 0.9.0 has none
        from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback

        trainer.checkpoint_callback = build_checkpoint_callback(config)
    if builds:  # the trainer here has no tokenizer, datasets or pools: only a refusal returns before those are used
        getattr(trainer, "init" if bool(config.trainer.use_v1) else "init_workers")()
    trainer._load_checkpoint()
    resumed_at = trainer.global_steps
    for step in save_at:
        trainer.global_steps = step
        trainer._save_checkpoint()
    return {"resumed_at": resumed_at, "pid": os.getpid()}


@pytest.fixture(params=["v1", "legacy"])
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def launch(ray_cluster: None, verl_config: Any, tmp_path: Path, path: str) -> Any:
    """``launch(contexts, accept=False, save_at=())``: prepare as `verl-ctx run` does, then drive the trainer."""
    import ray

    from verl_ctx.integrations.verl import bound_trainer_cls, prepare
    from verl_ctx.integrations.verl._binding import bound_envelopes
    from verl_ctx.integrations.verl._checkpoint import ContextCheckpointMixin, accept_context_change

    remote = ray.remote(drive)

    def _launch(
        launched: ContextSet, *, accept: bool = False, save_at: tuple[int, ...] = (), builds: bool = False
    ) -> dict[str, Any]:
        from omegaconf import open_dict

        config = copy.deepcopy(verl_config)
        with open_dict(config):
            config.trainer.use_v1 = path == "v1"
            config.trainer.default_local_dir = str(tmp_path / "run")
            config.trainer.resume_mode = "auto"
        if accept:
            accept_context_change(config)
        runner_cls = prepare(config, launched).task_runner.__ray_actor_class__
        if path == "v1":
            from verl.trainer.ppo.v1 import PPOTrainerSync

            # What ContextTaskRunnerV1Mixin.run registers for trainer_mode=sync.
            trainer_cls = bound_trainer_cls(PPOTrainerSync, bound_envelopes(runner_cls))
        else:
            from verl.trainer import main_ppo_v0

            # The trainer class verl's legacy TaskRunner.run builds when our LegacyTaskRunner runs it.
            verl_run = object.__new__(runner_cls)._bound_run()
            trainer_cls = verl_run.__globals__["RayPPOTrainer"]
            assert main_ppo_v0.RayPPOTrainer.__name__ == "RayPPOTrainer"  # verl's module is left as it was
            assert issubclass(trainer_cls, main_ppo_v0.RayPPOTrainer)
            assert trainer_cls is not main_ppo_v0.RayPPOTrainer
        assert issubclass(trainer_cls, ContextCheckpointMixin)
        assert set(bound_envelopes(trainer_cls)) == {"critic"}  # the reward's is in the config, by reference
        return dict(ray.get(remote.remote(trainer_cls, config, save_at, builds)))

    return _launch


def _saved(run: Path, step: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    where = run / f"global_step_{step}" / "verl_ctx"
    history = [json.loads(line) for line in (where / "history.jsonl").read_text().splitlines()]
    return json.loads((where / "contexts.json").read_text()), history


def test_save_writes_the_contexts_beside_each_checkpoint(launch: Any, tmp_path: Path) -> None:
    """verl's save writes its files and ours into global_step_N; no file holds the secret, not even encoded."""
    result = launch(contexts(CriticV1(clip=0.3)), save_at=(2,))
    assert result["pid"] != os.getpid()
    assert result["resumed_at"] == 0
    run = tmp_path / "run"
    step = run / "global_step_2"
    assert {p.name for p in step.iterdir()} == {"actor", "critic", "data.pt", "verl_ctx"}
    assert (run / "latest_checkpointed_iteration.txt").read_text() == "2"
    readable, history = _saved(run, 2)
    critic, reward = readable["roles"]["critic"], readable["roles"]["reward"]
    assert (critic["schema_id"], critic["version"], critic["values"]) == (f"{__name__}:CriticV1", 1, {"clip": 0.3})
    assert len(critic["fingerprint"]) == 64
    assert reward["values"] == {"judge": {"url": "http://judge:8000", "api_key": "**********"}}
    assert [e["event"] for e in history] == ["launched"]
    texts = json.loads((step / "verl_ctx" / "envelopes.json").read_text())["envelopes"]
    assert set(texts) == {"critic", "reward"}
    for text in texts.values():
        assert SECRET.encode() not in msgspec.msgpack.encode(from_text(text))
    for file in run.rglob("*"):
        assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file


def test_the_cpu_helper_saves_what_the_trainer_saves(launch: Any, verl_config: Any, tmp_path: Path) -> None:
    """verl_ctx.testing.save_checkpoint (docs/checkpoints.md, "On a CPU machine") writes the files verl's own trainer
    writes through verl-ctx, v1 and legacy: the same envelopes (the sealed secret aside: its salt is the run's), the
    same readable values and history, and verl's tracker file; it only leaves out verl's model and dataloader files."""
    from verl_ctx.integrations.verl._checkpoint import Snapshot
    from verl_ctx.testing import save_checkpoint

    launch(contexts(CriticV1(clip=0.3)), save_at=(2,))
    helper = save_checkpoint(contexts(CriticV1(clip=0.3)), tmp_path / "cpu", step=2, config=verl_config)
    real = tmp_path / "run" / "global_step_2"
    assert {p.name for p in helper.iterdir()} == {p.name for p in real.iterdir()} - {"actor", "critic", "data.pt"}
    assert (tmp_path / "cpu" / "latest_checkpointed_iteration.txt").read_text() == "2"
    (readable, history), (helper_readable, helper_history) = _saved(tmp_path / "run", 2), _saved(tmp_path / "cpu", 2)
    assert {**helper_readable, "saved_at": None} == {**readable, "saved_at": None}
    assert [{**e, "time": None} for e in helper_history] == [{**e, "time": None} for e in history]
    saved, helper_saved = Snapshot.read(real), Snapshot.read(helper)
    assert set(helper_saved.envelopes) == set(saved.envelopes) == {"critic", "reward"}
    for role, env in saved.envelopes.items():
        assert {**helper_saved.envelopes[role], "payload": None} == {**env, "payload": None}
        assert helper_saved.values(role) == saved.values(role)
    assert helper_saved.envelopes["critic"]["payload"] == saved.envelopes["critic"]["payload"]


def test_resume_same_passes_changed_fails_naming_fields_accepted_is_recorded(launch: Any, tmp_path: Path) -> None:
    """Equal contexts resume; a changed value or secret stops the run before any weights load, naming each
    change (secrets as stars); with the accept key the run resumes and every later checkpoint records it."""
    run = tmp_path / "run"
    launch(contexts(CriticV1(clip=0.3)), save_at=(2,))
    assert launch(contexts(CriticV1(clip=0.3)))["resumed_at"] == 2
    assert (run / "global_step_2" / "actor" / "LOADED").exists()
    (run / "global_step_2" / "actor" / "LOADED").unlink()

    with pytest.raises(ContextChangedError) as caught:
        launch(contexts(CriticV1(clip=0.5), secret=OTHER_SECRET))
    assert set(caught.value.changes) == {
        "[critic] clip: 0.3 -> 0.5",
        '[reward] judge.api_key: "**********" -> "**********" (secret changed)',
    }
    message = str(caught.value)
    assert "--accept-context-change" in message
    assert "+verl_ctx_accept_change=true" in message
    assert SECRET not in message
    assert OTHER_SECRET not in message
    assert not (run / "global_step_2" / "actor" / "LOADED").exists(), "refused before verl loaded anything"

    assert launch(contexts(CriticV1(clip=0.5), secret=OTHER_SECRET), accept=True, save_at=(4,))["resumed_at"] == 2
    _, at_2 = _saved(run, 2)
    assert [(e["event"], e.get("result")) for e in at_2] == [
        ("launched", None),
        ("resumed", "same"),
        ("resumed", "refused: contexts changed"),
        ("resumed", "changed: accepted"),
    ]
    assert "[critic] clip: 0.3 -> 0.5" in at_2[-1]["changes"]
    readable, at_4 = _saved(run, 4)
    assert readable["roles"]["critic"]["values"] == {"clip": 0.5}
    assert at_4 == at_2  # a checkpoint's history: all of its lineage, up to the resume it descends from
    assert launch(contexts(CriticV1(clip=0.5), secret=OTHER_SECRET))["resumed_at"] == 4  # the same as step 4


def test_resume_from_an_older_schema_version_migrates(launch: Any, tmp_path: Path) -> None:
    """A checkpoint saved with CriticV1 resumes under CriticV2: migrated, then compared, and the history says so."""
    run = tmp_path / "run"
    launch(contexts(CriticV1(clip=0.3)), save_at=(2,))
    assert launch(contexts(CriticV2(value_clip=0.3)), save_at=(3,))["resumed_at"] == 2
    _, history = _saved(run, 3)
    assert history[-1]["result"] == "migrated"
    (note,) = history[-1]["migrated"]
    assert note.startswith(f"[critic] {__name__}:CriticV1 v1 (")
    assert f"migrated to {__name__}:CriticV2 v2" in note
    with pytest.raises(ContextChangedError, match=r"\[critic\] value_clip: 0\.3 -> 0\.4"):
        launch(contexts(CriticV2(value_clip=0.4)))  # resumes from step 3, saved as v2 already


def test_the_trainer_compares_before_it_builds_any_worker_group(launch: Any, tmp_path: Path) -> None:
    """In the trainer, a changed resume is refused as it starts building worker groups (v1 init, legacy
    init_workers), not after every group has loaded its model (verl's _load_checkpoint)."""
    launch(contexts(CriticV1(clip=0.3)), save_at=(2,))
    with pytest.raises(ContextChangedError, match=r"\[critic\] clip: 0\.3 -> 0\.5"):
        launch(contexts(CriticV1(clip=0.5)), builds=True)  # verl's own init would fail at once on this stand-in
    _, history = _saved(tmp_path / "run", 2)
    assert [e.get("result") for e in history] == [None, "refused: contexts changed"]


def _saved_run(run: Path, saved: ContextSet) -> Any:
    """A run directory whose latest checkpoint (step 2) holds ``saved``, as the trainer writes it; its config."""

    from verl_ctx.integrations.verl._checkpoint import Snapshot

    Snapshot.of(dict(saved)).write(run / "global_step_2", global_step=2)
    (run / "latest_checkpointed_iteration.txt").write_text("2")
    return run


def test_a_changed_resume_is_refused_before_ray_starts(verl_config: Any, tmp_path: Path) -> None:
    """launch() compares the checkpoint's contexts with its own before anything starts: a change not accepted is
    ContextChangedError (recorded) before verl's own pre-launch check, which this config fails, and so before Ray;
    accepted, the launch goes on to that check; a rehearsal is refused alike and records nothing."""
    import ray
    from omegaconf import open_dict

    from verl_ctx.errors import LaunchError
    from verl_ctx.integrations.verl import launch, rehearse
    from verl_ctx.integrations.verl._checkpoint import accept_context_change

    run = tmp_path / "run"
    _saved_run(run, contexts(CriticV1(clip=0.3)))
    config = copy.deepcopy(verl_config)
    with open_dict(config):
        config.trainer.default_local_dir = str(run)
        config.trainer.resume_mode = "auto"
    was_up = ray.is_initialized()  # another test's cluster may be up; this test starts none
    with pytest.raises(ContextChangedError, match=r"\[critic\] clip: 0\.3 -> 0\.5") as caught:
        launch(copy.deepcopy(config), contexts(CriticV1(clip=0.5), secret=OTHER_SECRET))
    assert ray.is_initialized() == was_up
    assert '[reward] judge.api_key: "**********" -> "**********" (secret changed)' in caught.value.changes
    assert OTHER_SECRET not in str(caught.value)
    _, history = _saved(run, 2)
    assert [e.get("result") for e in history] == ["refused: contexts changed"]

    with pytest.raises(ContextChangedError):
        rehearse(copy.deepcopy(config), contexts(CriticV1(clip=0.5)))
    assert len(_saved(run, 2)[1]) == 1, "a rehearsal leaves the checkpoint's history alone"
    assert ray.is_initialized() == was_up

    accept_context_change(config)
    with pytest.raises(LaunchError, match="verl's pre-launch check failed"):  # past the resume check: verl's own
        launch(config, contexts(CriticV1(clip=0.5)))
    assert ray.is_initialized() == was_up


def wandb_run_config(run_file: Path) -> dict[str, Any]:
    """The run config an offline wandb run file records (its records: wandb's LevelDB-style log of protobufs)."""
    from wandb.proto import wandb_internal_pb2

    raw, pos, chunk, config = run_file.read_bytes(), 7, b"", {}  # 7: the ":W&B" file header
    while pos + 7 <= len(raw):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a chunk header is padding
            pos += 32768 - pos % 32768
            continue
        length, kind = int.from_bytes(raw[pos + 4 : pos + 6], "little"), raw[pos + 6]
        chunk, pos = chunk + raw[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            record.ParseFromString(chunk)
            chunk = b""
            kind_of = record.WhichOneof("record_type")
            items = record.run.config.update if kind_of == "run" else record.config.update
            if kind_of in ("run", "config"):
                config.update({item.key: json.loads(item.value_json) for item in items})
    return config


def test_tracked_run_config_holds_the_redacted_contexts(
    ray_cluster: None, verl_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl's Tracking gets the config verl-ctx prepared: the offline wandb run file records each role's values and
    no file of the run holds the secret; mlflow's flattening of that config gives extra_context/<role>/<path>."""
    from omegaconf import OmegaConf
    from verl.utils.tracking import Tracking, _compute_mlflow_params_from_objects

    from verl_ctx.integrations.verl import prepare

    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(name, value)
    config = copy.deepcopy(verl_config)
    prepare(config, contexts(CriticV1(clip=0.3)))
    # Exactly what both trainers' fit() hand Tracking (v1 trainer_base.py:423, legacy ray_trainer.py:1419).
    tracked = OmegaConf.to_container(config, resolve=True)
    Tracking(project_name="ctx", experiment_name="ckpt", default_backend=["wandb"], config=tracked).finish()
    import wandb

    wandb.teardown()  # waits for wandb's own process to write out the run file (finish() may return before)
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    assert wandb_run_config(run_file)["extra_context"] == {
        "critic": {"clip": 0.3},
        "reward": {"judge": {"url": "http://judge:8000", "api_key": "**********"}},
    }
    for file in run_file.parent.rglob("*"):
        assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file
    params = _compute_mlflow_params_from_objects(tracked)
    assert params["extra_context/critic/clip"] == 0.3
    assert params["extra_context/reward/judge/api_key"] == "**********"
    assert not any(SECRET in str(v) for v in params.values())


def test_a_damaged_history_is_read_past_and_a_missing_envelopes_file_is_refused(tmp_path: Path) -> None:
    """A history line that is not UTF-8 or nests past the parser's depth is left out (the rest is still the
    lineage); a verl_ctx/ folder whose envelopes file was deleted, or is a directory, stops the resume with a
    ConfigError instead of resuming as if nothing had been saved."""
    from verl_ctx.errors import ConfigError
    from verl_ctx.integrations.verl._checkpoint import Snapshot
    from verl_ctx.integrations.verl._checkpoint.trainer import _RunContexts

    launch = dict(contexts(CriticV1()))
    step = tmp_path / "global_step_1"
    Snapshot.of(launch, history=[{"event": "launched"}]).write(step, global_step=1)
    history = step / "verl_ctx" / "history.jsonl"
    history.write_bytes(history.read_bytes() + b"\xff\xfe not UTF-8\n" + b"[" * 100_000 + b"\n")
    assert Snapshot.read(step).history == [{"event": "launched"}]
    run = _RunContexts(launch)
    run.resume_from(str(step), accept=False)  # the same contexts: the resume goes on
    (step / "verl_ctx" / "envelopes.json").unlink()
    with pytest.raises(ConfigError, match=r"no readable verl_ctx/envelopes\.json"):
        run.resume_from(str(step), accept=False)
    (step / "verl_ctx" / "envelopes.json").mkdir()
    with pytest.raises(ConfigError, match=r"no readable verl_ctx/envelopes\.json"):
        run.refuse_changed(str(step), accept=False)
