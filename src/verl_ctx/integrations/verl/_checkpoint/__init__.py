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

from .comparison import Comparison, ContextChange, compare_snapshots, compare_with_launch
from .snapshot import DIR_NAME, Snapshot, find_saved, latest_step_dir
from .trainer import (
    ACCEPT_KEY,
    LAUNCH_ARGS,
    ContextCheckpointMixin,
    accept_context_change,
    check_resume_before_start,
    checkpoint_methods,
    early_resume_methods,
    launch_contexts,
    resume_folder,
)

__all__ = [
    "ACCEPT_KEY",
    "Comparison",
    "ContextChange",
    "ContextCheckpointMixin",
    "DIR_NAME",
    "LAUNCH_ARGS",
    "Snapshot",
    "accept_context_change",
    "check_resume_before_start",
    "checkpoint_methods",
    "compare_snapshots",
    "compare_with_launch",
    "early_resume_methods",
    "find_saved",
    "latest_step_dir",
    "launch_contexts",
    "resume_folder",
]
