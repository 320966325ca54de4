"""The embedded demo's set-up, read from the babyai env's spec."""

from __future__ import annotations

from agentgym_train.demo import demo_config, demo_levels
from agentgym_train.tasks import category_ids

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
