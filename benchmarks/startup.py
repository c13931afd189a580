"""Fresh-process costs: `import verl_ctx`, and `verl-ctx validate` against importing verl's trainer."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .timing import fmt_seconds, table

TITLE = "Start-up: import and pre-launch validation (fresh processes)"

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "integrations" / "data" / "verl_launch_scripts.json"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def corpus_launches(validate: list[str]) -> dict[str, list[str]]:
    """Two of verl's own launch scripts the installed verl composes: one with its own --config-path, one without.

    The recorded verdicts are verl 0.9.1's; an older verl refuses some launches (keys it does not have yet), so
    each candidate is composed once here (exit 2: refused) before it is timed.
    """
    launches = [x for x in json.loads(CORPUS.read_text()) if x["verl_composes"] and not x["repaired"]]
    chosen: dict[str, list[str]] = {}
    for with_path in (True, False):
        for x in launches:
            if any(a.startswith("--config-path" if with_path else "--config") for a in x["args"]) != with_path:
                continue
            probe = subprocess.run([*validate, *x["args"]], capture_output=True, cwd=REPO, env=_env(), check=False)
            if probe.returncode != 2:
                chosen[Path(x["script"]).name] = x["args"]
                break
    return chosen


def _walls(commands: dict[str, list[str]], rounds: int, cwd: Path | None = None) -> dict[str, list[float]]:
    """Wall time of each command in a fresh process, ``rounds`` times, interleaved (order alternating)."""
    env = _env()
    times: dict[str, list[float]] = {name: [] for name in commands}
    order = list(commands.items())
    for r in range(rounds):
        for name, cmd in order if r % 2 == 0 else reversed(order):
            started = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=cwd, env=env)
            times[name].append(time.perf_counter() - started)
    return times


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    # Byte-compile first, as `pip install` does: this machine sets PYTHONDONTWRITEBYTECODE.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True, capture_output=True)
    rounds = 3 if quick else 9
    py = sys.executable
    # pydantic loads BaseModel lazily, and its plugin loader on the first model class: any library that
    # defines a model pays both at import.
    imports = _walls(
        {
            "bare": [py, "-c", "pass"],
            "light": [py, "-c", "import pydantic, msgspec"],
            "models": [py, "-c", "import msgspec\nfrom pydantic import BaseModel\nclass M(BaseModel):\n    x: int = 0"],
            "ours": [py, "-c", "import verl_ctx"],
        },
        rounds,
    )
    # The import ratio per round (each over the bare interpreter of the same round), then the median and spread.
    per_round = sorted(
        (o - b) / (m - b) for o, m, b in zip(imports["ours"], imports["models"], imports["bare"], strict=True)
    )
    import_ratio = statistics.median(per_round)
    bare, light, models, ours = (statistics.median(imports[k]) for k in ("bare", "light", "models", "ours"))
    cli = str(Path(py).parent / "verl-ctx")
    validate_cmd = [cli, "validate", "-s", "examples.custom_recipe.contexts"]
    override = "+extra_context.critic.value_clip=0.3"
    launches = corpus_launches(validate_cmd)
    heavy = _walls(
        {
            "validate": [*validate_cmd, override],
            # After the launch's own arguments: Hydra's parser takes one run of overrides, after its options.
            **{name: [*validate_cmd, *args, override] for name, args in launches.items()},
            "verl": [py, "-c", "import verl.trainer.main_ppo"],
        },
        # 5 in a full run (a median of 3 fresh processes swung by 30 % between runs); one in --quick, which only
        # proves the section runs (the test suite's form: each round imports verl's trainer, ~8 s)
        1 if quick else 5,
        cwd=REPO,
    )
    validate, verl = statistics.median(heavy["validate"]), statistics.median(heavy["verl"])
    corpus = {name: statistics.median(heavy[name]) for name in launches}
    # Against verl's import of the same round (paired, as the codec section's ratios), then the median and range.
    paired = {name: _paired(heavy[name], heavy["verl"]) for name in ("validate", *launches)}
    rows = [
        ["python -c pass", fmt_seconds(bare), ""],
        ["import pydantic, msgspec", fmt_seconds(light), f"+{fmt_seconds(light - bare)} over bare"],
        ["import msgspec + define one pydantic model", fmt_seconds(models), f"+{fmt_seconds(models - bare)}"],
        [
            "import verl_ctx",
            fmt_seconds(ours),
            f"{(ours - bare) / (light - bare):.2f}x `import pydantic, msgspec`; **{import_ratio:.2f}x** msgspec + "
            f"one model ({per_round[0]:.2f}-{per_round[-1]:.2f} over {rounds} rounds; target ≤ 1.1)",
        ],
        [
            "verl-ctx validate (verl's ppo_trainer config + overrides)",
            fmt_seconds(validate),
            f"{_fmt(paired['validate'])} importing verl's trainer",
        ],
        *(
            [f"verl-ctx validate, verl's `{name}` ({len(launches[name])} args)", fmt_seconds(t), _fmt(paired[name])]
            for name, t in corpus.items()
        ),
        ["python -c 'import verl.trainer.main_ppo'", fmt_seconds(verl), "1.00"],
    ]
    ratios = {
        "import": (ours - bare) / (light - bare),
        "import_vs_basemodel": import_ratio,
        "validate_vs_verl_import": paired["validate"][0],
        "corpus_validate_vs_verl_import": max(paired[name][0] for name in launches),
        "validate_s": validate,
    }
    return table(["fresh process", "median wall time", "ratio"], rows), ratios


def _paired(times: list[float], against: list[float]) -> tuple[float, float, float]:
    """The median of the per-round ratios, and their range."""
    ratios = sorted(t / a for t, a in zip(times, against, strict=True))
    return statistics.median(ratios), ratios[0], ratios[-1]


def _fmt(ratio: tuple[float, float, float]) -> str:
    return f"{ratio[0]:.2f}x ({ratio[1]:.2f}-{ratio[2]:.2f})"
