"""Steps of cheap envs run on the event loop's own thread, with the hung-step rule kept.

An env may declare its steps cheap (``InstanceCost.cheap_step``: pure Python, no waiting on I/O,
well under a millisecond). A thread shard then runs their batches inline: no hand-off to a pool
thread and back, which cost more than a batch of 64 TextCraft steps. Nothing else can run while an
inline step does, so a step that hangs cannot be answered by the loop the way a thread's is
(watchdog.py). Instead a watchdog thread, past the step timeout, raises :class:`StepInterrupted`
in the loop's thread (``PyThreadState_SetAsyncExc``): the step unwinds, its item is answered 504
``step_timeout``, its session is abandoned (its env closed), and the batch's other items are
stepped, as on threads. The limit: an asynchronous exception lands only when the thread runs
Python again, so a step blocked in C (a lock, a socket, ``time.sleep``) is interrupted when that
call returns. An env whose steps may block must not declare them cheap.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from agentgym.protocol import item_error
from agentgym.server.host import EnvHost
from agentgym.server.messages import Answer, StepItem
from agentgym.server.watchdog import step_timeout_error


class StepInterrupted(BaseException):  # noqa: N818 - not an error of the env's: its time ran out
    """Raised in the event loop's thread by the watchdog: the inline step ran past the timeout.
    A ``BaseException``, so that an env's ``except Exception`` does not swallow it."""


def _interrupt(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None
    )


class InlineWatch:
    """The watchdog of one thread shard's inline steps (its thread starts with the first step)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.lock = threading.Lock()
        self.thread_id = 0
        self.started: float | None = None  # when the running item began; None: no item runs
        self.fired = False  # the running item was interrupted
        self._watcher: threading.Thread | None = None

    def enter(self) -> None:
        """A batch of inline items starts on this thread (the watcher thread starts with the first)."""
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="agentgym-inline-watchdog", daemon=True)
            self._watcher.start()
        self.thread_id = threading.get_ident()

    def begin(self) -> None:
        """An inline item starts (after :meth:`enter`): interrupted (``StepInterrupted``) past the
        timeout. No lock: the watcher fires only on a ``started`` past the timeout with ``fired``
        False, and ``started`` is made fresh before ``fired`` is reset (an interrupt that landed
        before the last item's ``end`` took the lock left both stale)."""
        self.started = time.monotonic()
        self.fired = False

    def end(self) -> None:
        """The item ended (or unwound): no interrupt may land after this."""
        with self.lock:
            self.started = None
            if self.fired:  # sent, perhaps not landed yet: it must not land in the loop's code
                _interrupt(self.thread_id, None)

    def guarded(self, host: EnvHost, sid: int, call: Callable[[Any], Any], arg: Any) -> Any:
        """``call(arg)`` within the timeout, or session ``sid`` abandoned and its 504 (a ``Guard``)."""
        try:
            self.begin()
            try:
                return call(arg)
            finally:
                self.end()
        except StepInterrupted:
            name = host.abandon(sid)
            print(
                f"agentgym: a cheap step of {name!r} ran past {self.timeout:g} s and was interrupted; "
                "its session is closed",
                file=sys.stderr,
            )
            return item_error(step_timeout_error(sid, name, self.timeout))

    def _watch(self) -> None:
        tick = min(0.25, self.timeout / 10)
        while True:
            time.sleep(tick)
            with self.lock:
                if self.started is None or self.fired or time.monotonic() - self.started < self.timeout:
                    continue
                self.fired = True
                _interrupt(self.thread_id, StepInterrupted)


def step_inline(host: EnvHost, items: list[StepItem], watch: InlineWatch | None) -> list[Answer]:
    """``host.step_many(items)`` on this thread, each item within ``watch``'s timeout (None: no
    limit); an item interrupted is answered 504 and its session abandoned."""
    if watch is None:
        return host.step_many(items)
    watch.enter()
    return host.step_many(items, guard=watch.guarded)
