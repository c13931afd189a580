"""``launch``: run verl's PPO entry with every role's context bound (what ``verl-ctx run`` calls), and its parts.

``python -m verl.trainer.main_ppo`` composes the config, then ``main`` runs ``auto_set_device`` and
``validate_config`` and calls ``run_ppo(config, task_runner_class=...)``, which starts Ray and runs the
TaskRunner. ``launch`` does the same with a bound TaskRunner, in steps a recipe's own ``main`` can call too:

1. ``check_launch(config)``: verl's own pre-launch checks, their failure as one ``LaunchError`` line;
2. ``init_ray(config)``: ``ray.init`` exactly as ``run_ppo`` would (it skips its own when Ray is up), then
   ``preflight(config)``: the GPUs the config's pools and rollout replicas need against the cluster's
   (``_preflight``), a shortfall one ``LaunchError`` before the TaskRunner starts;
3. ``prepare(config, contexts, ...)``: contexts into the config and a TaskRunner class (the store first for
   large or secret-holding ones, which is why Ray starts before);
4. ``run_ppo(config, task_runner_class=runner)``, verl's own.

Before all of them, a resume (``trainer.resume_mode``) is compared with the checkpoint's saved contexts
(``check_resume_before_start``): a change not accepted stops the launch before Ray starts.

With ``entry="recipe.x.main_x"`` (``verl-ctx run -m``) steps 1 and 4 are the recipe's own: its ``@hydra.main``
function is called with the config, its TaskRunners bound (``_recipe_main``); Ray is started first only when a
context must wait in the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..._driver.contextset import ContextSet
from ...errors import ContextError, ContextValidationError, LaunchError
from ._bind_workers import plan_in_config
from ._binding import WORKER_CLASS_ROLES
from ._checkpoint import check_resume_before_start
from ._config_channel import bind_config
from ._entry import VERL_ENTRY, EntryPoint, entry_point
from ._preflight import preflight
from ._rehearsal_settings import check_cpus, empty_dataloader, rehearsal_settings
from ._runners import make_task_runner
from ._store import DEFAULT_OFFLOAD_BYTES, offload
from .external._checks import unused_routing

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "LaunchOptions",
    "Prepared",
    "check_decoded",
    "check_launch",
    "init_ray",
    "innermost",
    "launch",
    "prepare",
    "ray_init_kwargs",
    "rehearsal_settings",
    "rehearse",
    "verl_cause",
]


class LaunchOptions(TypedDict, total=False):
    """The keyword options ``prepare``, ``launch`` and ``rehearse`` share (``verl-ctx run``'s flags)."""

    #: Contexts above this many payload bytes travel by object-store reference (``--offload-bytes``).
    offload_threshold: int
    #: The TaskRunner class to bind instead of verl's own (bound as the family it derives from: legacy or v1).
    task_runner_base: type | None
    #: The entry module whose ``@hydra.main`` function runs the launch (``-m``); verl's ``main_ppo`` by default.
    entry: str | None
    #: verl slot -> ``module:Class`` of the recipe's worker (``--worker``).
    workers: Mapping[str, str] | None
    #: Modules to import inside the TaskRunner before verl looks up its trainer (``--import``).
    imports: Sequence[str]
    #: ``rehearse`` only: refuse a rehearsal where a worker role's context was decoded by no recipe code (default).
    require_decoded: bool
    #: ``rehearse`` only: called with one line per phase as it happens (Ray up, hand-over, each worker built).
    progress: Callable[[str], None] | None
    #: Called once after verl's checks, right before Ray or the recipe's main starts; raising stops the launch there
    #: (the CLI's check that the recipe's modules import, run meanwhile in a process of its own, answers here).
    before_start: Callable[[], None] | None


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` bound: the TaskRunner to hand ``run_ppo``, and how each role travels."""

    task_runner: Any
    #: role -> "worker class", "config: <key>", with "by reference" for contexts in the object store.
    channels: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    #: ``runner_for(base)``: the same binding for another TaskRunner (a recipe's own), ``ray.remote`` made.
    runner_for: Any = field(default=None, repr=False)
    #: ``plan_in_config()``: the same contexts and plan written into the config, for a runner that binds itself
    #: (``bind_workers``).
    plan_in_config: Any = field(default=None, repr=False)


def check_launch(config: Any) -> None:
    """verl's own pre-launch steps (``auto_set_device``, ``validate_config``); a failure is a ``LaunchError``."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    try:
        auto_set_device(config)
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
    except Exception as e:
        cause, key = verl_cause(e)
        raise LaunchError(
            f"verl's pre-launch check failed: {cause}"
            + (f" (config key: {key})" if key else "")
            + ". Nothing was launched; fix the config (or run with --traceback for verl's full error)",
            cause=cause,
            key=key,
        ) from e


def verl_cause(exc: BaseException) -> tuple[str, str | None]:
    """The one line that says what verl refused, and the config key when verl names one."""
    text = str(exc)
    key = getattr(exc, "full_key", None)
    found = re.search(r"^full_key: (\S+)", text, re.M)
    if found:
        key = found.group(1)
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    lines = [line for line in str(root).strip().splitlines() if line.strip() and not line.startswith("full_key:")]
    return f"{type(root).__name__}: {lines[0] if lines else ''}".rstrip(": "), key or None


def ray_init_kwargs(config: Any) -> dict[str, Any]:
    """The ``ray.init`` arguments ``run_ppo`` uses for ``config`` (and the driver environment it sets first).

    verl computes them inline in ``run_ppo``; only ``get_ppo_ray_runtime_env`` is a function, reused here. The
    environment variables ``run_ppo`` sets in the driver (determinism, rl_insight) must be set before it
    reads them, so they are set here as ``run_ppo`` would.
    """
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    rollout = config.actor_rollout_ref.rollout
    reward_model = OmegaConf.select(config, "reward.reward_model", default=None)
    rm_determinism = bool(
        reward_model is not None
        and reward_model.get("enable")
        and OmegaConf.select(reward_model, "rollout.full_determinism", default=False)
    )
    if rollout.get("full_determinism") or rm_determinism:
        os.environ.update(VERL_FULL_DETERMINISM="1", VLLM_BATCH_INVARIANT="1", PYTHONHASHSEED=str(rollout.seed))
    loggers = config.trainer.get("logger") or []
    if "rl_insight" in ([loggers] if isinstance(loggers, str) else loggers):
        os.environ["VERL_RL_INSIGHT_ENABLE"] = "1"
    runtime_env = get_ppo_ray_runtime_env(config)
    if OmegaConf.select(config, "transfer_queue.enable", default=False):
        runtime_env.setdefault("env_vars", {})["TRANSFER_QUEUE_ENABLE"] = "1"
    ray_init = config.ray_kwargs.get("ray_init", {}) if config.get("ray_kwargs") is not None else {}
    merged = OmegaConf.merge(runtime_env, ray_init.get("runtime_env", {}))
    kwargs: dict[str, Any] = OmegaConf.to_container(OmegaConf.create({**ray_init, "runtime_env": merged}))
    return kwargs


def init_ray(config: Any) -> bool:
    """``ray.init`` as ``run_ppo`` does, unless Ray is up already; returns whether this call started it."""
    import ray

    if ray.is_initialized():
        return False
    ray.init(**ray_init_kwargs(config))
    return True


def prepare(
    config: Any,
    contexts: ContextSet,
    *,
    rehearsal: Mapping[str, Any] | None = None,
    **options: Unpack[LaunchOptions],
) -> Prepared:
    """Bind ``contexts`` into ``config`` (changed in place) and a TaskRunner class for ``run_ppo``.

    Contexts above ``offload_threshold`` payload bytes, and every context holding a secret, go to a store actor
    first (Ray must be running: ``init_ray``). The raw ``extra_context`` section is replaced by the validated
    values with secrets masked, so nothing verl prints or tracks holds a secret. ``workers`` and ``imports``
    are the recipe's worker classes and modules, used inside the TaskRunner (see ``make_task_runner``).
    """
    threshold = options.get("offload_threshold", DEFAULT_OFFLOAD_BYTES)
    envelopes = offload(contexts.envelopes(), threshold=threshold, always=contexts.secret_roles())
    written = bind_config(config, envelopes, redacted=contexts.redacted())
    channels = {role: "worker class" for role in envelopes if role in WORKER_CLASS_ROLES}
    for key in written:  # each key ends with the role; the reward context may ride in two
        role = key.rsplit(".", 1)[1]
        channels[role] = f"{channels[role]}, {key}" if role in channels else f"config: {key}"
    for role, env in envelopes.items():
        if "payload" not in env:
            channels[role] += " (by reference: Ray object store)"

    def runner_for(base: type | None) -> Any:
        return make_task_runner(
            {role: env for role, env in envelopes.items() if role in WORKER_CLASS_ROLES},
            use_v1=bool(config.trainer.use_v1),
            base=base,
            workers=options.get("workers"),
            imports=options.get("imports", ()),
            rehearsal=rehearsal,
        )

    def in_config() -> None:
        plan_in_config(
            config, envelopes, workers=options.get("workers"), imports=options.get("imports", ()), rehearsal=rehearsal
        )

    return Prepared(
        runner_for(options.get("task_runner_base")), channels, contexts.payload_sizes(), runner_for, in_config
    )


def _recipe_entry(options: LaunchOptions) -> EntryPoint | None:
    """The recipe's own entry point when ``entry`` names one (not verl's ``main_ppo``)."""
    entry = options.get("entry")
    return entry_point(entry) if entry and entry != VERL_ENTRY else None


def _start(config: Any, prepared: Prepared, recipe: EntryPoint | None) -> None:
    """Hand over: verl's ``run_ppo`` with the bound runner, or the recipe's own main with its runners bound."""
    if recipe is None:
        from verl.trainer.main_ppo import run_ppo

        run_ppo(config, task_runner_class=prepared.task_runner)
        return
    from ._recipe_main import run_recipe_main

    run_recipe_main(recipe, config, prepared.runner_for, prepared.plan_in_config)


def _needs_store(contexts: ContextSet, threshold: int) -> bool:
    return bool(contexts.secret_roles()) or any(size > threshold for size in contexts.payload_sizes().values())


def launch(config: Any, contexts: ContextSet, **options: Unpack[LaunchOptions]) -> None:
    """Run verl's PPO training (``trainer.use_v1`` picks v1 or legacy) with every role's context delivered.

    Does what ``python -m verl.trainer.main_ppo`` does after composing the config, with a bound TaskRunner; with
    ``entry``, what ``python -m ENTRY`` does, with the recipe's own TaskRunners bound.
    """
    recipe = _recipe_entry(options)
    before_start = options.pop("before_start", None) or (lambda: None)
    try:
        check_resume_before_start(config, contexts)  # a refused resume costs seconds: before Ray, workers, weights
        if recipe is None:
            unused = unused_routing(config)  # what `verl-ctx validate` refuses, for a launch from Python
            if unused:
                raise ContextValidationError(unused)
            check_launch(config)
    finally:
        before_start()  # its refusal (a module that does not import) is the first thing to fix: it wins
    if recipe is None:
        started = init_ray(config)
        try:
            preflight(config)  # the cluster's GPUs against the config's pools: seconds, not a silent wait
        except LaunchError:
            if started:
                import ray

                ray.shutdown()
            raise
    elif _needs_store(contexts, options.get("offload_threshold", DEFAULT_OFFLOAD_BYTES)):
        init_ray(config)  # the store must hold the contexts before the runner class that refers to them is made
    _start(config, prepare(config, contexts, **options), recipe)


def rehearse(config: Any, contexts: ContextSet, **options: Unpack[LaunchOptions]) -> list[dict[str, Any]]:
    """Run the launch on this machine's CPUs up to the model engine; returns what each worker recorded.

    verl's checks, Ray, the TaskRunner, the trainer and every recipe worker run for real; each
    ``TrainingWorker`` stops where it would start its engine (see ``_rehearsal``). Each record says which role,
    which recipe class, which process, and the ``repr`` of every typed context the worker holds. Raises
    ``LaunchError`` when the run fails before every worker was built (verl's cause named).
    """
    import tempfile

    recipe = _recipe_entry(options)
    say = options.pop("progress", None) or (lambda line: None)
    importing = options.get("before_start") is not None
    before_start = options.pop("before_start", None) or (lambda: None)
    for setting in rehearsal_settings(config):
        say(f"{setting} for the rehearsal (the recipe's own batch key, above data.train_batch_size)")
    say(
        "checking before Ray starts: the resume"
        + (", verl's checks" if recipe is None else "")
        + ("; the recipe's modules importing in a fresh process" if importing else "")
    )
    try:
        check_resume_before_start(config, contexts, record=False)  # the launch would be refused: so is its rehearsal
        if recipe is None:
            check_launch(config)  # a recipe's main runs its own checks
        check_cpus(config)
    finally:
        before_start()  # as in launch: its refusal wins
    say("starting Ray on this machine's CPUs")
    started = init_ray(config)
    try:
        import ray

        say(f"Ray is up ({int(ray.cluster_resources().get('CPU', 0))} logical CPUs)")
        with tempfile.TemporaryDirectory(prefix="verl-ctx-rehearsal-") as directory:
            prepared = prepare(config, contexts, rehearsal={"dir": directory}, **options)
            say(
                f"handing over to {recipe.module}'s main: its checks, its TaskRunner, its trainer"
                if recipe
                else "handing over to verl's run_ppo: TaskRunner, trainer, worker groups"
            )
            try:
                with _records_told(Path(directory), say):
                    _start(config, prepared, recipe)
            except ContextError as e:  # verl-ctx's own refusal (an unbound context, a wrong runner): it is the cause
                raise innermost(e) from None
            except Exception as e:
                if not _completed(e):
                    cause, key = verl_cause(innermost(e))
                    raise LaunchError(
                        f"the rehearsal stopped before every worker was built: {cause}"
                        + (f" (config key: {key})" if key else "")
                        + empty_dataloader(cause, config)
                        + _ray_root_cause(innermost(e)),
                        cause=cause,
                        key=key,
                    ) from e
            else:
                raise LaunchError("the rehearsal ran to the end without reaching a worker", cause="no worker built")
            records = [json.loads(p.read_text()) for p in sorted(Path(directory).glob("*.json"))]
            if options.get("require_decoded", True):
                check_decoded(records, contexts, config)
            return records
    finally:
        if started:
            import ray

            ray.shutdown()


@contextlib.contextmanager
def _records_told(directory: Path, say: Callable[[str], None], every: float = 0.5) -> Iterator[None]:
    """While the block runs, tell each worker record as its worker writes it (a line per worker built)."""
    import threading

    seen: set[str] = set()
    done = threading.Event()

    def tell_new() -> None:
        for path in sorted(directory.glob("*.json")):
            if path.name in seen:
                continue
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):  # being written: the next look reads it whole
                continue
            seen.add(path.name)
            decoded = ", ".join(str(v).split("(", 1)[0] for v in record.get("decoded", {}).values()) or "nothing"
            verb, after = ("called", f"; then it {record['after']}") if "after" in record else ("built", "")
            where = f"{record.get('worker')} in process {record.get('pid')}"
            say(f"{verb} {record.get('role')}: {where}, decoded {decoded}{after}")

    def watch() -> None:
        while not done.wait(every):
            tell_new()

    watcher = threading.Thread(target=watch, name="rehearsal-records", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        tell_new()


def check_decoded(records: Sequence[Mapping[str, Any]], contexts: ContextSet, config: Any) -> None:
    """Refuse a rehearsal in which a worker role's context reached its worker but no recipe code decoded it.

    actor, ref and critic contexts ride in worker classes; a role this run starts whose context no worker's own
    code decoded (stored on ``self``) would be silently unused on GPUs. Rollout and reward contexts are read by
    the recipe's agent loop and reward code, which a rehearsal does not run: it decodes them on their behalf.
    """
    from ..._driver.roles import inactive_roles

    wanted = [r for r in contexts if r in WORKER_CLASS_ROLES]
    inactive = inactive_roles(config, wanted)
    decoded = {role for record in records for role in record.get("decoded_roles", ())}
    missing = sorted(r for r in wanted if r not in inactive and r not in decoded)
    if missing:
        workers = sorted({str(r["worker"]) for r in records})
        raise LaunchError(
            f"the rehearsal built every worker, but no recipe code decoded the {', '.join(missing)} context(s): on "
            f"GPUs they would be delivered and never read. Workers built: {', '.join(workers)}. Give the recipe's "
            "worker class for the slot with --worker (critic=..., actor=/ref= for the hybrid worker's inner "
            "workers, actor_rollout_ref=... for the hybrid worker) and read the context there with decode()",
            cause="undecoded " + ", ".join(missing),
        )


#: Ray's errors that mean a process or node went away rather than the recipe's code raising: the cause is then in
#: Ray's daemon logs, not in the exception.
_RAY_INFRASTRUCTURE = frozenset(
    {
        "ActorDiedError",
        "ActorUnavailableError",
        "LocalRayletDiedError",
        "NodeDiedError",
        "ObjectLostError",
        "OwnerDiedError",
        "RaySystemError",
        "WorkerCrashedError",
    }
)


def _ray_root_cause(exc: BaseException) -> str:
    """For a Ray infrastructure error: the last trouble line Ray's daemons logged, and where the logs are; else ''."""
    from ._ray_logs import session_logs, trouble_lines

    if not any(k.__name__ in _RAY_INFRASTRUCTURE for k in type(exc).__mro__):
        return ""
    logs = session_logs()
    found = trouble_lines(logs) if logs is not None else {}
    last = next((lines[-1] for lines in reversed(list(found.values()))), None)
    if last is None:
        return f". Ray's logs: {logs}" if logs is not None else ""
    return f". Ray's daemons logged: {last.strip()} (logs: {logs})"


def innermost(exc: BaseException) -> BaseException:
    """The worker's own exception inside Ray's ``RayTaskError`` wrappers (worker -> TaskRunner -> driver)."""
    from ray.exceptions import RayTaskError

    while isinstance(exc, RayTaskError) and getattr(exc, "cause", None) is not None:
        exc = exc.cause
    return exc


def _completed(exc: BaseException) -> bool:
    from ._rehearsal import RehearsalComplete

    return isinstance(innermost(exc), RehearsalComplete) or "RehearsalComplete" in str(exc)
