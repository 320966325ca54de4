"""DAPO's soft overlong punishment (Yu et al. 2025, "DAPO", section 3.4), per turn: a reply
within ``max_chars - cache_chars`` characters costs nothing, one in the last ``cache_chars`` before
``max_chars`` costs linearly more up to ``penalty``, and a longer one costs ``penalty``.

Replies are measured in characters (``Step.raw_output``), which every episode has, text-level
policies' included; DAPO measures tokens."""

from __future__ import annotations

from agentgym.trajectory import Episode


def overlong_penalty(
    episode: Episode, max_chars: int = 400, cache_chars: int = 100, penalty: float = 1.0
) -> list[float]:
    """The env's reward of each step minus the punishment of the reply that chose its action."""
    if not 0 <= cache_chars <= max_chars:
        raise ValueError(
            f"overlong_penalty needs 0 <= cache_chars <= max_chars, got {cache_chars}, {max_chars}"
        )
    free = max_chars - cache_chars
    out = []
    for step in episode.steps:
        over = len(step.raw_output) - free
        if over <= 0:
            cost = 0.0
        elif over >= cache_chars:
            cost = penalty
        else:
            cost = penalty * over / cache_chars
        out.append(step.reward - cost)
    return out
