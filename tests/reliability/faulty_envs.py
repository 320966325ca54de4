"""Faulty envs for the server fault tests, loaded with ``AGENTGYM_PLUGIN_MODULES=faulty_envs``.

``faulty`` is a counter game (say ``inc`` three times) whose env fails on demand: ``raise`` raises
inside ``step``, ``hang`` blocks ``step`` (until :data:`RELEASE` is set, at most ``HANG_S``), ``spin``
hangs holding the GIL (a regular expression that backtracks for minutes: no other thread of the
process runs meanwhile, as in C code that never releases it), ``die`` kills the process hosting the
env (a ``--workers`` process); ``slow`` is ``inc`` taking ``SLOW_S``. ``faulty-cheap`` is the same env declaring its steps cheap (a
server steps it on its event loop's thread): there ``loop`` hangs in Python (a busy loop, until
:data:`RELEASE` or ``HANG_S``) and ``where`` answers the name of the thread that steps it. The tasks in
:data:`DRIFT_TASKS` are not deterministic: every reset of one shows another visit number. Its expert says ``raise`` on the
tasks in :data:`BAD_TASKS` (after one ``inc``) and ``inc`` elsewhere, so a rollout of the
``scripted`` policy has episodes whose env fails mid-way next to ones that succeed.
"""

from __future__ import annotations

import os
import re
import threading
import time

from agentgym import EnvSpec, InstanceCost, Split, TextEnv, hookimpl

BAD_TASKS = frozenset(range(0, 100, 4))
HANG_S = 30.0
SLOW_S = 1.0
DRIFT_TASKS = frozenset({99})
_visits = 0
RELEASE = threading.Event()  # set by a test's teardown: hung steps (threads of its server) return


class FaultyEnv(TextEnv):
    def reset_task(self, task_id):
        global _visits
        self.task_id, self.count, self.drift = task_id, 0, ""
        if task_id in DRIFT_TASKS:
            _visits += 1
            self.drift = f" (visit {_visits})"
        return f"Task {task_id}: say 'inc' three times.{self.drift}", {"instruction": "Say inc three times."}

    def step_action(self, action):
        if action == "raise":
            raise RuntimeError("the env broke")
        if action == "hang":
            RELEASE.wait(HANG_S)
            return "woke up", 0.0, False, False, {}
        if action == "spin":
            re.match(r"(a+)+$", "a" * 40 + "b")  # 2**40 ways to fail, none released
            return "done spinning", 0.0, False, False, {}
        if action == "die":
            os._exit(3)
        if action == "loop":
            deadline = time.monotonic() + HANG_S
            while not RELEASE.is_set() and time.monotonic() < deadline:
                pass
            return "looped", 0.0, False, False, {}
        if action == "where":
            return threading.current_thread().name, 0.0, False, False, {}
        if action == "slow":
            time.sleep(SLOW_S)
            action = "inc"
        if action != "inc":
            return f"Invalid action {action!r}: say inc.", 0.0, False, False, {"valid_action": False}
        self.count += 1
        done = self.count >= 3
        return f"count is {self.count}{self.drift}", 1.0 if done else 0.0, done, False, {"success": done}


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
        ),
        EnvSpec(
            name="faulty-cheap",
            factory=FaultyEnv,
            splits={"test": Split(range(100), {"only": list(range(100))})},
            default_max_turns=6,
            cost=InstanceCost(cheap_step=True),
        ),
    ]
