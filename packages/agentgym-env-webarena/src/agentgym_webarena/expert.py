"""The expert of the bundled tasks: each task's scripted solution (``agentgym.expert`` in its
config), spoken as WebArena's text actions. A step names its element by role and accessible name,
and the expert finds the element's ``[id]`` in the current observation, as an agent must (ids are
never written into a plan); an element not in view is looked for by scrolling down, then up.

Plan steps: ``{"click": {"role", "name"}}``, ``{"hover": ...}``,
``{"type": {"role", "name"}, "text": ..., "enter": true}``, ``{"goto": url}``, ``{"press": keys}``,
``{"scroll": "down"}``, ``{"stop": answer}``. A target may give ``"contains": true`` to match a
name by substring, and ``"nth"`` to pick among equal matches.
"""

from __future__ import annotations

import ast
import re
from typing import Any

_LINE = re.compile(r"^\t*\[(\d+)\] (\S+) ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
MAX_SCROLLS = 8


def elements(observation: str) -> list[tuple[int, str, str]]:
    """(id, role, name) of every element line of an observation."""
    out = []
    for line in observation.splitlines():
        m = _LINE.match(line)
        if m:
            try:
                name = ast.literal_eval(m.group(3))
            except (ValueError, SyntaxError):
                continue
            out.append((int(m.group(1)), m.group(2), str(name)))
    return out


def find(observation: str, target: dict[str, Any]) -> int | None:
    role, name = target.get("role"), str(target.get("name", "")).strip().lower()
    contains = bool(target.get("contains"))
    hits = [
        i
        for i, r, n in elements(observation)
        if (role is None or r == role) and (name in n.lower() if contains else n.strip().lower() == name)
    ]
    nth = int(target.get("nth", 0))
    return hits[nth] if len(hits) > nth else None


class WebArenaExpert:
    def __init__(self, env: Any):
        self.env = env
        self.step = 0
        self.scrolls = 0
        self.task: Any = None

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        env = self.env
        if env.num_steps == 0 or self.task is not env.config:
            self.task, self.step, self.scrolls = env.config, 0, 0
        plan = (env.config.get("agentgym") or {}).get("expert") or []
        if self.step >= len(plan):
            return "stop [N/A]"  # no plan for this task (not a bundled one): give up
        step = plan[self.step]
        kind = next(k for k in ("click", "hover", "type", "goto", "press", "scroll", "stop") if k in step)
        if kind in ("click", "hover", "type"):
            element = find(observation, step[kind])
            if element is None:
                if self.scrolls < MAX_SCROLLS:
                    self.scrolls += 1
                    return "scroll [down]" if self.scrolls <= MAX_SCROLLS // 2 else "scroll [up]"
                self.step = len(plan)
                return "stop [N/A]"
            self.step, self.scrolls = self.step + 1, 0
            if kind == "type":
                return f"type [{element}] [{step['text']}] [{1 if step.get('enter', True) else 0}]"
            return f"{kind} [{element}]"
        self.step += 1
        if kind in ("goto", "press", "stop"):  # a URL under the name the agent reads
            return env.to_shown(f"{kind} [{step[kind]}]")
        return f"scroll [{step['scroll']}]"
