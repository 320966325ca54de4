"""Faulty envs for the server fault tests, loaded with ``AGENTGYM_PLUGIN_MODULES=faulty_envs``.

``faulty`` is a counter game (say ``inc`` three times) whose env fails on demand: ``raise`` raises
inside ``step``, ``hang`` blocks ``step`` (until :data:`RELEASE` is set, at most ``HANG_S``), ``die``
kills the process hosting the env (a ``--workers`` process). Its expert says ``raise`` on the
tasks in :data:`BAD_TASKS` (after one ``inc``) and ``inc`` elsewhere, so a rollout of the
``scripted`` policy has episodes whose env fails mid-way next to ones that succeed.
"""

from __future__ import annotations

import os
import threading

from agentgym import EnvSpec, Split, TextEnv, hookimpl

BAD_TASKS = frozenset(range(0, 100, 4))
HANG_S = 30.0
RELEASE = threading.Event()  # set by a test's teardown: hung steps (threads of its server) return


class FaultyEnv(TextEnv):
    def reset_task(self, task_id):
        self.task_id, self.count = task_id, 0
        return f"Task {task_id}: say 'inc' three times.", {"instruction": "Say inc three times."}

    def step_action(self, action):
        if action == "raise":
            raise RuntimeError("the env broke")
        if action == "hang":
            RELEASE.wait(HANG_S)
            return "woke up", 0.0, False, False, {}
        if action == "die":
            os._exit(3)
        if action != "inc":
            return f"Invalid action {action!r}: say inc.", 0.0, False, False, {"valid_action": False}
        self.count += 1
        done = self.count >= 3
        return f"count is {self.count}", 1.0 if done else 0.0, done, False, {"success": done}


def _expert(env):
    def act(observation, info):
        return "raise" if env.task_id in BAD_TASKS and env.count >= 1 else "inc"

    return act


@hookimpl
def agentgym_envs():
    return [
        EnvSpec(
            name="faulty",
            factory=FaultyEnv,
            expert=_expert,
            splits={"test": Split(range(100), {"only": list(range(100))})},
            default_max_turns=6,
        )
    ]
