"""Waiting in tests for something to have happened, never for a guessed while.

``wait_until(predicate)`` polls until ``predicate()`` is truthy and returns that value; past the
deadline it fails the test, saying what it waited for. ``async_wait_until`` is the same from a
coroutine (the predicate may be a coroutine function), so the loop's other tasks keep running.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

import httpx

DEFAULT_TIMEOUT = 30.0
INTERVAL = 0.02


def _timed_out(what: str, timeout: float, last: Any) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g}s waiting for {what} (last value: {last!r})")


def wait_until(
    predicate: Callable[[], Any], *, what: str, timeout: float = DEFAULT_TIMEOUT, interval: float = INTERVAL
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        time.sleep(interval)


async def async_wait_until(
    predicate: Callable[[], Any], *, what: str, timeout: float = DEFAULT_TIMEOUT, interval: float = INTERVAL
) -> Any:
    """``wait_until`` for a coroutine: ``predicate`` may return an awaitable."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        await asyncio.sleep(interval)


def metric(text: str, name: str) -> float | None:
    """The value of the unlabelled sample ``name`` in Prometheus text ``text`` (None: absent)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return float(value)
    return None


def server_metric(client: httpx.Client, name: str) -> float | None:
    """``metric`` of the server's ``/metrics`` right now (``client`` has the server's base URL)."""
    return metric(client.get("/metrics").text, name)
