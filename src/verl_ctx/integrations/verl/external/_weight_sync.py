"""Weights in step: write the trainer's weights, have every pool server load them, report who did not.

``PoolWeightSync.push(version)``:

1. ``write(version, path)``: the trainer has its actor write the weights it would sync to
   ``weights_path(directory, version)`` (``ExternalPoolTrainer`` drives verl's checkpoint-engine send path
   with the ``verl_ctx_disk`` backend, ``disk_engine``);
2. ``load_weights(path, version)`` on every server of the routing, concurrently, waiting up to
   ``weight_sync.timeout_s``; a server that raises, has died, has no such method, cannot be found or does
   not answer in time is *failed*, with why;
3. the trainer's ``PoolState`` gets the new version and the failed servers: every client routes around them
   until a later push succeeds on them (each push tries every server again);
4. fewer than ``weight_sync.min_servers`` loaded: ``ServerUnavailableError`` (training must not go on against a
   pool that serves old weights).
"""

from __future__ import annotations

import contextlib
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...._secrets.redact import logger as redacted_logger
from ....errors import ServerUnavailableError
from ._router import Router
from ._routing import ExternalRouting

__all__ = ["PoolWeightSync", "SyncReport", "load_on_servers", "weights_path"]

logger = redacted_logger("verl_ctx.external")


def weights_path(directory: str, version: int) -> str:
    """Where the weights of ``version`` are written (and read by the servers)."""
    return posixpath.join(directory, f"version_{version}")


@dataclass(frozen=True)
class SyncReport:
    """One push: which servers loaded ``version`` from ``path``, which failed and why."""

    version: int
    path: str
    loaded: tuple[str, ...]
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "verl_ctx/pool/synced_version": float(self.version),
            "verl_ctx/pool/servers_loaded": float(len(self.loaded)),
            "verl_ctx/pool/servers_failed": float(len(self.failed)),
            "verl_ctx/pool/sync_s": self.seconds,
        }


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc  # a RayTaskError carries the server's own exception
    text = (str(cause).strip().splitlines() or [""])[0][:200]
    return f"{type(cause).__name__}: {text}".rstrip(": ")


def load_on_servers(routing: ExternalRouting, path: str, version: int, *, router: Router | None = None) -> SyncReport:
    """Call ``load_weights(path, version)`` on every server of ``routing``; wait up to ``timeout_s`` in all."""
    import ray

    router = router or Router(routing)
    started = time.monotonic()
    failed: dict[str, str] = {}
    calls: dict[Any, str] = {}
    for server_id in router.server_ids:
        try:
            handle = router.handle_of(server_id)
        except LookupError as e:
            failed[server_id] = str(e)
            continue
        try:
            calls[handle.load_weights.remote(path, version)] = server_id
        except AttributeError:
            failed[server_id] = "has no load_weights(path, version) method (docs/external-servers.md)"
    timeout = routing.weight_sync.timeout_s
    ready, pending = ray.wait(list(calls), num_returns=len(calls), timeout=timeout) if calls else ([], [])
    loaded = []
    for ref in ready:
        server_id = calls[ref]
        try:
            ray.get(ref)
            loaded.append(server_id)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
            failed[server_id] = f"server unreachable ({type(e).__name__})"
        except ray.exceptions.RayTaskError as e:
            failed[server_id] = f"load_weights raised {_first_line(e)}"
    for ref in pending:
        failed[calls[ref]] = f"load_weights did not finish within weight_sync.timeout_s={timeout}"
        with contextlib.suppress(Exception):  # best effort: an async server stops; the failure is recorded anyway
            ray.cancel(ref)
    order = {s: i for i, s in enumerate(router.server_ids)}
    return SyncReport(
        version=version,
        path=path,
        loaded=tuple(sorted(loaded, key=order.__getitem__)),
        failed=dict(sorted(failed.items(), key=lambda kv: order[kv[0]])),
        seconds=time.monotonic() - started,
    )


class PoolWeightSync:
    """Pushes the trainer's weights to the pool and tells every client the outcome (``PoolState``)."""

    def __init__(self, routing: ExternalRouting, pool_state: Any, write: Callable[[int, str], Any]) -> None:
        self.routing = routing
        self.pool_state = pool_state
        self.write = write
        self.reports: list[SyncReport] = []

    def push(self, version: int) -> SyncReport:
        import ray

        sync = self.routing.weight_sync
        if sync.mode != "reload_from_checkpoint" or sync.directory is None:
            raise ValueError(f"weight_sync is {sync.mode}: nothing to push")
        path = weights_path(sync.directory, version)
        self.write(version, path)
        report = load_on_servers(self.routing, path, version)
        ray.get(self.pool_state.publish.remote(version, report.failed))
        self.reports.append(report)
        del self.reports[:-10]
        # WARNING, not INFO: verl's workers log at WARNING by default (VERL_LOGGING_LEVEL), and a pool that follows
        # training, or does not, is what a person watching the run needs to see every sync.
        logger.warning(
            "weights version %d (%s): %d server(s) loaded in %.1f s%s",
            version,
            path,
            len(report.loaded),
            report.seconds,
            "".join(f"\n  failed {s}: {why}" for s, why in report.failed.items()),
        )
        if len(report.loaded) < sync.min_servers:
            lines = "\n".join(f"  {s}: {why}" for s, why in report.failed.items())
            raise ServerUnavailableError(
                f"only {len(report.loaded)} of {len(self.routing.servers)} pool server(s) loaded weights version "
                f"{version} from {path} (weight_sync.min_servers={sync.min_servers}); training stops rather than "
                f"learn from outputs of old weights. Failed:\n{lines}\nFix the servers' load_weights(path, version) "
                "or lower weight_sync.min_servers"
            )
        if report.failed:
            logger.warning(
                "weights version %d: %d server(s) failed to load and are routed around until a later sync: %s",
                version,
                len(report.failed),
                ", ".join(report.failed),
            )
        return report
