"""The embedded demo's set-up, read from the babyai env's spec, and its place below the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import agentgym_train
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


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_nothing_below_the_cli_imports_it():
    """Only the plugin (which registers the commands) and the CLI's own modules import the CLI."""
    root = Path(agentgym_train.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parent.name != "cli" and path.name != "plugin.py"
        if any(
            m == "agentgym_train.cli" or m.startswith("agentgym_train.cli.") for m in _imported_modules(path)
        )
    ]
    assert offenders == []
    assert "agentgym_train.cli" in _imported_modules(root / "plugin.py")  # the check sees imports
