"""`verl-ctx validate` and `describe` through the real console script, on verl's own config."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import CONTEXTS, Run

pytest.importorskip("hydra")


@pytest.fixture
def ctx_module(write: Callable[[str, str], Path]) -> str:
    write("my_ctx.py", CONTEXTS)
    return "my_ctx"


def test_valid_overrides_exit_zero(run_cli: Run, ctx_module: str) -> None:
    """verl's own ppo_trainer config plus valid overrides: exit 0 and a one-line summary per role."""
    res = run_cli("validate", "-s", ctx_module, "+extra_context.critic.value_clip=0.3")
    assert res.code == 0, res.err
    assert "contexts valid for 2 role(s)" in res.out


def test_every_error_is_listed_at_once(run_cli: Run, ctx_module: str) -> None:
    """A bad value, a misspelt field and a misspelt role are all reported, each with path, value and fix."""
    res = run_cli(
        "validate",
        "-s",
        ctx_module,
        "+extra_context.critic.value_clip=-1",
        "+extra_context.critic.warmup_step=3",
        "+extra_context.critc.x=1",
    )
    assert res.code == 1
    assert "extra_context.critic.value_clip: input should be greater than 0 (got -1)" in res.err
    assert "extra_context.critic.warmup_step: unknown field (got 3); did you mean 'warmup_steps'?" in res.err
    assert "extra_context.critc: no schema is registered for this role; did you mean 'critic'?" in res.err


def test_a_schema_field_is_set_with_or_without_plus_and_a_typo_gets_the_nearest_field(
    run_cli: Run, ctx_module: str, write: Callable[[str, str], Path]
) -> None:
    """A field no config file sets (a default) is overridden without `+`, one a file sets with `+` too; a typo is
    not added by `+` but named with the nearest field; messages name no internal config or site-packages path."""
    write("run.yaml", "extra_context:\n  critic:\n    value_clip: 0.4\n")
    res = run_cli(
        "describe",
        "-s",
        ctx_module,
        "--format",
        "json",
        "--config",
        "run.yaml",
        "extra_context.reward.judge.url=http://other",
        "+extra_context.critic.value_clip=0.5",
    )
    assert res.code == 0, res.err
    sources = {row["path"]: (row["value"], row["source"]) for row in res.json()}
    assert sources["extra_context.reward.judge.url"] == ("http://other", "command-line override")
    assert sources["extra_context.critic.value_clip"] == (0.5, "command-line override")
    for typo in ("extra_context.reward.judge.ulr=x", "+extra_context.reward.judge.ulr=x"):
        bad = run_cli("validate", "-s", ctx_module, "--config", "run.yaml", typo)
        assert bad.code == 1, bad.err
        assert "extra_context.reward.judge.ulr: unknown field" in bad.err
        assert "did you mean 'url'?" in bad.err
    verl_typo = run_cli("validate", "-s", ctx_module, "--config", "run.yaml", "trainer.total_epoch=3")
    assert verl_typo.code == 2
    assert "did you mean 'trainer.total_epochs'?" in verl_typo.err
    assert "+trainer.total_epoch" not in verl_typo.err  # Hydra's advice would add the typo
    assert "verl_ctx_layered" not in verl_typo.err
    assert "site-packages" not in verl_typo.err
    assert "verl's config ppo_trainer with run.yaml over it" in verl_typo.err


def test_json_output_for_ci(run_cli: Run, ctx_module: str) -> None:
    """--format json gives machine-readable errors with role, path, input and hint."""
    res = run_cli("validate", "-s", ctx_module, "--format", "json", "+extra_context.critic.shaping=lenght_penalty")
    assert res.code == 1
    body = res.json()
    assert body["valid"] is False
    (error,) = body["errors"]
    assert (error["role"], error["path"], error["input"], error["hint"]) == (
        "critic",
        "extra_context.critic.shaping",
        '"lenght_penalty"',
        "did you mean 'length_penalty'?",
    )
    ok = run_cli("validate", "-s", ctx_module, "--format", "json").json()
    assert ok["valid"] is True
    assert set(ok["roles"]) == {"critic", "reward"}
    assert len(ok["roles"]["critic"]["fingerprint"]) == 64


def test_secrets_never_printed(run_cli: Run, ctx_module: str) -> None:
    """A wrong-typed secret is reported without its value, and describe shows stars."""
    bad = run_cli(
        "validate",
        "-s",
        ctx_module,
        "+extra_context.reward.token=[1,2]",
        "+extra_context.reward.judge.api_key=hunter2",
        "+extra_context.reward.judge.bogus=1",
    )
    assert bad.code == 1
    assert "hunter2" not in bad.err + bad.out
    assert "extra_context.reward.token" in bad.err
    good = run_cli("describe", "-s", ctx_module, "+extra_context.reward.judge.api_key=hunter2")
    assert good.code == 0, good.err
    assert "hunter2" not in good.out


def test_inactive_role_warns(run_cli: Run, ctx_module: str) -> None:
    """A critic context with GRPO (no critic runs) is valid but warned about, by verl's rules."""
    res = run_cli("validate", "-s", ctx_module, "algorithm.adv_estimator=grpo", "+extra_context.critic.value_clip=0.3")
    assert res.code == 0
    assert "InactiveRoleWarning" in res.err
    assert "this run starts no critic" in res.err


def test_describe_shows_provenance(run_cli: Run, ctx_module: str, write: Callable[[str, str], Path]) -> None:
    """Each leaf says whether it came from the schema default, the config file or the command line, as JSON values."""
    write("conf/train.yaml", "extra_context:\n  critic:\n    value_clip: 0.4\n    warmup_steps: 2\n")
    res = run_cli(
        "describe",
        "-s",
        ctx_module,
        "--format",
        "json",
        "--config",
        "conf/train.yaml",
        "extra_context.critic.warmup_steps=9",
    )
    assert res.code == 0, res.err
    sources = {row["path"]: (row["value"], row["source"]) for row in res.json()}
    assert sources["extra_context.critic.value_clip"] == (0.4, "config file")
    assert sources["extra_context.critic.warmup_steps"] == (9, "command-line override")
    assert sources["extra_context.critic.shaping"] == ("none", "schema default")
    assert sources["extra_context.reward.judge.url"] == ("http://judge", "schema default")


def test_config_file_flag(run_cli: Run, ctx_module: str, write: Callable[[str, str], Path]) -> None:
    """--config FILE is layered over verl's config and its values are validated."""
    write("run.yaml", "extra_context:\n  critic:\n    value_clip: -3\n")
    res = run_cli("validate", "-s", ctx_module, "--config", "run.yaml")
    assert res.code == 1
    assert "extra_context.critic.value_clip" in res.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate", "-s", "no_such_module_xyz"], "cannot import schema module 'no_such_module_xyz'"),
        # an override Hydra cannot read is named by position and key, its value never shown (it may be a secret)
        (["validate", "-s", "my_ctx", "extra_context.critic.value_clip=="], "override #1 (extra_context.critic."),
        (["validate", "-s", "my_ctx", "+extra_context.critic"], "override #1 (extra_context.critic) has no '='"),
        (["validate", "-s", "my_ctx", "sk-live-pasted0123"], "override #1 (not shown: it may be a secret)"),
        (["validate", "-s", "my_ctx", "--config", "broken.yaml"], "cannot"),
        (["validate", "-s", "my_ctx", "--config", "missing.yaml"], "cannot read config file"),
        (["validate", "-s", "my_ctx", "--config-path", "conf"], "resolved against the folder of verl.trainer.main_ppo"),
        (["validate", "-s", "my_ctx", "--multirun"], "does not launch a single run"),
        (["validate", "--format", "xml", "-s", "my_ctx"], "Invalid value for '--format'"),
        (["validate"], "name at least one schema module"),
    ],
)
def test_bad_input_is_a_usage_error(
    run_cli: Run, ctx_module: str, write: Callable[[str, str], Path], args: list[str], message: str
) -> None:
    """Unknown module, malformed override, malformed YAML, bad flags: a clear message and exit 2."""
    write("broken.yaml", "extra_context:\n  critic: [unclosed\n")
    res = run_cli(*args)
    assert res.code == 2, (res.out, res.err)
    assert message in res.err
    assert "Traceback" not in res.err


def test_missing_verl_is_a_usage_error(
    run_cli: Run, ctx_module: str, write: Callable[[str, str], Path], tmp_path: Path
) -> None:
    """Without verl installed, the message names the pip extra (verl's config is what contexts are checked in)."""
    # sitecustomize runs at interpreter start-up: verl then cannot be found, as on a machine without it.
    hide = write("hide_verl/sitecustomize.py", "import sys\nsys.modules['verl'] = None\n").parent
    res = run_cli("validate", "-s", ctx_module, env={"PYTHONPATH": f"{hide}{os.pathsep}{tmp_path}"})
    assert res.code == 2, (res.out, res.err)
    assert "pip install 'verl-ctx[verl]'" in res.err
    assert "Traceback" not in res.err


def test_validate_imports_neither_torch_nor_ray(tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    """The pre-launch check stays light: composing verl's config and validating imports no torch or ray."""
    import subprocess
    import sys

    write("my_ctx.py", CONTEXTS)
    code = (
        "import sys; from verl_ctx.cli import main\n"
        "try:\n    main(['validate', '-s', 'my_ctx'])\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', [m for m in ('torch', 'ray', 'verl') if m in sys.modules])"
    )
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert time.perf_counter() - started < 30


def test_run_refuses_invalid_contexts_before_ray_starts(run_cli: Run, ctx_module: str) -> None:
    """`verl-ctx run` validates first: an invalid context exits 1 and nothing is launched."""
    res = run_cli("run", "-s", ctx_module, "+extra_context.critic.value_clip=0")
    assert res.code == 1
    assert "nothing was launched" in res.err
    assert "Started a local Ray instance" not in res.out + res.err


ROUTING = [
    "actor_rollout_ref.rollout.name=vllm",
    "+extra_context.rollout.routing.servers=[{name: llm-0}]",
    "+extra_context.rollout.routing.weight_sync=none",
]


def test_external_routing_the_run_would_not_use_is_an_error_naming_the_key(run_cli: Run) -> None:
    """Pool routing with verl's own trainer (the default v1 mode, or the legacy path) would be validated and then
    ignored while local replicas start: an error naming the keys that make it used; with the pool trainer it is
    valid where verl has the switch (0.9.1), and refused naming the verl version where it has not (0.9.0)."""
    schemas = ["-s", "examples.external_servers.contexts"]
    default = run_cli("validate", *schemas, *ROUTING)
    assert default.code == 1, default.err
    assert "[rollout] extra_context.rollout.routing: this run would validate it and never use it" in default.err
    assert "trainer.v1.trainer_mode=sync is verl's own trainer" in default.err
    assert "set trainer.use_v1=true and trainer.v1.trainer_mode=external_pool" in default.err
    assert "--import verl_ctx.integrations.verl.external.trainer" in default.err

    legacy = run_cli("validate", *schemas, "--format", "json", "trainer.use_v1=false", *ROUTING).json()
    error = legacy["errors"][0]
    assert error["path"] == "extra_context.rollout.routing"
    assert error["message"].startswith("this run would validate it and never use it (servers, weight_sync and ")
    assert "trainer.use_v1=false runs verl's legacy trainer" in error["message"]

    from verl_ctx.integrations.verl.external._checks import verl_has_pool_switch

    assert error["hint"].startswith("set trainer.use_v1=true and trainer.v1.trainer_mode=external_pool")
    pool = run_cli("validate", *schemas, "trainer.v1.trainer_mode=external_pool", *ROUTING)
    if verl_has_pool_switch():
        assert len(legacy["errors"]) == 1
        assert pool.code == 0, pool.err
    else:
        assert pool.code == 1
        assert "the external_pool trainer needs verl >= 0.9.1" in pool.err
        assert "upgrade verl (pip install 'verl>=0.9.1'), or drop extra_context.rollout.routing" in pool.err


def test_verl_pool_switch_is_read_from_the_installed_verl() -> None:
    """verl 0.9.1 added LLMServerManager.create_empty (the switch); 0.9.0 lacks it; read without importing verl."""
    from importlib.metadata import version

    from verl_ctx.integrations.verl.external._checks import verl_has_pool_switch

    release = tuple(int(p) for p in version("verl").split(".")[:3])
    assert verl_has_pool_switch() is (release >= (0, 9, 1))


def test_errors_and_warnings_come_together_and_json_lists_roles(run_cli: Run, ctx_module: str) -> None:
    """An invalid reward value and a critic context GRPO will not use: the error and the warning in one answer,
    human and JSON, and the JSON's roles say which role runs and, for one that does not, verl's reason."""
    args = ["-s", ctx_module, "algorithm.adv_estimator=grpo", "+extra_context.critic.value_clip=0.3"]
    bad = "+extra_context.reward.judge.bogus=1"
    human = run_cli("validate", *args, bad)
    assert human.code == 1
    assert "extra_context.reward.judge.bogus: unknown field" in human.err
    assert "InactiveRoleWarning: [critic] a context is configured, but this run starts no critic" in human.err

    body = run_cli("validate", "--format", "json", *args, bad).json()
    assert body["valid"] is False
    assert [e["path"] for e in body["errors"]] == ["extra_context.reward.judge.bogus"]
    (warning,) = body["warnings"]
    assert {k: warning[k] for k in ("role", "path", "code")} == {
        "role": "critic",
        "path": "extra_context.critic",
        "code": "inactive_role",
    }
    assert "this run starts no critic" in warning["message"]
    assert body["roles"]["reward"] == {"active": True, "reason": None}
    assert body["roles"]["critic"]["active"] is False
    assert body["roles"]["critic"]["reason"].startswith("algorithm.adv_estimator=grpo does not use a critic")

    good = run_cli("validate", "--format", "json", *args).json()
    assert good["roles"]["critic"]["active"] is False
    assert good["roles"]["reward"]["active"] is True
    assert len(good["roles"]["reward"]["fingerprint"]) == 64


@pytest.mark.parametrize("command", ["validate", "describe", "config", "run --check"])
def test_strict_makes_every_warning_an_error_for_every_command_that_validates(
    run_cli: Run, ctx_module: str, command: str
) -> None:
    """A context for a role the run does not start is a warning (exit 0); under --strict an error (exit 1), with its
    role, path and kind in the JSON errors, and nothing launched."""
    args = ["-s", ctx_module, "algorithm.adv_estimator=grpo", "extra_context.critic.value_clip=0.3"]
    lenient = run_cli(*command.split(), *args)
    assert "InactiveRoleWarning" in lenient.err
    if command == "run --check":  # the contexts pass; verl's own checks then run (and refuse this bare config)
        assert "validated 2 role context(s)" in lenient.out
    else:
        assert lenient.code == 0, lenient.err
    strict = run_cli(*command.split(), "--strict", *args)
    assert strict.code == 1, strict.out + strict.err
    assert "[critic] extra_context.critic: InactiveRoleWarning: a context is configured" in strict.err
    assert "a warning (inactive_role) made an error by --strict" in strict.err
    assert "pre-launch check" not in strict.err  # refused before verl's checks: nothing was launched
    if command == "validate":
        body = run_cli("validate", "--strict", "--format", "json", *args).json()
        (error,) = body["errors"]
        assert (body["valid"], error["role"], error["path"], error["hint"], body["warnings"]) == (
            False,
            "critic",
            "extra_context.critic",
            "a warning (inactive_role) made an error by --strict",
            [],
        )


def test_json_is_printed_on_a_usage_error_too(run_cli: Run) -> None:
    """--format json answers in JSON on exit 2 as well: a CI job parses every outcome the same way."""
    res = run_cli("validate", "--format", "json", "-s", "no_such_module_here")
    assert res.code == 2
    body = res.json()
    assert (body["valid"], body["warnings"], body["roles"]) == (False, [], {})
    assert body["errors"][0]["message"].startswith("usage error: ")
    assert "no_such_module_here" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("critc=my_ctx:CriticContext", "--worker critc=...: unknown slot; use one of "),
        ("critic=my_ctxx:CriticWorker", "--worker critic=my_ctxx:CriticWorker: cannot import my_ctxx: No module named"),
        ("critic=my_ctx:CriticContex", "--worker critic=my_ctx:CriticContex: my_ctx has no CriticContex; did you mean"),
    ],
)
def test_a_misspelt_worker_is_told_before_torch_or_ray_is_imported(
    run_cli: Run, ctx_module: str, write: Callable[[str, str], Path], tmp_path: Path, spec: str, message: str
) -> None:
    """A --worker slot, module or class that does not exist is a usage error at once: judged from the source,
    before the contexts are validated and before verl's workers (torch) or Ray are imported (here they cannot be)."""
    hide = write("hide_torch/sitecustomize.py", "import sys\nsys.modules['torch'] = None\n").parent
    env = {"PYTHONPATH": f"{hide}{os.pathsep}{tmp_path}"}
    res = run_cli("run", "-s", ctx_module, "--worker", spec, "+extra_context.critic.value_clip=0", env=env)
    assert res.code == 2, (res.out, res.err)
    assert message in res.err
    assert "Traceback" not in res.err


def test_an_unquoted_number_for_a_text_field_gets_a_quoting_hint_without_its_value(
    run_cli: Run, ctx_module: str
) -> None:
    """api_key=12345 reaches a SecretStr as a number (YAML and Hydra read it so): the error says to quote it, in
    YAML and on the command line, and still never shows the value; quoted, it validates."""
    res = run_cli("validate", "-s", ctx_module, "+extra_context.reward.judge.api_key=12345")
    assert res.code == 1
    assert "extra_context.reward.judge.api_key: input should be a valid string (got <int, not shown>)" in res.err
    assert 'read as a number because it is not quoted; quote it: in YAML `api_key: "..."`' in res.err
    assert "12345" not in res.out + res.err
    assert run_cli("validate", "-s", ctx_module, '+extra_context.reward.judge.api_key="12345"').code == 0


# Each command with --format, and a click usage error of each kind: unknown option, missing argument, bad choice,
# bad value, unknown command; the command's verdict key (if its JSON answer has one) is false.
USAGE_ERRORS = [
    (["validate", "--format", "json", "--config"], "valid", "Option '--config' requires an argument"),
    (["validate", "--format", "json", "--format", "yaml"], "valid", "'yaml' is not one of 'human', 'json'"),
    (["describe", "--format=json", "--module"], None, "Option '--module' requires an argument"),
    (["diff", "--format", "json"], "same", "Missing argument 'CHECKPOINT'"),
    (["diff", "ckpt", "--format", "json", "--against"], "same", "Option '--against' requires an argument"),
    (["schema", "check", "--format", "json"], "ok", "Missing argument 'EXPORT_DIR'"),
    (["schema", "check", "exported", "--format", "json", "--bogus"], "ok", "No such option '--bogus'"),
    (["run", "--format", "json", "--offload-bytes", "many"], None, "'many' is not a valid integer"),
    (["valdate", "--format", "json"], None, "No such command 'valdate'"),
]


@pytest.mark.parametrize(("args", "verdict", "message"), USAGE_ERRORS, ids=[" ".join(a) for a, _, _ in USAGE_ERRORS])
def test_json_is_printed_on_a_click_usage_error(
    run_cli: Run, args: list[str], verdict: str | None, message: str
) -> None:
    """--format json answers a usage error that click finds itself in one JSON object on stdout, still exit 2, with
    `errors`, `warnings` and `roles` as the other JSON answers have them; nothing on stderr."""
    res = run_cli(*args)
    assert res.code == 2, (res.out, res.err)
    body = res.json()
    (error,) = body["errors"]
    assert error["message"].startswith("usage error: "), error
    assert message in error["message"], error
    assert (error["role"], error["path"], error["input"]) == (None, None, None)
    assert error["hint"].startswith("Try 'verl-ctx")
    assert error["hint"].endswith(" --help' for help.")
    assert (body["warnings"], body["roles"]) == ([], {})
    if verdict is not None:
        assert body[verdict] is False
    assert set(body) == {"errors", "warnings", "roles"} | ({verdict} if verdict else set())
    assert res.err == ""


def test_a_usage_error_in_json_withholds_an_override_value(run_cli: Run) -> None:
    """click's own message echoes an unexpected argument; in JSON, as in text, an override's value is withheld."""
    res = run_cli("schema", "check", "--format", "json", "exported", "+extra_context.reward.token=sk-live-123")
    assert res.code == 2
    assert "sk-live-123" not in res.out + res.err
    assert "+extra_context.reward.token=<value withheld>" in res.json()["errors"][0]["message"]


def test_without_json_a_usage_error_is_clicks_text(run_cli: Run) -> None:
    """Without --format json (or on a command that has no --format) the usage error stays click's text on stderr."""
    for args in (["diff"], ["schema", "export", "--format", "json", "-o", "x"]):
        res = run_cli(*args)
        assert res.code == 2
        assert res.out == ""
        assert "Usage: verl-ctx" in res.err


def test_json_is_printed_on_every_exit_code_of_describe_diff_and_run(
    run_cli: Run, ctx_module: str, tmp_path: Path
) -> None:
    """describe, diff and run with --format json answer in JSON on exit 1 and on exit 2 (from verl-ctx's own checks),
    as validate does: errors (each field's), the warnings raised with them, and the roles."""
    bad = ["-s", ctx_module, "+extra_context.critic.value_clip=-1"]
    described = run_cli("describe", "--format", "json", *bad)
    assert described.code == 1
    body = described.json()
    assert [e["path"] for e in body["errors"]] == ["extra_context.critic.value_clip"]
    assert body["roles"]["critic"] == {"active": True, "reason": None}

    ran = run_cli("run", "--check", "--format", "json", *bad)
    assert ran.code == 1
    assert [e["path"] for e in json.loads(ran.out.splitlines()[-1])["errors"]] == ["extra_context.critic.value_clip"]

    (tmp_path / "empty").mkdir()
    diffed = run_cli("diff", "empty", "--format", "json", "-s", ctx_module)
    assert diffed.code == 2
    body = diffed.json()
    assert body["same"] is False
    assert body["errors"][0]["message"].startswith("usage error: ")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--report", "r.json"], {}, "--report (or VERL_CTX_RUN_REPORT) is a rehearsal's report; add --rehearse"),
        ([], {"VERL_CTX_RUN_REPORT": "r.json"}, "--report (or VERL_CTX_RUN_REPORT) is a rehearsal's report"),
        (
            ["--rehearse", "--report", "."],
            {},
            "Invalid value for '--report' (env var: 'VERL_CTX_RUN_REPORT'): File '.' is",
        ),
        (["--rehearse", "--report", "/proc/none/r.json"], {}, "cannot write the report to '/proc/none/r.json': "),
    ],
    ids=["option-without-rehearse", "variable-without-rehearse", "a-folder", "unwritable"],
)
def test_a_report_no_rehearsal_would_write_is_a_usage_error_before_anything_starts(
    run_cli: Run, ctx_module: str, args: list[str], env: dict[str, str], message: str
) -> None:
    """`run --report` (or its variable) on a launch or --check, which write no report, or naming a folder, stops at
    once: never a report silently left unwritten, never a minute's rehearsal before the path is refused."""
    res = run_cli("run", "-s", ctx_module, *args, "+extra_context.critic.value_clip=0.5", env=env)
    assert res.code == 2, (res.out, res.err)
    assert message in res.err
    assert "Started a local Ray instance" not in res.out + res.err


def test_an_unset_environment_variable_is_named_not_its_value(run_cli: Run, ctx_module: str) -> None:
    """`'key=${oc.env:NAME}'` with NAME unset: the variable and the key that reads it are named (a name is no
    secret); a set variable's value is never shown."""
    res = run_cli("validate", "-s", ctx_module, "extra_context.reward.token=${oc.env:JUDGE_TOKEN_XYZ}")
    assert res.code == 2, res.err
    assert "environment variable JUDGE_TOKEN_XYZ (read at extra_context.reward.token) is not set" in res.err
    ok = run_cli(
        "validate",
        "-s",
        ctx_module,
        "extra_context.reward.token=${oc.env:JUDGE_TOKEN_XYZ}",
        env={"JUDGE_TOKEN_XYZ": "sk-set-0123456789"},
    )
    assert ok.code == 0, ok.err
    assert "sk-set-0123456789" not in ok.out + ok.err


def test_schema_modules_that_register_no_context_are_a_usage_error(
    run_cli: Run, ctx_module: str, write: Callable[[str, str], Path]
) -> None:
    """`-s` naming a package whose schemas live in a submodule validated nothing and said "valid": now exit 2,
    naming the submodule that holds them."""
    write("pkg/__init__.py", "")
    write("pkg/contexts.py", CONTEXTS)
    res = run_cli("validate", "-s", "pkg")
    assert res.code == 2, res.out + res.err
    assert "-s pkg registered no RoleContext" in res.err
    assert "did you mean -s pkg.contexts?" in res.err
    assert run_cli("validate", "-s", "pkg.contexts").code == 0
