"""``make demo``: this recipe launched through ``verl-ctx run --rehearse`` on this machine's CPUs.

1. writes a tiny model config + tokenizer and an 8-row dataset (nothing is downloaded);
2. runs the real console script: verl's config composed with the recipe's ``config.yaml`` layered on it, every
   context validated, verl's own pre-launch checks, Ray started as ``run_ppo`` starts it, verl's TaskRunner and
   trainer, and the recipe's worker classes built in Ray worker processes up to the model engine;
3. shows what each recipe worker decoded, and in which process;
4. validates a bad override through the same command and shows it refused before anything starts.

Run it from the repository root: ``python -m examples.custom_recipe.demo [--legacy]``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECIPE = Path(__file__).resolve().parent
REPO = RECIPE.parents[1]
SECRET = "sk-demo-never-shown"  # the judge's API key: watch for it in the output (it never appears)

RECIPE_ARGS = [
    "-s",
    "examples.custom_recipe.contexts",
    "--config",
    str(RECIPE / "config.yaml"),
    "--worker",
    "critic=examples.custom_recipe.workers:CriticWorker",
    "--worker",
    "actor_rollout_ref=examples.custom_recipe.workers:HybridWorker",
]
RECIPE_OVERRIDES = [
    "algorithm.adv_estimator=gae",  # a critic runs
    "actor_rollout_ref.actor.use_kl_loss=true",  # a reference policy runs
    "extra_context.critic.value_clip=0.25",  # overrides the value in config.yaml
    f"+extra_context.reward.judge.api_key={SECRET}",
]
BAD_OVERRIDE = "extra_context.critic.value_clip=-1"


def _command(*args: str) -> tuple[list[str], dict[str, str]]:
    """The installed ``verl-ctx`` console script, run from the repository root (so the recipe is importable)."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    return [str(Path(sys.executable).with_name("verl-ctx")), *args], env


def verl_ctx(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``verl-ctx ARGS``, its output captured; a run that has not ended after ``timeout`` seconds is stopped."""
    command, env = _command(*args)
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def streamed(*args: str) -> tuple[int, str]:
    """``verl-ctx ARGS`` with its lines shown as they come (verl's and Ray's own go to the log file it names)."""
    command, env = _command(*args)
    lines = []
    with subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            print(line, end="", flush=True)
    return proc.returncode, "".join(lines)


def main(argv: list[str]) -> int:
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    legacy = "--legacy" in argv
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="verl-ctx-demo-") as scratch:
        model, data = tiny_model(Path(scratch) / "model"), tiny_dataset(Path(scratch) / "data")
        overrides = [*tiny_run_args(model, data), *RECIPE_OVERRIDES, f"trainer.use_v1={not legacy}"]
        shown = " ".join(RECIPE_OVERRIDES).replace(SECRET, "<the key, withheld here too>")
        print(f"$ verl-ctx run --rehearse {' '.join(RECIPE_ARGS)} <tiny-run overrides> {shown}")
        code, output = streamed("run", "--rehearse", *RECIPE_ARGS, *overrides)
    if code != 0:
        return 1
    log = re.search(r"verl's and Ray's output: (\S+\.log)", output)  # verl's config dump and Ray's lines
    leaked = SECRET in output or (log is not None and SECRET in Path(log.group(1)).read_text())
    print(f"\nthe judge's API key in anything printed, verl's own config dump included: {'YES' if leaked else 'no'}")

    print(f"\n$ verl-ctx validate -s examples.custom_recipe.contexts --config ... {BAD_OVERRIDE}")
    bad = verl_ctx(
        "validate", "-s", "examples.custom_recipe.contexts", "--config", str(RECIPE / "config.yaml"), BAD_OVERRIDE
    )
    print((bad.stdout + bad.stderr).rstrip())
    print(f"exit code: {bad.returncode} (nothing was launched)")
    print(f"\ndemo done in {time.perf_counter() - started:.0f} s")
    return 0 if bad.returncode == 1 and not leaked else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
