"""The env through its text actions: observations, tolerance, messages, rewards, the expert."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys

import httpx
import pytest
from agentgym_textcraft import tasks
from agentgym_textcraft.actions import ActionError, Craft, Get, Inventory, parse
from agentgym_textcraft.expert import plan

import agentgym
from agentgym.errors import UnknownTaskError
from agentgym.server.background import serve_in_thread
from agentgym.testing import run_expert

SPEC = agentgym.env_specs()["textcraft"]


@pytest.fixture
def env():
    e = agentgym.make("textcraft")
    yield e
    e.close()


def task_of(env, goal: str) -> int:
    return env.book.goals.index(goal)


def start(env, goal: str) -> str:
    obs, _ = env.reset(options={"task_id": task_of(env, goal)})
    return obs


def act(env, action: str) -> tuple[str, bool]:
    obs, _, _, _, info = env.step(action)
    return obs, info["valid_action"]


def test_observation_lists_the_tree_and_distractors_then_the_goal(env):
    obs, info = env.reset(options={"task_id": task_of(env, "minecraft:lectern")})
    head, goal = obs.split("\n\n")
    assert goal == "Goal: craft lectern." and info["goal"] == "lectern" and info["depth"] == 4
    lines = head.split("\n")
    assert lines[0] == "Crafting commands:"
    tree, _ = env.book.commands("minecraft:lectern")
    assert set(tree) <= set(lines[1:])
    assert {
        "craft 1 lectern using 4 wooden slabs, 1 bookshelf",
        "craft 1 bookshelf using 6 planks, 3 book",
        "craft 4 oak planks using 1 oak logs",
    } <= set(tree)
    assert len(lines) - 1 - len(tree) == 10  # distractors
    assert len(set(lines)) == len(lines)


def test_observations_are_deterministic_per_task_id(env):
    other = agentgym.make("textcraft")
    for t in (0, 17, 300, 547):
        assert env.reset(options={"task_id": t}) == other.reset(options={"task_id": t})


@pytest.mark.parametrize("task_id", [tasks.NUM_GOALS, tasks.NUM_GOALS + 17, 10**12])
def test_ids_past_the_last_goal_are_refused_not_wrapped(env, task_id):
    env.reset(options={"task_id": 5})
    message = f"unknown task id {task_id} for textcraft: valid 0..547 (train 448 ids, test 100 ids)"
    with pytest.raises(UnknownTaskError) as exc:
        env.reset(options={"task_id": task_id})
    assert str(exc.value) == message and isinstance(exc.value, ValueError)
    assert (exc.value.code, exc.value.status) == ("unknown_task", 422)
    assert env.task_id == 5 and env.step("inventory")[4]["valid_action"]  # the episode goes on
    with pytest.raises(ValueError, match="not in 0..547"):
        tasks.category_of(task_id)


def test_its_original_clients_reset_of_an_unknown_task_is_a_json_error_and_keeps_the_session():
    """AgentGym's TextCraft client names the task ``data_idx``; the refusal over v1 is the kit's."""
    with serve_in_thread(["textcraft"]) as url, httpx.Client(base_url=url, timeout=60) as c:
        env_id = c.post("/create").json()["id"]
        r = c.post("/reset", json={"id": env_id, "data_idx": 548})
        assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_task", r.text
        assert r.json()["error"]["message"].startswith("unknown task id 548 for textcraft: valid 0..547")
        assert c.post("/reset", json={"id": env_id, "data_idx": 547}).status_code == 200
        assert c.post("/step", json={"id": env_id, "action": "inventory"}).status_code == 200


def test_observations_are_the_same_in_every_process():
    code = (
        "import agentgym; e = agentgym.make('textcraft');"
        "print(repr([e.reset(options={'task_id': t})[0] for t in (5, 300, 541)]))"
    )
    outs = set()
    for seed in ("0", "1", "random"):
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout)
    assert len(outs) == 1


def test_every_observation_uses_human_names(env):
    for t in range(tasks.NUM_GOALS):
        obs, _ = env.reset(options={"task_id": t})
        assert "minecraft" not in obs and "_" not in obs and "#" not in obs, obs


def test_parse_forms_and_tolerance():
    assert parse("  Inventory. ") == Inventory() and parse("check inventory") == Inventory()
    assert parse("GET 2 Oak Logs.") == Get(2, "oak logs")
    assert parse("get oak log") == Get(1, "oak log")
    assert parse("`craft 4 minecraft:oak_planks using 1 minecraft:oak_log`") == Craft(
        4, "minecraft:oak_planks", ((1, "minecraft:oak_log"),)
    )
    assert parse("craft  1 wooden pickaxe   using 2 stick , 3x planks") == Craft(
        1, "wooden pickaxe", ((2, "stick"), (3, "planks"))
    )
    assert parse("craft torch from 1 stick and 1 coal") == Craft(None, "torch", ((1, "stick"), (1, "coal")))
    assert parse("craft x using 1 flint and steel", lambda n: n == "flint and steel") == Craft(
        None, "x", ((1, "flint and steel"),)
    )
    for bad, says in [
        ("fly away", "Unknown action"),
        ("craft a stick", "names its ingredients"),
        ("get 0 stick", "1 or more"),
    ]:
        with pytest.raises(ActionError, match=says):
            parse(bad)


def test_actions_tolerate_case_plurals_ids_and_periods(env):
    start(env, "minecraft:wooden_pickaxe")
    steps = [
        ("GET 2 Oak Logs.", "Got 2 oak log"),
        ("craft 8 minecraft:oak_planks using 2 minecraft:oak_log", "Crafted 8 oak planks"),
        ("Craft   4 Sticks using 2 Planks.", "Crafted 4 stick"),
        ("inventory", "Inventory: [oak planks] (6) [stick] (4)"),
    ]
    for action, expected in steps:
        obs, valid = act(env, action)
        assert valid and obs == expected, (action, obs)
    obs, reward, terminated, _, info = env.step("craft 1 wooden pickaxe using 2 stick, 3 oak plank")
    assert obs == "Crafted 1 wooden pickaxe" and reward == 1.0 and terminated and info["success"]


def test_result_counts_and_multiples(env):
    start(env, "minecraft:crafting_table")
    act(env, "get 3 oak log")
    obs, valid = act(env, "craft 1 oak planks using 1 oak log")
    assert not valid and "one craft makes 4 oak planks, so ask for a multiple of 4, not 1" in obs
    assert "craft 4 oak planks using 1 oak logs" in obs
    obs, valid = act(env, "craft 8 oak planks using 1 oak log")
    assert not valid and "not the same multiple" in obs
    obs, valid = act(env, "craft oak planks using 2 oak log")  # the result count may be left out
    assert valid and obs == "Crafted 8 oak planks"
    obs, valid = act(env, "craft 4 planks using 1 oak log")  # a kind, when one member's recipe fits
    assert valid and obs == "Crafted 4 oak planks"
    assert env.inventory.counts == {"minecraft:oak_planks": 12}


def test_any_member_of_a_tag_fills_it_even_mixed(env):
    start(env, "minecraft:crafting_table")
    for action in (
        "get 1 oak log",
        "get 1 birch log",
        "craft 4 oak planks using 1 oak log",
        "craft 4 birch planks using 1 birch logs",
    ):
        assert act(env, action)[1], action
    obs, _, terminated, _, _ = env.step("craft 1 crafting table using 2 oak planks, 2 birch planks")
    assert obs == "Crafted 1 crafting table" and terminated
    assert env.inventory.counts == {
        "minecraft:oak_planks": 2,
        "minecraft:birch_planks": 2,
        "minecraft:crafting_table": 1,
    }
    start(env, "minecraft:crafting_table")
    for action in (
        "get 1 oak log",
        "get 1 birch log",
        "craft 4 oak planks using 1 oak log",
        "craft 4 birch planks using 1 birch log",
    ):
        act(env, action)
    obs, _, terminated, _, _ = env.step("craft 1 crafting table using 4 planks")  # the kind itself
    assert terminated and env.inventory.counts == {"minecraft:birch_planks": 4, "minecraft:crafting_table": 1}


def test_either_or_ingredients(env):
    start(env, "minecraft:torch")
    for action in ("get 1 charcoal", "get 1 bamboo", "get 1 bamboo", "craft 1 stick using 2 bamboo"):
        assert act(env, action)[1], action
    obs, _, terminated, _, _ = env.step("craft 4 torch using 1 stick and 1 charcoal")  # shown as coal
    assert obs == "Crafted 4 torch" and terminated


@pytest.mark.parametrize(
    ("action", "says"),
    [
        (
            "craft 4 stick using 2 oak logs",
            "There is no recipe for stick from oak logs. Crafting commands for stick: craft 4 stick using 2 planks",
        ),
        (
            "craft 1 wooden pickaxe using 2 stick, 3 planks",
            "not enough ingredients: it needs 2 stick and you have 0; it needs 3 planks and you have 1 (1 oak planks)",
        ),
        (
            "get 1 stick",
            "stick cannot be got: it is not a base item, it is crafted. Crafting commands for stick:",
        ),
        ("get 2 planks", "planks cannot be got: every kind of it is crafted (oak planks, spruce planks"),
        (
            "craft 4 oak log using 1 oak planks",
            "oak log is not crafted: it is a base item. Get it with: get 1 oak log",
        ),
        ("get 1 oak plonks", "there is no item called 'oak plonks'. Did you mean: oak planks"),
        ("craft 1 minecraft:flying_machine using 1 stick", "there is no item called 'flying machine'"),
        ("craft 2 planks using 1 stick", "planks is a kind of item: craft one of them by name"),
        ("dance", "Unknown action. Valid actions: craft <n> <item> using"),
    ],
)
def test_invalid_actions_explain_themselves_and_change_nothing(env, action, says):
    start(env, "minecraft:wooden_pickaxe")
    env.step("get 1 oak log")
    env.step("craft 4 oak planks using 1 oak log")
    env.step("craft 4 stick using 2 oak planks")  # 4 stick... then lose them:
    env.inventory.counts = {"minecraft:oak_planks": 1}
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("Invalid action: ") and says in obs, obs
    assert info["valid_action"] is False and reward == 0 and not terminated and not truncated
    assert env.inventory.counts == {"minecraft:oak_planks": 1}
    assert "minecraft" not in obs and "_" not in obs


def test_get_of_a_kind_gives_its_plain_member(env):
    start(env, "minecraft:oak_planks")
    assert act(env, "get 1 oak logs") == ("Got 1 oak log", True)
    assert act(env, "get 2 stone crafting materials") == ("Got 2 cobblestone", True)


def test_reward_only_for_the_goal(env):
    start(env, "minecraft:stick")
    _, r1, t1, _, _ = env.step("get 1 oak log")
    _, r2, t2, _, _ = env.step("craft 4 oak planks using 1 oak log")
    _, r3, t3, _, info = env.step("craft 4 stick using 2 oak planks")
    assert (r1, r2, r3) == (0.0, 0.0, 1.0) and (t1, t2, t3) == (False, False, True)
    assert info["success"] and info["raw_score"] == 1.0 and info["category"] == "depth 1"


def test_expert_batches_shared_ingredients_and_uses_what_is_held(env):
    book = env.book
    # Planks for the slabs and the bookshelf: one get, one batched craft.
    assert plan(book, "minecraft:lectern")[:3] == [
        "get 3 oak log",
        "craft 12 oak planks using 3 oak log",
        "craft 6 oak slab using 3 oak planks",
    ]
    assert plan(book, "minecraft:wooden_pickaxe", {"minecraft:birch_planks": 1, "minecraft:stick": 1}) == [
        "get 2 bamboo",  # sticks from bamboo: the shallowest recipe
        "craft 1 stick using 2 bamboo",
        "get 1 birch log",  # the kind of planks already held
        "craft 4 birch planks using 1 birch log",
        "craft 1 wooden pickaxe using 2 stick, 3 birch planks",
    ]
    assert plan(book, "minecraft:stick", {"minecraft:stick": 1}) == []


# The test split, and a seeded sample of train ids; `python -m bench.speed.textcraft` runs every goal.
SAMPLE = sorted(SPEC.splits["test"].task_ids) + random.Random(0).sample(
    list(SPEC.splits["train"].task_ids), 100
)


def test_expert_solves_a_sample_with_valid_actions_only(env):
    failures = []
    for task_id in SAMPLE:
        actions, records, success = run_expert(SPEC, env, task_id, SPEC.default_max_turns)
        if not success or not all(r[4]["valid_action"] for r in records):
            failures.append((task_id, env.goal, actions))
    assert not failures, failures[:3]


def test_play_in_the_terminal():
    r = subprocess.run(
        [sys.executable, "-m", "agentgym", "play", "textcraft", "--task", "3"],
        input="inventory\nget 1 birch logs\ncraft 4 birch planks using 1 birch log\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = re.sub(r"\s+", " ", r.stdout.replace("│", " "))
    assert "Goal: craft birch planks." in out and "Got 1 birch log" in out
    assert "Crafted 4 birch planks" in out and "success True" in out
