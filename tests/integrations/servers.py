"""Stub LLM servers: Ray named actors with verl's server `generate` signature, returning TokenOutput."""

from __future__ import annotations

import asyncio
from typing import Any


class StubServer:
    def __init__(self, name: str, delay_s: float = 0.0) -> None:
        self.name = name
        self.delay_s = delay_s
        self.seen: list[str] = []

    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.seen.append(request_id)
        await asyncio.sleep(self.delay_s)
        return TokenOutput(token_ids=[len(prompt_ids), 7], extra_fields={"server": self.name, "global_steps": 3})

    def calls(self) -> int:
        return len(self.seen)
