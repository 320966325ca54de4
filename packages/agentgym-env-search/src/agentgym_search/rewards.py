"""The reward transform this package adds: ``answer_f1``, the token F1 of the episode's best answer
as its return, for training on Search with the default exact-match env (whose success and return
stay exact match: what evaluation reports)."""

from __future__ import annotations

from agentgym.trajectory import Episode


def answer_f1(episode: Episode) -> list[float]:
    """Per step, how much that step's answer raised the best token F1 so far (0 for a search, a
    format error or a worse answer): the rewards sum to the best answer's F1. Partial credit where
    exact match pays nothing, e.g. ``the United States`` for ``United States of America`` (0.67)."""
    rewards, best = [], 0.0
    for step in episode.steps:
        f1 = float(step.info.get("f1", 0.0))
        rewards.append(max(f1 - best, 0.0))
        best = max(best, f1)
    return rewards
