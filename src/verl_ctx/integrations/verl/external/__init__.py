"""Rollout against LLM servers started outside the job: typed routing, the client verl asks for.

``ExternalRolloutContext`` is the base of a rollout context with a ``routing: ExternalRouting``;
``ExternalLLMServerClient`` is verl's ``LLMServerClient`` routing by it; ``Router`` is the policy alone.
See docs/external-servers.md.
"""

from __future__ import annotations

from ._routing import ExternalRolloutContext, ExternalRouting, Router, ServerRef


def __getattr__(name: str) -> object:
    # verl's LLMServerClient module pulls its rollout stack: import the subclass on first use only.
    if name == "ExternalLLMServerClient":
        from ._llm_client import ExternalLLMServerClient

        return ExternalLLMServerClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ExternalLLMServerClient", "ExternalRolloutContext", "ExternalRouting", "Router", "ServerRef"]
