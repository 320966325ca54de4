"""The expert of the bundled tasks: each task's scripted solution (``agentgym.expert`` in its
config), spoken as WebArena's text actions. A step names its element by role and accessible name,
and the expert finds the element's ``[id]`` in the current observation, as an agent must (ids are
never written into a plan); an element not in view is looked for by scrolling down, then up.

Plan steps: ``{"click": {"role", "name"}}``, ``{"hover": ...}``,
``{"type": {"role", "name"}, "text": ..., "enter": true}``, ``{"goto": url}``, ``{"press": keys}``,
``{"scroll": "down"}``, ``{"stop": answer}``. A target may give ``"contains": true`` to match a
name by substring, and ``"nth"`` to pick among equal matches.

The expert keeps no state of its own: where it is in the plan is read from the episode's actions
(``WebArenaEnv.history``), so a new expert picks up where the episode is. A session restored by
replay on another server gets a new one, which must not start the plan again (and add to the cart
twice).
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


def progress(plan: list[dict[str, Any]], history: list[str]) -> tuple[int, int]:
    """(plan step reached, scrolls made looking for its element) after the episode's actions: every
    action is one plan step but a scroll the step did not ask for, which looked for its element."""
    step = scrolls = 0
    for action in history:
        if step >= len(plan):
            break
        if action.strip().startswith("scroll") and "scroll" not in plan[step]:
            scrolls += 1
            continue
        step, scrolls = step + 1, 0
    return step, scrolls


class WebArenaExpert:
    def __init__(self, env: Any):
        self.env = env

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        env = self.env
        plan = (env.config.get("agentgym") or {}).get("expert") or []
        at, scrolls = progress(plan, env.history)
        if at >= len(plan):
            return "stop [N/A]"  # no plan for this task (not a bundled one), or it gave up
        step = plan[at]
        kind = next(k for k in ("click", "hover", "type", "goto", "press", "scroll", "stop") if k in step)
        if kind in ("click", "hover", "type"):
            element = find(observation, step[kind])
            if element is None:
                if scrolls < MAX_SCROLLS:
                    return "scroll [down]" if scrolls < MAX_SCROLLS // 2 else "scroll [up]"
                return "stop [N/A]"
            if kind == "type":
                return f"type [{element}] [{step['text']}] [{1 if step.get('enter', True) else 0}]"
            return f"{kind} [{element}]"
        if kind in ("goto", "press", "stop"):  # a URL under the name the agent reads
            return env.to_shown(f"{kind} [{step[kind]}]")
        return f"scroll [{step['scroll']}]"
