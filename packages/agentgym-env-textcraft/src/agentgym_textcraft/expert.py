"""The expert: plans the goal's crafting tree recursively and speaks it as text actions.

Planning has two passes. First, from the goal down, each item that is not a base item gets its
shallowest recipe, and each kind or either-or ingredient a concrete item: one already held, else
one the plan already uses (the same planks for the sticks and the pickaxe), else the shallowest.
Every choice is shallower than the item it is for, so the tree is finite and has no cycle. Second,
the amounts: from the goal down, what is needed less what is held, in whole crafts — so an item
needed in several places is got or crafted once, in one batch (``craft 8 oak planks using 2 oak
log``). The actions are those gets and crafts, ingredients first.

The expert replans from the env's inventory on every call (tens of microseconds), so it stays right
whatever happened before it was asked.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from agentgym_textcraft.book import RecipeBook, is_tag
from agentgym_textcraft.names import human
from agentgym_textcraft.recipes import Recipe, Slot


def plan(book: RecipeBook, goal: str, held: Mapping[str, int] | None = None) -> list[str]:
    """The actions that craft ``goal`` starting from the ``held`` item counts."""
    held = dict(held or {})
    if held.get(goal, 0) > 0:
        return []
    chosen: dict[str, tuple[Recipe, tuple[str, ...]]] = {}
    order: list[str] = []  # every item of the plan, each after the ingredients it is made of
    seen: set[str] = set()

    def option(slot: Slot, item: str) -> str:
        candidates = [
            c
            for o in slot.options
            for c in (book.tags[o] if is_tag(o) else (o,))
            if book.depth[c] < book.depth[item]
        ]
        for preferred in (held, seen):
            for c in candidates:
                if c in preferred:
                    return c
        return min(candidates, key=lambda c: book.depth[c])

    def decide(item: str) -> None:
        if item in seen:
            return
        seen.add(item)
        if item not in book.base:
            recipe = min(book.recipes_for[item], key=book.recipe_depth)
            options = tuple(option(s, item) for s in recipe.slots)
            chosen[item] = (recipe, options)
            for o in options:
                decide(o)
        order.append(item)

    decide(goal)
    need: Counter[str] = Counter({goal: 1})
    times: dict[str, int] = {}
    for item in reversed(order):  # every consumer of an item comes before it
        missing = need[item] - held.get(item, 0)
        if missing <= 0:
            continue
        if item in chosen:
            recipe, options = chosen[item]
            times[item] = math.ceil(missing / recipe.count)
            for slot, o in zip(recipe.slots, options, strict=True):
                need[o] += times[item] * slot.count
        else:
            times[item] = missing
    actions = []
    for item in order:
        if item not in times:
            continue
        if item not in chosen:
            actions.append(f"get {times[item]} {human(item)}")
            continue
        recipe, options = chosen[item]
        k = times[item]
        uses = ", ".join(f"{k * s.count} {human(o)}" for s, o in zip(recipe.slots, options, strict=True))
        actions.append(f"craft {k * recipe.count} {human(item)} using {uses}")
    return actions


class CraftExpert:
    """``act(observation, info) -> action`` for the env it is made with."""

    def __init__(self, env: Any):
        self.env = env

    def __call__(self, observation: str, info: dict) -> str:
        env = self.env
        actions = plan(env.book, env.goal, env.inventory.counts)
        return actions[0] if actions else "inventory"
