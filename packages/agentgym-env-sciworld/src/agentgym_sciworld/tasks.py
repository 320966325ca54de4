"""Task ids, categories and splits. Import-free (no JVM, not even ``scienceworld``), so the plugin
module stays cheap.

Task ids mean what they mean in AgentGym's SciWorld server: the flat list of (task, variation)
over the simulator's tasks in its own order (``scienceworld``'s ``tasks.json``: 1-1 boil, 1-2 melt,
..., 10-2), every variation of a task in turn, leaving out the tasks 5-1, 5-2 (grow a plant/fruit),
9-1, 9-2, 9-3 (inclined planes) and 10-1, 10-2 (Mendelian genetics). A published AgentGym task-id
list therefore names the same tasks here.

``TASKS`` is a copy of the simulator's table (ScienceWorld 1.2.3: names, variation counts, and the
sizes of its own train/dev/test variation ranges, which are contiguous in that order); the tests
compare it with the live simulator.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    sim_id: str  # the simulator's id, e.g. "4-1"
    name: str  # the name ``load`` takes, e.g. "find-living-thing"
    variations: int
    train: int  # variations 0..train-1 are the simulator's train set
    dev: int  # then ``dev`` dev variations; the rest are its test set

    @property
    def test_variations(self) -> range:
        return range(self.train + self.dev, self.variations)


# (simulator id, name, variations, train variations, dev variations), in the simulator's order.
ALL_TASKS: tuple[Task, ...] = tuple(
    Task(*row)
    for row in (
        ("1-1", "boil", 30, 14, 7),
        ("1-2", "melt", 30, 14, 7),
        ("1-3", "freeze", 30, 14, 7),
        ("1-4", "change-the-state-of-matter-of", 30, 14, 7),
        ("2-1", "use-thermometer", 540, 270, 135),
        ("2-2", "measure-melting-point-known-substance", 436, 218, 109),
        ("2-3", "measure-melting-point-unknown-substance", 300, 150, 75),
        ("3-1", "power-component", 20, 10, 5),
        ("3-2", "power-component-renewable-vs-nonrenewable-energy", 20, 10, 5),
        ("3-3", "test-conductivity", 900, 450, 225),
        ("3-4", "test-conductivity-of-unknown-substances", 600, 300, 150),
        ("4-1", "find-living-thing", 300, 150, 75),
        ("4-2", "find-non-living-thing", 300, 150, 75),
        ("4-3", "find-plant", 300, 150, 75),
        ("4-4", "find-animal", 300, 150, 75),
        ("5-1", "grow-plant", 126, 62, 31),
        ("5-2", "grow-fruit", 126, 62, 31),
        ("6-1", "chemistry-mix", 32, 16, 8),
        ("6-2", "chemistry-mix-paint-secondary-color", 36, 18, 9),
        ("6-3", "chemistry-mix-paint-tertiary-color", 36, 18, 9),
        ("7-1", "lifespan-longest-lived", 125, 62, 31),
        ("7-2", "lifespan-shortest-lived", 125, 62, 31),
        ("7-3", "lifespan-longest-lived-then-shortest-lived", 125, 62, 31),
        ("8-1", "identify-life-stages-1", 14, 6, 3),
        ("8-2", "identify-life-stages-2", 10, 4, 2),
        ("9-1", "inclined-plane-determine-angle", 168, 84, 42),
        ("9-2", "inclined-plane-friction-named-surfaces", 1386, 692, 346),
        ("9-3", "inclined-plane-friction-unnamed-surfaces", 162, 80, 40),
        ("10-1", "mendelian-genetics-known-plant", 120, 60, 30),
        ("10-2", "mendelian-genetics-unknown-plant", 480, 240, 120),
    )
)

# Left out of the reference's id list; left out here too, so that ids name the same tasks.
EXCLUDED = frozenset({"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"})
TASKS: tuple[Task, ...] = tuple(t for t in ALL_TASKS if t.sim_id not in EXCLUDED)

# First task id of each task; task ids of one task are contiguous, variation by variation.
_OFFSETS: list[int] = []
_total = 0
for _task in TASKS:
    _OFFSETS.append(_total)
    _total += _task.variations
NUM_TASK_IDS = _total

# Every task name -> a category. The five the reference's test set reports (Measure, Test-Conductivity,
# Find, Chem-Mix, Lifespan) group the simulator's topics as its task table does: Measure is topic
# "Measurement" (use a thermometer, measure a melting point of a known/unknown substance). The other
# three name the remaining topics of the included tasks, for the train split.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "Matter": ("boil", "melt", "freeze", "change-the-state-of-matter-of"),
    "Measure": (
        "use-thermometer",
        "measure-melting-point-known-substance",
        "measure-melting-point-unknown-substance",
    ),
    "Circuit": ("power-component", "power-component-renewable-vs-nonrenewable-energy"),
    "Test-Conductivity": ("test-conductivity", "test-conductivity-of-unknown-substances"),
    "Find": ("find-living-thing", "find-non-living-thing", "find-plant", "find-animal"),
    "Chem-Mix": (
        "chemistry-mix",
        "chemistry-mix-paint-secondary-color",
        "chemistry-mix-paint-tertiary-color",
    ),
    "Lifespan": (
        "lifespan-longest-lived",
        "lifespan-shortest-lived",
        "lifespan-longest-lived-then-shortest-lived",
    ),
    "Life-Stages": ("identify-life-stages-1", "identify-life-stages-2"),
}
CATEGORY_OF: dict[str, str] = {name: c for c, names in CATEGORIES.items() for name in names}

# The reference's test set: 200 tasks, per category.
TEST_SIZES: dict[str, int] = {
    "Measure": 53,
    "Test-Conductivity": 83,
    "Find": 44,
    "Chem-Mix": 5,
    "Lifespan": 15,
}


def task_of(task_id: int) -> tuple[Task, int]:
    """``(task, variation)`` of a task id; ``ValueError`` outside ``0..NUM_TASK_IDS-1``."""
    if not 0 <= task_id < NUM_TASK_IDS:
        raise ValueError(f"task_id must be in 0..{NUM_TASK_IDS - 1}, got {task_id}")
    i = bisect.bisect_right(_OFFSETS, task_id) - 1
    return TASKS[i], task_id - _OFFSETS[i]


def task_id_of(name: str, variation: int) -> int:
    for task, offset in zip(TASKS, _OFFSETS, strict=True):
        if task.name == name:
            if not 0 <= variation < task.variations:
                raise ValueError(f"{name} has variations 0..{task.variations - 1}, got {variation}")
            return offset + variation
    raise ValueError(f"unknown or excluded task {name!r}")


def category_of(task_id: int) -> str:
    return CATEGORY_OF[task_of(task_id)[0].name]


def held_out_categories() -> dict[str, list[int]]:
    """The test split: ``TEST_SIZES[c]`` ids per category, drawn only from the simulator's own test
    variations, spread evenly over the category's tasks (the first tasks in simulator order take the
    remainder), each task's draw seeded by its name: the same ids on every machine."""
    out: dict[str, list[int]] = {}
    for category, size in TEST_SIZES.items():
        names = CATEGORIES[category]
        ids: list[int] = []
        for k, name in enumerate(names):
            task = next(t for t in TASKS if t.name == name)
            n = size // len(names) + (k < size % len(names))
            picks = random.Random(f"sciworld/test/{name}").sample(task.test_variations, n)
            ids.extend(task_id_of(name, v) for v in picks)
        out[category] = sorted(ids)
    return out


def train_categories() -> dict[str, list[int]]:
    """The train split: the simulator's own train variations of every included task, by category.
    Disjoint from the test split, which only draws test variations."""
    out: dict[str, list[int]] = {c: [] for c in CATEGORIES}
    for task, offset in zip(TASKS, _OFFSETS, strict=True):
        out[CATEGORY_OF[task.name]].extend(range(offset, offset + task.train))
    return out


def other_categories() -> dict[str, list[int]]:
    """Every other task id, by category: the simulator's dev variations and the test variations the
    test split did not draw. They are tasks (the reference's ids cover every variation), held out of
    both splits so that train and test stay what they are."""
    taken = {t for ids in (*train_categories().values(), *held_out_categories().values()) for t in ids}
    out: dict[str, list[int]] = {c: [] for c in CATEGORIES}
    for task_id in range(NUM_TASK_IDS):
        if task_id not in taken:
            out[category_of(task_id)].append(task_id)
    return out
