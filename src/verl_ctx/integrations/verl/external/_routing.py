"""The typed routing context for an inference pool started outside the job: servers, policy, faults, weights.

Plain pydantic: validated by ``verl-ctx validate`` before anything starts. ``Router`` (``_router``) applies it;
``ExternalLLMServerClient`` (``_llm_client``) puts it behind verl's client API; ``ExternalPoolTrainer``
(``trainer``) keeps the pool's weights in step with training by ``weight_sync``.
"""

from __future__ import annotations

import posixpath
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ...._model.role_context import RoleContext

__all__ = ["ExternalRolloutContext", "ExternalRouting", "ServerRef", "WeightSync"]

Policy = Literal["sticky", "round_robin", "least_inflight"]

# A duration must be a real number of seconds: "inf" would mean "wait forever" (issue #11, item 12).
_SECONDS: dict[str, Any] = {"gt": 0, "allow_inf_nan": False}


class ServerRef(BaseModel):
    """A Ray named actor implementing the pool-server protocol (docs/external-servers.md)."""

    model_config = {"frozen": True, "extra": "forbid"}

    name: str = Field(min_length=1, description="Ray actor name, as given to .options(name=...).")
    namespace: str | None = Field(None, description="Ray namespace; default: ExternalRouting.namespace.")


class WeightSync(BaseModel):
    """How the pool's weights follow training. ``mode`` must be declared: there is no silent default.

    * ``none``: the pool keeps the weights it was started with (a frozen policy: evaluation, distillation from
      a fixed model). Training does not change what the servers generate with.
    * ``reload_from_checkpoint``: every ``every_n_steps`` steps (and once at start) the trainer writes the
      weights it would sync to ``directory``/``version_<N>`` and calls ``load_weights(path, version)`` on every
      server, waiting up to ``timeout_s``. Servers that fail are reported and routed around until a later sync
      succeeds on them; fewer than ``min_servers`` loaded stops training with ``ServerUnavailableError``.
    """

    model_config = {"frozen": True, "extra": "forbid"}

    mode: Literal["none", "reload_from_checkpoint"] = Field(
        description="none: frozen policy; reload_from_checkpoint: save, then load_weights(path, version) on servers."
    )
    directory: str | None = Field(
        None,
        validate_default=True,
        description="Absolute path both the actor's rank 0 and every server can read (a shared filesystem).",
    )
    every_n_steps: int = Field(1, ge=1, description="Sync after every N-th training step.")
    timeout_s: float = Field(600.0, **_SECONDS, description="How long a sync waits for every server's load_weights.")
    min_servers: int = Field(1, ge=1, description="Fewer servers than this on the new weights stops training.")
    keep_last: int = Field(2, ge=1, description="Weight directories kept on disk (older ones are deleted).")

    @field_validator("directory")
    @classmethod
    def _directory_for_reload(cls, value: str | None, info: ValidationInfo) -> str | None:
        mode = info.data.get("mode")
        if mode == "reload_from_checkpoint":
            if not value:
                raise ValueError(
                    "reload_from_checkpoint needs a directory: an absolute path on a filesystem that the actor's "
                    "rank 0 writes and every server reads"
                )
            if not posixpath.isabs(value):
                raise ValueError(
                    f"must be an absolute path (got {value!r}): servers resolve it in their own working directory"
                )
        elif mode == "none" and value is not None:
            raise ValueError("only meaningful with mode reload_from_checkpoint; weight_sync none saves nothing")
        return value


class ExternalRouting(BaseModel):
    """Where and how rollout requests go when the job does not run its own LLM servers."""

    model_config = {"frozen": True, "extra": "forbid"}

    # Checks between fields are field validators reading the fields declared before them, so each error is
    # reported at the field to change (routing.max_staleness, not routing).
    namespace: str | None = Field(None, description="Default Ray namespace of the servers.")
    servers: list[ServerRef] = Field(min_length=1, description="The servers to route to.")
    policy: Policy = Field(
        "sticky",
        description="sticky: one request id stays on one server (multi-turn prefix cache reuse) and moves only "
        "when that server is down; round_robin; least_inflight: the server with the fewest requests in flight "
        "from this client.",
    )
    request_timeout_s: float = Field(600.0, **_SECONDS, description="Limit for one generate call (finite).")
    retries: int = Field(2, ge=0, description="Further attempts after one fails, times out or is stale.")
    sticky_capacity: int = Field(100_000, gt=0, description="Request ids remembered by the sticky policy.")
    cooldown_s: float = Field(
        5.0, **_SECONDS, description="A server that failed or timed out gets no requests for this long."
    )
    max_cooldown_s: float = Field(
        60.0, **_SECONDS, description="Each failure in a row doubles the cool-down, up to this."
    )
    max_wait_s: float = Field(
        30.0,
        ge=0,
        allow_inf_nan=False,
        description="When no server is up, a request waits up to this long for one to come off its cool-down "
        "before ServerUnavailableError; 0: fail at once.",
    )
    health_probe: bool = Field(
        True, description="Ping a server whose cool-down is over before it gets a request again."
    )
    probe_timeout_s: float = Field(2.0, **_SECONDS, description="Limit for that ping.")
    weight_sync: WeightSync = Field(
        None,  # refused by _declared: it must be declared
        validate_default=True,
        description="none (declared frozen policy) or reload_from_checkpoint; see WeightSync.",
    )
    max_staleness: int | None = Field(
        None,
        ge=0,
        description="Outputs generated with weights more than this many versions (training steps) behind the "
        "trainer's are stale; None: not checked.",
    )
    on_stale: Literal["error", "count"] = Field(
        "error",
        description="error: a stale output is never returned: the request moves to another server, and "
        "StaleOutputError is raised when none serves fresh weights; count: returned, counted and logged.",
    )

    @field_validator("servers")
    @classmethod
    def _unique_servers(cls, servers: list[ServerRef], info: ValidationInfo) -> list[ServerRef]:
        default = info.data.get("namespace")
        keys = [(s.namespace or default, s.name) for s in servers]
        dupes = sorted({name for (ns, name) in keys if keys.count((ns, name)) > 1})
        if dupes:
            raise ValueError(f"servers are listed twice: {', '.join(dupes)}")
        return servers

    @field_validator("max_cooldown_s")
    @classmethod
    def _cap_above_start(cls, value: float, info: ValidationInfo) -> float:
        start = info.data.get("cooldown_s")
        if start is not None and value < start:
            raise ValueError(f"is below cooldown_s ({start}): the first pause would already be longer")
        return value

    @field_validator("weight_sync", mode="before")
    @classmethod
    def _declared(cls, value: Any) -> Any:
        if value is None:
            raise ValueError(
                "must be declared: `none` (the pool keeps its weights: a frozen policy, evaluation) or "
                "`{mode: reload_from_checkpoint, directory: /shared/path}` (the pool follows training)"
            )
        # `weight_sync=none` on the command line or in YAML is the mode alone.
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("weight_sync")
    @classmethod
    def _enough_servers(cls, sync: WeightSync, info: ValidationInfo) -> WeightSync:
        servers = info.data.get("servers")
        if sync.mode == "reload_from_checkpoint" and servers is not None and sync.min_servers > len(servers):
            raise ValueError(f"min_servers is {sync.min_servers} but only {len(servers)} server(s) are listed")
        return sync

    @field_validator("max_staleness")
    @classmethod
    def _staleness_measurable(cls, value: int | None, info: ValidationInfo) -> int | None:
        sync = info.data.get("weight_sync")
        if value is None or sync is None:
            return value  # weight_sync itself is invalid: judged from its input by _every_error
        problem = _staleness_problem(value, sync.mode, sync.every_n_steps)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _every_error(cls, data: Any, handler: ModelWrapValidatorHandler[ExternalRouting]) -> ExternalRouting:
        """An invalid ``weight_sync`` does not hide a ``max_staleness`` error its input already shows: both at once."""
        try:
            return handler(data)
        except ValidationError as e:
            extra = _raw_staleness_problem(data)
            if extra is None or any(err["loc"][:1] == ("max_staleness",) for err in e.errors()):
                raise
            details: list[Any] = [
                {"type": err["type"], "loc": err["loc"], "input": err["input"], "ctx": err.get("ctx", {})}
                for err in e.errors(include_url=False)
            ]
            staleness = data["max_staleness"]
            details.append(
                {"type": "value_error", "loc": ("max_staleness",), "input": staleness, "ctx": {"error": extra}}
            )
            raise ValidationError.from_exception_data(e.title, details) from None


def _staleness_problem(value: int, mode: str, every_n_steps: int) -> str | None:
    if mode == "none":
        return (
            "needs weight_sync reload_from_checkpoint: with none the pool's weights never change, so there is "
            "no version to compare"
        )
    if every_n_steps - 1 > value:
        return (
            f"is {value} but weight_sync.every_n_steps={every_n_steps}: between syncs outputs are up to "
            f"{every_n_steps - 1} steps behind by design; raise max_staleness or sync more often"
        )
    return None


def _raw_staleness_problem(data: Any) -> str | None:
    """``max_staleness`` judged from the raw input, when ``weight_sync`` failed on another of its fields."""
    if not isinstance(data, dict):
        return None
    value, sync = data.get("max_staleness"), data.get("weight_sync")
    sync = {"mode": sync} if isinstance(sync, str) else sync
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0 and isinstance(sync, dict)):
        return None
    mode, every = sync.get("mode"), sync.get("every_n_steps", 1)
    if mode not in ("none", "reload_from_checkpoint") or not (isinstance(every, int) and every >= 1):
        return None  # not judged on a guess
    return _staleness_problem(value, mode, every)


class ExternalRolloutContext(RoleContext):
    """Base for a rollout context that routes to external servers; declare yours with ``role="rollout"``::

    class RolloutContext(ExternalRolloutContext, role="rollout"):
        system_prompt: str = "..."
    """

    routing: ExternalRouting
