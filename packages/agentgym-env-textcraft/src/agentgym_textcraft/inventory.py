"""``Inventory``: item counts, in the order first got; a tag counts (and gives up) any member."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentgym_textcraft.book import is_tag
from agentgym_textcraft.names import human


class Inventory:
    def __init__(self, tags: Mapping[str, Sequence[str]]):
        self.tags = tags
        self.counts: dict[str, int] = {}

    def count(self, ref: str) -> int:
        if is_tag(ref):
            return sum(self.counts.get(m, 0) for m in self.tags[ref])
        return self.counts.get(ref, 0)

    def add(self, item: str, n: int) -> None:
        self.counts[item] = self.counts.get(item, 0) + n

    def take(self, ref: str, n: int) -> None:
        """Remove ``n`` of ``ref`` (a tag: of its members, first got first); check ``count`` first."""
        members = [m for m in self.counts if m in self.tags[ref]] if is_tag(ref) else [ref]
        for item in members:
            used = min(n, self.counts[item])
            self.counts[item] -= used
            if not self.counts[item]:
                del self.counts[item]
            n -= used
            if not n:
                return
        raise ValueError(f"not enough {ref}")  # callers check count() first

    def describe(self) -> str:
        if not self.counts:
            return "Inventory: You are not carrying anything."
        return "Inventory: " + " ".join(f"[{human(i)}] ({n})" for i, n in self.counts.items())

    def holding(self, ref: str) -> str:
        """What of ``ref`` is held, in words: ``1 oak planks`` or, for a tag, per member."""
        if not is_tag(ref):
            return f"{self.count(ref)}"
        parts = [f"{self.counts[m]} {human(m)}" for m in self.counts if m in self.tags[ref]]
        return f"{self.count(ref)}" + (f" ({', '.join(parts)})" if parts else "")
