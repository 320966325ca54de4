"""The expert: replays the simulator's own gold action path (``load(..., generateGoldPath=True)``).

ScienceWorld computes, for every task variation, a sequence of actions that completes it from the
start. The expert speaks it one action per turn through the same text actions as any agent. If the
episode has left that path (someone else acted first), it sends ``reset task`` — the simulator's
own action that puts the world back to its start — and replays the path from there: the score drops
to 0 on the way, so step rewards still sum to the final score.
"""

from __future__ import annotations

from typing import Any

from agentgym_sciworld.env import SciWorldEnv, normalize_action

RESTART = "reset task"


class GoldPathExpert:
    def __init__(self, env: Any):
        env = getattr(env, "unwrapped", env)
        if not isinstance(env, SciWorldEnv):
            raise TypeError(f"the sciworld expert needs a SciWorldEnv, got {type(env).__name__}")
        self.env = env

    def __call__(self, observation: str, info: dict) -> str:
        gold = [normalize_action(a) for a in self.env.gold_path()]
        history = self.env.history
        since = len(history) - history[::-1].index(RESTART) if RESTART in history else 0
        done = history[since:]
        if len(done) < len(gold) and done == gold[: len(done)]:
            return gold[len(done)]
        if len(done) >= len(gold) and done[: len(gold)] == gold:
            return "look around"  # the path is done (the episode should have ended with it)
        return RESTART
