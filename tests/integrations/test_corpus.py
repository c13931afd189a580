"""verl's own launch scripts as ground truth: verl-ctx accepts, composes and judges roles exactly as verl does.

The 76 launches in data/verl_launch_scripts.json (see data/README.md) go through `verl-ctx config` (the click
command, in this process: it composes and validates as `verl-ctx validate` does, then prints the config verl
will get), with a critic and a ref context; verl's answer comes from Hydra's `hydra.main` with verl's own
arguments (verl_reference.py). On verl 0.9.1 the recorded verdicts are checked too. Each launch is composed
once per side and shared by the tests (composition is most of the cost: Hydra's, ~3 s a launch for both sides).

A campaign (tests/budget.py): ``make campaigns`` (CI) checks all 76 launches; ``make test`` and the compatibility
cells one launch of each kind (``_quick``: accepted or refused, config name, the roles verl starts) and two more
drawn afresh each run, so a quick run still meets new launches.
"""

from __future__ import annotations

import functools
import json
import os
import random
import tempfile
import warnings
import zlib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from omegaconf import OmegaConf

from verl_ctx import ContextRegistry, RoleContext, validate
from verl_ctx.cli._main import cli
from verl_ctx.errors import InactiveRoleWarning

from ..budget import FULL
from .verl_reference import verl_hydra_main

LAUNCHES = json.loads((Path(__file__).parent / "data" / "verl_launch_scripts.json").read_text())
# Launch 30 composes under `python -m verl.trainer.main_ppo`, how its script runs it (see data/README.md).
RELABELLED = {30: True}
ON_091 = version("verl") == "0.9.1"

REGISTRY = ContextRegistry("corpus")

pytestmark = [pytest.mark.campaign, pytest.mark.corpus]


def _kind(launch: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a launch a different case for composition and for roles."""
    named = [a.split("=", 1)[-1].removesuffix(".yaml") for a in launch["args"] if a.startswith("--config-name")]
    roles = launch.get("verl_roles") or {}
    return (launch["verl_composes"], tuple(named), *sorted(roles.items()))


def _quick(seed: int) -> list[int]:
    """The first launch of each kind, and two others drawn with ``seed``."""
    first: dict[tuple[Any, ...], int] = {}
    for i, launch in enumerate(LAUNCHES):
        first.setdefault(_kind(launch), i)
    chosen = set(first.values()) | set(RELABELLED)
    rest = [i for i in range(len(LAUNCHES)) if i not in chosen]
    return sorted(chosen | set(random.Random(seed).sample(rest, 2)))


# Each test id names its launch: a drawn one that fails is rerun with `VERL_CTX_CAMPAIGN=full pytest -k <id>`.
# pytest-xdist collects in every worker and wants the same tests from each: its run id, shared by the workers of one
# run, seeds the draw there.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
SEED = zlib.crc32(_RUN.encode()) if _RUN else random.SystemRandom().randrange(10**6)
CHOSEN = list(range(len(LAUNCHES))) if FULL else _quick(SEED)


class CriticContext(RoleContext, role="critic", registry=REGISTRY):
    value_clip: float = 0.2


class RefContext(RoleContext, role="ref", registry=REGISTRY):
    kl_temperature: float = 1.0


def _ids() -> list[str]:
    return [f"{i:02d}-{Path(x['script']).stem}" for i, x in enumerate(LAUNCHES)]


@functools.cache
def _reference(index: int) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory() as cwd:
        config = verl_hydra_main(LAUNCHES[index]["args"], cwd)
    return None if config is None else OmegaConf.to_container(config, resolve=False)


@functools.cache
def _ours(index: int) -> tuple[int, dict[str, Any] | None, str]:
    """`verl-ctx config` for the launch: exit code, the config it prints (extra_context aside), its output."""
    result = CliRunner().invoke(cli, ["config", "-s", __name__, *LAUNCHES[index]["args"]], catch_exceptions=False)
    if result.exit_code != 0:
        return result.exit_code, None, result.output
    printed = yaml.safe_load(result.stdout)
    printed.pop("extra_context")  # validated values, added by verl-ctx
    return 0, printed, result.output


@pytest.mark.parametrize("index", CHOSEN, ids=[_ids()[i] for i in CHOSEN])
def test_accepts_and_composes_exactly_like_verl(index: int) -> None:
    """Accepted exactly when verl's entry point composes the launch, and then with verl's very config."""
    launch = LAUNCHES[index]
    reference = _reference(index)
    if ON_091:
        assert (reference is not None) == RELABELLED.get(index, launch["verl_composes"])
    code, printed, output = _ours(index)
    assert code == (0 if reference is not None else 2), output
    if reference is None:
        assert "usage error" in output
    else:
        assert printed == reference


def _composed(index: int) -> Any:
    reference = _reference(index)
    if reference is None:  # only off 0.9.1: another verl version may refuse a launch 0.9.1 composed
        pytest.skip(f"verl {version('verl')} does not compose this launch")
    return OmegaConf.create(reference)


@pytest.mark.parametrize("index", [i for i in CHOSEN if LAUNCHES[i]["verl_composes"]], ids=lambda i: f"{i:02d}")
def test_roles_are_judged_as_verl_starts_them(index: int) -> None:
    """A critic or ref context is flagged inactive exactly when verl starts no such worker for that launch."""
    roles: dict[str, Any] = LAUNCHES[index]["verl_roles"]
    config = OmegaConf.merge(_composed(index), {"extra_context": {"critic": {"value_clip": 0.3}, "ref": {}}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        contexts = validate(config, registry=REGISTRY)
    inactive = {str(w.message).split("]")[0].strip("[") for w in caught if issubclass(w.category, InactiveRoleWarning)}
    assert ("critic" in inactive) == (not roles["need_critic"])
    assert ("ref" in inactive) == (not roles["ref_worker_started"])
    assert set(contexts) == {"critic", "ref"}  # an inactive role warns; it never blocks


def test_role_mirror_agrees_with_verls_own_functions() -> None:
    """On every launch verl composes, our torch-free rules give verl's own need_* answers and ref_in_actor."""
    from verl.trainer.ppo import utils as verl_utils

    from verl_ctx._driver import roles as _roles

    for index in CHOSEN:
        launch = LAUNCHES[index]
        if not launch["verl_composes"]:
            continue
        config = _composed(index)
        plain = OmegaConf.to_container(config, resolve=True)
        assert isinstance(plain, dict)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert _roles.need_critic(plain) == bool(verl_utils.need_critic(config))
        assert _roles.need_reference_policy(plain) == bool(verl_utils.need_reference_policy(config))
        assert _roles.need_reward_model(plain) == bool(verl_utils.need_reward_model(config))
        assert _roles.need_teacher_policy(plain) == bool(verl_utils.need_teacher_policy(config))
        assert _roles.ref_in_actor(plain) == launch["verl_roles"]["ref_in_actor"]
