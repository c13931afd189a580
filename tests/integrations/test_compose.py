"""Every way verl's entry point is given a config composes the same config in verl-ctx as in verl."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_ctx.errors import ConfigError
from verl_ctx.integrations.verl import compose_config
from verl_ctx.integrations.verl._compose import verl_config_dir

from .verl_reference import verl_cfg_job, verl_hydra_main

OVERRIDE = "trainer.total_epochs=7"
FORMS = {
    "relative --config-path": ["--config-path=config", "--config-name=ppo_megatron_trainer"],
    "./ relative --config-path": ["--config-path=./config", "--config-name=ppo_trainer"],
    "absolute --config-path": [f"--config-path={verl_config_dir()}", "--config-name=ppo_megatron_trainer"],
    "--config-name alone": ["--config-name=ppo_megatron_trainer"],
    "-cn": ["-cn", "ppo_megatron_trainer"],
    "-cp and -cn": ["-cp", "config", "-cn", "ppo_megatron_trainer"],
    ".yaml suffix": ["--config-path=config", "--config-name=ppo_megatron_trainer.yaml"],
    "space-separated values": ["--config-path", "config", "--config-name", "ppo_megatron_trainer"],
    "no config options": [],
}


def _same(ours: object, theirs: object) -> bool:
    ours_plain: object = OmegaConf.to_container(ours, resolve=False)
    theirs_plain: object = OmegaConf.to_container(theirs, resolve=False)
    return ours_plain == theirs_plain


@pytest.mark.parametrize("args", FORMS.values(), ids=FORMS.keys())
def test_config_forms_compose_like_verls_hydra_main(args: list[str], tmp_path: Path) -> None:
    """Each form of --config-path / --config-name verl accepts gives verl's own config (from any working directory)."""
    theirs = verl_hydra_main([*args, OVERRIDE], str(tmp_path))
    assert theirs is not None
    assert _same(compose_config([*args, OVERRIDE]), theirs)


@pytest.mark.parametrize("args", [FORMS["relative --config-path"], FORMS["-cn"]], ids=["relative", "-cn"])
def test_reference_matches_verls_own_entry_point(args: list[str], tmp_path: Path) -> None:
    """The in-process reference is checked against `python -m verl.trainer.main_ppo --cfg job` itself."""
    code, text = verl_cfg_job([*args, OVERRIDE], str(tmp_path))
    assert code == 0
    assert OmegaConf.to_container(OmegaConf.create(text)) == OmegaConf.to_container(
        compose_config([*args, OVERRIDE]), resolve=False
    )


@pytest.mark.parametrize(
    "args",
    [["--config-path=no_such_dir"], ["--config-name=nope"], ["--config-path=config/ppo_trainer.yaml"], ["a=1,2"]],
    ids=["missing dir", "missing name", "file as path", "sweep"],
)
def test_what_verl_refuses_is_refused(args: list[str], tmp_path: Path) -> None:
    """Arguments verl's entry point rejects are a ConfigError here, never a silently different config."""
    assert verl_hydra_main(args, str(tmp_path)) is None
    with pytest.raises(ConfigError):
        compose_config(args)


def test_relative_config_path_is_not_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config/ folder in the working directory is not what verl reads for --config-path=config, nor are we."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "ppo_trainer.yaml").write_text("trainer:\n  total_epochs: 999\n")
    monkeypatch.chdir(tmp_path)
    ours = compose_config(["--config-path=config", "--config-name=ppo_trainer"])
    assert ours.trainer.total_epochs != 999
    assert _same(ours, verl_hydra_main(["--config-path=config", "--config-name=ppo_trainer"], str(tmp_path)))


def test_user_file_is_layered_over_verls_config(tmp_path: Path) -> None:
    """--config FILE without a defaults list equals verl's result for [ppo_trainer, FILE] with FILE's values winning."""
    body = "trainer:\n  total_epochs: 3\nalgorithm:\n  adv_estimator: grpo\n"
    body += "extra_context:\n  critic:\n    value_clip: 0.3\n"
    (tmp_path / "mine.yaml").write_text(body)
    primary = tmp_path / "primary"
    primary.mkdir()
    (primary / "layered.yaml").write_text(
        textwrap.dedent(
            """\
            hydra:
              searchpath:
                - pkg://verl.trainer.config
            defaults:
              - ppo_trainer
              - _self_
            """
        )
        + body
    )
    theirs = verl_hydra_main([f"--config-path={primary}", "--config-name=layered", OVERRIDE], str(tmp_path))
    ours = compose_config([OVERRIDE], config_file=tmp_path / "mine.yaml")
    assert theirs is not None
    assert _same(ours, theirs)
    assert ours.trainer.total_epochs == 7  # the command line wins over the file, the file over verl's defaults
    assert ours.algorithm.adv_estimator == "grpo"
    assert ours.actor_rollout_ref.actor.ppo_epochs == 1  # verl's defaults are all there


def test_user_file_with_a_defaults_list_is_the_primary_config(tmp_path: Path) -> None:
    """A file that names ppo_trainer in its own defaults list composes as verl's recipes do, verl's dir searched."""
    (tmp_path / "recipe.yaml").write_text("defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  total_epochs: 4\n")
    ours = compose_config([], config_file=tmp_path / "recipe.yaml")
    assert ours.trainer.total_epochs == 4
    assert ours.actor_rollout_ref.actor.ppo_epochs == 1


def test_unknown_verl_key_keeps_hydras_message_and_suggests(tmp_path: Path) -> None:
    """A typo in one of verl's own keys shows Hydra's whole message, the key included, and a did-you-mean."""
    with pytest.raises(ConfigError) as info:
        compose_config(["algorithm.adv_estimatr=grpo"])
    message = str(info.value)
    assert "Key 'adv_estimatr' is not in struct" in message
    assert "full_key: algorithm.adv_estimatr" in message
    assert "did you mean 'algorithm.adv_estimator'?" in message
