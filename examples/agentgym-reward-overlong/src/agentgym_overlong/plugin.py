"""The plugin module the entry point names: the ``agentgym_reward_transforms`` hook.

A reward transform is a plain function, so the module that defines it is imported here; it
imports nothing heavy (``agentgym plugins`` calls every hook of every plugin).
"""

from __future__ import annotations

from agentgym import hookimpl
from agentgym_overlong.transform import overlong_penalty

AGENTGYM_API_VERSION = "1"


@hookimpl
def agentgym_reward_transforms():
    return {"overlong_penalty": overlong_penalty}
