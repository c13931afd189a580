"""validate(): every role's errors at once, defaults for absent sections, provenance, payload lint."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from pydantic import BaseModel, Field, SecretStr

from verl_ctx import ContextRegistry, RoleContext, migration, validate
from verl_ctx._driver.lint import lint_extra_context
from verl_ctx.errors import ContextValidationError, PayloadWarning


@pytest.fixture
def reg() -> ContextRegistry:
    reg = ContextRegistry()

    class Critic(RoleContext, role="critic", registry=reg):
        value_clip: float = Field(0.2, gt=0)
        warmup_steps: int = 0

    class Reward(RoleContext, role="reward", registry=reg):
        judge_url: str
        api_key: SecretStr

    class Actor(RoleContext, role="actor", registry=reg):
        entropy_bonus: float = 0.0

    return reg


def test_all_roles_errors_are_raised_together(reg: ContextRegistry) -> None:
    """Errors of several roles come in one ContextValidationError, each with a dotted path from the root."""
    config = {"extra_context": {"critic": {"value_clip": 0, "warmup_steps": "x"}, "actor": {"entropy_bonu": 1}}}
    with pytest.raises(ContextValidationError) as info:
        validate(config, registry=reg)
    paths = sorted(e.path for e in info.value.errors)
    assert paths == [
        "extra_context.actor.entropy_bonu",
        "extra_context.critic.value_clip",
        "extra_context.critic.warmup_steps",
        "extra_context.reward",
    ]
    text = str(info.value)
    assert "requires judge_url, api_key" in text
    assert "did you mean 'entropy_bonus'?" in text
    assert len(text.splitlines()) == 5


def test_absent_section_with_defaults_gets_defaults(reg: ContextRegistry) -> None:
    """A role with no section and only defaulted fields is validated to its defaults."""
    ctx = validate({"extra_context": {"reward": {"judge_url": "u", "api_key": "k"}}}, registry=reg)
    assert ctx["critic"].value_clip == 0.2  # type: ignore[attr-defined]
    assert set(ctx) == {"actor", "critic", "reward"}


def test_secret_inputs_are_redacted_in_errors(reg: ContextRegistry) -> None:
    """A secret given with the wrong type is reported without its value."""
    with pytest.raises(ContextValidationError) as info:
        validate({"extra_context": {"reward": {"judge_url": 3, "api_key": 987654321}}}, registry=reg)
    assert "987654321" not in str(info.value)
    assert "<int, not shown>" in str(info.value)


def test_nested_secret_is_redacted_in_a_parent_error() -> None:
    """When a whole nested section is wrong, secrets inside it are masked in the echoed input."""
    reg = ContextRegistry()

    class Judge(BaseModel):
        url: str
        api_key: SecretStr

    class Reward(RoleContext, role="reward", registry=reg):
        judge: Judge

    with pytest.raises(ContextValidationError) as info:
        validate({"extra_context": {"reward": {"judge": {"api_key": "hunter2"}}}}, registry=reg)
    assert "hunter2" not in str(info.value)


def test_omegaconf_config_with_interpolation(reg: ContextRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DictConfig is resolved before validation, so interpolations reach the schema as values (a secret from the
    environment, as it should come: no warning)."""
    from omegaconf import OmegaConf

    monkeypatch.setenv("TEST_JUDGE_KEY", "k")
    cfg = OmegaConf.create(
        {
            "base": 0.7,
            "extra_context": {
                "critic": {"value_clip": "${base}"},
                "reward": {"judge_url": "u", "api_key": "${oc.env:TEST_JUDGE_KEY}"},
            },
        }
    )
    assert validate(cfg, registry=reg)["critic"].value_clip == 0.7  # type: ignore[attr-defined]


def test_a_secret_given_as_a_literal_warns_without_its_value(reg: ContextRegistry) -> None:
    """On the command line (readable in `ps`) or in a config file, a literal secret is a LiteralSecretWarning that
    names the path and the way to give it from the environment, never the value; a mapping built in Python is not."""
    from omegaconf import OmegaConf

    from verl_ctx.errors import LiteralSecretWarning

    secret = "sk-literal-7f3a9c2e"
    section = {"extra_context": {"reward": {"judge_url": "u", "api_key": secret}}}
    with pytest.warns(LiteralSecretWarning) as caught:
        validate(OmegaConf.create(section), registry=reg, overrides=[f"+extra_context.reward.api_key={secret}"])
    (note,) = [str(w.message) for w in caught]
    assert note.startswith("[reward] extra_context.reward.api_key: a secret given as a literal on the command line")
    assert "'extra_context.reward.api_key=${oc.env:NAME}'" in note
    with pytest.warns(LiteralSecretWarning, match="literal in the config") as caught:
        validate(OmegaConf.create(section), registry=reg)
    assert all(secret not in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate(section, registry=reg)  # a mapping built in Python: no file, no command line


def test_describe_reports_provenance_and_hides_secrets(reg: ContextRegistry) -> None:
    """Each field says where its value came from; secrets show as stars."""
    config = {
        "extra_context": {
            "critic": {"value_clip": 0.5, "warmup_steps": 3},
            "reward": {"judge_url": "u", "api_key": "hunter2"},
        }
    }
    rows = {
        p.path: (p.value, p.source)
        for p in validate(config, registry=reg, overrides=["+extra_context.critic.warmup_steps=3"]).describe()
    }
    assert rows["extra_context.critic.value_clip"] == (0.5, "config file")
    assert rows["extra_context.critic.warmup_steps"] == (3, "command-line override")
    assert rows["extra_context.actor.entropy_bonus"] == (0.0, "schema default")
    assert rows["extra_context.reward.api_key"] == ("**********", "config file")


def test_large_payload_is_warned_against_rays_limit() -> None:
    """A payload past Ray's 10**7-byte actor-definition warning is reported with its size."""
    reg = ContextRegistry()

    class Big(RoleContext, role="critic", registry=reg):
        blob: bytes = b""

    with pytest.warns(PayloadWarning, match="10,000,012 bytes, past Ray's warning at 10,000,000 bytes"):
        validate({"extra_context": {"critic": {"blob": b"x" * (10**7 + 1)}}}, registry=reg)


class _Local:
    pass


def test_raw_extra_context_lint_names_key_and_class() -> None:
    """Objects cloudpickle would send by value, or whose module a worker cannot import, are named."""

    class InFunction:
        pass

    missing = type("Ghost", (), {"__module__": "no_such_module_anywhere"})()
    extra: dict[str, Any] = {
        "ok": {"a": [1, "x"]},
        "local": InFunction(),
        "nested": {"g": [missing]},
        "verl_ctx": {"critic": {}},
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problems = lint_extra_context(extra)
    assert len(problems) == 2
    assert "extra_context['local']" in problems[0]
    assert "InFunction" in problems[0]
    assert "extra_context['nested.g[0]']" in problems[1]
    assert "no_such_module_anywhere" in problems[1]
    assert all(issubclass(w.category, PayloadWarning) for w in caught)
    assert lint_extra_context({"fine": _Local()}, warn=False) == []


def test_an_unknown_key_a_migration_renamed_is_named_with_its_new_name_and_a_plain_value_is_shown() -> None:
    """An old config key a migration renames gets "renamed to X in version N"; an unknown key's number is shown
    (it could not be a secret), while a string, or a number under a secret-like name or a typo of a secret field,
    is withheld."""
    reg = ContextRegistry("renames")

    class Judge(BaseModel):
        api_key: SecretStr | None = None
        timeout_s: float = 30.0

    class CriticContext(RoleContext, role="critic", version=2, registry=reg):
        value_clip: float = 0.2
        judge: Judge = Judge()

        @migration(from_version=1)
        def _renamed(data: dict[str, Any]) -> dict[str, Any]:
            data["value_clip"] = data.pop("clip")
            return data

    section = {"clip": 0.3, "name": "sk-live-1234", "judge": {"timout_s": 3, "api_kye": 98765, "auth_pin": 5}}
    with pytest.raises(ContextValidationError) as caught:
        validate({"extra_context": {"critic": section}}, registry=reg)
    by_path = {e.path: e for e in caught.value.errors}
    clip = by_path["extra_context.critic.clip"]
    assert (clip.input, clip.hint) == (
        "0.3",
        "renamed to 'value_clip' in version 2 (@migration(from_version=1)): write value_clip in the config",
    )
    assert by_path["extra_context.critic.name"].input == "<str, length 12, not shown>"
    assert by_path["extra_context.critic.judge.timout_s"].input == "3"
    assert by_path["extra_context.critic.judge.api_kye"].input == "<int, not shown>"
    assert by_path["extra_context.critic.judge.auth_pin"].input == "<int, not shown>"


def test_a_literal_default_of_an_environment_read_is_a_literal_secret(reg: ContextRegistry) -> None:
    """`'${oc.env:NAME,sk-...}'` gives the secret as a literal when NAME is unset: warned like any literal."""
    from omegaconf import OmegaConf

    from verl_ctx.errors import LiteralSecretWarning

    override = "+extra_context.reward.api_key=${oc.env:UNSET_VAR_XYZ,sk-literal-default}"
    config = OmegaConf.create({"extra_context": {"reward": {"judge_url": "u", "api_key": "${oc.env:UNSET_VAR_XYZ,x}"}}})
    with pytest.warns(LiteralSecretWarning):
        validate(config, registry=reg, overrides=[override])
