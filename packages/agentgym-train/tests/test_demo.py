"""The tiny recipe's set-up (the embedded default), read from the babyai env's spec."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from agentgym_train.recipes import recipe_path
from agentgym_train.recipes.runner import load_recipe, rl_config
from agentgym_train.rollout.tasks import category_ids, demo_ids, demo_levels, get_split

# The demo's levels as the demo listed them before it read them from the spec: BabyAI's train
# levels of the families its test split covers, in BabyAI's level order.
LISTED = [
    "GoToRedBallGrey",
    "GoToRedBall",
    "GoToRedBallNoDists",
    "GoToObjS6",
    "GoToLocalS8N7",
    "GoToObjMazeS7",
    "GoToImpUnlock",
    "GoToSeqS5R2",
    "GoToRedBlueBall",
    "GoToDoor",
    "GoToObjDoor",
    "Pickup",
    "UnblockPickup",
    "PickupLoc",
    "ActionObjDoor",
    "FindObjS7",
    "OneRoomS20",
    "SynthLoc",
]


def demo_config(*overrides: str):
    """The tiny recipe's RL stage (seed 0), with ``KEY=VALUE`` overrides."""
    return rl_config(load_recipe(recipe_path("tiny"), overrides), Path("runs"), Path("sft"), 0)


def test_the_demo_levels_read_from_the_spec_are_the_listed_ones_in_order():
    # the order matters: train_categories is part of a run's settings, checked when it resumes
    assert demo_levels() == LISTED
    assert demo_config().train_categories == LISTED
    assert category_ids("babyai", "train", demo_levels(), 300) == category_ids("babyai", "train", LISTED, 300)


def test_overrides_replace_the_demo_levels():
    assert demo_config("train_categories=[Pickup]").train_categories == ["Pickup"]


def test_demonstrations_take_each_category_in_turn():
    # BabyAI numbers its tasks seed * 40 + level, so in turn is the ascending order: the recipe's
    # BabyAI demonstrations are the ones it had before it took other envs
    assert demo_ids("babyai", 300) == category_ids("babyai", "train", LISTED, 300)
    # TextCraft's ids are sorted by depth: the first 100 would all be depth 1
    train = get_split("textcraft", "train").categories
    ids = demo_ids("textcraft", 100)
    depths = Counter(next(c for c, members in train.items() if t in members) for t in ids)
    assert depths == {"depth 1": 31, "depth 2": 31, "depth 3": 31, "depth 4": 7}  # depth 4 has 7 train goals
    assert len(set(ids)) == 100 and not set(ids) & set(get_split("textcraft", "test").task_ids)


def test_the_tiny_recipe_runs_every_phase_through_the_one_runner(tmp_path, recipe_run):
    """``agentgym train --demo tiny`` (what ``agentgym train`` runs with no arguments) on a few tasks:
    the tiny model built in the run, demonstrations, SFT, the SFT model's scores, GRPO, the RL
    model's scores for each RL seed, and the table."""
    overrides = ["tiny.tasks=5", "demos=6", "sft.epochs=1", "tasks_per_step=1", "seeds=[0, 1]"]
    out, result = recipe_run(tmp_path, "tiny", *overrides)
    run = tmp_path / result["run"]
    assert (run / "tiny" / "config.json").is_file() and Path(result["model"]) == Path("runs/demo-tiny/tiny")
    assert json.loads((run / "tiny" / "agentgym_tiny.json").read_text())["tasks_per_env"] == 5
    assert [s["seed"] for s in result["seeds"]] == [0, 1] and result["demos"] >= 4
    assert all(s["steps"] == 1 and s["greedy_gain"]["tasks"] == 2 for s in result["seeds"])
    assert {"model_s", "collect_s", "sft_s", "sft_sampled_eval_s", "rl_seed1_greedy_eval_s"} <= set(
        result["times_s"]
    )
    assert "babyai test split" in out.stdout and "RL mean" in out.stdout and "epoch mean" in out.stdout
