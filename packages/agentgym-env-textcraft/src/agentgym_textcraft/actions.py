"""Action text to commands: ``craft``, ``get``, ``inventory``, written loosely.

Tolerated: any case, extra spaces, a trailing period, quotes or backticks around the action,
``minecraft:`` ids, ``2x``, ``from``/``with`` for ``using``, ``and`` between ingredients, and counts
left out (a craft's counts are then the recipe's; a get's is 1). Names are read by ``names.Names``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_SPACES = re.compile(r"\s+")
_INVENTORY = re.compile(r"^(?:(?:check|show|look at|view|open) )?(?:(?:my|the) )?inventory$")
_GET = re.compile(r"^get(?: (\d+) ?x?)? (.+)$")
_CRAFT = re.compile(r"^craft(?: (\d+) ?x?)? (.+?) (?:using|from|with) (.+)$")
_INGREDIENT = re.compile(r"^\s*(?:(\d+) ?x? )?(\S.*?)\s*$")
_SEPARATOR = re.compile(r"\s*,\s*(?:and\s+)?|\s*\+\s*")
_AND = re.compile(r"\s+and\s+")

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


def _ingredients(text: str, is_name: Callable[[str], bool]) -> list[tuple[int | None, str]]:
    out = []
    for part in _SEPARATOR.split(text):
        m = _INGREDIENT.match(part)
        if m is None:
            continue
        # "1 stick and 1 coal" is two ingredients, "1 flint and steel" one: a name wins.
        pieces = [part] if is_name(m.group(2)) else _AND.split(part)
        for piece in pieces:
            im = _INGREDIENT.match(piece)
            if im is not None:
                out.append((_count(im.group(1)), im.group(2).strip()))
    return out


def parse(text: str, is_name: Callable[[str], bool] = lambda name: False) -> Command:
    """The command an action means; raises ``ActionError`` for anything else. ``is_name`` tells
    whether text is an item's name, so that ``and`` inside one does not split it."""
    t = normalize(text)
    if _INVENTORY.match(t):
        return Inventory()
    m = _CRAFT.match(t)
    if m:
        ingredients = _ingredients(m.group(3), is_name)
        if not ingredients:
            raise ActionError("Name the ingredients: craft <n> <item> using <n> <item>, <n> <item>.")
        return Craft(_count(m.group(1)), m.group(2).strip(), tuple(ingredients))
    if t.startswith("craft"):
        raise ActionError(f"A craft names its ingredients: {FORMS.split(';')[0]}.")
    m = _GET.match(t)
    if m:
        return Get(_count(m.group(1)) or 1, m.group(2).strip())
    raise ActionError(f"Unknown action. Valid actions: {FORMS}.")
