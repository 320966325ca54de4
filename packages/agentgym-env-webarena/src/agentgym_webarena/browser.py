"""One Chromium per process, driven by Playwright from one thread.

Playwright's objects belong to the event loop that made them, while env code runs on whatever
thread the server or the rollout calls it from. So the process holds one ``BrowserHost``: a daemon
thread running an asyncio loop with Playwright and one browser; envs submit coroutines to it
(``host.run(coro)``) and each env owns one browser context (its cookies, tabs and headers). Sessions
interleave on the loop while pages load.

If the browser crashes (or is killed), the host notices the disconnection, fails the contexts it
had (their envs report the session broken) and starts a new browser for the next context.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentgym.errors import AgentGymError

T = TypeVar("T")
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
#: Tried first for a headless browser: Chromium's old headless mode, a binary of its own since
#: Chromium 132 (Debian: ``apt-get install chromium-headless-shell``). It runs no browser UI, so a
#: step of the expert costs ~100 CPU-ms over all processes against ~150-210 with ``chromium`` in its
#: new headless mode, with the same observations byte for byte (``bench/speed/webarena.py``;
#: ``tests/test_golden_observations.py``). Without it, the regular Chromium runs.
HEADLESS_CANDIDATES = ("chromium-headless-shell", "chrome-headless-shell")


class BrowserNotFoundError(AgentGymError):
    code = "browser_not_found"
    status = 503


class BrowserCrashedError(AgentGymError):
    """The browser that held this session's context is gone; the session cannot go on."""

    code = "browser_crashed"
    status = 500


def find_chromium(executable: str | None = None, headless: bool = True) -> str:
    """The Chromium to drive: ``executable``, else ``$AGENTGYM_CHROMIUM``, else the first on PATH of
    (when ``headless``) chromium-headless-shell, then chromium / chromium-browser / google-chrome.
    Never Playwright's own download."""
    given = executable or os.environ.get("AGENTGYM_CHROMIUM", "").strip()
    if given:
        path = shutil.which(given) or (given if os.path.isfile(given) else None)
        if path is None:
            raise BrowserNotFoundError(f"the Chromium executable {given!r} does not exist")
        return path
    names = (*HEADLESS_CANDIDATES, *CANDIDATES) if headless else CANDIDATES
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise BrowserNotFoundError(
        f"the webarena env needs Chromium and found none on PATH (looked for {', '.join(names)}): "
        "install Debian's chromium-headless-shell (apt-get install chromium-headless-shell; headless "
        "only, the least CPU per step) or chromium (apt-get install chromium), or set "
        "AGENTGYM_CHROMIUM to its path"
    )


def is_closed_error(exc: BaseException) -> bool:
    """Whether a Playwright error says the browser (or this context or page) is gone."""
    text = str(exc)
    return (
        "Target page, context or browser has been closed" in text
        or "Browser has been closed" in text
        or "Connection closed" in text
    )


def _playwright_missing() -> BrowserNotFoundError:
    return BrowserNotFoundError('the webarena env needs Playwright: pip install "playwright>=1.45"')


class BrowserHost:
    """The process's browser: ``run(coro)`` from any thread; ``context(...)`` makes a context."""

    def __init__(self, executable: str | None = None, headless: bool = True):
        self.executable = find_chromium(executable, headless)
        self.headless = headless
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="agentgym-browser", daemon=True)
        self._thread.start()
        self._playwright: Any = None
        self._browser: Any = None
        self._lock: asyncio.Lock | None = None
        self.launches = 0  # browsers started (a restart after a crash adds one)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
        """Run ``coro`` on the browser's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def browser(self) -> Any:
        """The live browser, launched (again) when there is none."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if self._playwright is None:
                try:
                    from playwright.async_api import async_playwright
                except ImportError:
                    raise _playwright_missing() from None
                self._playwright = await async_playwright().start()
            args = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]
            try:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self.executable, headless=self.headless, args=args
                )
            except Exception as exc:
                raise BrowserNotFoundError(
                    f"Chromium at {self.executable} failed to start: {' '.join(str(exc).split())[:300]}"
                ) from exc
            self.launches += 1
            return self._browser

    async def new_context(self, **options: Any) -> Any:
        browser = await self.browser()
        return await browser.new_context(**options)

    def close(self) -> None:
        async def shutdown() -> None:
            if self._browser is not None:
                try:
                    await self._browser.close()
                except Exception:
                    pass
            if self._playwright is not None:
                await self._playwright.stop()

        try:
            self.run(shutdown(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)


_host: BrowserHost | None = None
_host_lock = threading.Lock()


def shared_host(executable: str | None = None, headless: bool = True) -> BrowserHost:
    """The process's one browser host (made on first use)."""
    global _host
    with _host_lock:
        if _host is None:
            _host = BrowserHost(executable, headless)
        return _host
