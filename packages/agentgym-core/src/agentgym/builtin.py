"""Core's built-in plugin, registered over the ``agentgym`` entry point like any other."""

from __future__ import annotations

from agentgym.hookspecs import hookimpl


@hookimpl
def agentgym_reward_transforms():
    from agentgym.rewards import BUILTIN_TRANSFORMS

    return dict(BUILTIN_TRANSFORMS)
