"""In the trainer: the contexts saved before each of verl's own saves, and checked on resume before anything
starts (on the driver before Ray, and as the trainer starts building its worker groups)."""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import os
import shlex
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from ...._model.fingerprint import schema_info
from ...._model.registry import default_registry, qualified_name
from ...._model.role_context import RoleContext
from ...._secrets.redact import say
from ...._wire.envelope import RESERVED_KEY
from ...._wire.sources import child, find_envelope
from ...._worker.decode import decode
from ....errors import ConfigError, ContextChangedError
from .._binding import bound_envelopes
from .comparison import MAX_CHANGES, Comparison, compare_with_launch, header
from .snapshot import DIR_NAME, HISTORY_FILE, Snapshot, append_history, has_saved_contexts, latest_step_dir

#: Top-level config key that lets a resume go on with changed contexts (``+verl_ctx_accept_change=true``).
ACCEPT_KEY = "verl_ctx_accept_change"


def accept_context_change(config: Any) -> None:
    """Let this launch resume from a checkpoint whose contexts differ (what ``--accept-context-change`` sets)."""
    from omegaconf import open_dict

    with open_dict(config):
        config[ACCEPT_KEY] = True


def accepts_change(config: Any) -> bool:
    value = child(config, ACCEPT_KEY)
    return value is True or str(value).lower() in ("true", "1", "yes")


def resume_folder(config: Any) -> str | None:
    """The ``global_step_N`` directory verl will resume from under ``config`` (``_load_checkpoint``'s rules)."""
    trainer = config.trainer
    mode = trainer.get("resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "resume_path":
        path = trainer.get("resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:
            return None  # verl refuses it itself, with its own message
        return os.path.join(os.getcwd(), path) if not os.path.isabs(path) else path
    base = str(trainer.default_local_dir)
    return latest_step_dir(base if os.path.isabs(base) else os.path.join(os.getcwd(), base))


def launch_contexts(trainer: Any) -> dict[str, RoleContext]:
    """The contexts a trainer was launched with: its class's envelopes and the config's, decoded.

    Each schema is the class the driver validated with: looked up in the registry by its id, else imported by
    that id. These envelopes come from this launch (the trainer's class definition and the run's config),
    never from a checkpoint: nothing a checkpoint names is imported.
    """
    entries: dict[str, Any] = dict(bound_envelopes(type(trainer)))
    for path in ((RESERVED_KEY,), ("actor_rollout_ref", "rollout", "custom", RESERVED_KEY)):
        node: Any = trainer.config
        for key in path:
            node = child(node, key)
        if isinstance(node, Mapping):
            for role in node:
                entries.setdefault(str(role), node[role])
    out = {}
    for role, entry in sorted(entries.items()):
        env = find_envelope({RESERVED_KEY: {role: entry}}, (role,), role_given=True)
        out[role] = decode(env, _schema_for(env), role=role)
    return out


def _schema_for(env: Mapping[str, Any]) -> type[RoleContext]:
    schema_id: str = env["schema_id"]
    for schema in default_registry.schemas():
        if qualified_name(schema) == schema_id:
            return schema
    module, _, name = schema_id.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        found = None
    if not (isinstance(found, type) and issubclass(found, RoleContext)):
        raise ConfigError(
            f"[{env['role']}] cannot save or check this run's contexts with its checkpoints: schema {schema_id} "
            "cannot be imported in the TaskRunner process. Define it at the top level of an importable module and "
            f"import it there (`verl-ctx run -s {module}` does; from Python, launch(..., imports=['{module}']))"
        )
    return found


class _RunContexts:
    """What one trainer saves with each checkpoint: its launch contexts, sealed once, and the lineage."""

    def __init__(self, contexts: dict[str, RoleContext]) -> None:
        self.contexts = contexts
        self.snapshot = Snapshot.of(contexts, history=[self._event("launched")])

    def _event(self, event: str, **more: Any) -> dict[str, Any]:
        roles = {role: header(*_info(ctx)) for role, ctx in self.contexts.items()}
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return {"event": event, "time": now, "roles": roles, **more}

    def refuse_changed(self, folder: str, *, accept: bool, record: bool = True) -> None:
        """Raise ``ContextChangedError`` (recorded in the checkpoint's history with ``record``) when the checkpoint's
        contexts differ from these and the change is not accepted; nothing else: the trainer records the resume."""
        if not has_saved_contexts(folder):
            return
        _, found, entry = self._compared(folder)
        if found.changes and not accept:
            if record:
                append_history(folder, {**entry, "result": "refused: contexts changed"})
            raise _changed_error(folder, found, self.contexts)

    def _compared(self, folder: str) -> tuple[Snapshot, Comparison, dict[str, Any]]:
        saved = Snapshot.read(folder)
        found = compare_with_launch(saved, self.contexts)
        result = "changed" if found.changes else "migrated" if found.migrated else "same"
        entry = self._event(
            "resumed", source=folder, result=result, changes=found.listing(MAX_CHANGES), migrated=list(found.migrated)
        )
        return saved, found, entry

    def resume_from(self, folder: str, *, accept: bool) -> None:
        if not has_saved_contexts(folder):
            say(
                f"verl-ctx: checkpoint {folder} holds no saved contexts (saved without verl-ctx): nothing to compare; "
                "this run's contexts are saved with its checkpoints from now on"
            )
            self.snapshot.history.append(self._event("resumed", source=folder, result="no saved contexts"))
            return
        saved, found, entry = self._compared(folder)
        for line in found.migrated:
            say(f"verl-ctx: {line} (the checkpoint's context, to compare it with this launch's)")
        for line in found.notes:
            say(f"verl-ctx: {line}")
        if found.changes and not accept:
            append_history(folder, {**entry, "result": "refused: contexts changed"})
            raise _changed_error(folder, found, self.contexts)
        if found.changes:
            entry["result"] = "changed: accepted"
            say(
                f"verl-ctx: resuming from {folder} with changed contexts ({ACCEPT_KEY}=true):\n  "
                + "\n  ".join(found.listing())
            )
        append_history(folder, entry)
        # Keep the run's salt, so its later checkpoints' secrets compare with the earlier ones'.
        self.snapshot = Snapshot(
            Snapshot.of(self.contexts, salt=saved.salt).envelopes, saved.salt, [*saved.history, entry]
        )


def _info(ctx: RoleContext) -> tuple[str, int, str]:
    info = schema_info(type(ctx))
    return info.schema_id, info.version, info.fingerprint


#: This launch's arguments, set by ``verl-ctx run`` so that a refusal tells the exact commands to compare or accept:
#: what ``diff`` takes (``-s``, ``--config``, ``-m``, verl's arguments) and what only ``run`` takes (``--worker``,
#: ``--import``). Unset, a refusal names the schema modules it knows.
LAUNCH_ARGS: ContextVar[tuple[Sequence[str], Sequence[str]] | None] = ContextVar("verl_ctx_launch_args", default=None)


def _changed_error(folder: str, found: Comparison, contexts: Mapping[str, RoleContext]) -> ContextChangedError:
    count = len(found.changes) + found.omitted
    lines = "\n".join(f"  {line}" for line in found.listing())
    migrated = "".join(f"\n  (note: {m})" for m in found.migrated)
    given = LAUNCH_ARGS.get()
    if given is None:
        modules = sorted({type(ctx).__module__ for ctx in contexts.values()})
        args, rest = shlex.join(a for m in modules for a in ("-s", m)), " [VERL_ARGS as launched]"
        run_args = args
    else:
        args, rest = shlex.join(given[0]), ""
        run_args = shlex.join([*given[1], *given[0]])
    return ContextChangedError(
        f"this run's contexts differ from those saved with the checkpoint it resumes, {folder} "
        f"({count} change{'s' if count != 1 else ''}; expected the same, or training silently continues with "
        f"different ones):\n{lines}{migrated}\n"
        f"To compare: `verl-ctx diff {shlex.quote(folder)} {args}{rest}`. To resume with these contexts anyway: "
        f"`verl-ctx run --accept-context-change {run_args}{rest}` (or the override +{ACCEPT_KEY}=true); the change is "
        f"recorded in the checkpoint's {DIR_NAME}/{HISTORY_FILE}. To start afresh instead: "
        "trainer.resume_mode=disable or another trainer.default_local_dir",
        changes=[str(c) for c in found.changes],
    )


def _run_contexts(trainer: Any) -> _RunContexts:
    run = trainer.__dict__.get("_verl_ctx_run")
    if run is None:
        run = trainer.__dict__["_verl_ctx_run"] = _RunContexts(launch_contexts(trainer))
    return run  # type: ignore[no-any-return]


def _save_contexts(trainer: Any) -> None:
    step_dir = os.path.join(trainer.config.trainer.default_local_dir, f"global_step_{trainer.global_steps}")
    _run_contexts(trainer).snapshot.write(step_dir, global_step=int(trainer.global_steps))


def check_resume_before_start(config: Any, contexts: Mapping[str, RoleContext], *, record: bool = True) -> None:
    """The resume check, from the checkpoint folder and the launch's contexts alone, before anything starts.

    ``launch`` runs it on the driver before Ray (and ``rehearse`` without ``record``): a resume that would be refused
    costs seconds, not a Ray start, worker groups and a model load. The trainer compares again when verl loads the
    checkpoint (for a runner verl-ctx did not launch) and records the resume in the checkpoint's history.
    """
    folder = resume_folder(config)
    if folder is not None:
        _RunContexts(dict(contexts)).refuse_changed(folder, accept=accepts_change(config), record=record)


def _check_resume(trainer: Any) -> None:
    if trainer.__dict__.get(_RESUME_CHECKED):
        return  # compared before the trainer built its worker groups (early_resume_methods)
    trainer.__dict__[_RESUME_CHECKED] = True
    folder = resume_folder(trainer.config)
    if folder is not None:
        _run_contexts(trainer).resume_from(folder, accept=accepts_change(trainer.config))
    elif (trainer.config.trainer.get("save_freq") or -1) > 0:
        _run_contexts(trainer)  # a schema that cannot be imported here fails now, not at the first save


_RESUME_CHECKED = "_verl_ctx_resume_checked"
#: The trainer method that builds the worker groups: v1 ``PPOTrainer.init`` (``_setup``), legacy ``init_workers``.
_BUILDS_WORKERS = ("init", "init_workers")


def early_resume_methods(trainer_cls: type) -> dict[str, Any]:
    """Wrappers of ``trainer_cls``'s worker-building method that compare contexts with the checkpoint first.

    verl loads the checkpoint (``_load_checkpoint``) after every worker group is built and has loaded its model;
    comparing there means a refused resume costs a model load on GPUs. The contexts and the folder are known when
    the trainer starts building, so the comparison (and the resume's record) happens then, once.
    """
    out: dict[str, Any] = {}
    for name in _BUILDS_WORKERS:
        builds = getattr(trainer_cls, name, None)
        if callable(builds):
            out[name] = _checked_first(builds)
    return out


def _checked_first(builds: Any) -> Any:
    @functools.wraps(builds)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        _check_resume(self)
        return builds(self, *args, **kwargs)

    return wrapper


class ContextCheckpointMixin:
    """Mix into a verl trainer (v1 ``PPOTrainer`` or legacy ``RayPPOTrainer``) that verl-ctx made.

    ``_save_checkpoint`` writes the run's contexts into ``global_step_N/verl_ctx/`` before verl saves;
    ``_load_checkpoint`` compares the checkpoint's with the launch's before verl loads any weights.
    """

    config: Any
    global_steps: int

    def _save_checkpoint(self) -> Any:
        _save_contexts(self)
        return super()._save_checkpoint()  # type: ignore[misc]

    def _load_checkpoint(self) -> Any:
        _check_resume(self)
        return super()._load_checkpoint()  # type: ignore[misc]


def checkpoint_methods(trainer_cls: type) -> dict[str, Any]:
    """``ContextCheckpointMixin``'s two methods for a class deriving from ``trainer_cls`` alone (no mixin base)."""

    def _save_checkpoint(self: Any) -> Any:
        _save_contexts(self)
        return trainer_cls._save_checkpoint(self)  # type: ignore[attr-defined]

    def _load_checkpoint(self: Any) -> Any:
        _check_resume(self)
        return trainer_cls._load_checkpoint(self)  # type: ignore[attr-defined]

    return {"_save_checkpoint": _save_checkpoint, "_load_checkpoint": _load_checkpoint}
