"""A rehearsal calls the recipe's reward function once, as verl's reward loop calls it, and sees what it decoded.

The reward context reaches a ``compute_score(..., **kwargs)`` in ``reward_kwargs.verl_ctx`` (``_config_channel``);
whether the function reads it is only known by running it. So the rehearsal loads it with verl's own loader
(``get_custom_reward_fn``: the file, the name, the ``reward_kwargs`` merged in), calls it on the first row of the
train data (its ``data_source``, its ground truth as the solution), and watches ``decode`` meanwhile (in the whole
process: in the TaskRunner, where this runs, nothing else decodes while the runner waits for it).

What the function does after decoding is the recipe's: an LLM judge cannot be reached from a rehearsal, so an
exception or a call still running after ``CALL_SECONDS`` is told, not a failure; the decode is what is checked.
The exception's message is not shown (it may quote the judge's URL or key): its class and the line that raised it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import traceback
from typing import Any

from ..._model.role_context import RoleContext
from ..._wire.envelope import RESERVED_KEY

__all__ = ["CALL_SECONDS", "call_reward_function"]

_REWARD_FUNCTION = "reward.custom_reward_function"

#: How long a rehearsal waits for the reward function (a judge's client may wait on its own timeouts first).
CALL_SECONDS = 20.0


def call_reward_function(config: Any, role: str) -> dict[str, Any] | None:
    """Call the config's reward function if ``role``'s context is handed to it; ``None`` if it is not.

    Returns the record's fields: ``worker`` (the function), ``decoded`` (``repr`` of each context it decoded),
    ``decoded_roles`` and ``after`` (what the call did once it had decoded: returned, raised, still running).
    """
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from ..._worker.decode import watching_decodes

    function = OmegaConf.select(config, _REWARD_FUNCTION, default=None)
    if not function or role not in ((function.get("reward_kwargs") or {}).get(RESERVED_KEY) or {}):
        return None
    name = f"{function.get('name') or 'compute_score'} in {function.get('path')}"
    score = get_custom_reward_fn(config)
    decoded: list[RoleContext] = []
    outcome: dict[str, str] = {}

    sample = _first_sample(config)

    def call() -> None:
        try:
            result = score(**sample)
            if inspect.isawaitable(result):  # an async compute_score: verl's reward loop awaits it
                result = asyncio.run(_awaited(result))
            outcome["after"] = f"returned {type(result).__name__}"
        except Exception as e:  # noqa: BLE001 - the recipe's code raised: told, not judged (see the module doc)
            outcome["after"] = f"raised {type(e).__name__} at {_where(e, str(function.get('path')))}"

    with watching_decodes(decoded.append):
        caller = threading.Thread(target=call, name="rehearsal-reward-function", daemon=True)
        caller.start()
        caller.join(CALL_SECONDS)
    after = outcome.get("after", f"still running after {CALL_SECONDS:.0f} s (left to finish on its own)")
    return {
        "worker": name,
        "decoded": {"decode()" + (f" #{i + 1}" if i else ""): repr(ctx) for i, ctx in enumerate(decoded)},
        "decoded_roles": sorted({r for ctx in decoded for r in ctx.__verl_ctx_roles__}),
        "after": after,
    }


async def _awaited(result: Any) -> Any:
    return await result


def _first_sample(config: Any) -> dict[str, Any]:
    """The keyword arguments verl's reward managers pass, from the first row of the first train file (blank ones
    when it cannot be read as verl's parquet: the rehearsal's question is the decode, not the data)."""
    import pandas as pd
    from omegaconf import ListConfig

    files = config.data.train_files
    first = files[0] if isinstance(files, (list, ListConfig)) else files
    try:
        row = pd.read_parquet(str(first)).iloc[0]
    except Exception:  # noqa: BLE001 - pandas and pyarrow raise many types; any of them: a blank sample
        return {"data_source": "", "solution_str": "", "ground_truth": "", "extra_info": {}}
    reward_model = row.get("reward_model")
    truth = reward_model.get("ground_truth", "") if isinstance(reward_model, dict) else ""
    extra = row.get("extra_info")
    return {
        "data_source": row.get("data_source", ""),
        "solution_str": str(truth),
        "ground_truth": truth,
        "extra_info": dict(extra) if isinstance(extra, dict) else {},
    }


def _where(e: BaseException, path: str) -> str:
    """The last line of the reward function's file that the exception passed (else the innermost line)."""
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if f.filename.endswith(path.lstrip("./"))] or frames
    return f"{own[-1].filename}:{own[-1].lineno}" if own else "?"
