"""Run the real `verl-ctx` console script in a subprocess, from a scratch directory with schema modules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verl_ctx._require import importable

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this directory's tests where verl or ray cannot be found (a core-only test environment).

    The command composes verl's own Hydra config from verl's files, and its verl integration checks that ray can
    be found; it imports no verl module, so `pip install --no-deps verl` and ray are enough (no torch).
    """
    if importable("verl") and importable("ray"):
        return
    skip = pytest.mark.skip(reason="the CLI suite needs verl's config and ray: pip install 'verl-ctx[verl]'")
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def console_script() -> str:
    found = Path(sys.executable).parent / "verl-ctx"
    return str(found) if found.exists() else (shutil.which("verl-ctx") or "verl-ctx")


Run = Callable[..., Result]


@pytest.fixture
def run_cli(tmp_path: Path) -> Run:
    """``run_cli(*args, env=None)``: the console script, cwd = tmp_path, the repo importable."""

    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        full_env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "NO_COLOR": "1", **(env or {})}
        proc = subprocess.run(
            [console_script(), *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=full_env,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """``write(name, text)``: a dedented file under the scratch directory."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return _write


CONTEXTS = """
    from typing import Literal
    from pydantic import BaseModel, Field, SecretStr
    from verl_ctx import RoleContext

    class Judge(BaseModel):
        url: str = "http://judge"
        api_key: SecretStr | None = None

    class CriticContext(RoleContext, role="critic"):
        value_clip: float = Field(0.2, gt=0)
        warmup_steps: int = 0
        shaping: Literal["none", "length_penalty"] = "none"

    class RewardContext(RoleContext, role="reward"):
        judge: Judge = Field(default_factory=Judge)
        token: SecretStr | None = None
"""
