"""The small env the kit's tests plant bugs in, as plugin source text (each test module writes a
plugin of its own: these classes, its planted subclasses, and its specs).

``COUNTER``: say 'inc' as many times as the task says; ``incs``, ``refuse`` and ``pay`` are the
places a planted bug overrides. ``SHOWS_MOVES``: a move counter set in ``__init__`` and never reset,
shown to the agent (the carry-over bug). ``plant`` makes them the plugin a pytester run loads; ``failed_tests``: the kit's checks it failed."""

from __future__ import annotations

import textwrap
from typing import Any

IMPORTS = "from agentgym import EnvSpec, Split, TextEnv, hookimpl\n"

COUNTER = textwrap.dedent('''
    class Counter(TextEnv):
        """Say 'inc' as many times as the task says (task id + 1 by default)."""
        def reset_task(self, task_id):
            self.target, self.count = self.incs(task_id), 0
            return f"Say inc {self.target} times.", {"instruction": "Say inc N times."}
        def incs(self, task_id):
            return task_id + 1
        def step_action(self, action):
            if action != "inc":
                return self.refuse(action)
            self.count += 1
            done = self.count == self.target
            return f"count {self.count}", self.pay(done), done, False, {"success": done}
        def refuse(self, action):
            return f"Invalid action {action[:20]!r}: say inc.", 0.0, False, False, {"valid_action": False}
        def pay(self, done):
            return float(done)
        def available_actions(self):
            return ["inc"]
''')

SHOWS_MOVES = textwrap.dedent("""
    class ShowsMoves(Counter):  # a move counter set in __init__, never reset, shown to the agent
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.moves = 0
        def step_action(self, action):
            self.moves += 1
            obs, *rest = super().step_action(action)
            return (f"{obs} (move {self.moves})", *rest)
""")


def failed_tests(result: Any) -> set[str]:
    """The names of the kit's checks that failed in a pytester run (``result``)."""
    return {
        line.split("::")[1].split("[")[0].split(" ")[0]
        for line in result.outlines
        if line.startswith("FAILED")
    }


def plant(pytester: Any, monkeypatch: Any, source: str) -> None:
    """``source`` as the plugin module ``suite_envs``, loaded by the runs ``pytester`` makes."""
    pytester.makepyfile(suite_envs=source)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("AGENTGYM_PLUGIN_MODULES", "suite_envs")
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)
