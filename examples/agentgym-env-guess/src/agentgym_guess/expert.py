"""The expert: bisection driven only by the text observations (so it also works remotely)."""

from __future__ import annotations

import re

_RANGE = re.compile(r"between 1 and (\d+)")
_HINT = re.compile(r"(higher|lower) than (-?\d+)")


class BisectExpert:
    def __init__(self, env=None):
        self.lo, self.hi = 1, 1

    def __call__(self, observation: str, info: dict) -> str:
        m = _RANGE.search(observation)
        if m:
            self.lo, self.hi = 1, int(m.group(1))
        h = _HINT.search(observation)
        if h:
            n = int(h.group(2))
            if h.group(1) == "higher":
                self.lo = max(self.lo, n + 1)
            else:
                self.hi = min(self.hi, n - 1)
        return f"guess {(self.lo + self.hi) // 2}"
