"""Task ids and splits: pure tables, no Java needed (the live simulator is compared in test_env.py)."""

from __future__ import annotations

import pytest
from agentgym_sciworld.tasks import (
    ALL_TASKS,
    CATEGORIES,
    CATEGORY_OF,
    EXCLUDED,
    NUM_TASK_IDS,
    TASKS,
    category_of,
    held_out_categories,
    task_id_of,
    task_of,
    train_categories,
)

import agentgym

SPEC = agentgym.env_specs()["sciworld"]


def test_task_ids_are_the_flat_list_of_task_variations_without_the_excluded_tasks():
    # The reference: for (id, name) in the simulator's task order, unless id is excluded, every
    # variation 0..max-1 in turn.
    expected = [(t.name, v) for t in ALL_TASKS if t.sim_id not in EXCLUDED for v in range(t.variations)]
    assert NUM_TASK_IDS == len(expected) == 4639
    assert [(task_of(i)[0].name, task_of(i)[1]) for i in range(NUM_TASK_IDS)] == expected
    assert task_of(0)[0].name == "boil" and task_of(0)[1] == 0
    assert task_of(29)[1] == 29 and task_of(30)[0].name == "melt"
    last, variation = task_of(NUM_TASK_IDS - 1)
    assert last.name == "identify-life-stages-2" and variation == 9
    # Chemistry follows Classification directly: grow-plant/grow-fruit (5-1, 5-2) are not there.
    assert task_of(task_id_of("find-animal", 299) + 1)[0].name == "chemistry-mix"
    assert task_id_of("find-animal", 299) + 1 == task_id_of("chemistry-mix", 0)


def test_excluded_tasks_are_absent():
    assert EXCLUDED == {"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"}
    names = {t.name for t in TASKS}
    for task in ALL_TASKS:
        assert (task.name in names) == (task.sim_id not in EXCLUDED)
    for name in ("grow-plant", "inclined-plane-determine-angle", "mendelian-genetics-unknown-plant"):
        with pytest.raises(ValueError, match="unknown or excluded"):
            task_id_of(name, 0)


@pytest.mark.parametrize("bad", [-1, NUM_TASK_IDS, 10**9])
def test_out_of_range_ids_are_value_errors(bad):
    with pytest.raises(ValueError, match="task_id must be in"):
        task_of(bad)


def test_every_included_task_has_one_category():
    assert set(CATEGORY_OF) == {t.name for t in TASKS}
    assert sum(len(names) for names in CATEGORIES.values()) == len(TASKS)
    assert category_of(task_id_of("use-thermometer", 3)) == "Measure"
    assert category_of(task_id_of("test-conductivity-of-unknown-substances", 3)) == "Test-Conductivity"
    assert category_of(task_id_of("chemistry-mix-paint-tertiary-color", 0)) == "Chem-Mix"


def test_test_split_sizes_and_categories():
    test = SPEC.splits["test"]
    assert len(test) == 200 == len(set(test.task_ids))
    assert test.category_counts() == {
        "Measure": 53,
        "Test-Conductivity": 83,
        "Find": 44,
        "Chem-Mix": 5,
        "Lifespan": 15,
    }
    for category, ids in test.categories.items():
        for task_id in ids:
            task, variation = task_of(task_id)
            assert CATEGORY_OF[task.name] == category
            assert variation in task.test_variations  # only the simulator's own test variations
            assert test.category_of(task_id) == category
    # Every task of each category is represented.
    drawn = {task_of(t)[0].name for t in test.task_ids}
    assert drawn == {n for c in test.categories for n in CATEGORIES[c]}
    assert held_out_categories() == held_out_categories()  # seeded: the same ids every time


def test_train_split_is_the_simulators_train_variations_and_disjoint_from_test():
    train, test = SPEC.splits["train"], SPEC.splits["test"]
    assert not set(train.task_ids) & set(test.task_ids)
    assert len(train) == sum(t.train for t in TASKS) == 2312
    for task_id in train.task_ids:
        task, variation = task_of(task_id)
        assert variation < task.train
    assert set(train.categories) == set(CATEGORIES)
    assert train_categories()["Matter"][:3] == [0, 1, 2]


def test_spec_declares_java():
    assert SPEC.requires == ("java",)
    assert SPEC.to_json()["requires"] == ["java"]


def test_the_splits_hold_every_variation_once_and_an_id_past_the_last_is_refused():
    from agentgym_sciworld.env import SciWorldEnv

    from agentgym.errors import UnknownTaskError

    held = sorted(t for split in SPEC.splits.values() for t in split.task_ids)
    assert held == list(range(NUM_TASK_IDS))  # the reference's ids: every variation is a task
    assert set(SPEC.splits["other"].task_ids).isdisjoint({*SPEC.splits["train"], *SPEC.splits["test"]})
    env = SciWorldEnv.__new__(SciWorldEnv)  # no JVM: the check reads the spec only
    env.agentgym_spec = SPEC
    env.check_task_id(SPEC.splits["other"].task_ids[0])  # a dev variation
    env.check_task_id(NUM_TASK_IDS - 1)
    with pytest.raises(UnknownTaskError) as exc:
        env.check_task_id(NUM_TASK_IDS)
    assert str(exc.value).startswith(
        f"unknown task id {NUM_TASK_IDS} for sciworld: valid 0..{NUM_TASK_IDS - 1}"
    )
