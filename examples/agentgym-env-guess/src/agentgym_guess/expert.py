"""The expert: bisection. In-process it reads what the env has told the player so far; without an
env (a client-side agent) it follows the same bounds from the text observations it is shown."""

from __future__ import annotations

import re

_RANGE = re.compile(r"between 1 and (\d+)")
_HINT = re.compile(r"(higher|lower) than (-?\d+)")


class BisectExpert:
    def __init__(self, env=None):
        self.env = env
        self.lo, self.hi = 1, 1

    def __call__(self, observation: str, info: dict) -> str:
        if self.env is not None and hasattr(self.env, "lo"):
            return f"guess {(self.env.lo + self.env.hi) // 2}"
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
