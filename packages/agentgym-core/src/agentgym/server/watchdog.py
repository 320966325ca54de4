"""The hung-step rule, written once for thread and process shards: a step past the step timeout is
answered 504, its session abandoned, and the rest of its batch stepped.

Every step runs as part of a batch (a single step is a batch of one) that records its
:class:`Progress`. Whoever watches it (the server's event loop for a thread shard, a worker's
watchdog thread for a process shard) asks :meth:`Progress.overdue` and, when the running item is,
calls :func:`after_hang` and runs the items left. A worker that cannot even do that (a hang holding
the GIL) falls silent; the server kills it past :func:`silence_limit`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentgym.errors import AgentGymError
from agentgym.protocol import item_error
from agentgym.server.messages import Answer, StepItem


@dataclass
class Progress:
    """How far a batch of steps got: the results so far, whether an item runs and since when, and a
    stop asked by its watcher (no further item starts once ``cancelled``). The batch's runner
    (``EnvHost.step_many``) calls :meth:`begin` and :meth:`end` around each item."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    out: list[Answer] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    # a batch waiting for a thread counts as running its first item: a step queued behind hung
    # ones is answered 504 past the timeout, not left waiting for a thread that never comes
    running: bool = True
    cancelled: bool = False

    def begin(self) -> bool:
        """An item starts now; False if the watcher stopped the batch."""
        with self.lock:
            if self.cancelled:
                return False
            self.started, self.running = time.monotonic(), True
            return True

    def end(self, answers: list[Answer]) -> bool:
        """The running item's answers; False (and they are dropped) if the watcher gave it up."""
        with self.lock:
            self.running = False
            if self.cancelled:
                return False
            self.out.extend(answers)
            return True

    def left(self, timeout: float) -> float:
        """Seconds to wait before asking :meth:`overdue` again: until the running item's timeout,
        or a tick while no item runs (between two items)."""
        with self.lock:
            if not self.running:
                return min(0.25, timeout / 10)
            return max(self.started + timeout - time.monotonic(), 1e-3)

    def overdue(self, timeout: float) -> list[Answer] | None:
        """If the running item has run ``timeout`` seconds: stop the batch after it and return the
        results before it; else None."""
        with self.lock:
            if not self.running or time.monotonic() - self.started < timeout:
                return None
            self.cancelled = True
            return list(self.out)


def step_timeout_error(sid: int, env: str, seconds: float) -> AgentGymError:
    """504 ``step_timeout``: a declared env failure (its session is closed), not a proxy's 504."""
    return AgentGymError(
        f"session {sid}: env {env!r} did not finish a step within {seconds:g} s; session closed",
        code="step_timeout",
        status=504,
    )


def after_hang(
    abandon: Callable[[int], str], items: list[StepItem], done: list[Answer], timeout: float
) -> tuple[list[Answer], list[StepItem]]:
    """The item after ``done`` hangs: its session is abandoned (``abandon(sid)`` returns its env's
    name) and answered 504. Returns the batch's answers so far and the items still to run."""
    sid = items[len(done)].sid
    answered = [*done, item_error(step_timeout_error(sid, abandon(sid), timeout))]
    return answered, items[len(done) + 1 :]


def heartbeat_interval(step_timeout: float) -> float:
    """How often a busy worker says it is alive (at most 5 s apart)."""
    return min(5.0, step_timeout / 4)


def silence_limit(step_timeout: float) -> float:
    """Seconds without a word from a worker with a step in flight before it is killed: its own
    watchdog answers a hung step after ``step_timeout``; this is for a worker that cannot."""
    return step_timeout + max(2.0, step_timeout / 2)
