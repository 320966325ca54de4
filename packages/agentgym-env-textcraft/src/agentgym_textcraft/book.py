"""``RecipeBook``: the crafting world built from the recipe files — which items are raw materials
(base items), how deep each item's crafting tree is, the goals, the crafting commands shown for a
goal, and which recipe a written craft means.

Base items are those that no crafting recipe makes, plus those that a furnace makes (smelting is
not part of the game: iron ingots, glass, coal are got like logs). Two kinds of recipes would make
depths circular and are dropped when the book is built:

- *unpacking*: a recipe that turns a packed form back into several of its own ingredient (9 coal
  from a coal block, 9 wheat from a hay bale, 4 honey bottles from a honey block and 4 bottles);
  the packing recipe (coal block from 9 coal) stays;
- nothing else: the other cycles (a quartz slab from any quartz block, a chiseled quartz block from
  slabs; any wool dyed into red wool) resolve themselves, because an item's depth is the least
  fixed point ``depth(item) = min over recipes of (max over ingredients of depth) + 1``, base items
  0, a tag (``planks``) the least depth of its members, an either-or ingredient its best option.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from agentgym_textcraft import recipes as recipe_files
from agentgym_textcraft.names import Names, human
from agentgym_textcraft.recipes import TAG, Recipe, Slot
from agentgym_textcraft.tags import TAGS

MAX_DISTRACTORS = 10


@dataclass(frozen=True)
class Craft:
    """A written craft matched to a recipe: ``times`` crafts, consuming ``uses`` (ref, count)."""

    recipe: Recipe
    times: int
    uses: tuple[tuple[str, int], ...]

    @property
    def made(self) -> int:
        return self.recipe.count * self.times


class CraftError(ValueError):
    """A written craft that is no recipe; the message says what is wrong, in human names."""


class AmountError(CraftError):
    """The ingredients are a recipe's, but the numbers are not a whole number of crafts."""


def is_tag(ref: str) -> bool:
    return ref.startswith(TAG)


def _unpacking(recipes: Sequence[Recipe]) -> set[Recipe]:
    packed_from: dict[str, set[str]] = {}  # item -> items it is made from alone
    for r in recipes:
        if len(r.slots) == 1 and len(r.slots[0].options) == 1:
            packed_from.setdefault(r.result, set()).add(r.slots[0].options[0])
    return {
        r
        for r in recipes
        if r.count > 1
        and any(len(s.options) == 1 and r.result in packed_from.get(s.options[0], ()) for s in r.slots)
    }


class RecipeBook:
    def __init__(self, recipes: Sequence[Recipe], cooked: Iterable[str] = ()):
        self.unpacking = _unpacking(recipes)
        self.recipes: list[Recipe] = [r for r in recipes if r not in self.unpacking]
        self.recipes_for: dict[str, list[Recipe]] = {}
        for r in self.recipes:
            self.recipes_for.setdefault(r.result, []).append(r)

        used_tags = {o for r in self.recipes for s in r.slots for o in s.options if is_tag(o)}
        unknown = sorted(t for t in used_tags if t[1:] not in TAGS)
        if unknown:
            raise ValueError(f"recipes use tags with no member list in tags.py: {unknown}")
        #: Tag ref (``#minecraft:planks``) -> member item ids.
        self.tags: dict[str, tuple[str, ...]] = {t: TAGS[t[1:]] for t in sorted(used_tags)}

        items = set(self.recipes_for)
        items.update(o for r in self.recipes for s in r.slots for o in s.options if not is_tag(o))
        items.update(m for members in self.tags.values() for m in members)
        self.items: frozenset[str] = frozenset(items)
        self.base: frozenset[str] = frozenset(
            i for i in items if i not in self.recipes_for or i in set(cooked)
        )
        self.depth: dict[str, float] = self._depths()
        unreachable = sorted(i for i in items if self.depth[i] == math.inf)
        if unreachable:
            raise ValueError(f"items no chain of crafts from base items makes: {unreachable}")
        # Goals: every crafted item, by depth; ties in id order, so the list (and the meaning of a
        # task id) does not depend on the order a file system lists the recipe files in.
        self.goals: list[str] = sorted(
            (i for i in items if i not in self.base), key=lambda i: (self.depth[i], i)
        )
        self.names = Names([*sorted(items), *self.tags])
        self._trees: dict[str, tuple[list[str], list[str]]] = {}

    @classmethod
    def load(cls, directory: Path | None = None) -> RecipeBook:
        return cls(*recipe_files.load(directory))

    # -- depth ------------------------------------------------------------------------------
    def _depths(self) -> dict[str, float]:
        depth: dict[str, float] = {i: (0 if i in self.base else math.inf) for i in self.items}

        def ref_depth(ref: str) -> float:
            if is_tag(ref):
                return min(depth[m] for m in self.tags[ref])
            return depth[ref]

        changed = True
        while changed:  # Bellman-Ford style relaxation: at most (max depth + 1) rounds
            changed = False
            for r in self.recipes:
                if r.result in self.base:
                    continue
                d = max(min(ref_depth(o) for o in s.options) for s in r.slots) + 1
                if d < depth[r.result]:
                    depth[r.result] = d
                    changed = True
        for t in self.tags:
            depth[t] = ref_depth(t)
        return depth

    def recipe_depth(self, recipe: Recipe) -> float:
        return max(min(self.depth[o] for o in s.options) for s in recipe.slots) + 1

    # -- what observations show -------------------------------------------------------------
    def shown(self, slot: Slot) -> str:
        """The option a crafting command names for a slot: the shallowest (first on ties)."""
        return min(slot.options, key=lambda o: self.depth[o])

    def command(self, recipe: Recipe) -> str:
        ingredients = ", ".join(f"{s.count} {human(self.shown(s))}" for s in recipe.slots)
        return f"craft {recipe.count} {human(recipe.result)} using {ingredients}"

    def gettable(self, ref: str) -> str | None:
        """The base item that ``get`` of ``ref`` gives: the item itself, or a tag's first base member."""
        if is_tag(ref):
            return next((m for m in self.tags[ref] if m in self.base), None)
        return ref if ref in self.base else None

    def tree(self, goal: str) -> list[Recipe]:
        """The goal's crafting tree: every recipe of the goal and, recursively, of the crafted
        ingredients the commands name. A tag that has a base member is got, not crafted; one
        that has none (planks, wool) brings the recipes of its shallowest members (all eight
        planks; white wool, not the fifteen dyed ones), as any member will do."""
        out: list[Recipe] = []
        seen: set[str] = set()

        def visit(item: str) -> None:
            if item in seen or item in self.base:
                return
            seen.add(item)
            for r in self.recipes_for.get(item, ()):
                out.append(r)
                for s in r.slots:
                    ref = self.shown(s)
                    if not is_tag(ref):
                        visit(ref)
                    elif self.gettable(ref) is None:
                        for member in self.tags[ref]:
                            if self.depth[member] == self.depth[ref]:
                                visit(member)

        visit(goal)
        return out

    def commands(self, goal: str) -> tuple[list[str], list[str]]:
        """(the goal tree's commands, candidate distractor commands), both in a fixed order.

        Distractors are other recipes that use what the tree makes or uses (a tag's members
        included), so they look relevant: ``craft 6 birch slab using 3 birch planks`` for planks.
        """
        cached = self._trees.get(goal)
        if cached is not None:
            return cached
        tree = self.tree(goal)
        shown = list(dict.fromkeys(self.command(r) for r in tree))
        used = {r.result for r in tree}
        for r in tree:
            for s in r.slots:
                used.update(s.options)
                used.update(m for o in s.options if is_tag(o) for m in self.tags[o])
        in_tree = set(tree)
        taken = set(shown)
        distractors = []
        for r in self.recipes:
            if r in in_tree or r.result == goal or used.isdisjoint(self._touches[r]):
                continue
            text = self.command(r)
            if text not in taken:
                taken.add(text)
                distractors.append(text)
        self._trees[goal] = (shown, distractors)
        return shown, distractors

    def observation(self, goal: str, rng: random.Random) -> str:
        shown, distractors = self.commands(goal)
        listed = shown + rng.sample(distractors, min(MAX_DISTRACTORS, len(distractors)))
        rng.shuffle(listed)
        return "Crafting commands:\n{}\n\nGoal: craft {}.".format("\n".join(listed), human(goal))

    # -- matching a written craft -----------------------------------------------------------
    def accepts(self, slot: Slot) -> frozenset[str]:
        return self._accepts[slot]

    @cached_property
    def _accepts(self) -> dict[Slot, frozenset[str]]:
        return {
            s: frozenset(m for o in s.options for m in (self.tags[o] if is_tag(o) else (o,)))
            for r in self.recipes
            for s in r.slots
        }

    @cached_property
    def _touches(self) -> dict[Recipe, frozenset[str]]:
        """Each recipe's ingredient refs and the members of its tags."""
        return {
            r: frozenset(o for s in r.slots for o in (s.options + tuple(self._accepts[s])))
            for r in self.recipes
        }

    def fits(self, ref: str, slot: Slot) -> bool:
        """Whether a named ingredient can fill a slot: an accepted item, or a tag all of whose
        members are accepted (``planks`` for a planks slot, ``oak logs`` for a logs slot)."""
        accepted = self._accepts[slot]
        if is_tag(ref):
            return set(self.tags[ref]) <= accepted
        return ref in accepted

    def match(self, result: str, count: int | None, named: Sequence[tuple[str, int | None]]) -> Craft:
        """The craft of ``count`` (or unsaid) ``result`` from named (ingredient ref, count or unsaid).

        ``count`` must be a multiple of what one craft makes, and every ingredient's count the same
        multiple of what the recipe takes: ``craft 8 oak planks using 2 oak logs`` is two crafts.
        Several named items may fill one slot (``2 oak planks, 2 birch planks`` for 4 planks).
        Raises ``CraftError`` saying what is wrong.
        """
        if is_tag(result):
            return self._match_tag(result, count, named)
        recipes = self.recipes_for.get(result, [])
        if not recipes:
            raise CraftError(
                f"{human(result)} is not crafted: it is a base item. Get it with: get 1 {human(result)}"
            )
        merged: dict[str, int | None] = {}
        for ref, n in named:
            if ref in merged and (n is None or merged[ref] is None):
                raise CraftError(f"{human(ref)} is named twice: give each ingredient once, with its count.")
            previous = merged.get(ref)
            merged[ref] = n if previous is None or n is None else previous + n
        items = list(merged.items())
        problem = None
        for recipe in recipes:
            for assignment in _assignments(items, recipe.slots, self.fits):
                outcome = _counts(recipe, count, items, assignment)
                if isinstance(outcome, Craft):
                    return outcome
                problem = problem or (recipe, outcome)
        if problem is not None:
            recipe, why = problem
            raise AmountError(
                f"Wrong amounts to craft {human(result)}: {why} One craft is: {self.command(recipe)}"
                " (or a multiple of every number in it)."
            )
        wanted = ", ".join(human(ref) for ref, _ in items)
        raise CraftError(f"There is no recipe for {human(result)} from {wanted}. {self.recipe_hint(result)}")

    def recipe_hint(self, item: str, limit: int = 3) -> str:
        cmds = [self.command(r) for r in self.recipes_for.get(item, [])[:limit]]
        return "Crafting commands for {}: {}.".format(human(item), "; ".join(cmds))

    def _match_tag(self, tag: str, count: int | None, named: Sequence[tuple[str, int | None]]) -> Craft:
        # "craft 4 planks using 1 oak log": the tag names the result when exactly one member's
        # recipe takes those ingredients.
        found: list[Craft] = []
        amounts: list[AmountError] = []
        for member in self.tags[tag]:
            if member in self.recipes_for:
                try:
                    found.append(self.match(member, count, named))
                except AmountError as e:
                    amounts.append(e)
                except CraftError:
                    continue
        if len(found) == 1:
            return found[0]
        if not found and len(amounts) == 1:
            raise amounts[0]
        members = ", ".join(human(m) for m in self.tags[tag] if m in self.recipes_for)
        raise CraftError(f"{human(tag)} is a kind of item: craft one of them by name ({members}).")


Named = list[tuple[str, int | None]]


def _assignments(
    items: Named, slots: Sequence[Slot], fits: Callable[[str, Slot], bool]
) -> Iterator[tuple[int, ...]]:
    """Each way of giving every named item a slot it fits so that every slot gets one or more."""
    n, m = len(items), len(slots)
    if n < m:
        return
    choice = [-1] * n

    def rec(i: int) -> Iterator[tuple[int, ...]]:
        if i == n:
            if len(set(choice)) == m:
                yield tuple(choice)
            return
        for j in range(m):
            if fits(items[i][0], slots[j]):
                choice[i] = j
                yield from rec(i + 1)

    yield from rec(0)


def _counts(recipe: Recipe, count: int | None, items: Named, assignment: tuple[int, ...]) -> Craft | str:
    """The craft an assignment means, or why its numbers do not add up."""
    times: set[int] = set()
    if count is not None:
        if count % recipe.count:
            return f"one craft makes {recipe.count} {human(recipe.result)}, so ask for a multiple of {recipe.count}, not {count}."
        times.add(count // recipe.count)
    for j, slot in enumerate(recipe.slots):
        mine = [items[i] for i in range(len(items)) if assignment[i] == j]
        if any(n is None for _, n in mine):
            if len(mine) > 1:
                return f"give a count for each of {', '.join(human(r) for r, _ in mine)}."
            continue
        total = sum(n for _, n in mine)
        if total % slot.count:
            return f"{total} {human(mine[0][0])} is not a multiple of the {slot.count} one craft takes."
        times.add(total // slot.count)
    if len(times) > 1:
        return "the numbers are not the same multiple of one craft."
    k = times.pop() if times else 1
    uses = tuple(
        (ref, n if n is not None else k * recipe.slots[assignment[i]].count)
        for i, (ref, n) in enumerate(items)
    )
    return Craft(recipe, k, uses)
