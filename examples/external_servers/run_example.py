"""Route rollout requests to an inference pool started outside the job.

Run: `python -m examples.external_servers.run_example`

1. a pool of named server actors is started (here, on a local Ray cluster; normally by another job);
2. the recipe's rollout context names them; `verl-ctx validate` checks it before launch;
3. the context reaches the config the rollout side receives (`bind_config`, as `verl-ctx run` does);
4. `ExternalLLMServerClient` routes `generate` calls: sticky per conversation, skipping a server that dies.
"""

from __future__ import annotations

import asyncio
import os

OVERRIDES = [
    "actor_rollout_ref.rollout.name=vllm",
    "+extra_context.rollout.routing.namespace=inference_pool",
    "+extra_context.rollout.routing.servers=[{name: llm-0}, {name: llm-1}]",
    "+extra_context.rollout.routing.policy=sticky",
    "+extra_context.rollout.routing.retries=1",
]


async def converse(client, conversation: str, turns: int) -> list[str]:  # type: ignore[no-untyped-def]
    served = []
    for turn in range(turns):
        out = await client.generate(conversation, prompt_ids=[1, 2, turn], sampling_params={"temperature": 0.7})
        served.append(out.extra_fields["server"])
    return served


def main() -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from verl_ctx.cli._load import compose_config, import_schema_modules

    from verl_ctx import validate
    from verl_ctx.integrations.verl import ExternalLLMServerClient, bind_config

    from .pool import start_pool, stop_server

    import_schema_modules(["examples.external_servers.contexts"])
    config = compose_config(config_file=None, config_path=None, config_name=None, overrides=OVERRIDES)
    contexts = validate(config, overrides=OVERRIDES)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        pool = start_pool(["llm-0", "llm-1"], namespace="inference_pool")
        bind_config(config, contexts.envelopes())  # what `verl-ctx run` does before launching
        client = ExternalLLMServerClient(config)  # no load balancer: the routing context drives it
        for conversation in ("chat-a", "chat-b"):
            print(f"{conversation}: turns served by {asyncio.run(converse(client, conversation, 3))}")
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
