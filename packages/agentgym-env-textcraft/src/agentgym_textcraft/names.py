"""Human names of items and tags, and reading the names people and models write.

Observations only ever show human names (``oak planks``, never ``minecraft:oak_planks``); actions
may use either, in any case, singular or plural.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from agentgym_textcraft.recipes import TAG

_SPACES = re.compile(r"\s+")


def human(ref: str) -> str:
    """``minecraft:oak_planks`` -> ``oak planks``; a tag ``#minecraft:oak_logs`` -> ``oak logs``."""
    return ref.removeprefix(TAG).removeprefix("minecraft:").replace("_", " ")


def canonical(text: str) -> str:
    """What a written name is compared as: lower case, single spaces, no ``#``/``minecraft:``/``_``."""
    t = _SPACES.sub(" ", text.replace("_", " ").strip().lower())
    t = t.removeprefix(TAG).removeprefix("minecraft:").strip()
    return t


def _variants(name: str) -> list[str]:
    """Singular and plural forms to try when a name is not known as written."""
    out = []
    if name.endswith("ies"):
        out.append(name[:-3] + "y")
    if name.endswith("es"):
        out.append(name[:-2])
    if name.endswith("s"):
        out.append(name[:-1])
    else:
        out += [name + "s", name + "es"]
        if name.endswith("y"):
            out.append(name[:-1] + "ies")
    return out


class Names:
    """Resolves written names to refs among ``refs`` (item ids and ``#tag`` ids)."""

    def __init__(self, refs: Iterable[str]):
        self.by_name: dict[str, str] = {}
        for ref in refs:
            name = human(ref)
            other = self.by_name.setdefault(name, ref)
            if other != ref:
                raise ValueError(f"two things are called {name!r}: {other} and {ref}")

    def resolve(self, text: str) -> str | None:
        """The ref a written name means, or ``None``. An exact name wins over a singular/plural
        variant: ``oak logs`` is the tag, ``oak log`` the item, ``bricks`` and ``brick`` two items."""
        name = canonical(text)
        ref = self.by_name.get(name)
        if ref is not None:
            return ref
        for variant in _variants(name):
            ref = self.by_name.get(variant)
            if ref is not None:
                return ref
        return None

    def suggest(self, text: str, n: int = 3) -> list[str]:
        """Known names close to ``text``, for "did you mean" hints."""
        return difflib.get_close_matches(canonical(text), self.by_name, n=n, cutoff=0.6)
