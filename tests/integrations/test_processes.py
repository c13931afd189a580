"""Across real process boundaries: a driver script's __main__ schema, and driver/worker code skew."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import REPO

MAIN_SCRIPT = textwrap.dedent(
    """
    import enum, json, os
    import ray
    from pydantic import BaseModel, Field
    from verl_ctx import ContextRegistry, RoleContext, encode
    from verl_ctx import decode
    from verl_ctx.integrations.verl import bind_worker_cls

    class Mode(enum.Enum):
        GREEDY = "greedy"
        SAMPLE = "sample"

    class Inner(BaseModel):
        mode: Mode = Mode.GREEDY
        tags: list[str] = Field(default_factory=list)

    class MainContext(RoleContext, role="critic", registry=ContextRegistry()):
        inner: Inner = Field(default_factory=Inner)
        clip: float = 0.2

    class Reader:
        def __init__(self):
            self.ctx = decode(self, MainContext)

        def get(self):
            return {"ctx": self.ctx.model_dump(mode="json"), "mode_is_enum": isinstance(self.ctx.inner.mode, Mode),
                    "pid": os.getpid()}

    if __name__ == "__main__":
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        ctx = MainContext(inner=Inner(mode=Mode.SAMPLE, tags=["a", "b"]), clip=0.5)
        bound = bind_worker_cls(Reader, {"critic": encode(ctx)})
        result = ray.get(ray.remote(bound).remote().get.remote())
        result["driver_pid"] = os.getpid()
        print("RESULT " + json.dumps(result))
        ray.shutdown()
    """
)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env_path = f"{REPO}"
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**__import__("os").environ, "PYTHONPATH": env_path, "RAY_AUTH_MODE": "disabled"},
    )


@pytest.mark.ray
def test_schema_defined_in_driver_main_works_end_to_end(tmp_path: Path) -> None:
    """A schema class in a driver script's __main__ (nested model, Enum) decodes in a Ray worker process."""
    script = tmp_path / "driver.py"
    script.write_text(MAIN_SCRIPT)
    out = _run([str(script)], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result["ctx"] == {"inner": {"mode": "sample", "tags": ["a", "b"]}, "clip": 0.5}
    assert result["mode_is_enum"] is True
    assert result["pid"] != result["driver_pid"]


SCHEMA_V = {
    "driver": "from verl_ctx import RoleContext\n"
    "class Ctx(RoleContext, role='critic'):\n    clip: float = 0.2\n    steps: int = 0\n",
    "worker": "from verl_ctx import RoleContext\n"
    "class Ctx(RoleContext, role='critic'):\n    clip: float = 0.2\n    steps: str = 'none'\n    beta: float\n",
}

ENCODE = "import skewmod, verl_ctx, verl_ctx.envelope as e; print(e.to_text(verl_ctx.encode(skewmod.Ctx(steps=3))))"
DECODE = textwrap.dedent(
    """
    import json, sys, skewmod, verl_ctx, verl_ctx.errors, verl_ctx.schema
    try:
        verl_ctx.decode(sys.stdin.read().strip(), skewmod.Ctx)
    except verl_ctx.errors.SchemaMismatchError as e:
        own = verl_ctx.schema.schema_info(skewmod.Ctx).fingerprint
        print(json.dumps({"message": str(e), "driver": e.driver_fingerprint, "worker": e.worker_fingerprint,
                          "fields": list(e.differing_fields), "own": own}))
    """
)


def test_worker_with_different_schema_module_raises_mismatch(tmp_path: Path) -> None:
    """Driver and worker processes importing different versions of one schema module: the worker names both."""
    for side, source in SCHEMA_V.items():
        (tmp_path / side).mkdir()
        (tmp_path / side / "skewmod.py").write_text(source)
    driver = _run(["-c", ENCODE], tmp_path / "driver")
    assert driver.returncode == 0, driver.stderr
    worker = subprocess.run(
        [sys.executable, "-c", DECODE],
        cwd=tmp_path / "worker",
        input=driver.stdout,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr
    report = json.loads(worker.stdout)
    assert report["worker"] == report["own"]
    assert report["driver"] != report["worker"]
    assert report["driver"][:12] in report["message"]
    assert report["worker"][:12] in report["message"]
    assert report["fields"] == ["beta", "steps"]
