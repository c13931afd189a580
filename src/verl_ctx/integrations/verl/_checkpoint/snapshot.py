"""What is saved beside a verl checkpoint (``verl_ctx/``: envelopes, contexts for people, the run's history) and
finding it again."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ...._model.role_context import RoleContext
from ...._secrets.redact import say
from ...._wire.codec import decode_payload
from ...._wire.envelope import from_text, to_text
from ....errors import ConfigError, ContextError
from .sealing import SCRYPT, sealed_envelope, shown

ENVELOPES_FILE, CONTEXTS_FILE, HISTORY_FILE = "envelopes.json", "contexts.json", "history.jsonl"

DIR_NAME = "verl_ctx"

CHECKPOINT_FORMAT = 1


@dataclass
class Snapshot:
    """A run's contexts as a checkpoint holds them: sealed envelopes by role, the salt, the lineage."""

    envelopes: dict[str, dict[str, Any]]
    salt: bytes
    history: list[dict[str, Any]] = field(default_factory=list)
    global_step: int | None = None
    where: str | None = None  # the global_step_N directory it was read from

    @classmethod
    def of(
        cls, contexts: Mapping[str, RoleContext], *, salt: bytes | None = None, history: Sequence[dict[str, Any]] = ()
    ) -> Snapshot:
        salt = secrets.token_bytes(16) if salt is None else salt
        envs = {role: sealed_envelope(ctx, role, salt) for role, ctx in sorted(contexts.items())}
        return cls(envs, salt, list(history))

    def values(self, role: str) -> Any:
        return shown(decode_payload(self.envelopes[role]["payload"]))

    @functools.cached_property
    def _rendered(self) -> tuple[dict[str, str], dict[str, Any]]:
        """The envelopes as text and the readable form: made once per run, written at every save."""
        texts = {role: to_text(env) for role, env in self.envelopes.items()}
        readable = {
            role: {
                "schema_id": env["schema_id"],
                "version": env["schema_version"],
                "fingerprint": env["fingerprint"],
                "values": self.values(role),
            }
            for role, env in self.envelopes.items()
        }
        return texts, readable

    def write(self, step_dir: str | os.PathLike[str], *, global_step: int) -> Path:
        """Write the three files into ``step_dir/verl_ctx/`` (each atomically); returns that directory."""
        out = Path(step_dir) / DIR_NAME
        out.mkdir(parents=True, exist_ok=True)
        head = {"verl_ctx_checkpoint": CHECKPOINT_FORMAT, "global_step": global_step}
        sealing = {"kdf": "scrypt", **SCRYPT, "salt": self.salt.hex()}
        texts, readable = self._rendered
        _write(out / ENVELOPES_FILE, json.dumps({**head, "sealing": sealing, "envelopes": texts}, indent=1))
        saved_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        _write(out / CONTEXTS_FILE, json.dumps({**head, "saved_at": saved_at, "roles": readable}, indent=2))
        _write(out / HISTORY_FILE, "".join(json.dumps(e, sort_keys=True) + "\n" for e in self.history))
        return out

    @classmethod
    def read(cls, step_dir: str | os.PathLike[str]) -> Snapshot:
        """What ``write`` wrote into ``step_dir``; a file that is not one is a ``ConfigError``."""
        where = Path(step_dir) / DIR_NAME
        path = where / ENVELOPES_FILE
        try:
            body = json.loads(path.read_text())
            if body.get("verl_ctx_checkpoint") != CHECKPOINT_FORMAT:
                raise ValueError(f"format {body.get('verl_ctx_checkpoint')!r}, this verl-ctx reads {CHECKPOINT_FORMAT}")
            sealing = body["sealing"]
            if {k: sealing.get(k) for k in ("kdf", *SCRYPT)} != {"kdf": "scrypt", **SCRYPT}:
                raise ValueError(f"sealing {sealing!r} is not one this verl-ctx computes")
            salt = bytes.fromhex(sealing["salt"])
            envelopes = {str(role): from_text(text) for role, text in body["envelopes"].items()}
            for env in envelopes.values():
                decode_payload(env["payload"])  # a corrupt payload is refused here, with the file named
            step = body.get("global_step")
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            RecursionError,
            msgspec.DecodeError,
            ContextError,
        ) as e:
            raise ConfigError(f"cannot read the contexts saved with checkpoint {step_dir}: {path}: {e}") from None
        if any(env["role"] != role for role, env in envelopes.items()):
            raise ConfigError(f"{path}: an envelope is filed under another role than its own")
        return cls(
            envelopes,
            salt,
            _read_history(where / HISTORY_FILE),
            step if isinstance(step, int) else None,
            str(Path(step_dir)),
        )


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a crash leaves the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _read_history(path: Path) -> list[dict[str, Any]]:
    """The lineage, as far as it reads: a line that is not a JSON object (a torn last line from a crash, bytes that
    are not UTF-8, nesting past the parser's depth) is left out; the history is a record, never a reason to stop."""
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def has_saved_contexts(folder: str) -> bool:
    """Whether checkpoint ``folder`` holds contexts saved by verl-ctx; a ``verl_ctx/`` folder without its envelopes
    file (deleted, or not a file) is a damaged checkpoint, never one to resume as if nothing had been saved."""
    where = Path(folder) / DIR_NAME
    if (where / ENVELOPES_FILE).is_file():
        return True
    if where.exists():
        raise ConfigError(
            f"checkpoint {folder} has a {DIR_NAME}/ folder but no readable {DIR_NAME}/{ENVELOPES_FILE} (deleted, or "
            "not a file): its saved contexts cannot be compared with this launch's. Restore the file from a copy of "
            f"the checkpoint, or, to resume without the comparison, remove {where}"
        )
    return False


def append_history(step_dir: str, entry: dict[str, Any]) -> None:
    """Add ``entry`` to a checkpoint's history; a read-only checkpoint is only a note, never a failure."""
    try:
        with open(Path(step_dir) / DIR_NAME / HISTORY_FILE, "a") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
    except OSError as e:
        say(f"verl-ctx: could not record this resume in {step_dir}/{DIR_NAME}/{HISTORY_FILE}: {e}")


def find_saved(path: str | os.PathLike[str]) -> str:
    """The ``global_step_N`` directory holding saved contexts that ``path`` names.

    ``path`` is that directory, its ``verl_ctx`` subdirectory, or a run's ``trainer.default_local_dir`` (its
    latest checkpoint, as ``resume_mode=auto`` picks it).
    """
    p = Path(path)
    if p.name == DIR_NAME and (p / ENVELOPES_FILE).is_file():
        return str(p.parent)
    if (p / DIR_NAME / ENVELOPES_FILE).is_file():
        return str(p)
    latest = latest_step_dir(str(p))
    if latest is not None:
        return find_saved(latest)
    if not p.exists():
        raise ConfigError(f"{path}: no such checkpoint directory")
    raise ConfigError(
        f"{path} holds no contexts saved by verl-ctx: expected {DIR_NAME}/{ENVELOPES_FILE} in a global_step_N "
        "directory (a checkpoint saved by a run launched with `verl-ctx run`), or a run directory with "
        "latest_checkpointed_iteration.txt"
    )


def latest_step_dir(run_dir: str) -> str | None:
    """The checkpoint ``resume_mode=auto`` resumes from (verl's ``find_latest_ckpt_path``, without torch)."""
    try:
        step = int(Path(run_dir, "latest_checkpointed_iteration.txt").read_text().strip())
    except (OSError, ValueError):
        return None
    folder = os.path.join(run_dir, f"global_step_{step}")
    return folder if os.path.isdir(folder) else None
