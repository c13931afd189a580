"""A stand-in inference pool: named Ray actors implementing the pool-server protocol.

In production these are your vLLM/SGLang servers, started by another job into a Ray namespace with
``.options(name=..., namespace=..., lifetime="detached")``; the training job only needs their names. The protocol
(docs/external-servers.md): ``generate`` reports the weights version it used in ``extra_fields["global_steps"]``;
``load_weights(path, version)`` loads the directory the trainer wrote and returns once it serves it.
"""

from __future__ import annotations

import json
import os
from typing import Any


class EchoServer:
    def __init__(self, name: str) -> None:
        from verl.workers.rollout.replica import TokenOutput

        self.token_output = TokenOutput  # imported once, when the server starts
        self.name = name
        self.version = 0  # the weights it was started with
        self.fail_loads: str | None = None

    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        return self.token_output(
            token_ids=list(reversed(prompt_ids)), extra_fields={"server": self.name, "global_steps": self.version}
        )

    async def load_weights(self, path: str, version: int) -> None:
        # A real server loads <path> here (safetensors shards + config: a Hugging Face model directory).
        if self.fail_loads:
            raise RuntimeError(self.fail_loads)
        with open(os.path.join(path, "verl_ctx_weights.json")) as f:
            assert json.load(f)["version"] == version
        self.version = version

    def break_loads(self, message: str) -> None:
        self.fail_loads = message


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
