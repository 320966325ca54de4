"""Misbehaving envs for the server's failure tests, loaded with AGENTGYM_PLUGIN_MODULES.

``crashy`` works like a tiny counter game, but the action ``crash`` raises inside the env and
``die`` kills the process hosting it, so the tests can check that one broken env instance (or
worker process) never takes the server or other sessions down.
"""

from __future__ import annotations

import os
import time

from agentgym import EnvSpec, Split, TextEnv, hookimpl


class CrashyEnv(TextEnv):
    def reset_task(self, task_id):
        self.count = 0
        return f"Task {task_id}: say 'inc' three times.", {"instruction": "Say inc three times."}

    def step_action(self, action):
        if action == "crash":
            raise RuntimeError("boom")
        if action == "die":
            os._exit(3)
        if action.startswith("sleep"):
            time.sleep(float(action.split()[1]))
            return "slept", 0.0, False, False, {}
        if action != "inc":
            return f"Invalid action {action!r}: say inc.", 0.0, False, False, {"valid_action": False}
        self.count += 1
        done = self.count >= 3
        return f"count is {self.count}", 1.0 if done else 0.0, done, False, {"success": done}


def _expert(env):
    return lambda observation, info: "inc"


@hookimpl
def agentgym_envs():
    return [
        EnvSpec(
            name="crashy",
            factory=CrashyEnv,
            expert=_expert,
            splits={"test": Split(range(10), {"only": list(range(10))})},
            default_max_turns=5,
        )
    ]
