"""Core's built-in plugin, registered over the ``agentgym`` entry point like any other."""

from __future__ import annotations

from agentgym.hookspecs import hookimpl

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"


@hookimpl
def agentgym_reward_transforms():
    from agentgym.rewards import BUILTIN_TRANSFORMS

    return dict(BUILTIN_TRANSFORMS)
