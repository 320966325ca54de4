"""The recipe data: parsing real files, tags, base items, depths, goals, splits."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from agentgym_textcraft import tasks
from agentgym_textcraft.book import RecipeBook, is_tag
from agentgym_textcraft.env import recipe_book
from agentgym_textcraft.names import human
from agentgym_textcraft.recipes import Recipe, Slot, data_dir, load, parse_recipe
from agentgym_textcraft.tags import TAGS

import agentgym

SPEC = agentgym.env_specs()["textcraft"]


@pytest.fixture(scope="module")
def book() -> RecipeBook:
    return recipe_book()


def read(name: str) -> Recipe | None:
    path = data_dir() / "recipes" / f"{name}.json"
    return parse_recipe(json.loads(path.read_text()), path.name)


def test_shaped_recipe_counts_pattern_cells_per_key_in_key_order():
    assert read("wooden_pickaxe") == Recipe(
        "minecraft:wooden_pickaxe",
        1,
        (Slot(("minecraft:stick",), 2), Slot(("#minecraft:planks",), 3)),
        "shaped",
        "wooden_pickaxe.json",
    )
    lectern = read("lectern")
    assert [(s.options, s.count) for s in lectern.slots] == [
        (("#minecraft:wooden_slabs",), 4),
        (("minecraft:bookshelf",), 1),
    ]


def test_shapeless_recipe_merges_repeated_ingredients_and_keeps_the_result_count():
    r = read("magenta_dye_from_blue_red_white_dye")
    assert r.kind == "shapeless" and r.result == "minecraft:magenta_dye" and r.count == 4
    assert [(s.options, s.count) for s in r.slots] == [
        (("minecraft:blue_dye",), 1),
        (("minecraft:red_dye",), 2),
        (("minecraft:white_dye",), 1),
    ]


def test_tags_and_either_or_ingredients():
    planks = read("oak_planks")
    assert planks.count == 4 and planks.slots == (Slot(("#minecraft:oak_logs",), 1),)
    torch = read("torch")
    coal = next(s for s in torch.slots if "minecraft:coal" in s.options)
    assert coal.options == ("minecraft:coal", "minecraft:charcoal")


def test_other_recipe_types_are_skipped_but_furnace_products_noted():
    assert read("andesite_slab_from_andesite_stonecutting") is None
    assert read("glass") is None  # smelting
    assert read("armor_dye") is None  # crafting_special_*
    recipes, cooked = load()
    assert len(recipes) == 635  # 491 shaped + 144 shapeless of the 860 files
    assert {"minecraft:glass", "minecraft:iron_ingot", "minecraft:stone"} <= cooked


def test_two_keys_with_one_ingredient_are_one_slot_and_bad_patterns_fail():
    raw = {
        "type": "minecraft:crafting_shaped",
        "pattern": ["AB", "BA"],
        "key": {"A": {"item": "minecraft:stick"}, "B": {"item": "minecraft:stick"}},
        "result": {"item": "minecraft:x", "count": 2},
    }
    assert parse_recipe(raw).slots == (Slot(("minecraft:stick",), 4),)
    raw["pattern"] = ["AC"]
    with pytest.raises(ValueError, match="without a key"):
        parse_recipe(raw)


def test_nested_tags_are_flattened():
    logs = TAGS["minecraft:logs"]
    assert {"minecraft:oak_log", "minecraft:stripped_dark_oak_wood", "minecraft:crimson_stem"} <= set(logs)
    assert len(logs) == len(set(logs)) == 8 * 4
    assert TAGS["minecraft:oak_logs"][0] == "minecraft:oak_log"


def test_every_tag_the_recipes_use_has_members_that_are_items(book):
    assert set(book.tags) == {
        "#" + t
        for t in (
            "minecraft:acacia_logs minecraft:birch_logs minecraft:coals minecraft:crimson_stems "
            "minecraft:dark_oak_logs minecraft:jungle_logs minecraft:logs minecraft:oak_logs minecraft:planks "
            "minecraft:soul_fire_base_blocks minecraft:spruce_logs minecraft:stone_crafting_materials "
            "minecraft:stone_tool_materials minecraft:warped_stems minecraft:wooden_slabs minecraft:wool"
        ).split()
    }
    assert all(m in book.items for members in book.tags.values() for m in members)


def test_unpacking_recipes_are_dropped_and_packing_kept(book):
    assert sorted(r.source for r in book.unpacking) == [
        "bone_meal_from_bone_block.json",
        "coal.json",
        "diamond.json",
        "dried_kelp.json",
        "emerald.json",
        "gold_ingot_from_gold_block.json",
        "gold_nugget.json",
        "honey_bottle.json",
        "iron_ingot_from_iron_block.json",
        "iron_nugget.json",
        "lapis_lazuli.json",
        "netherite_ingot_from_netherite_block.json",
        "redstone.json",
        "slime_ball.json",
        "wheat.json",
    ]
    assert "minecraft:coal_block" in book.recipes_for and "minecraft:hay_block" in book.recipes_for


def test_base_items(book):
    base = book.base
    assert {"minecraft:oak_log", "minecraft:string", "minecraft:wheat", "minecraft:honey_bottle"} <= base
    # Furnace products are got, even where a crafting recipe also makes them.
    assert {"minecraft:iron_ingot", "minecraft:glass", "minecraft:coal"} <= base
    assert "minecraft:iron_ingot" in book.recipes_for
    assert not {"minecraft:stick", "minecraft:oak_planks", "minecraft:iron_block"} & base


def test_depth_is_the_least_fixed_point(book):
    expect = {
        "minecraft:oak_planks": 1,
        "minecraft:stick": 1,  # from bamboo, shallower than from planks (2)
        "minecraft:wooden_pickaxe": 2,
        "minecraft:iron_block": 1,
        "minecraft:book": 2,
        "minecraft:bookshelf": 3,
        "minecraft:lectern": 4,
        "minecraft:quartz_slab": 2,  # either-or: from quartz blocks, not chiseled ones (a cycle)
        "minecraft:chiseled_quartz_block": 3,
        "minecraft:red_wool": 2,
        "#minecraft:planks": 1,
        "#minecraft:oak_logs": 0,
    }
    assert {k: book.depth[k] for k in expect} == expect
    for item in book.items:
        if item in book.base:
            assert book.depth[item] == 0
        else:
            assert book.depth[item] == min(book.recipe_depth(r) for r in book.recipes_for[item]) < math.inf


def test_goals_are_crafted_items_by_depth_then_id_and_match_the_plugin_constants(book):
    goals = book.goals
    assert goals == sorted(goals, key=lambda g: (book.depth[g], g))
    assert not set(goals) & book.base and len(goals) == len(book.items) - len(book.base)
    counts: dict[int, int] = {}
    for g in goals:
        counts[int(book.depth[g])] = counts.get(int(book.depth[g]), 0) + 1
    assert counts == tasks.DEPTH_COUNTS and len(goals) == tasks.NUM_GOALS
    assert goals[0] == "minecraft:acacia_planks" and book.depth[goals[-1]] == 4


def test_human_names_are_unique_and_hold_no_separator(book):
    names = [human(r) for r in [*book.items, *book.tags]]
    assert len(set(names)) == len(names)
    for name in names:
        assert "minecraft" not in name and "_" not in name and "," not in name
        for word in ("using", "from", "with"):  # the words that end a craft's result
            assert f" {word} " not in f" {name} "
    assert "flint and steel" in names  # so " and " splits ingredients only between names


@pytest.mark.parametrize(
    ("written", "ref"),
    [
        ("Oak Planks", "minecraft:oak_planks"),
        ("minecraft:oak_planks", "minecraft:oak_planks"),
        ("oak plank", "minecraft:oak_planks"),
        ("  STICKS ", "minecraft:stick"),
        ("torches", "minecraft:torch"),
        ("oak logs", "#minecraft:oak_logs"),
        ("oak log", "minecraft:oak_log"),
        ("#minecraft:planks", "#minecraft:planks"),
        ("bricks", "minecraft:bricks"),
        ("brick", "minecraft:brick"),
        ("oak stair", "minecraft:oak_stairs"),
    ],
)
def test_names_resolve(book, written, ref):
    assert book.names.resolve(written) == ref


def test_splits():
    test, train = SPEC.splits["test"], SPEC.splits["train"]
    assert len(test) == 100
    assert test.category_counts() == {"depth 1": 31, "depth 2": 41, "depth 3": 25, "depth 4": 3}
    assert not set(test.task_ids) & set(train.task_ids)
    assert sorted([*test.task_ids, *train.task_ids]) == list(range(tasks.NUM_GOALS))
    assert tasks.held_out_categories() == tasks.held_out_categories()  # seeded: the same every time
    for t in test.task_ids:
        assert test.category_of(t) == tasks.category_of(t)


def test_split_categories_are_the_goals_depths(book):
    for t in range(tasks.NUM_GOALS):
        assert tasks.category_of(t) == f"depth {int(book.depth[book.goals[t]])}"


def test_data_is_read_without_importing_textcraft_and_the_plugin_reads_none():
    code = (
        "import sys, agentgym_textcraft.plugin as p; p.agentgym_envs();"
        "assert 'agentgym_textcraft.book' not in sys.modules;"
        "from agentgym_textcraft.env import recipe_book; assert recipe_book().goals;"
        "assert 'textcraft' not in sys.modules, 'textcraft was imported'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_goals_do_not_depend_on_file_order():
    recipes, cooked = load()
    again = RecipeBook(list(reversed(recipes)), cooked)
    assert again.goals == recipe_book().goals
    assert all(is_tag(t) for t in again.tags)
