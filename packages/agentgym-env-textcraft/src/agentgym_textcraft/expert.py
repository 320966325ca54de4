"""The expert: plans the goal's crafting tree recursively and speaks it as text actions.

For each item it needs it uses what the inventory holds, else gets it (a base item) or crafts it
with its shallowest recipe, enough times at once for everything that needs it, choosing for a tag
or an either-or ingredient the option held already, else the shallowest. Every recipe it picks is
shallower than the item, so planning always ends. It replans from the env's inventory on every
call (microseconds), so it stays right whatever happened before it was asked.
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
    inventory = Counter(held or {})
    reserved: Counter[str] = Counter()  # held items already promised to a craft higher up
    actions: list[str] = []

    def free(item: str) -> int:
        return inventory[item] - reserved[item]

    def choose(slot: Slot, amount: int) -> str:
        candidates = [m for o in slot.options for m in (book.tags[o] if is_tag(o) else (o,))]
        held_enough = [c for c in candidates if free(c) >= amount]
        if held_enough:
            return held_enough[0]
        return min(candidates, key=lambda c: book.depth[c])

    def best(item: str) -> Recipe:
        return min(book.recipes_for[item], key=book.recipe_depth)

    def ensure(item: str, n: int) -> None:
        missing = n - max(0, free(item))
        if missing > 0:
            if item in book.base:
                actions.append(f"get {missing} {human(item)}")
                inventory[item] += missing
            else:
                recipe = best(item)
                times = math.ceil(missing / recipe.count)
                uses = []
                for slot in recipe.slots:
                    choice = choose(slot, times * slot.count)
                    ensure(choice, times * slot.count)
                    uses.append((choice, times * slot.count))
                for choice, amount in uses:
                    inventory[choice] -= amount
                    reserved[choice] -= amount
                made = times * recipe.count
                inventory[item] += made
                listed = ", ".join(f"{amount} {human(choice)}" for choice, amount in uses)
                actions.append(f"craft {made} {human(item)} using {listed}")
        reserved[item] += n

    ensure(goal, 1)
    return actions


class CraftExpert:
    """``act(observation, info) -> action`` for the env it is made with."""

    def __init__(self, env: Any):
        self.env = env

    def __call__(self, observation: str, info: dict) -> str:
        env = self.env
        actions = plan(env.book, env.goal, env.inventory.counts)
        return actions[0] if actions else "inventory"
