"""Integrations with the frameworks verl-ctx delivers into. Each is imported on its own, lazily:
``import verl_ctx`` never imports them, and each raises an ``ImportError`` naming the pip extra to install
when its framework is missing.

* ``verl_ctx.integrations.verl``: deliver typed contexts to verl's actor, ref, critic, rollout and reward.
"""
