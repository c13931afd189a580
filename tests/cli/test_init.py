"""`verl-ctx init`: the skeleton it writes validates (no warning, under --strict), passes its own tests and lint, for
every choice of roles. README.md's block runs the default skeleton's rehearsal (tests/integrations/test_docs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verl_ctx._require import importable
from verl_ctx.cli._scaffold import ROLES, commands, files

from .conftest import Run

pytest.importorskip("hydra")
# The skeleton's verl surface (TrainingWorker, ActorRolloutRefWorker, verl's reward-function loader) is what the
# example recipes' rehearsals prove on every supported verl release; these tests check the skeleton's own text.
pytestmark = pytest.mark.one_verl


@pytest.mark.parametrize("roles", [*ROLES, "ref,rollout", "actor,critic,reward"])
def test_each_skeleton_validates_strictly_and_lints(run_cli: Run, tmp_path: Path, roles: str) -> None:
    name = "recipe_" + roles.replace(",", "_")
    made = run_cli("init", name, "--roles", roles)
    assert made.code == 0, made.err
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / name).iterdir()) == sorted(
        files(name, roles.split(","))
    )
    checked = run_cli("validate", "--strict", "-s", f"{name}.contexts", "--config", f"{name}/config.yaml")
    assert checked.code == 0, checked.err
    assert f"contexts valid for {len(roles.split(','))} role(s)" in checked.out
    if not importable("ruff"):  # a core-only environment (the compatibility matrix's other Pythons)
        return
    ruff = [sys.executable, "-m", "ruff"]
    lint = subprocess.run(
        [*ruff, "check", "--line-length", "120", "--select", "E,F,I,W,UP,B", name], cwd=tmp_path, capture_output=True
    )
    assert lint.returncode == 0, lint.stdout
    formatted = subprocess.run([*ruff, "format", "--check", "--line-length", "120", name], cwd=tmp_path)
    assert formatted.returncode == 0


def test_the_full_skeleton_passes_its_own_tests(run_cli: Run, tmp_path: Path) -> None:
    """Every role: its unit tests (verl's real config objects, the reward function with its context) pass."""
    if not importable("torch"):  # verl's worker modules import torch: an environment with verl's config files only
        pytest.skip("verl's worker classes need torch here")
    assert run_cli("init", "full", "--roles", ",".join(ROLES)).code == 0
    test = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "full"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert test.returncode == 0, test.stdout[-3000:]
    assert "5 passed" in test.stdout


def test_init_never_overwrites_and_refuses_bad_names_and_roles(run_cli: Run, tmp_path: Path) -> None:
    assert run_cli("init", "mine").code == 0
    contexts = tmp_path / "mine" / "contexts.py"
    contexts.write_text("# mine\n")
    again = run_cli("init", "mine")
    assert again.code == 2
    assert "nothing was written (--force overwrites them)" in again.err
    assert contexts.read_text() == "# mine\n"
    assert run_cli("init", "mine", "--force").code == 0
    assert "class ActorContext" in contexts.read_text()
    assert "use letters, digits and _" in run_cli("init", "my-recipe").err
    assert "is a Python keyword" in run_cli("init", "class").err
    for taken in ("verl", "os", "pytest"):  # a recipe would shadow it, or be shadowed by it, on every import
        shadowing = run_cli("init", taken)
        assert shadowing.code == 2
        assert f"a module named {taken} exists already" in shadowing.err
        assert not (tmp_path / taken).exists()
    bad = run_cli("init", "x", "--roles", "actr,critic")
    assert bad.code == 2
    assert "did you mean 'actor' for 'actr'?" in bad.err


@pytest.mark.parametrize("roles", ["reward", "ref", "critic,reward"])
def test_the_readme_lists_the_files_written(run_cli: Run, tmp_path: Path, roles: str) -> None:
    name = "listed_" + roles.replace(",", "_")
    assert run_cli("init", name, "--roles", roles).code == 0
    readme = (tmp_path / name / "README.md").read_text()
    listed = {line.split("`")[1] for line in readme.splitlines() if line.startswith("| `")}
    written = {p.name for p in (tmp_path / name).iterdir()} - {"__init__.py", "README.md"}
    assert listed == written
    assert "  " not in commands(name, roles.split(","))["rehearse"]


def test_the_printed_next_steps_are_the_readmes(run_cli: Run, tmp_path: Path) -> None:
    out = run_cli("init", "steps", "--roles", "critic").out
    readme = (tmp_path / "steps" / "README.md").read_text()
    for step in ("validate", "test", "rehearse"):
        assert commands("steps", ["critic"])[step] in out
        assert commands("steps", ["critic"])[step] in readme
