"""SciWorld's dialect on the AgentGym-compatible routes: replies as AgentGym's own ScienceWorld
server gave them, so that its ``SciworldEnvClient`` and ``Evaluator`` work unchanged.

That client builds its first observation itself from ``task_description`` + the reset's
``observation`` (the look-around text alone), and scores with the simulator's ``score`` (0-100,
-100 on a failed task; success is ``score == 100``), whose per-step change is ``reward``. The v1 API
keeps its [0, 1] rewards.
"""

from __future__ import annotations

from typing import Any

from agentgym_sciworld.env import SciWorldEnv


def reply(env: SciWorldEnv, route: str, result: dict[str, Any]) -> Any:
    """Shape a v1 result as the original server's reply to ``route`` (see ``agentgym.server.dialects``)."""
    if route == "observation":  # the last observation; after a reset, the look-around text
        return env.first_look if env.num_steps == 0 else result["observation"]
    if route in ("create", "reset"):
        return {
            "task_name": env.task_name,
            "var_num": env.variation,
            "task_description": env.goal,
            "observation": env.first_look,
            "reward": env.raw_change,
            "score": env.raw_score,
            "deleted": False,
            "done": False,
        }
    return {
        "observation": result["observation"],
        "reward": env.raw_change,
        "score": env.raw_score,
        "done": bool(result["terminated"] or result["truncated"]),
    }
