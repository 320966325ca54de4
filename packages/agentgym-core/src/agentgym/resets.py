"""``ResetCache``: a task's reset made once and started from copies (a GRPO group's n samples).

A GRPO group plays one task n times; for envs whose reset generates the task (BabyAI's level
generation is most of an episode's cost) that is n - 1 generations too many. An env that can copy
itself (``TextEnv.save_reset`` / ``load_reset``) has its resets kept here, per process (so per
server, or per ``--workers`` process), keyed by the env's class, the task id and the seed, at most
``size`` of them (least recently used dropped first), shared by every instance and session of the
process under a lock. A saved reset is never changed: each load makes a fresh copy.

A task reset once is never saved: a pass over distinct tasks (an evaluation) pays nothing. The
second reset of a key saves it; later ones load it. ``AGENTGYM_RESET_CACHE`` sets the size (0: off).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

DEFAULT_SIZE = 1024


class ResetCache:
    """Saved resets by key, bounded; thread-safe. ``save_after``: resets of a key before it is saved."""

    def __init__(self, size: int = DEFAULT_SIZE, save_after: int = 2):
        self.size, self.save_after = size, save_after
        self._saved: OrderedDict[Hashable, Any] = OrderedDict()
        self._seen: OrderedDict[Hashable, int] = OrderedDict()  # resets of keys not saved yet
        self._lock = threading.Lock()
        self.hits = self.saves = 0

    def get(self, key: Hashable) -> Any:
        """The saved reset of ``key``, or None; a miss counts towards saving it."""
        if self.size <= 0:
            return None
        with self._lock:
            saved = self._saved.get(key)
            if saved is not None:
                self._saved.move_to_end(key)
                self.hits += 1
                return saved
            self._seen[key] = self._seen.pop(key, 0) + 1
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
            return None

    def wants(self, key: Hashable) -> bool:
        """Whether the reset of ``key`` just made should be saved (seen ``save_after`` times)."""
        if self.size <= 0:
            return False
        with self._lock:
            return self._seen.get(key, 0) >= self.save_after

    def put(self, key: Hashable, saved: Any) -> None:
        with self._lock:
            self._seen.pop(key, None)
            self._saved[key] = saved
            self._saved.move_to_end(key)
            self.saves += 1
            while len(self._saved) > self.size:
                self._saved.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._saved.clear()
            self._seen.clear()

    def __len__(self) -> int:
        return len(self._saved)


def _size_from_env() -> int:
    raw = os.environ.get("AGENTGYM_RESET_CACHE", "")
    try:
        return int(raw) if raw.strip() else DEFAULT_SIZE
    except ValueError:
        raise ValueError(f"AGENTGYM_RESET_CACHE must be a number of resets, got {raw!r}") from None


#: The process's cache, used by ``TextEnv.reset`` for envs that can save their resets.
RESETS = ResetCache(_size_from_env())
