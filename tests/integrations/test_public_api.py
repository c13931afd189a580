"""The verl integration's public surface is pinned, like the core's (tests/core/test_package.py)."""

from __future__ import annotations

import importlib

import pytest

# Growth of the public API is a reviewed decision: adding a name means changing this table.
PUBLIC = {
    "verl_ctx.integrations.verl": [
        "ContextTaskRunnerMixin",
        "ContextTaskRunnerV1Mixin",
        "ContextTrainerMixin",
        "LaunchOptions",
        "Prepared",
        "bind_config",
        "bind_role_worker_mapping",
        "bind_worker_cls",
        "bind_workers",
        "bound_trainer_cls",
        "check_launch",
        "compose_config",
        "import_modules",
        "init_ray",
        "launch",
        "lint_extra_context",
        "make_task_runner",
        "offload",
        "preflight",
        "prepare",
        "rehearse",
    ],
    "verl_ctx.integrations.verl.external": [
        "TRAINER_MODE",
        "TRAINER_MODULE",
        "ExternalLLMServerClient",
        "ExternalPoolTrainer",
        "ExternalRolloutContext",
        "ExternalRouting",
        "PoolState",
        "PoolWeightSync",
        "Router",
        "ServerRef",
        "SyncReport",
        "WeightSync",
        "check_external_pool",
        "load_on_servers",
        "routing_from",
        "start_pool_state",
        "weights_path",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_integration_all_is_pinned_and_importable(module: str) -> None:
    """Each integration namespace exports exactly the pinned names (ruff's sort order), each one importable."""
    mod = importlib.import_module(module)
    assert mod.__all__ == PUBLIC[module]
    assert all(hasattr(mod, name) for name in mod.__all__)
