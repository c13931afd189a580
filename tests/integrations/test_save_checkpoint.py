"""``verl_ctx.testing.save_checkpoint`` and ``python -m verl_ctx.testing save-checkpoint``: a checkpoint's contexts
saved as a run's trainer saves them, on a CPU machine, without training or Ray (docs/checkpoints.md, "On a CPU
machine"). That the files equal a real trainer's save is tested with verl's trainers in test_checkpoints.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel, Field, SecretStr

from verl_ctx import ContextRegistry, ContextSet, RoleContext
from verl_ctx.envelope import from_text
from verl_ctx.errors import ContextChangedError

from .conftest import REPO

SECRET = "sk-cpu-save-5b1e0c"
HERE = ContextRegistry("save_checkpoint tests")


class Judge(BaseModel):
    url: str = "http://judge:8000"
    api_key: SecretStr | None = None


class CriticContext(RoleContext, role="critic", registry=HERE):  # travels on the trainer's class
    clip: float = Field(0.2, gt=0)


class RewardContext(RoleContext, role="reward", registry=HERE):  # travels in the config, holds a secret
    judge: Judge = Field(default_factory=Judge)


class RolloutContext(RoleContext, role="rollout", registry=HERE):  # travels in the rollout's config
    max_turns: int = 1


def launched(clip: float = 0.3, secret: str = SECRET) -> ContextSet:
    return ContextSet(
        {
            "critic": CriticContext(clip=clip),
            "reward": RewardContext(judge=Judge(api_key=SecretStr(secret))),
            "rollout": RolloutContext(),
        }
    )


def _history(step_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (step_dir / "verl_ctx" / "history.jsonl").read_text().splitlines()]


def test_saves_the_contexts_as_a_run_saves_them(tmp_path: Path) -> None:
    """global_step_N/verl_ctx/ (exact envelopes, readable values, the launch in the history) and verl's tracker file;
    no model files; no file holds the secret, not even encoded; the saved contexts are the launch's."""
    from verl_ctx.integrations.verl._checkpoint import Snapshot, compare_with_launch
    from verl_ctx.testing import save_checkpoint

    run = tmp_path / "run"
    step = save_checkpoint(launched(), run, step=7)
    assert step == run / "global_step_7"
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()) == [
        "global_step_7/verl_ctx/contexts.json",
        "global_step_7/verl_ctx/envelopes.json",
        "global_step_7/verl_ctx/history.jsonl",
        "latest_checkpointed_iteration.txt",
    ]
    assert (run / "latest_checkpointed_iteration.txt").read_text() == "7"
    readable = json.loads((step / "verl_ctx" / "contexts.json").read_text())
    assert readable["global_step"] == 7
    assert readable["roles"]["critic"]["values"] == {"clip": 0.3}
    assert readable["roles"]["critic"]["schema_id"] == f"{__name__}:CriticContext"
    assert readable["roles"]["reward"]["values"] == {"judge": {"url": "http://judge:8000", "api_key": "**********"}}
    assert [e["event"] for e in _history(step)] == ["launched"]
    assert set(_history(step)[0]["roles"]) == {"critic", "reward", "rollout"}
    texts = json.loads((step / "verl_ctx" / "envelopes.json").read_text())["envelopes"]
    for text in texts.values():
        assert SECRET.encode() not in msgspec.msgpack.encode(from_text(text))
    for file in run.rglob("*"):
        assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file
    saved = Snapshot.read(step)
    assert compare_with_launch(saved, launched()).same
    assert [str(c) for c in compare_with_launch(saved, launched(secret="sk-other")).changes] == [
        '[reward] judge.api_key: "**********" -> "**********" (secret changed)'
    ]


def test_a_second_save_resumes_as_a_run_does(tmp_path: Path) -> None:
    """With resume_mode=auto (verl's default) the next save resumes from the latest checkpoint first: the same
    contexts resume and are recorded; a change is ContextChangedError (recorded as refused, nothing saved) unless the
    config accepts it; the run's salt and history are carried on; resume_mode=disable starts afresh."""
    from omegaconf import open_dict

    from verl_ctx.integrations.verl import compose_config
    from verl_ctx.integrations.verl._checkpoint import Snapshot, accept_context_change
    from verl_ctx.testing import save_checkpoint

    run = tmp_path / "run"
    save_checkpoint(launched(), run, step=1)
    save_checkpoint(launched(), run, step=2)
    assert [(e["event"], e.get("result")) for e in _history(run / "global_step_2")] == [
        ("launched", None),
        ("resumed", "same"),
    ]
    with pytest.raises(ContextChangedError, match=r"\[critic\] clip: 0\.3 -> 0\.5"):
        save_checkpoint(launched(clip=0.5), run, step=3)
    assert not (run / "global_step_3").exists()
    assert (run / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert _history(run / "global_step_2")[-1]["result"] == "refused: contexts changed"

    config = compose_config()
    accept_context_change(config)
    save_checkpoint(launched(clip=0.5), run, step=3, config=config)
    assert [e.get("result") for e in _history(run / "global_step_3")] == [
        None,
        "same",
        "refused: contexts changed",
        "changed: accepted",
    ]
    salts = {Snapshot.read(run / f"global_step_{n}").salt for n in (1, 2, 3)}
    assert len(salts) == 1, "one run, one salt: its checkpoints' secrets compare"

    with open_dict(config):
        config.trainer.resume_mode = "disable"
    save_checkpoint(launched(clip=0.9), run, step=4, config=config)
    assert [e["event"] for e in _history(run / "global_step_4")] == ["launched"]


def _env(where: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{where}{os.pathsep}{REPO}", "NO_COLOR": "1"}


CONTEXTS = """
from pydantic import Field
from verl_ctx import RoleContext

class CriticContext(RoleContext, role="critic"):
    value_clip: float = Field(0.2, gt=0)
"""


def test_the_command_saves_where_the_launch_would_and_diff_reads_it(tmp_path: Path) -> None:
    """`python -m verl_ctx.testing save-checkpoint --step N -s MODULE VERL_ARGS` composes and validates as
    `verl-ctx run` would and saves under the config's trainer.default_local_dir; `verl-ctx diff` reads the result.
    Invalid contexts exit 1, a missing -s or --step exits 2, and nothing is saved."""
    (tmp_path / "ctxmod.py").write_text(CONTEXTS)
    save = [sys.executable, "-m", "verl_ctx.testing", "save-checkpoint"]
    args = ["-s", "ctxmod", "trainer.default_local_dir=run", "+extra_context.critic.value_clip=0.3"]
    env = _env(tmp_path)

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    done = run(*save, "--step", "5", *args)
    assert done.returncode == 0, done.stderr
    assert "saved run/global_step_5" in done.stdout
    assert (tmp_path / "run" / "latest_checkpointed_iteration.txt").read_text() == "5"
    verl_ctx = str(Path(sys.executable).parent / "verl-ctx")
    assert run(verl_ctx, "diff", "run", *args).returncode == 0
    changed = run(verl_ctx, "diff", "run", *args[:2], "+extra_context.critic.value_clip=0.5")
    assert changed.returncode == 1
    assert "[critic] value_clip: 0.3 -> 0.5" in changed.stdout

    invalid = run(*save, "--step", "6", *args[:2], "+extra_context.critic.value_clip=-1")
    assert invalid.returncode == 1
    assert "extra_context.critic.value_clip" in invalid.stderr
    assert run(*save, "--step", "6", *args[2:]).returncode == 2
    assert run(*save, *args).returncode == 2
    assert not (tmp_path / "run" / "global_step_6").exists()
