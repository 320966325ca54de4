"""The plugin module: declares the ``webarena`` env and the ``agentgym webarena`` commands.
Import-light: Playwright, the browser and the sites start only when an env is made; the splits come
from the task configs (the bundled JSON, or ``$AGENTGYM_WEBARENA_TASKS``)."""

from __future__ import annotations

from agentgym import EnvSpec, InstanceCost, Split, hookimpl

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"

PROMPT = """You are an autonomous agent in a web browser, given an objective. Each turn you see the \
page as an accessibility tree where every element has an [id], the open tabs, the URL, the objective \
and your previous action. Think step by step, then give exactly one action in a ``` code block:
click [id], type [id] [text] [0|1], hover [id], press [keys], scroll [up|down], new_tab,
tab_focus [i], close_tab, goto [url], go_back, go_forward, stop [answer].
Type presses Enter after the text unless the last argument is 0. When the objective asks for
information, answer it with stop [answer]; when it asks you to do something, do it, then stop [].

Example:
OBJECTIVE: What is the price of the Aurora Desk Lamp?
[201] link 'Home & Kitchen'
Let's think step by step. The lamp is likely in Home & Kitchen. In summary, the next action I will
perform is ```click [201]```"""


@hookimpl
def agentgym_envs():
    from agentgym_webarena.tasks import category, configured_tasks, split_of

    tasks = configured_tasks()
    splits: dict[str, dict[str, list[int]]] = {}
    for i, config in enumerate(tasks):
        splits.setdefault(split_of(config), {}).setdefault(category(config), []).append(i)
    return [
        EnvSpec(
            name="webarena",
            gym_name="WebArena",
            factory="agentgym_webarena.env:WebArenaEnv",
            expert="agentgym_webarena.expert:WebArenaExpert",
            compat="agentgym_webarena.compat:reply",
            description="Web navigation in a real browser (Chromium), WebArena's tasks, observations and actions.",
            splits={
                name: Split(
                    sorted(i for ids in cats.values() for i in ids), cats, f"{name} tasks, by site/kind"
                )
                for name, cats in splits.items()
            },
            default_max_turns=15,
            action_parser="fenced",
            prompt=PROMPT,
            reward_range=(0.0, 1.0),
            requires=("chromium",),
            # measured (bench/speed/webarena.py): a browser context costs ~31 MB PSS (its renderer); 16
            # stepping sessions saturate 2 cores
            cost=InstanceCost(memory_mb=35.0, cpu=0.25, startup_s=0.2),
        )
    ]


@hookimpl
def agentgym_cli(cli):
    from agentgym_webarena.cli import webarena

    cli.add_command(webarena)
