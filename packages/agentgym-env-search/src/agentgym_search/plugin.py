"""The plugin module: declares the ``search`` env, the built-in retrievers and the ``agentgym
search`` commands, and adds the specs of the package's own hooks (retrievers, data sets:
:mod:`agentgym_search.hookspecs`). Import-light: neither the corpus nor an index is read until an
env is made (the embedded default's split sizes come from ``data/meta.json``; a user's question
files are read here, to know their splits)."""

from __future__ import annotations

import pluggy

from agentgym import EnvSpec, InstanceCost, Split, hookimpl

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"

PROMPT = """Answer the question by searching a Wikipedia index. Search with <search> query </search>; \
the top passages come back inside <information> ... </information>. Give the final answer, a short \
phrase, as <answer> answer </answer>. One search or one answer per turn.

Example:
Question: What was the nationality of the director of the film Jaws?
<search> director of the film Jaws </search>
<information>Doc 1(Title: Jaws (film)) Jaws is a 1975 American thriller film directed by Steven Spielberg ...</information>
<search> Steven Spielberg nationality </search>
<information>Doc 1(Title: Steven Spielberg) Steven Allan Spielberg is an American filmmaker ...</information>
<answer> American </answer>"""


def _split(categories: dict[str, list[int]], description: str) -> Split:
    ids = sorted(t for ids in categories.values() for t in ids)
    return Split(ids, categories, description)


@hookimpl
def agentgym_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    from agentgym_search import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def agentgym_envs():
    from agentgym_search.data import configured_data

    data = configured_data()
    categories = data.categories()
    embedded = list(data.test) == ["embedded"]
    describe = (
        "questions generated from the Wikipedia leads, by kind and hop count"
        if embedded
        else "the question files in AGENTGYM_SEARCH_TEST / AGENTGYM_SEARCH_TRAIN, by 'dataset'"
    )
    return [
        EnvSpec(
            name="search",
            gym_name="Search",
            factory="agentgym_search.env:SearchEnv",
            expert="agentgym_search.expert:SearchExpert",
            compat="agentgym_search.compat:reply",
            description="Deep Search: answer questions by searching a Wikipedia index (Search-R1's actions).",
            splits={
                "test": _split(categories["test"], f"test {describe}"),
                "train": _split(categories["train"], f"train {describe}"),
            },
            default_max_turns=10,
            action_parser="tags",
            prompt=PROMPT,
            reward_range=(0.0, 1.0),
            # measured (README): an instance holds only its question; the corpus and the index are
            # shared by the process
            cost=InstanceCost(memory_mb=1.0),
        )
    ]


@hookimpl
def agentgym_retrievers():
    from agentgym_search.retrievers import BUILTIN

    return BUILTIN


@hookimpl
def agentgym_reward_transforms():
    from agentgym_search.rewards import answer_f1

    return {"answer_f1": answer_f1}


@hookimpl
def agentgym_cli(cli):
    from agentgym_search.cli import search

    cli.add_command(search)
