"""``Navigations``: the main-frame navigations a browser context starts and commits, counted from
Playwright's events and awaited by their change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

#: (navigation requests, documents committed) at one moment; an action compares them before and after
Marks = tuple[int, int]

#: How long to look for the request of a navigation an action may have started. No event says
#: "this action navigates nowhere", so this one wait is bounded by time: the request of a click's
#: navigation reaches Playwright a few milliseconds after the click returns (measured: ~5 ms on the
#: bundled sites, more under load), and the wait ends the moment it shows.
REQUEST_WINDOW = 0.05
#: How long a started navigation may take to commit its document. Bounded because some never do (a
#: 204 answer, a download); a refused one commits Chromium's error page.
COMMIT_PATIENCE = 5.0


class Navigations:
    """Counts a context's main-frame navigation requests and commits (fed by its ``request`` and its
    pages' ``framenavigated`` events). Counters rather than one-shot event waits, because the event
    of an action's navigation may fire while the action is still being awaited, before anyone could
    start waiting for it."""

    def __init__(self) -> None:
        self.requests = 0
        self.commits = 0
        self._waiters: list[asyncio.Future[None]] = []

    def marks(self) -> Marks:
        return self.requests, self.commits

    def on_request(self, request: Any) -> None:
        if request.is_navigation_request() and request.frame.parent_frame is None:
            self.requests += 1
            self._wake()

    def on_commit(self, frame: Any) -> None:
        if frame.parent_frame is None:
            self.commits += 1
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Whether ``predicate`` holds within ``timeout`` seconds, tested again at each navigation
        event (never by polling)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    waiter = loop.create_future()
                    self._waiters.append(waiter)
                    try:
                        await waiter
                    finally:
                        if waiter in self._waiters:
                            self._waiters.remove(waiter)
        except TimeoutError:
            return predicate()
        return True

    async def follow(self, before: Marks) -> None:
        """Wait until a navigation started since ``before`` has committed its document, if one
        started; return at once (after the request window) if none did."""
        requests, commits = before
        if await self.until(lambda: self.requests != requests, REQUEST_WINDOW):
            await self.until(lambda: self.commits != commits, COMMIT_PATIENCE)
