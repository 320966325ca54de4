"""Misbehaving envs for the server's failure tests, loaded with AGENTGYM_PLUGIN_MODULES.

``crashy`` works like a tiny counter game, but the action ``crash`` raises inside the env and
``die`` kills the process hosting it, so the tests can check that one broken env instance (or
worker process) never takes the server or other sessions down.

``block DIR`` is a step that is running for as long as a test wants, signalled through files (the
env may live in a worker process): it creates ``DIR/started``, then waits until ``DIR/release``
exists. A test waits for the first, so it acts while the step surely runs, and makes the second.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentgym import EnvSpec, Split, TextEnv, hookimpl

#: A blocked step gives up (and raises) after this many seconds: a failed test never hangs the server.
RELEASE_TIMEOUT = 30.0


class CrashyEnv(TextEnv):
    def reset_task(self, task_id):
        self.count = 0
        return f"Task {task_id}: say 'inc' three times.", {"instruction": "Say inc three times."}

    def step_action(self, action):
        if action == "crash":
            raise RuntimeError("boom")
        if action == "die":
            os._exit(3)
        if action.startswith("block "):
            signals = Path(action.split(maxsplit=1)[1])
            (signals / "started").touch()
            deadline = time.monotonic() + RELEASE_TIMEOUT
            while not (signals / "release").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no {signals / 'release'} after {RELEASE_TIMEOUT}s")
                time.sleep(0.01)
            return "released", 0.0, False, False, {}
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
