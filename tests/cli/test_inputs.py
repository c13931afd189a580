"""What users type that goes wrong, through the real console script: clear messages and the documented exit codes."""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import CONTEXTS, Run

pytest.importorskip("hydra")

Write = Callable[[str, str], Path]


@pytest.fixture
def ctx_module(write: Write) -> str:
    write("my_ctx.py", CONTEXTS)
    return "my_ctx"


def test_typo_in_a_nested_section_is_an_error_with_did_you_mean(run_cli: Run, ctx_module: str) -> None:
    """A misspelt key inside a nested model (judge.urll) is refused, although the nested model ignores extras."""
    res = run_cli("validate", "-s", ctx_module, "+extra_context.reward.judge.urll=http://x")
    assert res.code == 1
    assert "extra_context.reward.judge.urll: unknown field" in res.err
    assert "did you mean 'url'?" in res.err
    assert "http://x" not in res.err  # an unknown key could be a mistyped secret: never echoed


def test_mistyped_secret_field_is_never_echoed(run_cli: Run, ctx_module: str) -> None:
    """A typo of a secret field's name reports type and length, in human and JSON output alike."""
    for fmt in ("human", "json"):
        res = run_cli("validate", "-s", ctx_module, "--format", fmt, "+extra_context.reward.tokn=sk-live-123")
        assert res.code == 1
        assert "sk-live-123" not in res.out + res.err
        assert "did you mean 'token'?" in res.out + res.err


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "no.such.key=sk-live-123"],  # Hydra: "To append to your config use +no.such.key=..."
        ["validate", "+extra_context.rewrd=1", "~extra_context=sk-live-123"],  # Hydra: "... and not sk-..."
        # Hydra prints the subtree it would not delete, re-formatted: {'a': 'sk-...'}
        ["validate", "+extra_context.reward.tokn={a: sk-live-123}", "~extra_context=x"],
        # argparse takes one run of overrides: the ones after -cn are "unrecognized arguments"
        ["validate", "algorithm.adv_estimator=gae", "-cn", "ppo_trainer", "+extra_context.reward.token=sk-live-123"],
        ["schema", "check", ".", "extra_context.reward.token=sk-live-123"],  # click: unexpected extra argument
        ["schema", "check", "extra_context.reward.token=sk-live-123"],  # an override where a directory goes
    ],
    ids=["hydra-override", "hydra-delete", "hydra-delete-subtree", "argparse", "click-extra", "schema-check-dir"],
)
def test_override_values_in_other_libraries_messages_are_withheld(
    run_cli: Run, ctx_module: str, args: list[str]
) -> None:
    """Hydra, argparse and click echo a failing override whole; the value may be a secret: only the key shows."""
    res = (
        run_cli(*args[:2], "-s", ctx_module, *args[2:])
        if args[0] == "schema"
        else run_cli(args[0], "-s", ctx_module, *args[1:])
    )
    assert res.code == 2, res.out + res.err
    assert "sk-live-123" not in res.out + res.err
    assert "Traceback" not in res.err


def test_a_path_the_os_refuses_is_a_usage_error() -> None:
    """A NUL byte in a path argument (possible in-process only) is exit 2 with a message, not a ValueError."""
    from click.testing import CliRunner

    from verl_ctx.cli._main import cli

    for args in (["schema", "check", "a\x00b"], ["diff", "a\x00b"], ["validate", "--config", "a\x00b.yaml"]):
        res = CliRunner().invoke(cli, args, prog_name="verl-ctx")
        assert isinstance(res.exception, SystemExit), (args, res.exception)
        assert res.exit_code == 2, (args, res.output)


def test_inactive_role_never_blocks_even_when_incomplete(run_cli: Run, write: Write) -> None:
    """Under GRPO no critic runs: a CriticContext with a required field and no section is not an error."""
    write("strict_ctx.py", "from verl_ctx import RoleContext\nclass C(RoleContext, role='critic'):\n    beta: float\n")
    assert run_cli("validate", "-s", "strict_ctx", "algorithm.adv_estimator=grpo").code == 0
    res = run_cli("validate", "-s", "strict_ctx", "algorithm.adv_estimator=grpo", "+extra_context.critic.beta=x")
    assert res.code == 0, res.err
    assert "InactiveRoleWarning" in res.err
    assert run_cli("validate", "-s", "strict_ctx", "algorithm.adv_estimator=gae").code == 1


def test_ref_is_inactive_in_a_lora_run(run_cli: Run, write: Write) -> None:
    """With a LoRA actor verl computes reference log-probs in the actor and builds no ref worker: we say so."""
    write("ref_ctx.py", "from verl_ctx import RoleContext\nclass R(RoleContext, role='ref'):\n    t: float = 1.0\n")
    args = ("validate", "-s", "ref_ctx", "actor_rollout_ref.actor.use_kl_loss=true", "+extra_context.ref.t=2")
    assert "InactiveRoleWarning" not in run_cli(*args).err
    res = run_cli(*args, "actor_rollout_ref.model.lora.rank=8")
    assert res.code == 0
    assert "LoRA run" in res.err
    assert "no ref worker is built" in res.err


def test_describe_shows_json_values_one_row_per_leaf(run_cli: Run, write: Write) -> None:
    """Times in ISO form, enums by value, nested models one leaf per row with that leaf's own source."""
    write(
        "rich_ctx.py",
        """
        import datetime as dt, enum
        from pydantic import BaseModel
        from verl_ctx import RoleContext

        class Mode(enum.Enum):
            ADDITIVE = "additive"

        class Inner(BaseModel):
            a: int = 1
            b: int = 2

        class C(RoleContext, role="critic"):
            when: dt.datetime = dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.timezone.utc)
            mode: Mode = Mode.ADDITIVE
            inner: Inner = Inner()
        """,
    )
    res = run_cli("describe", "-s", "rich_ctx", "--format", "json", "+extra_context.critic.inner.a=5")
    assert res.code == 0, res.err
    rows = {r["path"]: (r["value"], r["source"]) for r in res.json()}
    assert rows["extra_context.critic.when"] == ("2026-01-02T03:04:00+00:00", "schema default")
    assert rows["extra_context.critic.mode"] == ("additive", "schema default")
    assert rows["extra_context.critic.inner.a"] == (5, "command-line override")
    assert rows["extra_context.critic.inner.b"] == (2, "schema default")
    human = run_cli("describe", "-s", "rich_ctx")
    assert "TzInfo" not in human.out
    assert "<Mode." not in human.out


def test_config_command_prints_what_verl_gets_with_secrets_redacted(run_cli: Run, ctx_module: str) -> None:
    """`verl-ctx config` shows the composed config with the validated contexts, secrets as stars."""
    res = run_cli("config", "-s", ctx_module, "+extra_context.reward.judge.api_key=hunter2", "trainer.total_epochs=3")
    assert res.code == 0, res.err
    assert "hunter2" not in res.out
    assert "api_key: '**********'" in res.out
    assert "total_epochs: 3" in res.out


def test_config_prints_one_subtree_with_package(run_cli: Run, ctx_module: str) -> None:
    """`config -p PATH` prints only that subtree (secrets still stars), a leaf as its value; a path the config does
    not have is a usage error naming the nearest key."""
    args = ["-s", ctx_module, "extra_context.reward.judge.api_key=hunter2", "trainer.total_epochs=3"]
    whole = run_cli("config", *args)
    part = run_cli("config", "-p", "extra_context.reward", *args)
    assert part.code == 0, part.err
    assert part.out.splitlines()[0] == "# @package extra_context.reward"
    assert "api_key: '**********'" in part.out
    assert "hunter2" not in part.out
    assert "total_epochs" not in part.out
    assert len(part.out.splitlines()) < len(whole.out.splitlines()) / 50
    leaf = run_cli("config", "--package", "trainer.total_epochs", *args)
    assert leaf.out.splitlines() == ["# @package trainer.total_epochs", "3"]
    typo = run_cli("config", "-p", "extra_context.rewrd", *args)
    assert typo.code == 2
    assert "did you mean 'extra_context.reward'?" in typo.err
    assert typo.out == ""


def test_messages_read_well(run_cli: Run, write: Write) -> None:
    """Acronyms keep their capitals, union tags stay out of paths, type errors carry a hint."""
    write(
        "msg_ctx.py",
        """
        from typing import Annotated, Literal, Union
        from pydantic import AnyUrl, BaseModel, Field
        from verl_ctx import RoleContext

        class Search(BaseModel):
            kind: Literal["search"] = "search"
            index: int = 0

        class Calc(BaseModel):
            kind: Literal["calc"] = "calc"

        class C(RoleContext, role="critic"):
            endpoint: AnyUrl = AnyUrl("http://x")
            tools: list[Annotated[Union[Search, Calc], Field(discriminator="kind")]] = []
            steps: int = 0
        """,
    )
    res = run_cli(
        "validate",
        "-s",
        "msg_ctx",
        "+extra_context.critic.endpoint=ftp//x",
        "+extra_context.critic.tools=[{kind: calc}, {kind: search, index: x}]",
        "+extra_context.critic.steps=many",
    )
    assert res.code == 1
    assert "URL" in res.err or "url" in res.err
    assert "uRL" not in res.err
    assert "extra_context.critic.tools[1].index: input should be a valid integer" in res.err
    assert "tools.1.search" not in res.err
    assert "expected a whole number" in res.err


def test_missing_dependency_inside_the_schema_module_is_named(run_cli: Run, write: Write) -> None:
    """A schema module that imports a package which is not installed: that package is named, not the module."""
    write("needs_dep.py", "import definitely_not_installed_pkg\n")
    res = run_cli("validate", "-s", "needs_dep")
    assert res.code == 2
    assert "needs module 'definitely_not_installed_pkg', which is not installed" in res.err


def test_schema_module_that_exits_is_a_usage_error(run_cli: Run, write: Write) -> None:
    """sys.exit(0) while importing a schema module must not look like a pass in CI."""
    write("exits.py", "import sys\nsys.exit(0)\n")
    res = run_cli("validate", "-s", "exits")
    assert res.code == 2
    assert "called sys.exit(0)" in res.err


def test_interrupt_exits_130(run_cli: Run, write: Write) -> None:
    """Ctrl-C (KeyboardInterrupt) ends with exit code 130, as shells expect, not 1."""
    write("interrupts.py", "raise KeyboardInterrupt\n")
    res = run_cli("validate", "-s", "interrupts")
    assert res.code == 130
    assert "interrupted" in res.err


def test_yaml_alias_bomb_is_refused_quickly(run_cli: Run, ctx_module: str, write: Write) -> None:
    """A 400-byte 'billion laughs' config is refused before Hydra expands it."""
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    write("bomb.yaml", "\n".join(lines) + "\n")
    started = time.perf_counter()
    res = run_cli("validate", "-s", ctx_module, "--config", "bomb.yaml")
    assert res.code == 2
    assert "through its YAML aliases" in res.err
    assert time.perf_counter() - started < 30


def test_huge_config_is_refused_before_composing(run_cli: Run, ctx_module: str, tmp_path: Path) -> None:
    """A config file over the size limit is refused with its size, without being parsed."""
    (tmp_path / "huge.yaml").write_text("x: " + "y" * (5 * 1024 * 1024) + "\n")
    res = run_cli("validate", "-s", ctx_module, "--config", "huge.yaml")
    assert res.code == 2
    assert "bytes; verl-ctx reads configs up to" in res.err


def test_help_lists_the_exit_codes(run_cli: Run) -> None:
    """`verl-ctx validate --help` says what each exit code means."""
    res = run_cli("validate", "--help")
    assert res.code == 0
    assert "Exit codes:" in res.out
    assert "130" in res.out


@pytest.mark.usefixtures("empty_default_registry")
def test_accept_context_change_reaches_the_config_verl_gets(
    ctx_module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--accept-context-change sets verl_ctx_accept_change in the config handed to launch (which needs GPUs)."""
    from click.testing import CliRunner

    from verl_ctx.cli._main import cli
    from verl_ctx.integrations.verl import _launch

    seen: list[object] = []
    monkeypatch.setattr(_launch, "launch", lambda config, *a, **k: seen.append(config.get("verl_ctx_accept_change")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for flag, expected in (("--accept-context-change", True), (None, None)):
        args = ["run", "-s", ctx_module, *([flag] if flag else [])]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert seen.pop() == expected


def _invoke(args: list[str], cwd: Path) -> tuple[int, str]:
    """The CLI in this process (cheap): its exit code and everything it printed."""
    import os

    from click.testing import CliRunner

    from verl_ctx.cli._main import cli

    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(cli, args, prog_name="verl-ctx")
    finally:
        os.chdir(old)
    assert isinstance(res.exception, SystemExit | None), repr(res.exception)
    return res.exit_code, res.output


def _deep_yaml(depth: int) -> str:
    return "a: " + "[" * depth + "1" + "]" * depth + "\n"


ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9)
)


@pytest.mark.parametrize(
    ("files", "config"),
    [
        ({"bad.yaml": b"a: \xff\xfe\n"}, "bad.yaml"),
        ({"deep.yaml": _deep_yaml(1000).encode()}, "deep.yaml"),
        ({}, "/proc/self/mem"),
        (
            {"main.yaml": b"defaults:\n  - grp: bomb\n  - _self_\na: 1\n", "grp/bomb.yaml": ALIAS_BOMB.encode()},
            "main.yaml",
        ),
        (
            {"main.yaml": b"defaults:\n  - grp: deep\n  - _self_\na: 1\n", "grp/deep.yaml": _deep_yaml(1000).encode()},
            "main.yaml",
        ),
    ],
    ids=["not UTF-8", "nested 1000 deep", "/proc/self/mem", "alias bomb in a defaults list", "deep in a defaults list"],
)
def test_a_config_file_that_cannot_be_read_safely_is_one_line_and_exit_2(
    tmp_path: Path, files: dict[str, bytes], config: str
) -> None:
    """Every file Hydra would read (--config and what its defaults list pulls in) is checked first: exit 2, one line."""
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    started = time.perf_counter()
    code, out = _invoke(["validate", "-s", "verl_ctx", "--config", config], tmp_path)
    assert time.perf_counter() - started < 30  # the alias bomb ran for minutes
    assert code == 2, out
    assert len(out.strip().splitlines()) == 1, out
    assert "Traceback" not in out
    assert "config file" in out or "cannot read" in out, out


def test_a_fifo_as_config_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """--config naming a FIFO would block on open until something writes: refused at once instead."""
    import os
    import threading

    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    result: list[tuple[int, str]] = []
    args = ["validate", "-s", "verl_ctx", "--config", str(fifo)]
    worker = threading.Thread(target=lambda: result.append(_invoke(args, tmp_path)))
    worker.start()
    worker.join(60)
    if worker.is_alive():  # release the blocked reader, then fail
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(10)
        pytest.fail("validate --config FIFO blocked")
    ((code, out),) = result
    assert code == 2, out
    assert "not a regular file" in out


@pytest.mark.parametrize(
    "raise_",
    ["raise GeneratorExit", "class Stop(BaseException): pass\nraise Stop('from the module')"],
    ids=["GeneratorExit", "a BaseException subclass"],
)
def test_a_schema_module_raising_a_base_exception_is_a_usage_error(tmp_path: Path, raise_: str) -> None:
    """A schema module that raises GeneratorExit or its own BaseException at import: exit 2 and one line."""
    import sys

    name = f"base_raiser_{abs(hash(raise_))}"
    (tmp_path / f"{name}.py").write_text(raise_ + "\n")
    try:
        code, out = _invoke(["validate", "-s", name], tmp_path)
    finally:
        sys.modules.pop(name, None)
        sys.path[:] = [p for p in sys.path if p != str(tmp_path)]
    assert code == 2, out
    assert len(out.strip().splitlines()) == 1, out
    assert "Traceback" not in out


@pytest.mark.parametrize("command", ["export", "envelope"])
def test_an_export_directory_that_cannot_be_written_is_a_usage_error(
    run_cli: Run, ctx_module: str, tmp_path: Path, command: str
) -> None:
    """`schema export -o` / `schema envelope -o` to a place that cannot be written (under a file): exit 2, one
    line, no traceback."""
    (tmp_path / "a_file").write_text("x")
    args = ("-s", ctx_module, "-o", "a_file/out") if command == "export" else ("-o", "a_file/out.json")
    res = run_cli("schema", command, *args)
    assert res.code == 2, res.out + res.err
    assert len(res.err.strip().splitlines()) == 1, res.err
    assert "Traceback" not in res.err


@pytest.mark.usefixtures("empty_default_registry")
@pytest.mark.parametrize("command", ["validate", "describe"])
@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("+extra_context=[sk-live-123,x]", "extra_context should be a mapping; got list"),
        ("+extra_context.rollout=[sk-live-123]", "no schema is registered for this role"),
        ("++extra_context=${no.sk-live-123}", "the interpolation at extra_context failed"),
        ("+extra_context.rollout.routing=${no.sk-live-123}", "the interpolation at extra_context.rollout.routing"),
    ],
    ids=["list-for-extra_context", "list-for-a-role", "unresolved-extra_context", "unresolved-routing"],
)
def test_a_malformed_section_is_one_message_without_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, override: str, said: str
) -> None:
    """A list where extra_context (or a role's section) goes, or an interpolation that does not resolve: one
    message naming what was expected, not omegaconf's KeyValidationError or InterpolationKeyError from the
    external-pool settings check that reads the section beside validation (both found by the CLI fuzz campaign)."""
    (tmp_path / "malformed_ctx.py").write_text(textwrap.dedent(CONTEXTS))
    monkeypatch.delitem(sys.modules, "malformed_ctx", raising=False)  # imported afresh into the emptied registry
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out = _invoke([command, "-s", "malformed_ctx", override], tmp_path)
    assert code in (1, 2), out
    assert said in out, out
    assert "Traceback" not in out
    assert "sk-live-123" not in out


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("x = 1" + "+1" * 200_000 + "\n", "nested too deeply for Python's parser"),
        ("# padding\n" * 500_000, "over the 4194304-byte limit"),
        ("def main(:\n", "SyntaxError"),
    ],
    ids=["200k-deep expression", "over the size cap", "syntax error"],
)
def test_an_entry_module_that_cannot_be_read_is_one_line_and_exit_2(
    run_cli: Run, ctx_module: str, write: Write, source: str, said: str
) -> None:
    """-m reads the module's source to find its @hydra.main: a file too big, too deep or not Python is a usage error
    of one line naming it (never a RecursionError traceback, never minutes of parsing)."""
    write("odd_main.py", source)
    res = run_cli("validate", "-s", ctx_module, "-m", "odd_main")
    assert res.code == 2, res.out + res.err
    assert said in res.err
    assert "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1, res.err


@pytest.mark.parametrize("command", ["describe", "config"])
def test_a_secret_inside_another_value_is_masked_in_what_the_command_prints(
    run_cli: Run, ctx_module: str, command: str
) -> None:
    """The judge's key from the environment, and the same key inside the judge's URL (a plain str field, which no
    schema marks secret): every output goes through one redaction, so the key shows nowhere, in no encoding."""
    key = "sk-url-embedded-8c41d2"
    res = run_cli(
        command, "-s", ctx_module, "+extra_context.reward.judge.api_key=${oc.env:JUDGE_KEY}",
        f"+extra_context.reward.judge.url='http://judge.internal/score?key={key}'",
        env={"JUDGE_KEY": key},
    )  # fmt: skip
    assert res.code == 0, res.err
    assert "http://judge.internal/score?key=**********" in res.out
    for form in (key, key.encode().hex()):
        assert form not in res.out + res.err


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("verl-ctx valid", ["validate"]),
        ("verl-ctx validate -s my_c", ["my_ctx"]),
        ("verl-ctx run --import pk", ["pkg."]),
        ("verl-ctx run -m pkg.ma", ["pkg.main_x"]),
        ("verl-ctx config --pack", ["--package"]),
    ],
)
def test_shell_completion_completes_commands_options_and_modules(
    run_cli: Run, ctx_module: str, write: Write, words: str, expected: list[str]
) -> None:
    """click's bash completion, as docs/editor.md installs it: module names come from the working directory."""
    write("pkg/__init__.py", "")
    write("pkg/main_x.py", "")
    cword = str(len(words.split()) - 1)
    res = run_cli(env={"_VERL_CTX_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": cword})
    assert res.code == 0, res.err
    assert [line.split(",", 1)[1] for line in res.out.splitlines()] == expected
