"""Contexts for code that receives verl's Hydra config instead of a ``TrainingWorkerConfig``.

Rollout servers, agent loops, reward managers and reward-loop workers are handed the Hydra config (or its
rollout part), so that config is their channel. verl prints it, resolves it and sends it to experiment
trackers, so entries go there as JSON-safe text (``verl_ctx.envelope.to_text``), and a context holding a
secret only as the text of a store reference (``_store``):

* the rollout context in ``actor_rollout_ref.rollout.custom.verl_ctx.rollout`` (``RolloutConfig.custom``,
  verl's documented extension point for custom rollout settings);
* every other config-channel role (reward, custom roles) in a top-level ``verl_ctx.<role>`` key;
* the reward context, again, in ``reward.custom_reward_function.reward_kwargs.verl_ctx`` when the config names a
  custom reward function that takes ``**kwargs`` (or a ``verl_ctx`` parameter): verl passes its ``reward_kwargs`` to
  every call (``verl.trainer.ppo.reward.get_custom_reward_fn``), in the reward-loop worker processes, so the function
  reads it with ``decode(kwargs, RewardContext)``. A function that takes neither is left as it is (verl would call
  it with an argument it does not take); a reward manager reads the top-level key from its config.

The raw ``extra_context`` section the user wrote is replaced by its validated values with secrets as stars,
so what verl prints and tracks shows each role's context and no secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._driver.validate import SECTION
from ..._wire.envelope import RESERVED_KEY, to_text
from ._binding import WORKER_CLASS_ROLES

__all__ = ["bind_config"]

_ROLLOUT = "actor_rollout_ref.rollout"
_REWARD_FUNCTION = "reward.custom_reward_function"


def bind_config(
    config: Any, envelopes: Mapping[str, Mapping[str, Any]], *, redacted: Mapping[str, Any] | None = None
) -> list[str]:
    """Write the config-channel roles' envelopes (or store references) into ``config`` as text.

    ``config`` is verl's composed ``DictConfig``; it is changed in place. ``redacted`` (role -> values with
    secrets masked, ``ContextSet.redacted()``) replaces the ``extra_context`` section when given. Returns the
    dotted keys written.
    """
    from omegaconf import OmegaConf, open_dict

    written = []
    with open_dict(config):
        for role in sorted(envelopes):
            if role in WORKER_CLASS_ROLES:
                continue
            text = to_text(envelopes[role])
            rollout = OmegaConf.select(config, _ROLLOUT) if role == "rollout" else None
            if rollout is not None:
                if rollout.get("custom") is None:
                    rollout.custom = {}
                rollout.custom.setdefault(RESERVED_KEY, {})
                rollout.custom[RESERVED_KEY][role] = text
                written.append(f"{_ROLLOUT}.custom.{RESERVED_KEY}.{role}")
                continue
            if config.get(RESERVED_KEY) is None:
                config[RESERVED_KEY] = {}
            config[RESERVED_KEY][role] = text
            written.append(f"{RESERVED_KEY}.{role}")
            if role == "reward" and _reward_function_takes_it(config):
                function = config.reward.custom_reward_function
                if function.get("reward_kwargs") is None:
                    function.reward_kwargs = {}
                function.reward_kwargs[RESERVED_KEY] = {role: text}
                written.append(f"{_REWARD_FUNCTION}.reward_kwargs.{RESERVED_KEY}.{role}")
        if redacted is not None:
            config[SECTION] = OmegaConf.create(dict(redacted))
    return written


def _reward_function_takes_it(config: Any) -> bool:
    """Whether the config's custom reward function can be handed a ``verl_ctx`` keyword argument.

    Read from its source, not imported (it may import a judge's client library the driver lacks): a module-level
    function or coroutine of that name, in the file verl loads, with ``**kwargs`` or a ``verl_ctx`` parameter. A file
    that is missing or does not parse is verl's to report, when it loads it.
    """
    import ast

    from omegaconf import OmegaConf

    from ...errors import ConfigError
    from ._entry import parse_source

    path = OmegaConf.select(config, f"{_REWARD_FUNCTION}.path", default=None)
    name = OmegaConf.select(config, f"{_REWARD_FUNCTION}.name", default=None) or "compute_score"
    if not path:
        return False
    try:
        tree = parse_source(str(path), "reward.custom_reward_function.path")
    except ConfigError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            args = node.args
            return args.kwarg is not None or any(a.arg == RESERVED_KEY for a in (*args.args, *args.kwonlyargs))
    return False
