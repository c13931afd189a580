"""Every code block in README.md, docs/*.md and examples/*/README.md runs as written.

Python blocks run in a fresh interpreter each (so a block is self-contained, as a reader copies it); shell blocks
run command by command with the installed `verl-ctx`; YAML and JSON blocks must parse. Each document gets its own
scratch directory (with `examples/` linked in). An HTML comment right before a block changes how it runs:

* ``<!-- doc-test: file PATH -->``: the block is that file; it is written (packages get an ``__init__.py``) and,
  for Python, also imported;
* ``<!-- doc-test: check-only (why) -->``: a `verl-ctx run` that needs GPUs runs as `verl-ctx run --check`: every
  check before Ray, verl's own pre-launch check (``validate_config``) included, with the model and data paths it
  names replaced by tiny stand-ins (``verl_ctx.testing``), so an incomplete command fails here as it would there;
* ``<!-- doc-test: expect-exit N -->``: each command exits with N; a shell command whose trailing comment is
  exactly ``# exit N`` (``cmd ...   # exit 1``) expects N, the block's others 0;
* ``<!-- doc-test: run-by WHAT (why) -->`` / ``<!-- not-run: why -->``: executed elsewhere (CI's .ci/run, another
  test) or beyond this machine (a GPU); the reason is required.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from verl_ctx.integrations.verl.external._checks import verl_has_pool_switch

from .conftest import REPO

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "examples").glob("*/README.md")])
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_MARK = re.compile(r"<!--\s*(doc-test:|not-run:)\s*(.*?)\s*-->\s*$", re.S)
#: The paths a documented launch names that a reader has and this machine has not: replaced by tiny stand-ins.
_STAND_INS = ("actor_rollout_ref.model.path", "critic.model.path", "data.train_files", "data.val_files")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    code: str
    mark: str  # "" or the marker's text, e.g. "file my_recipe/contexts.py"

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text()
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip()
        last = before.rsplit("\n", 1)[-1]
        mark = _MARK.search(last)
        label = "" if mark is None else ("not-run " if mark.group(1) == "not-run:" else "") + mark.group(2)
        found.append(Block(doc, text[: match.start()].count("\n") + 1, match.group(1), match.group(2), label))
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]


def test_every_document_has_its_blocks_found() -> None:
    """The extractor sees the blocks of every document (a broken fence would hide them from this test)."""
    assert {b.doc.name for b in ALL} >= {"README.md"}
    assert all(text.count("```") % 2 == 0 for text in (d.read_text() for d in DOCS))
    print(f"{len(ALL)} blocks in {len(DOCS)} documents")


def _env(scratch: Path) -> dict[str, str]:
    """The environment a reader has: the venv's commands on PATH and nothing on PYTHONPATH; commands run from the
    folder each document names (``scratch``), whose modules are found from there as the docs promise."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "RAY_AUTH_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
    }
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def scratches(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """One scratch directory per document, with examples/ linked in and every `file` block written."""
    out = {}
    for doc in DOCS:
        scratch = tmp_path_factory.mktemp(doc.stem)
        (scratch / "examples").symlink_to(REPO / "examples")
        if doc.name == "recipes.md":  # run from a verl checkout, as a recipe collection's scripts are
            import verl

            (scratch / "verl").symlink_to(Path(verl.__file__).parent)
            (scratch / "recipe").symlink_to(REPO / "examples" / "recipe")
        for block in blocks(doc):
            if block.mark.startswith("file "):
                path = scratch / block.mark.split()[1]
                path.parent.mkdir(parents=True, exist_ok=True)
                for parent in path.relative_to(scratch).parents:
                    if str(parent) != "." and block.lang == "python":
                        (scratch / parent / "__init__.py").touch()
                path.write_text(block.code)
        out[doc] = scratch
    return out


def _commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and blank lines dropped."""
    return [command for command, _ in _commands_and_exits(code)]


_EXIT_COMMENT = re.compile(r"#\s*exit\s+(\d+)\s*")  # the whole comment: `# exit 1 on ...` is prose


def _commands_and_exits(code: str) -> list[tuple[str, int | None]]:
    """Each shell command of a block, with the exit code its trailing ``# exit N`` comment states (else None)."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        command, _, comment = line.partition(" #")
        command = command.strip()
        if command and not command.startswith("#"):
            stated = _EXIT_COMMENT.fullmatch("#" + comment.strip()) if comment else None
            out.append((command, int(stated.group(1)) if stated else None))
    return out


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A tiny model and dataset (verl's check reads the model's config): the values for ``_STAND_INS``."""
    from verl_ctx.testing import tiny_dataset, tiny_model

    where = tmp_path_factory.mktemp("stand-ins")
    model, data = str(tiny_model(where / "model")), str(tiny_dataset(where / "data"))
    return dict(zip(_STAND_INS, (model, model, data, data), strict=True))


def _check_only(command: str, stand_ins: dict[str, str]) -> str:
    """The documented `verl-ctx run ...` as `verl-ctx run --check ...`, with its model and data paths stood in."""
    words = shlex.split(command)
    assert words[:2] == ["verl-ctx", "run"], f"check-only marks a `verl-ctx run`, not: {command}"
    assert "--rehearse" not in words, f"a rehearsal runs as written, not check-only: {command}"
    kept = ["verl-ctx", "run", "--check"]
    for word in words[2:]:
        key, sep, _ = word.lstrip("+").partition("=")
        kept.append(f"{word.split('=', 1)[0]}={stand_ins[key]}" if sep and key in stand_ins else word)
    return shlex.join(kept)


@pytest.mark.parametrize("block", ALL, ids=[b.name for b in ALL])
def test_block_runs(block: Block, scratches: dict[Path, Path], request: pytest.FixtureRequest) -> None:
    """The block runs (or parses) as a reader would run it, in its document's scratch directory; a launch that needs
    GPUs runs up to and through verl's own pre-launch check."""
    scratch = scratches[block.doc]
    if block.mark.startswith(("run-by", "not-run")):
        assert len(block.mark.split(maxsplit=2)) >= 2, f"{block.name}: say why it is not run here"
        pytest.skip(block.mark)
    if block.lang in ("yaml", "yml"):
        yaml.safe_load(block.code)
        return
    if block.lang == "json":
        json.loads(block.code)
        return
    if block.lang == "python":
        code = block.code
        if block.mark.startswith("file "):
            module = block.mark.split()[1].removesuffix(".py").replace("/", ".")
            code = f"import {module}"
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, f"{block.name}:\n{out.stderr[-3000:]}"
        return
    if block.lang in ("bash", "sh", "shell", "console"):
        expected = int(block.mark.split()[1]) if block.mark.startswith("expect-exit") else 0
        assert not block.mark.startswith("validate-only"), (
            f"{block.name}: a launch is checked as far as verl's own check"
        )
        for command, stated in _commands_and_exits(block.code):
            want = expected if stated is None else stated
            if block.mark.startswith("check-only"):
                command = _check_only(command, request.getfixturevalue("stand_ins"))
            out = subprocess.run(
                ["bash", "-c", command], cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=600
            )
            if "trainer.v1.trainer_mode=external_pool" in command and not verl_has_pool_switch():
                # verl 0.9.0: the documented refusal (docs/compatibility.md), before anything starts
                assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
                assert "the external_pool trainer needs verl >= 0.9.1" in out.stderr
                continue
            assert out.returncode == want, (
                f"{block.name}: `{command}` exited {out.returncode}, expected {want}\n{out.stderr[-3000:]}"
            )
            if block.mark.startswith("check-only"):
                assert "verl's pre-launch checks passed" in out.stdout, out.stdout[-2000:]
                print(f"{block.name}: reached and passed verl's pre-launch check: {command}")
        return
    assert block.lang in ("", "text"), f"{block.name}: a ```{block.lang} block this test cannot run"
