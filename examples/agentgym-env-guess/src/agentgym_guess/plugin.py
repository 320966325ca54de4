"""The plugin module: declares the env. Kept import-light: the env class is named by string."""

from __future__ import annotations

from agentgym import EnvSpec, Split, hookimpl
from agentgym_guess.tasks import category_of

# The plugin API version this plugin was written for (agentgym.API_VERSION then, written out):
# another agentgym-core version reports the plugin as broken instead of running it.
AGENTGYM_API_VERSION = "1"

# Task ids 0..1099: the id picks the range size and the hidden number (see env.py).
TRAIN = range(0, 1000)
TEST = range(1000, 1100)


def _categories(ids: range) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in ids:
        out.setdefault(category_of(t), []).append(t)
    return out


PROMPT = """You are playing "guess the number". A hidden integer lies in a range given at the start.
After each guess you are told whether the number is higher or lower.
Reply with your reasoning, then one line: Action: guess <number>

Example:
Observation: I am thinking of a number between 1 and 10.
Thought: The middle of 1..10 is 5.
Action: guess 5"""


@hookimpl
def agentgym_envs():
    return [
        EnvSpec(
            name="guess",
            factory="agentgym_guess.env:GuessEnv",
            expert="agentgym_guess.expert:BisectExpert",
            description="Guess a hidden integer from higher/lower feedback (the example plugin).",
            splits={
                "train": Split(TRAIN, _categories(TRAIN), "ids 0-999"),
                "test": Split(TEST, _categories(TEST), "ids 1000-1099"),
            },
            default_max_turns=12,
            action_parser="react",
            prompt=PROMPT,
            reward_range=(0.0, 1.0),
        )
    ]
