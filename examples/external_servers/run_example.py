"""Rollout on an inference pool started outside the job, with its weights kept in step.

Run: `python -m examples.external_servers.run_example`

1. a pool of named server actors is started (here, on a local Ray cluster; normally by another job);
2. the recipe's rollout context names them and declares how their weights follow training; `validate` checks it;
3. the context reaches the config the rollout side receives (`bind_config`, as `verl-ctx run` does);
4. `ExternalLLMServerClient` routes `generate` calls: sticky per conversation;
5. a weight update, as `ExternalPoolTrainer` makes one after a training step: the actor's checkpoint engine
   writes the weights (here: a two-tensor stand-in for the model), every server loads them; one that fails
   is reported and routed around; every output says which weights version generated it;
6. a server dies: its conversations move to the survivor.

`ExternalPoolTrainer` (`verl-ctx run --import verl_ctx.integrations.verl.external.trainer
trainer.v1.trainer_mode=external_pool`) does steps 3-5 inside a real training run; see docs/external-servers.md.
"""

from __future__ import annotations

import asyncio
import os
import tempfile

NAMESPACE = "inference_pool"


def overrides(weights_dir: str) -> list[str]:
    return [
        "actor_rollout_ref.rollout.name=vllm",
        f"+extra_context.rollout.routing.namespace={NAMESPACE}",
        "+extra_context.rollout.routing.servers=[{name: llm-0}, {name: llm-1}, {name: llm-2}]",
        "+extra_context.rollout.routing.policy=sticky",
        "+extra_context.rollout.routing.retries=1",
        f"+extra_context.rollout.routing.weight_sync={{mode: reload_from_checkpoint, directory: {weights_dir}}}",
        "+extra_context.rollout.routing.max_staleness=0",
    ]


async def converse(client, conversation: str, turns: int) -> list[str]:  # type: ignore[no-untyped-def]
    served = []
    for turn in range(turns):
        out = await client.generate(conversation, prompt_ids=[1, 2, turn], sampling_params={"temperature": 0.7})
        served.append(out.extra_fields["server"])
    return served


def write_weights(directory: str, version: int) -> None:
    """What the trainer's actor worker does: verl's checkpoint-engine send path, the verl_ctx_disk backend."""
    import torch

    from verl_ctx.integrations.verl.external.disk_engine import DiskCheckpointEngine

    engine = DiskCheckpointEngine(bucket_size=1 << 20, is_master=True, directory=directory)
    weights = {"lm_head.weight": torch.full((4, 2), float(version)), "model.norm.weight": torch.ones(2)}
    asyncio.run(engine.send_weights(iter(weights.items()), global_steps=version))


def main() -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from verl_ctx import validate
    from verl_ctx.integrations.verl import bind_config, compose_config, import_modules
    from verl_ctx.integrations.verl.external import (
        ExternalLLMServerClient,
        PoolWeightSync,
        routing_from,
        start_pool_state,
    )

    from .pool import start_pool, stop_server

    weights_dir = tempfile.mkdtemp(prefix="pool-weights-")
    import_modules(["examples.external_servers.contexts"])
    config = compose_config(overrides=overrides(weights_dir))
    contexts = validate(config, overrides=overrides(weights_dir))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        pool = start_pool(["llm-0", "llm-1", "llm-2"], namespace=NAMESPACE)
        bind_config(config, contexts.envelopes())  # what `verl-ctx run` does before launching
        routing = routing_from(config)
        assert routing is not None, "the rollout context carries the pool's routing"
        state = start_pool_state(0)  # the trainer's version, shared with every client
        client = ExternalLLMServerClient(config, pool_state=state)
        for conversation in ("chat-a", "chat-b"):
            print(f"{conversation}: turns served by {asyncio.run(converse(client, conversation, 3))}")

        ray.get(pool[2].break_loads.remote("CUDA out of memory"))
        sync = PoolWeightSync(routing, state, write=lambda version, path: write_weights(weights_dir, version))
        report = sync.push(1)  # after training step 1
        print(f"weights version 1 loaded by {list(report.loaded)}; failed: {report.failed}")

        async def after_update() -> list[tuple[str, int]]:
            outs = [await client.generate(f"new-{i}", prompt_ids=[i], sampling_params={}) for i in range(6)]
            return sorted({(o.extra_fields["server"], o.extra_fields["global_steps"]) for o in outs})

        print(f"new conversations (server, weights version): {asyncio.run(after_update())}")

        stop_server(pool[0])
        print(
            f"after llm-0 died, chat-a/chat-b turns served by "
            f"{asyncio.run(converse(client, 'chat-a', 1))} / {asyncio.run(converse(client, 'chat-b', 1))}"
        )
        for handle in pool[1:]:
            ray.kill(handle)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
