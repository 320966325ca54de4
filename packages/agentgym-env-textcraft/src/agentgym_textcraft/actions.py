"""Action text to commands: ``craft``, ``get``, ``inventory``, written loosely.

Tolerated: any case, extra spaces, a trailing period, quotes or backticks around the action,
``minecraft:`` ids, ``2x``, ``from``/``with`` for ``using``, ``and`` between ingredients, and counts
left out (a craft's counts are then the recipe's; a get's is 1). Names are read by ``names.Names``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPACES = re.compile(r"\s+")
_INVENTORY = re.compile(r"^(?:(?:check|show|look at|view|open) )?(?:(?:my|the) )?inventory$")
_GET = re.compile(r"^get(?: (\d+) ?x?)? (.+)$")
_CRAFT = re.compile(r"^craft(?: (\d+) ?x?)? (.+?) (?:using|from|with) (.+)$")
_INGREDIENT = re.compile(r"^(?:(\d+) ?x? )?(.+)$")
_SEPARATOR = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+|\s*\+\s*")

FORMS = "craft <n> <item> using <n> <item>, <n> <item> ...; get <n> <item>; inventory"


@dataclass(frozen=True)
class Get:
    count: int
    name: str


@dataclass(frozen=True)
class Craft:
    count: int | None
    name: str
    ingredients: tuple[tuple[int | None, str], ...]


@dataclass(frozen=True)
class Inventory:
    pass


Command = Get | Craft | Inventory


class ActionError(ValueError):
    """Text that is none of the action forms; the message says so."""


def normalize(text: str) -> str:
    """Lower case, single spaces, no surrounding quotes, no trailing period."""
    t = _SPACES.sub(" ", text.strip().strip("`'\"").strip().lower())
    return t.rstrip(".!").strip()


def _count(digits: str | None) -> int | None:
    if digits is None:
        return None
    n = int(digits)
    if n < 1:
        raise ActionError("Counts must be 1 or more.")
    return n


def parse(text: str) -> Command:
    """The command an action means; raises ``ActionError`` for anything else."""
    t = normalize(text)
    if _INVENTORY.match(t):
        return Inventory()
    m = _CRAFT.match(t)
    if m:
        ingredients = []
        for part in _SEPARATOR.split(m.group(3)):
            if not part:
                continue
            im = _INGREDIENT.match(part)
            assert im is not None  # the pattern matches any non-empty text
            ingredients.append((_count(im.group(1)), im.group(2).strip()))
        if not ingredients:
            raise ActionError("Name the ingredients: craft <n> <item> using <n> <item>, <n> <item>.")
        return Craft(_count(m.group(1)), m.group(2).strip(), tuple(ingredients))
    if t.startswith("craft"):
        raise ActionError(f"A craft names its ingredients: {FORMS.split(';')[0]}.")
    m = _GET.match(t)
    if m:
        return Get(_count(m.group(1)) or 1, m.group(2).strip())
    raise ActionError(f"Unknown action. Valid actions: {FORMS}.")
