"""Fresh-process costs: `import verl_ctx`, and `verl-ctx validate` against importing verl's trainer."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .timing import fmt_seconds, table

TITLE = "Start-up: import and pre-launch validation (fresh processes)"

REPO = Path(__file__).resolve().parents[1]


def _wall(cmd: list[str], repeat: int, cwd: Path | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=cwd, env=env)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    # Byte-compile first, as `pip install` does: this machine sets PYTHONDONTWRITEBYTECODE.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=True, capture_output=True)
    repeat = 3 if quick else 7
    py = sys.executable
    bare = _wall([py, "-c", "pass"], repeat)
    light = _wall([py, "-c", "import pydantic, msgspec"], repeat)
    # pydantic loads BaseModel lazily, and its plugin loader on the first model class: any library that
    # defines a model pays both at import.
    models = _wall(
        [py, "-c", "import msgspec\nfrom pydantic import BaseModel\nclass M(BaseModel):\n    x: int = 0"], repeat
    )
    ours = _wall([py, "-c", "import verl_ctx"], repeat)
    cli = str(Path(py).parent / "verl-ctx")
    validate = _wall(
        [cli, "validate", "-s", "examples.custom_recipe.contexts", "+extra_context.critic.value_clip=0.3"],
        max(3, repeat // 2),
        cwd=REPO,
    )
    verl = _wall([py, "-c", "import verl.trainer.main_ppo"], max(3, repeat // 2))
    rows = [
        ["python -c pass", fmt_seconds(bare), ""],
        ["import pydantic, msgspec", fmt_seconds(light), f"+{fmt_seconds(light - bare)} over bare"],
        ["import msgspec + define one pydantic model", fmt_seconds(models), f"+{fmt_seconds(models - bare)}"],
        [
            "import verl_ctx",
            fmt_seconds(ours),
            f"{(ours - bare) / (light - bare):.2f}x `import pydantic, msgspec`; "
            f"{(ours - bare) / (models - bare):.2f}x msgspec + one model",
        ],
        [
            "verl-ctx validate (verl's ppo_trainer config + overrides)",
            fmt_seconds(validate),
            f"{validate / verl:.2f}x importing verl's trainer",
        ],
        ["python -c 'import verl.trainer.main_ppo'", fmt_seconds(verl), "1.00"],
    ]
    ratios = {
        "import": (ours - bare) / (light - bare),
        "import_vs_basemodel": (ours - bare) / (models - bare),
        "validate_vs_verl_import": validate / verl,
        "validate_s": validate,
    }
    return table(["fresh process", "median wall time", "ratio"], rows), ratios
