"""A recipe with its own entry point, config folder, TaskRunner and trainer, launched exactly as its script launches it.

The recipe is ``examples/recipe/shaped_ppo`` in the shape of verl's recipe collection: ``main_shaped_ppo.py``
(``@hydra.main(config_path="config", config_name="shaped_ppo_trainer")``, a ``BaseTaskRunner`` that registers the
recipe's own workers as ``actor_rollout`` when no reference policy runs, a ``RayPPOTrainer`` of its own, a
pre-launch check of its own) and ``main_shaped_ppo_v1.py`` (a ``TaskRunnerV1`` that builds its own trainer). Its
config's ``hydra.searchpath`` is ``file://verl/trainer/config``, relative to the working directory, which here (as
in a verl checkout) holds ``verl/`` and ``recipe/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_ctx import validate
from verl_ctx.errors import ConfigError, LaunchError
from verl_ctx.integrations.verl import compose_config
from verl_ctx.integrations.verl._entry import entry_point

from .conftest import REPO
from .verl_reference import verl_hydra_main

LEGACY = "recipe.shaped_ppo.main_shaped_ppo"
V1 = "recipe.shaped_ppo.main_shaped_ppo_v1"
SCHEMAS = "recipe.shaped_ppo.contexts"
WORKERS = "recipe.shaped_ppo.workers"


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory laid out as a verl checkout: verl/ (the installed package) and recipe/ side by side."""
    import verl

    root = tmp_path_factory.mktemp("verl-checkout")
    (root / "verl").symlink_to(Path(verl.__file__).parent)
    (root / "recipe").symlink_to(REPO / "examples" / "recipe")
    _write_unit_recipes(root / "unit_recipes")
    cd = root / "extra-configs"  # a --config-dir holding a primary config found nowhere else
    cd.mkdir()
    (cd / "only_in_config_dir.yaml").write_text(
        "hydra:\n  searchpath: [file://verl/trainer/config]\n"
        "defaults: [shaped_ppo_trainer, _self_]\ntrainer:\n  total_epochs: 3\n"
    )
    return root


_PLAIN_RUNNER = """
import hydra
import ray
from verl.trainer.main_ppo_v0 import BaseTaskRunner


class TaskRunner(BaseTaskRunner):
    def run(self, config):
        pass


@hydra.main(config_path="shaped/config", config_name="shaped_ppo_trainer", version_base=None)
def main(config):
    return start(config)  # what the collection's mains hand run_ppo


def start(config):
    return ray.remote(num_cpus=1)(TaskRunner)
"""

_RUNNER_IN_A_METHOD = """
import hydra
import ray
from verl.trainer.main_ppo_v0 import BaseTaskRunner


@ray.remote
class TaskRunner(BaseTaskRunner):
    def run(self, config):
        pass


class Launcher:
    def start(self):
        return TaskRunner.remote()


@hydra.main(config_path="shaped/config", config_name="shaped_ppo_trainer", version_base=None)
def main(config):
    return Launcher().start()
"""


# A main written for an older verl: its module-level import fails on 0.9 (verl removed fsdp_workers).
_BROKEN_IMPORT = """
import hydra
from verl.workers.fsdp_workers import ActorRolloutRefWorker


@hydra.main(config_path="shaped/config", config_name="shaped_ppo_trainer", version_base=None)
def main(config):
    pass
"""


# A plain ray.remote runner of no verl family, as most of the collection writes them, without bind_workers.
_PLAIN_WITHOUT_THE_LINE = """
import hydra
import ray
from verl.trainer.main_ppo import run_ppo


@ray.remote(num_cpus=1)
class TaskRunner:
    def run(self, config):
        pass


@hydra.main(config_path="shaped/config", config_name="shaped_ppo_trainer", version_base=None)
def main(config):
    run_ppo(config, task_runner_class=TaskRunner)
"""

# The whole job as a ray.remote function, without bind_workers.
_FUNCTION_WITHOUT_THE_LINE = """
import hydra
import ray


@ray.remote(num_cpus=1)
def main_task(config):
    pass


@hydra.main(config_path="shaped/config", config_name="shaped_ppo_trainer", version_base=None)
def main(config):
    ray.get(main_task.remote(config))
"""


# reward_queue's shape: verl's fully-async runner subclassed (its class derived from the actor class's own, which
# the module also names), without bind_workers.
_FULLY_ASYNC_WITHOUT_THE_LINE = """
import hydra
import ray
from verl.experimental.fully_async_policy.fully_async_main import FullyAsyncTaskRunner
from verl.trainer.main_ppo import run_ppo


@ray.remote(num_cpus=1)
class TaskRunner(FullyAsyncTaskRunner.__ray_metadata__.modified_class):
    def _create_trainer(self, config):
        pass


@hydra.main(config_path="shaped/config", config_name="shaped_fully_async", version_base=None)
def main(config):
    run_ppo(config, task_runner_class=TaskRunner)
"""


# An evaluation entry point: a ray.remote function that starts no actor, critic or trainer.
_EVALUATION = """
import hydra
import ray


@ray.remote
def evaluate(config):
    return config.data.val_files


@hydra.main(config_path="shaped/config", config_name="shaped_ppo_trainer", version_base=None)
def main(config):
    print(ray.get(evaluate.remote(config)))
"""


# An --import module that says where it was imported: in a Ray worker (the runner's process) or not.
_IMPORT_MARKER = """
import os

import ray

with open(os.environ["VERL_CTX_TEST_IMPORTED"], "a") as f:
    f.write("in a Ray worker\\n" if ray.is_initialized() else "outside Ray\\n")
"""


def _write_unit_recipes(folder: Path) -> None:
    """Entry modules in shapes the collection uses, whose mains return what they would start instead of training."""
    folder.mkdir()
    (folder / "__init__.py").touch()
    (folder / "shaped").symlink_to(REPO / "examples" / "recipe" / "shaped_ppo")
    (folder / "main_plain_runner.py").write_text(_PLAIN_RUNNER)
    (folder / "main_runner_in_a_method.py").write_text(_RUNNER_IN_A_METHOD)
    (folder / "main_broken_import.py").write_text(_BROKEN_IMPORT)
    (folder / "main_plain_without_the_line.py").write_text(_PLAIN_WITHOUT_THE_LINE)
    (folder / "main_function_without_the_line.py").write_text(_FUNCTION_WITHOUT_THE_LINE)
    (folder / "main_fully_async_without_the_line.py").write_text(_FULLY_ASYNC_WITHOUT_THE_LINE)
    (folder / "main_evaluation.py").write_text(_EVALUATION)
    (folder / "import_marker.py").write_text(_IMPORT_MARKER)


@pytest.fixture
def in_collection(collection: Path, monkeypatch: pytest.MonkeyPatch, empty_default_registry: None) -> Path:
    """Run from the checkout, as the recipe's script does; its modules importable from there, as with `python -m`.

    The recipe's schemas are (re-)declared into an emptied default registry: collecting examples/ declares the
    custom recipe's for the same roles in this process.
    """
    import importlib
    import sys

    monkeypatch.chdir(collection)
    monkeypatch.syspath_prepend(str(collection))
    if SCHEMAS in sys.modules:
        importlib.reload(sys.modules[SCHEMAS])
    else:
        importlib.import_module(SCHEMAS)
    return collection


def _verl_ctx(
    collection: Path, *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed `verl-ctx ARGS`, run from the checkout as the docs say, with nothing on PYTHONPATH: the recipe's
    modules (-s, -m, --worker) are found from the working directory, by verl-ctx and by every Ray worker."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", **(env or {})}
    env.pop("PYTHONPATH", None)
    command = [str(Path(sys.executable).with_name("verl-ctx")), *args]
    return subprocess.run(
        command, cwd=collection, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _recipe(module: str, name: str) -> Any:
    """``name`` from one of the recipe's modules (imported from the working directory, as `python -m` would)."""
    import importlib

    return getattr(importlib.import_module(module), name)


FORMS: dict[str, list[str]] = {
    "the script's own arguments": ["--config-path=config", "--config-name=shaped_ppo_trainer"],
    "decorator defaults": [],
    "-cp/-cn, .yaml": ["-cp", "config", "-cn", "shaped_ppo_trainer.yaml"],
    "./config": ["--config-path=./config", "--config-name=shaped_ppo_trainer"],
    "--config-dir, primary only there": ["--config-dir=extra-configs", "--config-name=only_in_config_dir"],
    "-cd and a searchpath override": [
        "-cd",
        "extra-configs",
        "--config-name=only_in_config_dir",
        "hydra.searchpath=[file://verl/trainer/config]",
    ],
    "no reference policy, grpo": ["algorithm.adv_estimator=grpo"],
    "a reference policy": ["actor_rollout_ref.actor.use_kl_loss=true"],
    "a key the recipe has not": ["shaped_ppo.no_such_key=1"],
    "a key added with +": ["+shaped_ppo.new_key=1"],
}


def _roles(config: Any) -> dict[str, bool]:
    import warnings

    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # verl warns that a critic is disabled for grpo, as intended here
        return {"critic": need_critic(config), "ref": need_reference_policy(config)}


@pytest.mark.parametrize("args", FORMS.values(), ids=FORMS.keys())
def test_validate_m_composes_what_the_recipes_hydra_main_composes(args: list[str], in_collection: Path) -> None:
    """For each argument form, -m MODULE gives the config the recipe's @hydra.main hands its main (or refuses
    where it refuses), and the same roles by verl's rules."""
    entry = entry_point(LEGACY)
    theirs = verl_hydra_main(
        args, str(in_collection), main_file=entry.file, config_path="config", config_name="shaped_ppo_trainer"
    )
    try:
        ours = compose_config(args, entry=LEGACY)
    except ConfigError:
        ours = None
    if theirs is None:
        assert ours is None, "verl-ctx composed a config the recipe's entry point refuses"
        return
    assert ours is not None, "verl-ctx refused a config the recipe's entry point composes"
    assert OmegaConf.to_container(ours, resolve=False) == OmegaConf.to_container(theirs, resolve=False)
    assert _roles(ours) == _roles(theirs)


def test_the_recipes_own_entry_point_agrees_when_run_for_real(in_collection: Path) -> None:
    """`python -m recipe...main --cfg job ARGS` (the recipe's unmodified module, Hydra printing the job config)
    is the config `verl-ctx config -m` prints, but for the contexts' section verl-ctx fills in."""
    args = ["--config-path=config", "--config-name=shaped_ppo_trainer", "trainer.total_epochs=5"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(in_collection)}
    real = subprocess.run(
        [sys.executable, "-m", LEGACY, "--cfg", "job", *args],
        cwd=in_collection,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    ours = _verl_ctx(in_collection, "config", "-s", SCHEMAS, "-m", LEGACY, *args)
    assert ours.returncode == 0, ours.stderr[-2000:]
    theirs_config, ours_config = OmegaConf.create(real.stdout), OmegaConf.create(ours.stdout)
    for config in (theirs_config, ours_config):
        config.pop("extra_context")
    assert OmegaConf.to_container(ours_config) == OmegaConf.to_container(theirs_config)
    assert ours_config.trainer.total_epochs == 5


def test_validate_m_with_the_recipes_arguments_exits_0_and_judges_roles(in_collection: Path) -> None:
    """The CLI, given the launch script's own arguments: valid, with the roles this run starts."""
    args = ["-s", SCHEMAS, "-m", LEGACY, "--config-path=config", "--config-name=shaped_ppo_trainer"]
    out = _verl_ctx(in_collection, "validate", "--format", "json", *args)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    active = {role for role, r in report["roles"].items() if r["active"]}
    assert active == {"actor", "critic", "reward", "rollout"}  # gae: a critic; no ref configured
    assert report["roles"]["ref"]["reason"], report["roles"]["ref"]  # inactive, with verl's reason


def test_run_check_on_a_module_that_cannot_import_exits_2_naming_its_import_error(collection: Path) -> None:
    """`run --check -m` imports the entry module in a fresh process: an import verl 0.9 refuses is a usage error that
    names the module, the error and the line, before anything starts; `validate -m` says it imported nothing."""
    broken = "unit_recipes.main_broken_import"
    out = _verl_ctx(collection, "run", "--check", "-s", SCHEMAS, "-m", broken)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert (
        f"module '{broken}' does not import here: ModuleNotFoundError: No module named 'verl.workers.fsdp_workers' "
        f"(at {collection}/unit_recipes/main_broken_import.py:3)"
    ) in out.stderr
    assert "pre-launch checks passed" not in out.stdout
    validated = _verl_ctx(collection, "validate", "-s", SCHEMAS, "-m", broken)
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert f"-m {broken}: its config was composed; the module was read, not imported" in validated.stdout
    as_json = _verl_ctx(collection, "validate", "--format", "json", "-s", SCHEMAS, "-m", broken)
    assert json.loads(as_json.stdout)["entry"] == {"module": broken, "imported": False}


def test_validate_m_of_an_entry_point_that_starts_no_known_runner_calls_its_roles_unknown(collection: Path) -> None:
    """An evaluation main (a ray.remote function, no verl runner): no role is called active or inactive by main_ppo's
    rules; every role's verdict says why it is unknown, in text and JSON."""
    module = "unit_recipes.main_evaluation"
    out = _verl_ctx(collection, "validate", "-s", SCHEMAS, "-m", module)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"roles: unknown for this entry point: -m {module} uses none of BaseTaskRunner" in out.stdout
    assert "starts no" not in out.stderr  # no InactiveRoleWarning from main_ppo's rules
    roles = json.loads(_verl_ctx(collection, "validate", "--format", "json", "-s", SCHEMAS, "-m", module).stdout)
    assert {r["active"] for r in roles["roles"].values()} == {None}
    assert all(r["reason"].startswith("unknown for this entry point") for r in roles["roles"].values())
    recipe = json.loads(_verl_ctx(collection, "validate", "--format", "json", "-s", SCHEMAS, "-m", LEGACY).stdout)
    assert {r["active"] for r in recipe["roles"].values()} <= {True, False}  # a recipe's runner: judged


def test_a_rehearsal_brings_a_recipes_own_batch_keys_down_to_the_tiny_runs_batch() -> None:
    """DAPO's data.gen_batch_size (the dataloader's batch) at its launch size made the tiny dataset's loader empty:
    the rehearsal lowers a recipe's data.*batch_size above data.train_batch_size, and says which it lowered."""
    from verl_ctx.integrations.verl._rehearsal_settings import rehearsal_settings

    config = compose_config(["data.train_batch_size=4", "data.gen_batch_size=1536", "data.val_batch_size=2"])
    assert rehearsal_settings(config) == ["data.gen_batch_size=4"]
    assert (config.data.gen_batch_size, config.data.val_batch_size) == (4, 2)


def test_config_and_m_are_refused_together(in_collection: Path) -> None:
    """--config layers over verl's own config; with a recipe's entry point it is a usage error, not ignored."""
    with pytest.raises(ConfigError, match=r"with -m recipe\.shaped_ppo\.main_shaped_ppo the recipe's own config"):
        compose_config([], entry=LEGACY, config_file=REPO / "examples" / "custom_recipe" / "config.yaml")


def test_a_plain_runner_the_entry_point_makes_remote_itself_is_bound(in_collection: Path) -> None:
    """`run_ppo(config, ray.remote(num_cpus=1)(TaskRunner))`, the collection's idiom: the plain class the main
    wraps is the bound one, so the runner it starts binds the workers."""
    from verl_ctx.integrations.verl import ContextTaskRunnerMixin, make_task_runner
    from verl_ctx.integrations.verl._entry import entry_point
    from verl_ctx.integrations.verl._recipe_main import run_recipe_main

    point = entry_point("unit_recipes.main_plain_runner")
    config = compose_config([], entry=point.module)
    started = run_recipe_main(point, config, lambda base: make_task_runner({}, use_v1=True, base=base), lambda: None)
    assert issubclass(started.__ray_actor_class__, ContextTaskRunnerMixin)
    assert started._default_options == {"num_cpus": 1}


def test_a_runner_started_from_a_class_method_is_refused(in_collection: Path) -> None:
    """A class's method that starts the runner is not rebound: refused, rather than starting an unbound runner."""
    from verl_ctx.integrations.verl import make_task_runner
    from verl_ctx.integrations.verl._entry import entry_point
    from verl_ctx.integrations.verl._recipe_main import run_recipe_main

    point = entry_point("unit_recipes.main_runner_in_a_method")
    config = compose_config([], entry=point.module)
    with pytest.raises(ConfigError, match=r"Launcher\.start refers to the TaskRunner"):
        run_recipe_main(point, config, lambda base: make_task_runner({}, use_v1=True, base=base), lambda: None)


@pytest.mark.parametrize(
    ("module", "shape"),
    [
        ("unit_recipes.main_plain_without_the_line", "TaskRunner is a TaskRunner of no verl family"),
        ("unit_recipes.main_function_without_the_line", "main_task is a ray.remote function"),
        # Named as the recipe's runner, not the verl runner it derives from (Ray's class attribute names that one).
        ("unit_recipes.main_fully_async_without_the_line", "TaskRunner is a TaskRunner of no verl family"),
    ],
)
def test_a_runner_verl_ctx_cannot_bind_from_outside_is_refused_with_the_line_to_add(
    in_collection: Path, module: str, shape: str
) -> None:
    """A plain ray.remote runner or function that does not call bind_workers: refused before the main runs, and the
    refusal is the change to make (the rehearsals below run the same shapes with that line)."""
    if "fully_async" in module:
        _skip_without_fully_async()
    from verl_ctx.integrations.verl import make_task_runner
    from verl_ctx.integrations.verl._entry import entry_point
    from verl_ctx.integrations.verl._recipe_main import run_recipe_main

    point = entry_point(module)
    config = compose_config([], entry=point.module)
    planned: list[int] = []
    with pytest.raises(ConfigError) as refused:
        run_recipe_main(
            point, config, lambda base: make_task_runner({}, use_v1=True, base=base), lambda: planned.append(1)
        )
    assert f"-m {module}: {shape}" in str(refused.value)
    assert "bind_workers(role_worker_mapping, config, resource_pool_manager)" in str(refused.value)
    assert not planned


def test_a_ray_remote_helper_beside_a_runner_class_is_not_taken_for_a_runner(in_collection: Path) -> None:
    """A module with a runner class and a ray.remote helper function: the class is its runner; the helper is left
    alone (a function is the runner only when it binds itself, or when the module has no runner class)."""
    import importlib

    from verl_ctx.integrations.verl._recipe_main import recipe_runners

    (in_collection / "unit_recipes" / "main_with_a_helper.py").write_text(
        _PLAIN_RUNNER + "\n\n@ray.remote\ndef count_tokens(batch):\n    return len(batch)\n"
    )
    found = recipe_runners(importlib.import_module("unit_recipes.main_with_a_helper"))
    assert sorted(found) == ["TaskRunner"]
    assert sorted(recipe_runners(importlib.import_module("unit_recipes.main_function_without_the_line"))) == [
        "main_task"
    ]


def test_bind_workers_in_a_run_verl_ctx_did_not_launch_stops_it(verl_config: Any) -> None:
    """A runner's bind_workers line, run by `python -m` directly: no contexts to bind, so it stops the run rather than
    start workers that would look for them."""
    from verl_ctx.integrations.verl import bind_workers

    with pytest.raises(LaunchError, match=r"bind_workers: this config carries no contexts .* `verl-ctx run -s"):
        bind_workers({}, verl_config)


def test_a_bound_v1_trainer_sees_the_users_trainer_mode(in_collection: Path) -> None:
    """The bound trainer is registered as MODE+verl_ctx; verl's PPOTrainer.__init__ reads trainer_mode and branches on
    `== "sync"`, so the config it gets says the user's mode again."""
    from omegaconf import open_dict
    from verl.trainer.ppo.v1 import PPOTrainerSync

    from verl_ctx.integrations.verl import bound_trainer_cls

    class Recording(PPOTrainerSync):
        def __init__(self, config: Any) -> None:  # verl's own loads a tokenizer and datasets
            self.seen = str(config.trainer.v1.trainer_mode)

    config = _config(in_collection)
    with open_dict(config):
        config.trainer.v1.trainer_mode = "sync+verl_ctx"  # what ContextTaskRunnerV1Mixin.run points it at
    trainer: Any = bound_trainer_cls(Recording, {})(config=config)
    assert trainer.seen == "sync"


# --- the silent paths, each now a named error -----------------------------------------------------------------------


def _config(in_collection: Path, *overrides: str) -> Any:
    return compose_config(list(overrides), entry=LEGACY)


def test_a_legacy_runner_gets_the_legacy_mixin_whatever_use_v1_says(in_collection: Path) -> None:
    """The recipe's config leaves trainer.use_v1 true (verl's default); its BaseTaskRunner is still bound as one."""
    from verl_ctx.integrations.verl import ContextTaskRunnerMixin, make_task_runner

    config = _config(in_collection)
    TaskRunner = _recipe(LEGACY, "TaskRunner")
    assert config.trainer.use_v1 is True
    runner = make_task_runner({}, use_v1=True, base=TaskRunner)
    assert issubclass(runner.__ray_actor_class__, ContextTaskRunnerMixin)
    assert runner._default_options == {"num_cpus": 1}  # the recipe's @ray.remote options are kept


def test_a_runner_of_neither_family_is_refused() -> None:
    """A TaskRunner deriving from neither BaseTaskRunner nor TaskRunnerV1 cannot be bound: a ConfigError."""
    import ray

    from verl_ctx.integrations.verl import make_task_runner

    @ray.remote
    class OwnRunner:
        def run(self, config: Any) -> None:
            pass

    with pytest.raises(ConfigError, match=r"derives from neither verl\.trainer\.main_ppo_v0\.BaseTaskRunner"):
        make_task_runner({}, use_v1=True, base=OwnRunner)


def _legacy_runner(contexts: Any, workers: dict[str, str] | None = None) -> Any:
    """The recipe's bound TaskRunner as a plain object in this process (its registration needs no Ray cluster)."""
    from verl_ctx.integrations.verl import make_task_runner

    envelopes = {r: e for r, e in contexts.envelopes().items() if r in ("actor", "ref", "critic")}
    runner = make_task_runner(envelopes, use_v1=True, base=_recipe(LEGACY, "TaskRunner"), workers=workers)
    return runner.__ray_actor_class__()


def test_a_context_whose_role_has_no_registered_slot_stops_the_launch(in_collection: Path) -> None:
    """A runner that registers no critic while verl's rules start one: the critic context would ride nowhere."""
    import ray
    from verl.trainer.ppo.utils import Role

    config = _config(in_collection)
    runner = _legacy_runner(validate(config))
    ShapedHybridWorker = _recipe(WORKERS, "ShapedHybridWorker")
    runner.__dict__["_verl_ctx_config"] = config
    runner.role_worker_mapping[Role.ActorRollout] = ray.remote(ShapedHybridWorker)
    with pytest.raises(LaunchError, match=r"the critic context has no slot.*The runner registered: actor_rollout"):
        runner.role_worker_mapping[Role.ActorRollout]  # the trainer's first read, before any worker starts


def test_a_hybrid_worker_given_for_actor_rollout_ref_serves_actor_rollout(in_collection: Path) -> None:
    """Without a reference policy the runner registers actor_rollout: the recipe's hybrid worker is bound there."""
    import ray
    from verl.trainer.ppo.utils import Role
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    config = _config(in_collection)
    runner = _legacy_runner(validate(config), workers={"actor_rollout_ref": f"{WORKERS}:ShapedHybridWorker"})
    ShapedHybridWorker = _recipe(WORKERS, "ShapedHybridWorker")
    runner.__dict__["_verl_ctx_config"] = config
    runner.role_worker_mapping[Role.ActorRollout] = ray.remote(ActorRolloutRefWorker)
    runner.role_worker_mapping[Role.Critic] = ray.remote(TrainingWorker)
    bound = runner.role_worker_mapping[Role.ActorRollout].__ray_actor_class__
    assert issubclass(bound, ShapedHybridWorker)


def test_a_trainer_class_imported_inside_run_is_bound_when_it_first_reads_the_mapping(in_collection: Path) -> None:
    """DAPO's shape: the runner imports its trainer inside run, so no global names it. The trainer reading the
    mapping (its init_workers) is bound then, before any worker starts: its checkpoints carry the contexts."""
    import ray
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.utils import Role
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    from verl_ctx.integrations.verl._binding import bound_envelopes

    class ImportedInsideRun(RayPPOTrainer):
        def first_read(self) -> Any:  # what init_workers does first
            return self.role_worker_mapping[Role.ActorRollout]

    config = _config(in_collection)
    runner = _legacy_runner(validate(config))
    runner.__dict__["_verl_ctx_config"] = config
    runner.role_worker_mapping[Role.ActorRollout] = ray.remote(ActorRolloutRefWorker)
    runner.role_worker_mapping[Role.Critic] = ray.remote(TrainingWorker)
    trainer: Any = object.__new__(ImportedInsideRun)  # its __init__ loads a tokenizer and datasets
    trainer.role_worker_mapping = runner.role_worker_mapping
    trainer.first_read()
    assert isinstance(trainer, ImportedInsideRun)
    assert "_save_checkpoint" in vars(type(trainer))
    assert set(bound_envelopes(type(trainer))) == {"actor", "critic"}


def test_a_worker_for_a_slot_the_runner_never_registers_stops_the_launch(in_collection: Path) -> None:
    """--worker ref=... while no reference policy runs (the hybrid worker is actor_rollout): never silently unused."""
    import ray
    from verl.trainer.ppo.utils import Role
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    config = _config(in_collection)
    runner = _legacy_runner(validate(config), workers={"ref": f"{WORKERS}:ShapedRefWorker"})
    runner.__dict__["_verl_ctx_config"] = config
    runner.role_worker_mapping[Role.ActorRollout] = ray.remote(ActorRolloutRefWorker)
    runner.role_worker_mapping[Role.Critic] = ray.remote(TrainingWorker)
    with pytest.raises(LaunchError, match="the recipe's worker for ref has no slot"):
        list(runner.role_worker_mapping.items())


@pytest.mark.parametrize(
    ("slot", "cls", "wanted"),
    [
        ("actor_rollout_ref", "ShapedCriticWorker", "ActorRolloutRefWorker; ShapedCriticWorker is a TrainingWorker"),
        ("ActorRollout", "ShapedActorWorker", "ActorRolloutRefWorker; ShapedActorWorker is a TrainingWorker"),
        ("critic", "ShapedHybridWorker", "TrainingWorker; ShapedHybridWorker is a ActorRolloutRefWorker"),
    ],
)
def test_a_worker_class_that_cannot_serve_its_slot_is_a_usage_error(
    slot: str, cls: str, wanted: str, in_collection: Path
) -> None:
    """A TrainingWorker where a hybrid worker is needed, and the reverse, is refused when the class is resolved."""
    from verl_ctx.integrations.verl._binding import resolve_worker_classes

    with pytest.raises(ConfigError, match=wanted):
        resolve_worker_classes({slot: f"{WORKERS}:{cls}"})


def test_run_refuses_a_wrong_worker_class_before_ray_starts(in_collection: Path) -> None:
    """`verl-ctx run --worker actor_rollout_ref=<a TrainingWorker>`: exit 2, and no Ray cluster was started."""
    out = _verl_ctx(
        in_collection, "run", "-s", SCHEMAS, "-m", LEGACY, "--worker", f"actor_rollout_ref={WORKERS}:ShapedCriticWorker"
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "the actor_rollout_ref slot runs a subclass of verl's" in out.stderr
    assert "Started a local Ray instance" not in out.stdout + out.stderr


# --- rehearsals of the recipe's own main, on both runner families ----------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from verl_ctx.testing import tiny_dataset, tiny_model, tiny_run_args

    scratch = tmp_path_factory.mktemp("tiny")
    return tiny_run_args(tiny_model(scratch / "model"), tiny_dataset(scratch / "data"))


def _run(collection: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return _verl_ctx(collection, "run", *args, env=env)


def test_testing_cli_prints_a_tiny_runs_overrides(tmp_path: Path) -> None:
    """`python -m verl_ctx.testing tiny-run DIR` (docs/recipes.md's rehearsals): a model, a dataset, their overrides."""
    out = subprocess.run(
        [sys.executable, "-m", "verl_ctx.testing", "tiny-run", str(tmp_path / "tiny")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    overrides = dict(word.split("=", 1) for word in out.stdout.split())
    assert Path(overrides["actor_rollout_ref.model.path"], "config.json").is_file()
    assert Path(overrides["data.train_files"]).is_file()
    assert overrides["trainer.n_gpus_per_node"] == "1"


def _records(out: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return {r["role"]: r for r in report["records"]}


SCRIPT_ARGS = ["--config-path=config", "--config-name=shaped_ppo_trainer"]


def _every_role_decoded_by_the_recipe(out: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    """The rehearsal's records, checked: the recipe's actor, critic and hybrid worker built, each context decoded
    by the recipe's own class (the config's values)."""
    records = _records(out)
    assert records["actor"]["worker"] == f"{WORKERS}.ShapedActorWorker"
    assert records["actor"]["decoded"] == {"ctx": "ActorContext(entropy_bonus=0.01)"}
    assert records["critic"]["worker"] == f"{WORKERS}.ShapedCriticWorker"
    assert records["critic"]["decoded"] == {"ctx": "CriticContext(value_clip=0.3)"}
    assert records["actor_rollout (outer worker)"]["worker"] == f"{WORKERS}.ShapedHybridWorker"
    return records


@pytest.mark.ray
def test_rehearsal_of_the_legacy_recipe_main_delivers_every_role_to_its_workers(
    collection: Path, tiny: list[str]
) -> None:
    """The recipe's own main, TaskRunner (BaseTaskRunner, use_v1 left true) and workers it registers itself as
    actor_rollout: each role's context decoded by the recipe's class, with no --worker given."""
    out = _run(collection, "--rehearse", "--format", "json", "-s", SCHEMAS, "-m", LEGACY, *SCRIPT_ARGS, *tiny)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    records = _every_role_decoded_by_the_recipe(out)
    assert "ref" not in records  # no reference policy runs
    assert "verl's own" not in out.stdout
    # A line per phase as it happens, each worker told once it is built (before the table at the end).
    phases = out.stdout.split("rehearsal complete", 1)[0]
    assert "Ray is up" in phases
    assert f"handing over to {LEGACY}'s main" in phases
    assert f"built critic: {WORKERS}.ShapedCriticWorker in process" in phases
    assert "decoded CriticContext" in phases
    told = [line for line in phases.splitlines() if line.startswith("  built ")]
    assert told, phases
    assert not any("value_clip" in line for line in told)  # class names only: values (and any secret) stay out
    # The recipe's reward function (its config's custom_reward_function), called as verl's reward loop calls it,
    # decoded its context from the keyword arguments verl handed it.
    reward = records["reward"]
    assert reward["worker"] == "compute_score in recipe/shaped_ppo/reward.py"
    assert reward["decoded_roles"] == ["reward"]
    assert list(reward["decoded"].values()) == ["RewardContext(length_penalty=-0.001, judge_key=None)"]
    assert reward["after"] == "returned float"
    assert "called reward: compute_score in recipe/shaped_ppo/reward.py in process" in phases


@pytest.mark.one_verl  # the rehearsals above prove their verl surface on every release
@pytest.mark.ray
@pytest.mark.parametrize("main", ["main_plain_runner", "main_task_function", "main_own_remote"])
def test_a_runner_of_any_shape_binds_itself_with_one_line_and_every_role_is_decoded(
    collection: Path, tiny: list[str], main: str, tmp_path: Path
) -> None:
    """A plain ray.remote runner, a ray.remote function and a plain class its main makes remote, each with the one
    bind_workers line: the rehearsal builds the recipe's workers and each decodes its role's context; the --import
    module was imported in the runner's process (a Ray worker) too, as for a bound runner."""
    marker = tmp_path / "imported.txt"
    out = _run(
        collection, "--rehearse", "--format", "json", "-s", SCHEMAS, "-m", f"recipe.shaped_ppo.{main}", *SCRIPT_ARGS,
        "--import", "unit_recipes.import_marker", *tiny, env={"VERL_CTX_TEST_IMPORTED": str(marker)},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    _every_role_decoded_by_the_recipe(out)
    assert "in a Ray worker" in marker.read_text().splitlines()


def _skip_without_fully_async() -> None:
    """verl 0.9.0's separate trainer has no hybrid_engine=False mode, which its fully-async runner needs."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    if not hasattr(get_trainer_cls("separate_async"), "_enable_hybrid_replicas"):
        pytest.skip("this verl's fully-async runner needs hybrid_engine=False (added in verl 0.9.1)")


@pytest.mark.ray
def test_a_fully_async_runner_binds_itself_with_the_same_line_and_its_actor_decodes(
    collection: Path, tiny: list[str]
) -> None:
    """verl's FullyAsyncTaskRunner subclassed, its trainer a Ray actor of its own building the worker groups: the one
    bind_workers line in the subclass's _create_trainer, the recipe's actor given for the separate trainer's inner
    worker, and the rehearsal builds it there and it decodes its context."""
    _skip_without_fully_async()
    out = _run(
        collection, "--rehearse", "--format", "json", "-s", SCHEMAS, "-m", "recipe.shaped_ppo.main_fully_async",
        "--worker", f"actor={WORKERS}:ShapedActorWorker", "--config-path=config", "--config-name=shaped_fully_async",
        *tiny,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    records = _records(out)
    assert records["actor"]["worker"] == f"{WORKERS}.ShapedActorWorker"
    assert records["actor"]["decoded"] == {"ctx": "ActorContext(entropy_bonus=0.01)"}
    assert "DetachActorWorker" in records["actor (outer worker)"]["worker"]  # verl's separate trainer built it


@pytest.mark.ray
def test_rehearsal_of_the_v1_recipe_main_binds_the_trainer_it_builds(collection: Path, tiny: list[str]) -> None:
    """A TaskRunnerV1 subclass that builds its own trainer class: bound when the runner stores it; the recipe's
    workers given with --worker serve actor, ref, critic and rollout."""
    out = _run(
        collection,
        "--rehearse",
        "--format",
        "json",
        "-s",
        SCHEMAS,
        "-m",
        V1,
        "--worker",
        f"critic={WORKERS}:ShapedCriticWorker",
        "--worker",
        f"ActorRolloutRef={WORKERS}:ShapedHybridWorker",
        *SCRIPT_ARGS,
        *tiny,
        "actor_rollout_ref.actor.use_kl_loss=true",
        "extra_context.critic.value_clip=0.5",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    records = _records(out)
    assert records["critic"]["decoded"] == {"ctx": "CriticContext(value_clip=0.5)"}
    assert records["ref"]["worker"] == f"{WORKERS}.ShapedRefWorker"
    assert records["ref"]["decoded"] == {"ctx": "RefContext(kl_temperature=1.0)"}
    assert records["actor_rollout_ref (outer worker)"]["decoded"] == {"rollout_ctx": "RolloutContext(max_tool_calls=4)"}


@pytest.mark.one_verl  # the rehearsals above prove their verl surface on every release
@pytest.mark.ray
def test_a_rehearsal_whose_contexts_no_recipe_code_decodes_fails(
    collection: Path, tiny: list[str], tmp_path: Path
) -> None:
    """The v1 runner with verl's own workers: the table names verl's classes (no builtins.object), and the run
    fails naming the contexts nothing read; its report keeps the records that show it, beside the failure."""
    report = tmp_path / "report.json"
    out = _run(collection, "--rehearse", "--report", str(report), "-s", SCHEMAS, "-m", V1, *SCRIPT_ARGS, *tiny)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "verl.workers.engine_workers.TrainingWorker (verl's own)" in out.stdout
    assert "builtins.object" not in out.stdout
    assert "no recipe code decoded the actor, critic context(s)" in out.stderr
    failed = json.loads(report.read_text())
    assert failed["ok"] is False
    assert "no recipe code decoded the actor, critic context(s)" in failed["error"]["message"]
    assert {r["role"] for r in failed["records"]} >= {"actor", "critic"}


@pytest.mark.one_verl  # the rehearsals above prove their verl surface on every release
@pytest.mark.ray
def test_a_rehearsal_whose_batch_outgrows_the_data_names_the_batch_keys(collection: Path, tiny: list[str]) -> None:
    """verl's "Train dataloader is empty!" alone does not say which key: the rehearsal's failure names the data's
    batch keys and their values."""
    out = _run(collection, "--rehearse", "-s", SCHEMAS, "-m", LEGACY, *SCRIPT_ARGS, *tiny, "data.train_batch_size=64")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Train dataloader is empty" in out.stderr
    assert "one batch is more rows than data.train_files has: data.train_batch_size=64" in out.stderr


@pytest.mark.one_verl  # the rehearsals above prove their verl surface on every release
@pytest.mark.ray
def test_the_recipes_own_pre_launch_check_is_the_one_run(collection: Path, tiny: list[str], tmp_path: Path) -> None:
    """The recipe's main refuses its own setting; verl main_ppo's checks would not have: its message is the cause,
    on the console and in the --report file (a failed rehearsal's report says why, never an empty file)."""
    report = tmp_path / "report.json"
    out = _run(
        collection, "--rehearse", "--report", str(report), "-s", SCHEMAS, "-m", LEGACY, *SCRIPT_ARGS, *tiny,
        "shaped_ppo.reward_scale=-1",
    )  # fmt: skip
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "shaped_ppo.reward_scale must be > 0, got -1" in out.stderr
    failed = json.loads(report.read_text())
    assert failed["ok"] is False
    assert failed["records"] == []
    assert "shaped_ppo.reward_scale must be > 0, got -1" in failed["error"]["message"]
    assert "Ray is up" in out.stdout  # the phases reached, told as they happened
