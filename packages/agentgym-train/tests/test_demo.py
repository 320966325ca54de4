"""The embedded demo's set-up, read from the babyai env's spec."""

from __future__ import annotations

from collections import Counter

from agentgym_train.demo import demo_config, demo_ids, demo_levels
from agentgym_train.tasks import category_ids, get_split

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


def test_the_demo_levels_read_from_the_spec_are_the_listed_ones_in_order():
    # the order matters: train_categories is part of a run's settings, checked when it resumes
    assert demo_levels() == LISTED
    assert demo_config().train_categories == LISTED
    assert category_ids("babyai", "train", demo_levels(), 300) == category_ids("babyai", "train", LISTED, 300)


def test_overrides_replace_the_demo_levels():
    assert demo_config(train_categories=["Pickup"]).train_categories == ["Pickup"]


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
