"""The plugin module: declares the ``babyai`` env. Import-light: no minigrid until an env is made."""

from __future__ import annotations

from agentgym import EnvSpec, InstanceCost, Split, hookimpl
from agentgym_babyai.levels import (
    NUM_LEVELS,
    TRAIN_SEEDS,
    held_out_split,
    level_of,
    short_name,
    train_categories,
)

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"

PROMPT = """You are placed in a BabyAI grid world and must accomplish the goal you are given.
Every turn you see what is in front of you and the available actions. Reply with your reasoning,
then one line: Action: <one of the available actions>

Example:
Observation: Your goal: go to the red ball
In front of you in this room, you can see several objects: There is a red ball 1 2 steps in front of you and 1 steps to your left. ...
Available actions: ["turn left", "turn right", "move forward", "go to red ball 1", "pickup red ball 1", "check available actions"]
Thought: The red ball is visible and reachable, so I go straight to it.
Action: go to red ball 1"""


def _held_out_split() -> Split:
    categories = held_out_split()
    ids = sorted(t for ids in categories.values() for t in ids)
    return Split(
        ids, categories, "90 tasks: 5 seeds (10000-10004) of each level of the reference's test categories"
    )


def _train_split() -> Split:
    return Split(
        range(TRAIN_SEEDS * NUM_LEVELS),
        train_categories(),
        "seeds 0-9999 of all 40 levels (task ids 0-399999), categorised by level",
        category_fn=lambda t: short_name(level_of(t)),
    )


@hookimpl
def agentgym_envs():
    return [
        EnvSpec(
            name="babyai",
            gym_name="BabyAI",
            factory="agentgym_babyai.env:BabyAIEnv",
            expert="agentgym_babyai.expert:Expert",
            description="BabyAI grid-world levels (minigrid) with text observations and macro actions.",
            splits={"train": _train_split(), "test": _held_out_split()},
            # the reference's mapping: every id is a level (id % 40) and a seed (id // 40)
            open_task_ids=True,
            default_max_turns=20,
            action_parser="react",
            prompt=PROMPT,
            reward_range=(0.0, 1.0),
            state_key="agentgym_babyai.env:state_key",
            # measured: < 0.2 MB per instance after 8 levels; a step is ~0.1 ms of Python
            cost=InstanceCost(memory_mb=1.0, cheap_step=True),
        )
    ]
