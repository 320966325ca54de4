"""The plugin module: declares the ``textcraft`` env. Import-light: no recipe file is read until an
env is made."""

from __future__ import annotations

from agentgym import EnvSpec, InstanceCost, Split, hookimpl
from agentgym_textcraft.tasks import NUM_GOALS, TEST_PER_DEPTH, held_out_categories, train_categories

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"

PROMPT = """You are given a few useful crafting recipes to craft items in Minecraft, and a goal item.
Get base items, craft with the commands given, and check your inventory, one action per turn.
Reply with your reasoning, then one line: Action: <action>

Example:
Observation: Crafting commands:
craft 4 stick using 2 planks
craft 4 oak planks using 1 oak logs
craft 1 wooden pickaxe using 2 stick, 3 planks

Goal: craft wooden pickaxe.
Thought: I need 2 sticks and 3 planks; sticks are made of planks too, so I need 5 planks, which take 2 oak logs.
Action: get 2 oak logs"""


def _split(categories: dict[str, list[int]], description: str) -> Split:
    ids = sorted(t for ids in categories.values() for t in ids)
    return Split(ids, categories, description)


@hookimpl
def agentgym_envs():
    counts = "/".join(str(n) for n in TEST_PER_DEPTH.values())
    return [
        EnvSpec(
            name="textcraft",
            gym_name="TextCraft",
            factory="agentgym_textcraft.env:TextCraftEnv",
            expert="agentgym_textcraft.expert:CraftExpert",
            description="Craft Minecraft items from given crafting commands (ADaPT's TextCraft recipes).",
            splits={
                "train": _split(
                    train_categories(), f"the other goals: ids 0-{NUM_GOALS - 1} less the test ids, by depth"
                ),
                "test": _split(
                    held_out_categories(),
                    f"100 goals of depth 1/2/3/4 = {counts}: a seeded sample of each depth's ids",
                ),
            },
            default_max_turns=30,
            action_parser="react",
            prompt=PROMPT,
            reward_range=(0.0, 1.0),
            # measured: the recipe book is shared, ~0 MB per instance; a step is ~20 µs of Python
            cost=InstanceCost(memory_mb=1.0, cheap_step=True),
        )
    ]
