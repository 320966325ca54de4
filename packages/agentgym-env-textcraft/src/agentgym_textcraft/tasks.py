"""Task ids, goals' depths and splits. Import-free (no recipe files read), so the plugin stays cheap.

``goal = goals[task_id]`` where ``goals`` is ``RecipeBook.goals``: every crafted item, by depth,
ties by item id. Because goals are sorted by depth, a goal's depth follows from its index and the
number of goals per depth, kept here as ``DEPTH_COUNTS`` (the tests check it against the recipe
data). Task ids are ``0..NUM_GOALS-1``; a reset to another id is refused (``UnknownTaskError``),
never wrapped around onto a goal that another id already names.
"""

from __future__ import annotations

import random

#: Goals per crafting depth, in goal order (depth 1 first).
DEPTH_COUNTS: dict[int, int] = {1: 148, 2: 278, 3: 112, 4: 10}
NUM_GOALS = sum(DEPTH_COUNTS.values())
#: The reference's test set: 100 goals, by depth.
TEST_PER_DEPTH: dict[int, int] = {1: 31, 2: 41, 3: 25, 4: 3}


def depth_range(depth: int) -> range:
    """The task ids (below ``NUM_GOALS``) whose goals have this depth."""
    start = sum(n for d, n in DEPTH_COUNTS.items() if d < depth)
    return range(start, start + DEPTH_COUNTS.get(depth, 0))


def depth_of(task_id: int) -> int:
    if not 0 <= task_id < NUM_GOALS:
        raise ValueError(f"task id {task_id} is not in 0..{NUM_GOALS - 1}")
    for depth in DEPTH_COUNTS:
        if task_id in depth_range(depth):
            return depth
    raise AssertionError("unreachable: DEPTH_COUNTS covers every index")


def category_of(task_id: int) -> str:
    return f"depth {depth_of(task_id)}"


def held_out_categories() -> dict[str, list[int]]:
    """The test ids per category: a sample of each depth's ids, drawn with a seed named for it."""
    return {
        f"depth {d}": sorted(random.Random(f"textcraft/test/depth {d}").sample(depth_range(d), k))
        for d, k in TEST_PER_DEPTH.items()
    }


def train_categories() -> dict[str, list[int]]:
    """Every other id below ``NUM_GOALS``, per depth: disjoint goals from the test split's."""
    test = {t for ids in held_out_categories().values() for t in ids}
    return {f"depth {d}": [t for t in depth_range(d) if t not in test] for d in DEPTH_COUNTS}
