"""Contexts saved with every verl checkpoint, checked when a run resumes from one; ``verl-ctx diff`` reads them.

Beside verl's own files, in ``<trainer.default_local_dir>/global_step_N/``::

    verl_ctx/envelopes.json   each role's envelope as text (schema id, version, fingerprint, payload): exact,
                              so an older schema version can be migrated; secret values sealed (below)
    verl_ctx/contexts.json    for people: role, schema id, version, fingerprint and values, secrets as stars
    verl_ctx/history.jsonl    the run's context lineage: launched, and each resume (same, migrated, changes
                              accepted or refused)

The trainer writes them before verl's own save, so ``latest_checkpointed_iteration.txt`` (written last by
verl) never names a step without them. On resume (``trainer.resume_mode=auto|resume_path``) the checkpoint's
contexts are compared with the launch's before anything starts (``check_resume_before_start`` on the driver, before
Ray; the trainer again as it starts building worker groups, before any model loads): the same, nothing happens; an older
schema version is migrated (through ``decode``) and said so; any changed value, role or fingerprint stops the
run with ``ContextChangedError`` unless the config sets ``verl_ctx_accept_change=true``
(``+verl_ctx_accept_change=true``); both outcomes are recorded in the checkpoint's history.

Secrets are never written in a form they can be read back from (base64 is not protection). In a saved
envelope each secret value is replaced by ``verl-ctx-sealed:<hex>``: its scrypt digest (n=2**14, r=8, p=1)
under a random salt kept in ``envelopes.json`` and carried on by a resumed run. To compare, the launch's
secret is sealed with the checkpoint's salt: a changed secret is detected and reported as changed, never
shown. Limits: whoever holds a checkpoint can test guesses of a secret, one scrypt each (harmless for API
keys and tokens, not for a short password); checkpoints of different runs have different salts, so their
secrets cannot be compared with each other; a migration that rewrites a secret's value sees the digest,
not the secret.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib
import json
import os
import secrets
import shlex
import warnings
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..._codec import _enc_hook, _prepare_all, decode_payload
from ..._contextset import holds_secret
from ..._decode import decode
from ..._envelope import RESERVED_KEY, encode, from_text, to_text
from ..._field_errors import MASK, plain
from ..._fingerprint import schema_info
from ..._redact import say
from ..._registry import default_registry, qualified_name
from ..._schema import RoleContext
from ..._secret_schema import SecretBase
from ..._sources import child, find_envelope
from ...errors import ConfigError, ContextChangedError, ContextError, SchemaSkewWarning
from ._binding import bound_envelopes

__all__ = [
    "ACCEPT_KEY",
    "Change",
    "Comparison",
    "ContextCheckpointMixin",
    "Snapshot",
    "accept_context_change",
    "check_resume_before_start",
    "compare_snapshots",
    "compare_with_launch",
    "early_resume_methods",
    "find_saved",
]

CHECKPOINT_FORMAT = 1
DIR_NAME = "verl_ctx"
ENVELOPES_FILE, CONTEXTS_FILE, HISTORY_FILE = "envelopes.json", "contexts.json", "history.jsonl"
#: Top-level config key that lets a resume go on with changed contexts (``+verl_ctx_accept_change=true``).
ACCEPT_KEY = "verl_ctx_accept_change"
SEALED_PREFIX = "verl-ctx-sealed:"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
#: Changes kept per comparison (a rewritten 100,000-row table is one decision, not 100,000 lines).
MAX_CHANGES = 1000
_LISTED = 40  # changes listed in an error message
_SCHEMA = "<schema>"
_ROLE = "<role>"
_ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "<absent>"})()


# --- sealing ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _seal(secret: bytes, salt: bytes) -> str:
    if secret.startswith(SEALED_PREFIX.encode()):
        return secret.decode()  # a checkpoint's value, migrated: sealed already
    return SEALED_PREFIX + hashlib.scrypt(secret, salt=salt, dklen=32, maxmem=64 * 2**20, **_SCRYPT).hex()


def _sealed_payload(ctx: RoleContext, salt: bytes) -> bytes:
    """The payload ``encode`` makes, with each secret value replaced by its digest."""

    def sealed(secret: SecretBase[Any]) -> Any:
        value = secret.get_secret_value()
        if isinstance(value, bytes):
            return _seal(value, salt).encode()
        # A str as itself; Secret[int | float | bool] by its text (the kinds _secret_schema lets travel).
        return _seal((value if isinstance(value, str) else repr(value)).encode(), salt)

    def hook(obj: Any) -> Any:
        # SecretStr, SecretBytes, pydantic.Secret[T]: one base
        return sealed(obj) if isinstance(obj, SecretBase) else _enc_hook(obj)

    encoder = msgspec.msgpack.Encoder(enc_hook=hook)
    try:
        return encoder.encode(ctx)
    except OverflowError:  # an int msgpack cannot hold, as in _codec.encode_payload; secrets sealed on that path too
        return encoder.encode(_prepare_all(ctx, on_secret=sealed))


def _sealed_envelope(ctx: RoleContext, role: str, salt: bytes) -> dict[str, Any]:
    env = dict(encode(ctx, role=role))
    if holds_secret(ctx):
        env["payload"] = _sealed_payload(ctx, salt)
    return env


def _is_sealed(value: Any) -> bool:
    if isinstance(value, bytes):
        return value.startswith(SEALED_PREFIX.encode())
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


def _shown(value: Any, depth: int = 0) -> Any:
    """Saved (sealed) data as ``plain`` shows a context: JSON-native, secrets as stars."""
    if _is_sealed(value):
        return MASK
    if depth > 20:
        return "..."  # as plain() cuts a value nested deeper
    if isinstance(value, dict):
        return {str(k): _shown(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v, depth + 1) for v in value]
    return plain(value, depth)


# --- what is saved -----------------------------------------------------------------------------------------


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
        envs = {role: _sealed_envelope(ctx, role, salt) for role, ctx in sorted(contexts.items())}
        return cls(envs, salt, list(history))

    def values(self, role: str) -> Any:
        return _shown(decode_payload(self.envelopes[role]["payload"]))

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
        sealing = {"kdf": "scrypt", **_SCRYPT, "salt": self.salt.hex()}
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
            if {k: sealing.get(k) for k in ("kdf", *_SCRYPT)} != {"kdf": "scrypt", **_SCRYPT}:
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


def _has_saved_contexts(folder: str) -> bool:
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


def _append_history(step_dir: str, entry: dict[str, Any]) -> None:
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


# --- comparing -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One difference: ``old`` -> ``new`` at ``path`` of ``role``'s context, both shown redacted."""

    role: str
    path: str
    old: Any
    new: Any
    note: str = ""

    def __str__(self) -> str:
        line = f"[{self.role}] {self.path}: {_text(self.old)} -> {_text(self.new)}"
        return line + (f" ({self.note})" if self.note else "")

    def as_dict(self) -> dict[str, Any]:
        absent = (self.old is _ABSENT, self.new is _ABSENT)
        return {
            "role": self.role,
            "path": self.path,
            "old": None if absent[0] else self.old,
            "new": None if absent[1] else self.new,
            "note": self.note,
        }


def _text(value: Any, limit: int = 120) -> str:
    if value is _ABSENT:
        return "<absent>"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Comparison:
    """Saved contexts against others: the changes, the roles migrated to a newer version, other notes."""

    changes: tuple[Change, ...] = ()
    migrated: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    omitted: int = 0  # changes found beyond MAX_CHANGES, not kept

    @property
    def same(self) -> bool:
        return not self.changes

    def listing(self, limit: int = _LISTED) -> list[str]:
        lines = [str(c) for c in self.changes[:limit]]
        more = len(self.changes) - len(lines) + self.omitted
        return lines + ([f"... and {more} more"] if more else [])


class _Collector:
    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.migrated: list[str] = []
        self.notes: list[str] = []
        self.omitted = 0

    def add(self, change: Change) -> None:
        if len(self.changes) < MAX_CHANGES:
            self.changes.append(change)
        else:
            self.omitted += 1

    def result(self) -> Comparison:
        return Comparison(tuple(self.changes), tuple(self.migrated), tuple(self.notes), self.omitted)


def _header(schema_id: str, version: int, fingerprint: str) -> str:
    return f"{schema_id} v{version} ({fingerprint[:12]})"


def _env_header(env: Mapping[str, Any]) -> str:
    return _header(env["schema_id"], env["schema_version"], env["fingerprint"])


def _in_shape(
    role: str, env: dict[str, Any], schema: type[RoleContext], salt: bytes, out: _Collector, *, which: str = ""
) -> Any:
    """A saved envelope's data as ``schema`` reads it (migrated if older); ``None`` when it cannot be read.

    ``which`` names the checkpoint in its notes when two are compared."""
    info = schema_info(schema)
    here = _header(info.schema_id, info.version, info.fingerprint)
    if env["schema_version"] == info.version and env["fingerprint"] == info.fingerprint:
        if env["schema_id"] != info.schema_id:
            out.notes.append(f"[{role}] schema renamed: {env['schema_id']} -> {info.schema_id} (same fields and rules)")
        return decode_payload(env["payload"])
    if env["schema_version"] > info.version:
        out.add(
            Change(role, _SCHEMA, _env_header(env), here, "newer than this code's schema: it cannot be migrated down")
        )
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SchemaSkewWarning)  # the skew is reported below, as a change
            instance = decode(env, schema, role=role)
    except ContextError as e:
        reason = str(e).splitlines()[0]
        out.add(Change(role, _SCHEMA, _env_header(env), here, f"cannot be read with this code's schema: {reason}"))
        return None
    if env["schema_version"] < info.version:
        out.migrated.append(f"{which + ': ' if which else ''}[{role}] {_env_header(env)} migrated to {here}")
    else:
        # Another schema at the same version, which decode accepted: by the handshake's rule (a worker's, and what
        # `schema check` judges for every value) every saved value reads unchanged, so the schema is no change in
        # itself: the values are compared below (a field added since is its default against the launch's value).
        out.notes.append(
            f"{which + ': ' if which else ''}[{role}] schema changed at the same version ({_env_header(env)} -> "
            f"{here}); the checkpoint's values read unchanged"
        )
    return decode_payload(_sealed_payload(instance, salt))


def _diff(role: str, old: Any, new: Any, out: _Collector, *, secrets_comparable: bool = True) -> None:
    """Record every leaf where ``new`` differs from ``old`` (both sealed data of one role)."""
    skipped = False
    stack: list[tuple[str, Any, Any]] = [("", old, new)]
    while stack:
        path, a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            keys = [*a, *(k for k in b if k not in a)]
            for key in reversed(keys):
                sub = f"{path}.{key}" if path else str(key)
                stack.append((sub, a.get(key, _ABSENT), b.get(key, _ABSENT)))
            continue
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            stack.extend((f"{path}[{i}]", a[i], b[i]) for i in reversed(range(len(a))))
            continue
        if _same(a, b):
            continue
        if _is_sealed(a) and _is_sealed(b) and not secrets_comparable:
            skipped = True
            continue
        secret = _is_sealed(a) or _is_sealed(b)
        note = "secret changed" if secret else ""
        if a is _ABSENT or b is _ABSENT:
            note = "field only in the checkpoint" if b is _ABSENT else "field not in the checkpoint"
        # A path that holds a secret on either side shows neither: the other side's value (saved before the field
        # became secret, or by a schema that did not declare it) is what the field keeps secret.
        show = (lambda v: MASK) if secret else _shown
        out.add(Change(role, path or _ROLE, a if a is _ABSENT else show(a), b if b is _ABSENT else show(b), note))
    if skipped:
        out.notes.append(f"[{role}] secret values not compared: the two checkpoints come from different runs (salts)")


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    return bool(a == b) or (isinstance(a, float) and a != a and b != b)


def compare_with_launch(saved: Snapshot, contexts: Mapping[str, RoleContext]) -> Comparison:
    """The saved contexts against a launch's (typed, validated); secrets compared by their sealed digests."""
    out = _Collector()
    for role in sorted(set(saved.envelopes) | set(contexts)):
        if role not in contexts:
            out.add(Change(role, _ROLE, saved.envelopes[role]["schema_id"], _ABSENT, "role not in this launch"))
            continue
        ctx = contexts[role]
        if role not in saved.envelopes:
            out.add(Change(role, _ROLE, _ABSENT, qualified_name(type(ctx)), "role not in the checkpoint"))
            continue
        old = _in_shape(role, saved.envelopes[role], type(ctx), saved.salt, out)
        if old is not None:
            _diff(role, old, decode_payload(_sealed_payload(ctx, saved.salt)), out)
    return out.result()


def compare_snapshots(
    old: Snapshot, new: Snapshot, schemas: Mapping[str, type[RoleContext]] | None = None
) -> Comparison:
    """Two checkpoints' contexts; a role whose schema is in ``schemas`` is compared after migrating both sides."""
    out = _Collector()
    comparable = old.salt == new.salt
    for role in sorted(set(old.envelopes) | set(new.envelopes)):
        a, b = old.envelopes.get(role), new.envelopes.get(role)
        if a is None or b is None:
            note = "role only in the second checkpoint" if a is None else "role only in the first checkpoint"
            out.add(
                Change(
                    role,
                    _ROLE,
                    _ABSENT if a is None else a["schema_id"],
                    _ABSENT if b is None else b["schema_id"],
                    note,
                )
            )
            continue
        schema = (schemas or {}).get(role)
        if schema is None:
            # Without today's schema the two payloads are read as saved: another schema makes them incomparable.
            if (a["schema_version"], a["fingerprint"]) != (b["schema_version"], b["fingerprint"]):
                out.add(Change(role, _SCHEMA, _env_header(a), _env_header(b), "schema differs"))
            data_a, data_b = decode_payload(a["payload"]), decode_payload(b["payload"])
        else:
            # Both read as today's schema reads them (migrated when older), as a resume compares: a version that
            # migrates is a note, not a change, so this form and the config form give one verdict.
            data_a = _in_shape(role, a, schema, old.salt, out, which="first checkpoint")
            data_b = _in_shape(role, b, schema, new.salt, out, which="second checkpoint")
            if data_a is None or data_b is None:
                continue
        _diff(role, data_a, data_b, out, secrets_comparable=comparable)
    return out.result()


# --- in the trainer -------------------------------------------------------------------------------------


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
        roles = {role: _header(*_info(ctx)) for role, ctx in self.contexts.items()}
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return {"event": event, "time": now, "roles": roles, **more}

    def refuse_changed(self, folder: str, *, accept: bool, record: bool = True) -> None:
        """Raise ``ContextChangedError`` (recorded in the checkpoint's history with ``record``) when the checkpoint's
        contexts differ from these and the change is not accepted; nothing else: the trainer records the resume."""
        if not _has_saved_contexts(folder):
            return
        _, found, entry = self._compared(folder)
        if found.changes and not accept:
            if record:
                _append_history(folder, {**entry, "result": "refused: contexts changed"})
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
        if not _has_saved_contexts(folder):
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
            _append_history(folder, {**entry, "result": "refused: contexts changed"})
            raise _changed_error(folder, found, self.contexts)
        if found.changes:
            entry["result"] = "changed: accepted"
            say(
                f"verl-ctx: resuming from {folder} with changed contexts ({ACCEPT_KEY}=true):\n  "
                + "\n  ".join(found.listing())
            )
        _append_history(folder, entry)
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
