"""The example recipe launched through `verl-ctx run`: verl's real TaskRunner, trainer and the recipe's workers.

`verl-ctx run --rehearse` runs verl's own launch path on CPU (config composition, verl's pre-launch checks, Ray
started as run_ppo starts it, TaskRunnerV1 or the legacy TaskRunner, the registered trainer, resource pools and
worker groups) and stops each TrainingWorker where it would start a process group and load weights. What runs
beyond that boundary (the engines, vLLM, training) needs GPUs and weights.

The v1 rehearsal is README's first quick-start command, `make demo`, run once: its console is what a reader sees,
and its report comes from `run --report` through the variable the demo passes on untouched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from examples.custom_recipe.demo import RECIPE_ARGS, RECIPE_OVERRIDES, SECRET, verl_ctx

from tests.secret_hunt import hunt
from verl_ctx.cli._run import REPORT_ENV
from verl_ctx.envelope import from_text

from .conftest import REPO

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    scratch = tmp_path_factory.mktemp("tiny")
    return tiny_run_args(tiny_model(scratch / "model"), tiny_dataset(scratch / "data"))


def _rehearse(tiny: list[str], *extra: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """The demo's (and the recipe README's) `verl-ctx run` command, rehearsed, with a JSON report."""
    out = verl_ctx("run", "--rehearse", "--format", "json", *RECIPE_ARGS, *tiny, *RECIPE_OVERRIDES, *extra)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return out, report["records"]


def _demo_command() -> list[str]:
    """README's `make demo` when the suite runs in make's own venv; in another (make demo would run .venv's verl), the
    module make demo runs, with this interpreter and the variables make demo sets."""
    if Path(sys.prefix).resolve() == (REPO / ".venv").resolve():
        return ["make", "demo"]
    return ["env", "RAY_AUTH_MODE=disabled", "HF_HUB_OFFLINE=1", sys.executable, "-m", "examples.custom_recipe.demo"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """`make demo` as README gives it (it rehearses on v1), with the rehearsal's report kept in a file."""
    report = tmp_path_factory.mktemp("demo") / "report.json"
    out = subprocess.run(
        _demo_command(),
        cwd=REPO,
        env={**os.environ, REPORT_ENV: str(report), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out, json.loads(report.read_text())["records"]


@pytest.mark.one_verl  # run_ppo and its TaskRunner, proven on every release by the recipe tests below
def test_quick_start_demo_runs(demo: Any) -> None:
    """README's first quick-start command, `make demo`, rehearses the example recipe, shows a bad override refused
    before anything starts, and exits 0."""
    out, _records = demo
    assert "rehearsal complete: 5 worker record(s)" in out.stdout
    assert "exit code: 1 (nothing was launched)" in out.stdout
    assert "the judge's API key in anything printed, verl's own config dump included: no" in out.stdout


@pytest.fixture(scope="module", params=["v1", "legacy"])
def rehearsal(request: pytest.FixtureRequest, tiny: list[str]) -> tuple[str, subprocess.CompletedProcess[str], Any]:
    if request.param == "v1":
        out, records = request.getfixturevalue("demo")
    else:
        out, records = _rehearse(tiny, "trainer.use_v1=False")
    return request.param, out, {r["role"]: r for r in records}


def test_each_recipe_worker_decodes_its_context_in_a_worker_process(rehearsal: Any) -> None:
    """The recipe's own CriticWorker, ActorWorker, RefWorker and HybridWorker run and each holds its typed context."""
    _path, _out, records = rehearsal
    expected = {
        "critic": ("CriticWorker", "CriticContext(value_clip=0.25, warmup_steps=0, shaping='length_penalty')"),
        "actor": ("ActorWorker", "ActorContext(entropy_bonus=0.01, freeze_embeddings=False)"),
        "ref": ("RefWorker", "RefContext(kl_temperature=1.0)"),
        "actor_rollout_ref (outer worker)": (
            "HybridWorker",
            "RolloutContext(system_prompt='You are a careful assistant.', max_tool_calls=2)",
        ),
    }
    for role, (worker, decoded) in expected.items():
        record = records[role]
        assert record["worker"] == f"examples.custom_recipe.workers.{worker}"
        assert decoded in record["decoded"].values()
        assert record["pid"] != os.getpid()
    assert records["critic"]["contexts_delivered"] == ["critic"]
    assert records["actor"]["config"] == "TrainingWorkerConfig"


def test_reward_context_reaches_the_config_the_reward_manager_gets(rehearsal: Any) -> None:
    """The reward context, which holds a secret, is read back from the Hydra config inside the run, masked in reprs."""
    _path, _out, records = rehearsal
    (decoded,) = records["reward"]["decoded"].values()
    assert "url='http://judge.internal:8000'" in decoded
    assert "api_key=SecretStr('**********')" in decoded


def _logged(out: subprocess.CompletedProcess[str]) -> str:
    """The rehearsal's log file: verl's and Ray's output, named on the console."""
    found = re.search(r"verl's and Ray's output: (\S+\.log) \(--verbose shows it here\)", out.stdout)
    assert found, out.stdout[-2000:]
    with open(found.group(1)) as log:
        return log.read()


def test_a_rehearsal_prints_its_own_lines_and_keeps_verls_output_in_a_named_log(rehearsal: Any) -> None:
    """The console shows verl-ctx's plan, a line per phase, the table and the verdict (tens of lines, not a
    thousand); verl's config dump and Ray's forwarded worker lines are in the log file the console names."""
    _path, out, _records = rehearsal
    console = out.stdout + out.stderr
    assert len(console.splitlines()) < 50, console
    assert "rehearsal complete: 5 worker record(s)" in out.stdout
    assert "'extra_context'" not in console
    assert "pid=" not in console
    log = _logged(out)
    assert "'extra_context'" in log, "verl's TaskRunner printed its config into the log"
    assert "pid=" in log
    assert "Started a local Ray instance" in log
    assert "View the dashboard" not in log, "a rehearsal starts Ray without its dashboard"


def test_no_secret_in_anything_printed_nor_in_any_encoded_text(rehearsal: Any) -> None:
    """The plaintext secret is nowhere in the output (verl's config dump included), nor inside any verl-ctx text."""
    _path, out, _records = rehearsal
    printed = out.stdout + out.stderr + _logged(out)
    assert SECRET not in printed
    assert "'extra_context'" in printed, "verl's TaskRunner printed its config"
    texts = re.findall(r"verl-ctx:1:[A-Za-z0-9+/=]+", printed)
    assert texts, "the config-channel entries verl printed"
    for text in texts:
        found = from_text(text)
        assert SECRET.encode() not in msgspec.msgpack.encode(found)
    # #23's secret hunt: in no encoding (base64 at any alignment, hex, msgpack, JSON-escaped, repr) anywhere printed,
    # verl's config dump (what its trackers are handed) and Ray's worker lines in the log included
    assert hunt(printed, {"the judge's api_key": SECRET}, "the rehearsal's output and log") == []


def test_a_missing_recipe_worker_class_stops_before_ray(tiny: list[str]) -> None:
    """A --worker naming a class that does not exist is a usage error, before anything starts."""
    out = verl_ctx(
        "run",
        "-s",
        "examples.custom_recipe.contexts",
        "--worker",
        "critic=examples.custom_recipe.workers:NoSuchWorker",
        *tiny,
    )
    assert out.returncode == 2
    assert "examples.custom_recipe.workers has no NoSuchWorker" in out.stderr
    assert "Started a local Ray instance" not in out.stdout + out.stderr
