"""Minecraft's item tags used by the recipes: which items count as "planks", "oak logs", ...

The recipe files name tags (``{"tag": "minecraft:planks"}``) but the data set ships no tag files, so
the members are listed here as vanilla Minecraft 1.16 defines them (the recipes are 1.16's). A
member starting with ``#`` is a nested tag. Members are in Minecraft's order, plain forms first: a
``get`` of a tag gives its first base member (``get 1 oak logs`` gives an oak log).
"""

from __future__ import annotations

_WOODS = ("oak", "spruce", "birch", "jungle", "acacia", "dark_oak")
_STEMS = ("crimson", "warped")


def _wood_logs(wood: str) -> tuple[str, ...]:
    return (f"{wood}_log", f"{wood}_wood", f"stripped_{wood}_log", f"stripped_{wood}_wood")


def _stem_logs(stem: str) -> tuple[str, ...]:
    return (f"{stem}_stem", f"{stem}_hyphae", f"stripped_{stem}_stem", f"stripped_{stem}_hyphae")


_TAGS: dict[str, tuple[str, ...]] = {
    **{f"{w}_logs": _wood_logs(w) for w in _WOODS},
    **{f"{s}_stems": _stem_logs(s) for s in _STEMS},
    "logs_that_burn": tuple(f"#{w}_logs" for w in _WOODS),
    "logs": ("#logs_that_burn", "#crimson_stems", "#warped_stems"),
    "planks": tuple(f"{w}_planks" for w in (*_WOODS, *_STEMS)),
    "wooden_slabs": tuple(f"{w}_slab" for w in (*_WOODS, *_STEMS)),
    "wool": tuple(
        f"{c}_wool"
        for c in (
            "white",
            "orange",
            "magenta",
            "light_blue",
            "yellow",
            "lime",
            "pink",
            "gray",
            "light_gray",
            "cyan",
            "purple",
            "blue",
            "brown",
            "green",
            "red",
            "black",
        )
    ),
    "coals": ("coal", "charcoal"),
    "stone_crafting_materials": ("cobblestone", "blackstone"),
    "stone_tool_materials": ("cobblestone", "blackstone"),
    "soul_fire_base_blocks": ("soul_sand", "soul_soil"),
}

#: Tag id -> its member item ids, nested tags flattened, in order, without repeats.
TAGS: dict[str, tuple[str, ...]] = {}


def _flatten(tag: str, seen: tuple[str, ...] = ()) -> tuple[str, ...]:
    if tag in seen:
        raise ValueError(f"tag cycle: {' -> '.join((*seen, tag))}")
    out: list[str] = []
    for member in _TAGS[tag]:
        if member.startswith("#"):
            out.extend(_flatten(member[1:], (*seen, tag)))
        else:
            out.append(member)
    return tuple(dict.fromkeys(out))


for _tag in _TAGS:
    TAGS[f"minecraft:{_tag}"] = tuple(f"minecraft:{m}" for m in _flatten(_tag))
