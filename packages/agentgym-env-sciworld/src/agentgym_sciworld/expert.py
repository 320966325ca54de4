"""The expert: replays the simulator's own gold action path (``load(..., generateGoldPath=True)``).

ScienceWorld computes, for every task variation, a sequence of actions that completes it from the
start. The expert speaks it one action per turn through the same text actions as any agent. It finds
its place from the episode's actions so far: the gold actions taken in order, whatever else came
in between. So actions that change nothing (``look at``, ``inventory``, an invalid action) do not
throw it off; ones that move the agent or things may (the simulator's ``reset task`` clears only the
goal progress, not the world, so there is no way back to the start through actions).
"""

from __future__ import annotations

from typing import Any

from agentgym_sciworld.env import SciWorldEnv, normalize_action


class GoldPathExpert:
    def __init__(self, env: Any):
        env = getattr(env, "unwrapped", env)
        if not isinstance(env, SciWorldEnv):
            raise TypeError(f"the sciworld expert needs a SciWorldEnv, got {type(env).__name__}")
        self.env = env

    def __call__(self, observation: str, info: dict) -> str:
        gold = [normalize_action(a) for a in self.env.gold_path()]
        done = 0
        for action in self.env.history:
            if done < len(gold) and action == gold[done]:
                done += 1
        # Past the end the episode should already be over; looking around is harmless.
        return gold[done] if done < len(gold) else "look around"
