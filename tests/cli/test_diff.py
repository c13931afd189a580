"""`verl-ctx diff` through the real console script: a checkpoint's saved contexts against a config or a checkpoint."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import CONTEXTS, REPO, Run

pytest.importorskip("hydra")

OLD_SECRET = "sk-old-4f1e9a77c2"
NEW_SECRET = "sk-new-b83d05e6aa"

# Writes a checkpoint's contexts the way the trainer does (Snapshot.write), from verl's config + overrides.
SAVE = """
    import sys
    import my_ctx  # noqa: F401  (registers the schemas)
    from verl_ctx import validate
    from verl_ctx.integrations.verl import compose_config
    from verl_ctx.integrations.verl._checkpoint import Snapshot

    out, salt, *overrides = sys.argv[1:]
    contexts = validate(compose_config(overrides), overrides=overrides)
    snapshot = Snapshot.of(contexts, salt=None if salt == "-" else bytes.fromhex(salt))
    snapshot.write(out, global_step=int(out.rsplit("_", 1)[1]))
"""


@pytest.fixture
def save(tmp_path: Path, write: Callable[[str, str], Path]) -> Callable[..., Path]:
    """``save(step, *overrides, salt="-", run="run")``: a global_step_N directory with saved contexts."""
    write("my_ctx.py", CONTEXTS)
    script = write("save_ckpt.py", SAVE)

    def _save(step: int, *overrides: str, salt: str = "-", run: str = "run") -> Path:
        out = tmp_path / run / f"global_step_{step}"
        env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
        subprocess.run(
            [sys.executable, str(script), str(out), salt, *overrides], cwd=tmp_path, env=env, check=True, timeout=120
        )
        return out

    return _save


BASE = ("+extra_context.critic.value_clip=0.3", f"+extra_context.reward.token={OLD_SECRET}")


def test_same_config_exits_zero(run_cli: Run, save: Callable[..., Path]) -> None:
    """The config a checkpoint was saved from, given again: exit 0, "same contexts"."""
    ckpt = save(3, *BASE)
    res = run_cli("diff", str(ckpt), "-s", "my_ctx", *BASE)
    assert res.code == 0, res.out + res.err
    assert "same contexts (2 role(s))" in res.out


def test_changed_value_and_secret_are_listed_and_no_secret_is_printed(run_cli: Run, save: Callable[..., Path]) -> None:
    """A changed value and a changed secret exit 1, each named with old -> new; neither secret appears anywhere."""
    ckpt = save(3, *BASE)
    changed = ("+extra_context.critic.value_clip=0.5", f"+extra_context.reward.token={NEW_SECRET}")
    res = run_cli("diff", str(ckpt), "-s", "my_ctx", *changed)
    assert res.code == 1, res.out + res.err
    assert "2 differences:" in res.out
    assert "[critic] value_clip: 0.3 -> 0.5" in res.out
    assert '[reward] token: "**********" -> "**********" (secret changed)' in res.out
    as_json = run_cli("diff", str(ckpt), "-s", "my_ctx", "--format", "json", *changed)
    assert as_json.code == 1
    body = as_json.json()
    assert body["same"] is False
    assert {(c["role"], c["path"], c["old"], c["new"], c["note"]) for c in body["changes"]} == {
        ("critic", "value_clip", 0.3, 0.5, ""),
        ("reward", "token", "**********", "**********", "secret changed"),
    }
    for out in (res, as_json):
        for secret in (OLD_SECRET, NEW_SECRET):
            assert secret not in out.out + out.err


def test_a_value_saved_before_its_field_became_secret_is_not_shown(
    run_cli: Run, save: Callable[..., Path], write: Callable[[str, str], Path]
) -> None:
    """A checkpoint saved when `token` was a plain str holds its value in clear; a later one of the same run, saved
    when the code declared it a secret, holds it sealed: the change is listed with neither side shown (the old value
    is what the field now keeps secret)."""
    salt = "00" * 16
    plain = CONTEXTS.replace("token: SecretStr | None = None", "token: str | None = None")
    assert plain != CONTEXTS
    write("my_ctx.py", plain)  # the schemas as the first checkpoint was saved
    old = save(2, *BASE, salt=salt)
    write("my_ctx.py", CONTEXTS)  # as the code declares them now
    new = save(4, *BASE, salt=salt)
    res = run_cli("diff", str(old), "--against", str(new))
    assert res.code == 1, res.out + res.err
    assert '[reward] token: "**********" -> "**********" (secret changed)' in res.out
    assert OLD_SECRET not in res.out + res.err


def test_a_run_directory_means_its_latest_checkpoint(run_cli: Run, save: Callable[..., Path]) -> None:
    """Given trainer.default_local_dir, diff reads the checkpoint resume_mode=auto would resume from."""
    save(2, "+extra_context.critic.value_clip=0.1")
    latest = save(4, *BASE)
    (latest.parent / "latest_checkpointed_iteration.txt").write_text("4")
    res = run_cli("diff", str(latest.parent), "-s", "my_ctx", *BASE)
    assert res.code == 0, res.out + res.err
    assert f"checkpoint {latest} (step 4)" in res.out


def test_two_checkpoints_of_one_run_compare_secrets_too(run_cli: Run, save: Callable[..., Path]) -> None:
    """--against: checkpoints sharing a run's salt compare every value, secrets by digest."""
    salt = "00" * 16
    old = save(2, *BASE, salt=salt)
    new = save(4, "+extra_context.critic.value_clip=0.3", f"+extra_context.reward.token={NEW_SECRET}", salt=salt)
    res = run_cli("diff", str(old), "--against", str(new), "--format", "json")
    assert res.code == 1, res.out + res.err
    (change,) = res.json()["changes"]
    assert (change["path"], change["note"]) == ("token", "secret changed")
    assert run_cli("diff", str(old), "--against", str(old)).code == 0


def test_checkpoints_of_two_runs_cannot_compare_secrets_and_say_so(run_cli: Run, save: Callable[..., Path]) -> None:
    """Different runs seal secrets under different salts: values are compared, secrets are noted as not comparable."""
    old = save(2, *BASE, run="a")
    new = save(2, "+extra_context.critic.value_clip=0.4", f"+extra_context.reward.token={NEW_SECRET}", run="b")
    res = run_cli("diff", str(old), "--against", str(new))
    assert res.code == 1, res.out + res.err
    assert "[critic] value_clip: 0.3 -> 0.4" in res.out
    assert "[reward] secret values not compared: the two checkpoints come from different runs" in res.out
    assert "token" not in res.out.split("difference:")[1]


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "nowhere", "-s", "my_ctx"],
        ["diff", "."],
        ["diff", "CKPT"],
        ["diff", "CKPT", "--against", "CKPT", "+extra_context.critic.value_clip=0.5"],
    ],
    ids=["missing-dir", "no-saved-contexts", "nothing-to-compare-with", "against-and-config"],
)
def test_usage_errors_exit_two(run_cli: Run, save: Callable[..., Path], args: list[str]) -> None:
    """A path without saved contexts, or inputs that do not say what to compare with, is a usage error (exit 2)."""
    ckpt = save(1, *BASE)
    res = run_cli(*[str(ckpt) if a == "CKPT" else a for a in args])
    assert res.code == 2, res.out + res.err
    assert "usage error:" in res.err


def test_a_corrupt_saved_file_is_a_usage_error_without_traceback(run_cli: Run, save: Callable[..., Path]) -> None:
    """An envelopes.json that is not one (edited, truncated, hostile) is refused with the file named, exit 2."""
    ckpt = save(1, *BASE)
    saved = ckpt / "verl_ctx" / "envelopes.json"
    text = saved.read_text()
    for broken in (text[: len(text) // 2], text.replace('"verl-ctx:1:', '"verl-ctx:1:AAAA'), "[]"):
        saved.write_text(broken)
        res = run_cli("diff", str(ckpt), "-s", "my_ctx", *BASE)
        assert res.code == 2, res.out + res.err
        assert f"cannot read the contexts saved with checkpoint {ckpt}" in res.err
        assert "Traceback" not in res.err


RELEASE_1 = """
    from verl_ctx import RoleContext

    class Critic(RoleContext, role="critic"):
        clip: float = 0.2
"""
RELEASE_2 = """
    from verl_ctx import RoleContext, migration

    class Critic(RoleContext, role="critic", version=2):
        value_clip: float = 0.2

        @migration(from_version=1)
        def _renamed(data):
            data["value_clip"] = data.pop("clip")
            return data
"""


def test_one_verdict_whatever_the_form_after_migrating(
    run_cli: Run, tmp_path: Path, write: Callable[[str, str], Path]
) -> None:
    """Checkpoints saved by release 1 and by release 2 of a schema, compared with -s release 2: the first migrates to
    the second's values, so the checkpoint form says "same" (exit 0) as the config form does; a migration note names
    the checkpoint it is about."""
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
    script = write("save_ckpt.py", SAVE.replace("import my_ctx", "import ctx_release"))
    saved = {}
    for step, release, value in (
        (2, RELEASE_1, "clip=0.3"),
        (3, RELEASE_1, "clip=0.3"),
        (4, RELEASE_2, "value_clip=0.3"),
    ):
        write("ctx_release.py", release)
        saved[step] = tmp_path / "run" / f"global_step_{step}"
        args = [sys.executable, str(script), str(saved[step]), "00" * 16, f"+extra_context.critic.{value}"]
        subprocess.run(args, cwd=tmp_path, env=env, check=True, timeout=120)

    config_form = run_cli("diff", str(saved[2]), "-s", "ctx_release", "+extra_context.critic.value_clip=0.3")
    assert config_form.code == 0, config_form.out + config_form.err
    both = run_cli("diff", str(saved[2]), "--against", str(saved[4]), "-s", "ctx_release")
    assert both.code == 0, both.out + both.err
    assert "same contexts (1 role(s))" in both.out
    assert "note: first checkpoint: [critic] ctx_release:Critic v1 (" in both.out
    assert "second checkpoint" not in both.out  # saved by release 2: nothing to migrate
    body = run_cli("diff", str(saved[2]), "--against", str(saved[4]), "-s", "ctx_release", "--format", "json").json()
    assert (body["same"], body["changes"]) == (True, [])
    twice = run_cli("diff", str(saved[2]), "--against", str(saved[3]), "-s", "ctx_release")
    assert "note: first checkpoint: [critic]" in twice.out
    assert "note: second checkpoint: [critic]" in twice.out
    without = run_cli("diff", str(saved[2]), "--against", str(saved[4]))  # no schema to migrate with: not comparable
    assert without.code == 1
    assert "schema differs" in without.out


def test_a_refused_resume_tells_the_exact_diff_and_run_commands(run_cli: Run, save: Callable[..., Path]) -> None:
    """`run` refusing a resume whose contexts changed names the commands to compare and to accept with this launch's
    own arguments (no placeholders), and the diff command it names runs and shows the change."""
    latest = save(2, *BASE)
    (latest.parent / "latest_checkpointed_iteration.txt").write_text("2")
    launch = [
        "-s",
        "my_ctx",
        "trainer.default_local_dir=run",
        "+extra_context.critic.value_clip=0.5",
        "+extra_context.reward.token=${oc.env:TOKEN}",
    ]
    env = {"TOKEN": OLD_SECRET}
    res = run_cli("run", "--check", "--import", "my_ctx", *launch, env=env)
    assert res.code == 1, res.out + res.err
    args = "-s my_ctx trainer.default_local_dir=run +extra_context.critic.value_clip=0.5 "
    args += "'+extra_context.reward.token=${oc.env:TOKEN}'"
    assert f"`verl-ctx diff {latest} {args}`" in res.err
    assert f"`verl-ctx run --accept-context-change --import my_ctx {args}`" in res.err
    assert "MODULE" not in res.err
    diff = run_cli("diff", str(latest), *launch, env=env)
    assert diff.code == 1, diff.out + diff.err
    assert "[critic] value_clip: 0.3 -> 0.5" in diff.out


def test_a_schema_change_schema_check_calls_compatible_never_stops_a_resume(
    run_cli: Run, save: Callable[..., Path], write: Callable[[str, str], Path]
) -> None:
    """A field added with a default at the same version: `schema check` says compatible, and `diff` (what a resume
    compares) agrees, with a line saying the schema changed; the new field's value is compared like any other. A
    change that would read a saved value otherwise (int -> str) is refused by both."""
    ckpt = save(3, *BASE)
    assert run_cli("schema", "export", "-s", "my_ctx", "-o", "exported").code == 0
    added = CONTEXTS.replace("warmup_steps: int = 0", "warmup_steps: int = 0\n        bonus: float = 0.0")
    assert added != CONTEXTS
    write("my_ctx.py", added)
    check = run_cli("schema", "check", "-s", "my_ctx", "exported")
    assert check.code == 0, check.out + check.err
    same = run_cli("diff", str(ckpt), "-s", "my_ctx", *BASE)
    assert same.code == 0, same.out + same.err
    assert "[critic] schema changed at the same version" in same.out
    assert "the checkpoint's values read unchanged" in same.out
    other = run_cli("diff", str(ckpt), "-s", "my_ctx", *BASE, "+extra_context.critic.bonus=0.5")
    assert other.code == 1
    assert "[critic] bonus: 0.0 -> 0.5" in other.out

    retyped = CONTEXTS.replace("warmup_steps: int = 0", "warmup_steps: str = '0'")
    write("my_ctx.py", retyped)
    assert run_cli("schema", "check", "-s", "my_ctx", "exported").code == 1
    refused = run_cli("diff", str(ckpt), "-s", "my_ctx", *BASE, "+extra_context.critic.warmup_steps='0'")
    assert refused.code == 1
    assert "cannot be read with this code's schema" in refused.out
