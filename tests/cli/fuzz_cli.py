"""The CLI fuzz campaign: fuzzed arguments to ``validate``, ``describe``, ``config`` and ``schema``, in one process.

Each run must end with exit 0, 1 or 2 and a message of ours: no traceback, no exception escaping click, and the
fuzzed secret never in the output. Run in its own interpreter (it imports a schema module into the default
registry): ``python -m tests.cli.fuzz_cli N SEED`` prints a JSON report; ``test_fuzz.py`` runs it in CI.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from .conftest import CONTEXTS

SECRET = "sk-FUZZ-9f8e7d6c5b4a"
# The CLI suite's schemas (conftest.CONTEXTS), plus a length-bounded list.
MODULE = (
    CONTEXTS
    + """
    class ActorContext(RoleContext, role="actor"):
        table: list[float] = Field(default_factory=list, max_length=3)
"""
)
# Keys whose value may be echoed by design: plain fields (value_clip, url) and keys of verl's own config, new ones
# included (`verl-ctx config` prints the config verl gets, as verl itself prints it).
PLAIN_KEYS = [
    "extra_context.critic.value_clip",
    "extra_context.critic.warmup_steps",
    "extra_context.critic.shaping",
    "extra_context.actor.table",
    "extra_context.reward.judge.url",
    "algorithm.adv_estimator",
    "critic.enable",
    "trainer.use_v1",
    "actor_rollout_ref.model.lora.rank",
    "data.train_batch_size",
    "no.such.key",
]
# Keys whose value may be a secret: secret-typed fields and every key no schema declares (a mistyped secret
# field). Their values are never printed.
MAY_BE_SECRET = [
    "extra_context.critic.valu_clip",
    "extra_context.reward.judge.api_key",
    "extra_context.reward.judge.api_kye",
    "extra_context.reward.token",
    "extra_context.reward.tokn",
    "extra_context.rewrd",
    "extra_context",
]
KEYS = PLAIN_KEYS + MAY_BE_SECRET
VALUES = [
    "{S}",
    "[{S},{S}]",
    "{a: {S}}",
    "0.3",
    "-1",
    "nan",
    "1e400",
    "null",
    "[1,2,3,4,5]",
    "{",
    "[",
    "${oc.env:HOME}",
    "${no.such.node}",
    "'",
    "%",
    "gae",
    "grpo",
    "true",
    "x" * 300,
    "\x00",
    "",
]
OPTIONS = [
    ["--format", "json"],
    ["--format", "xml"],
    ["--config", "missing.yaml"],
    ["--config", "bad.yaml"],
    ["--config", "good.yaml"],
    ["-cn", "ppo_megatron_trainer"],
    ["-cn", "no_such_config"],
    ["--config-path", "config", "--config-name", "ppo_trainer.yaml"],
    ["--config-dir", "/nonexistent"],
    ["-s", "no_such_module"],
    ["--bogus-option"],
]
COMMANDS = [["validate"], ["describe"], ["config"], ["schema", "check"], ["schema", "export"]]


def case(rng: random.Random) -> list[str]:
    """One command line: a subcommand, the schema module, zero to two options, zero to four overrides."""
    args = [*rng.choice(COMMANDS), "-s", "fuzz_ctx"]
    while rng.random() < 0.25:
        args += rng.choice(OPTIONS)
    for _ in range(rng.randint(0, 4)):
        key = rng.choice(KEYS)
        value = rng.choice(VALUES).replace("{S}", SECRET if key in MAY_BE_SECRET else "plain-value")
        args.append(f"{rng.choices(['+', '', '++', '~'], weights=[6, 2, 1, 1])[0]}{key}={value}")
    if rng.random() < 0.1:
        args.append(rng.choice(["--help", "=", "-", "--", "a=b=c"]))
    return args


def campaign(n: int, seed: int, scratch: Path) -> dict[str, Any]:
    from verl_ctx.cli._main import cli

    rng = random.Random(seed)
    (scratch / "fuzz_ctx.py").write_text(textwrap.dedent(MODULE))
    (scratch / "bad.yaml").write_text("extra_context: {critic: [unclosed\n")
    (scratch / "good.yaml").write_text(f"extra_context:\n  reward:\n    token: {SECRET}\n")
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    runner = CliRunner()
    exits: Counter[str] = Counter()
    defects: list[str] = []
    worst = 0.0
    for i in range(n):
        args = case(rng)
        started = time.perf_counter()
        result = runner.invoke(cli, args, prog_name="verl-ctx", env={"NO_COLOR": "1"})
        worst = max(worst, time.perf_counter() - started) if i else worst  # the first run pays the imports
        exits[str(result.exit_code)] += 1
        problem = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            problem = f"{type(result.exception).__name__}: {result.exception!r:.200}"
        elif result.exit_code not in (0, 1, 2):
            problem = f"exit {result.exit_code}"
        elif "Traceback" in result.output:
            problem = "a traceback in the output"
        elif SECRET in result.output or SECRET[3:] in result.output:
            problem = "the secret in the output"
        if problem:  # the command line as run, the sentinel secret named not shown (the seed reproduces it)
            defects.append(f"{problem} for {args!r}".replace(SECRET, "<SECRET>").replace(SECRET[3:], "<SECRET>"))
    return {
        "seed": seed,
        "tried": n,
        "exits": dict(sorted(exits.items())),
        "worst_s": round(worst, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "defects": defects[:50],
    }


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 300
    seed = int(argv[1]) if len(argv) > 1 else random.SystemRandom().randrange(2**32)
    with tempfile.TemporaryDirectory(prefix="verl-ctx-fuzz-cli-") as scratch:  # removed after, run or fail
        report = campaign(n, seed, Path(scratch))
    print(json.dumps(report))
    return 1 if report["defects"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
