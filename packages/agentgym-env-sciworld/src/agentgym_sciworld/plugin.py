"""The plugin module: declares the ``sciworld`` env. Import-light: no ``scienceworld``, py4j or JVM
until an env is made."""

from __future__ import annotations

from agentgym import EnvSpec, InstanceCost, Split, hookimpl
from agentgym_sciworld.tasks import TEST_SIZES, held_out_categories, other_categories, train_categories

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"

PROMPT = """You are an agent in ScienceWorld, a simulated house where you carry out elementary science tasks: \
measure temperatures, test conductivity, find living things, mix chemicals, compare life spans. Every turn you see \
what your last action did. Reply with your reasoning, then one line: Action: <action>

Example:
Observation: Your task is to find a(n) animal. First, focus on the thing. Then, move it to the red box in the kitchen.

This room is called the hallway. In it, you see: ...
You also see:
	A door to the greenhouse (that is open)
	A door to the kitchen (that is open)
Thought: Animals are likely outside; the greenhouse may lead there.
Action: go to greenhouse"""


def _split(categories: dict[str, list[int]], description: str) -> Split:
    ids = sorted(t for ids in categories.values() for t in ids)
    return Split(ids, categories, description)


@hookimpl
def agentgym_envs():
    sizes = ", ".join(f"{c} {n}" for c, n in TEST_SIZES.items())
    return [
        EnvSpec(
            name="sciworld",
            gym_name="SciWorld",
            factory="agentgym_sciworld.env:SciWorldEnv",
            expert="agentgym_sciworld.expert:GoldPathExpert",
            description=(
                "ScienceWorld science-lab tasks on the real simulator (a Scala program through py4j: "
                "needs a Java runtime; one JVM per env instance)."
            ),
            splits={
                "train": _split(
                    train_categories(),
                    "the simulator's own train variations of every included task, by category",
                ),
                "test": _split(
                    held_out_categories(),
                    f"200 of the simulator's test variations ({sizes}), seeded per task",
                ),
                "other": _split(
                    other_categories(),
                    "every other variation (the simulator's dev ones, and the test ones not drawn): "
                    "tasks outside train and test",
                ),
            },
            default_max_turns=30,
            action_parser="react",
            prompt=PROMPT,
            reward_range=(0.0, 1.0),
            # measured: 0.45 GB resident per JVM (-Xmx1g, serial GC), a core while it steps or
            # compiles, 1-4 s to start; a reset reloads any task exactly in the same JVM
            cost=InstanceCost(memory_mb=450.0, cpu=1.0, startup_s=2.0, reusable=True),
            requires=("java",),
            compat="agentgym_sciworld.compat:reply",
        )
    ]
