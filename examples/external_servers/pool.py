"""A stand-in inference pool: named Ray actors with verl's server ``generate`` signature.

In production these are your vLLM/SGLang servers, started by another job into a Ray namespace with
``.options(name=..., namespace=..., lifetime="detached")``; the training job only needs their names.
"""

from __future__ import annotations

from typing import Any


class EchoServer:
    def __init__(self, name: str) -> None:
        self.name = name

    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        return TokenOutput(token_ids=list(reversed(prompt_ids)), extra_fields={"server": self.name, "global_steps": 0})


def stop_server(handle: Any) -> None:
    """Kill a server and wait until it is gone (``ray.kill`` returns before the actor has exited)."""
    import time

    import ray

    ray.kill(handle)
    for _ in range(300):
        try:
            ray.get(handle.__ray_ready__.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        time.sleep(0.1)


def start_pool(names: list[str], namespace: str) -> list[Any]:
    import ray

    actor = ray.remote(num_cpus=0)(EchoServer)
    handles = [actor.options(name=n, namespace=namespace, lifetime="detached").remote(n) for n in names]
    ray.get([h.__ray_ready__.remote() for h in handles])
    return handles
