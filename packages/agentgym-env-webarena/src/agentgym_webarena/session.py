"""``BrowserSession``: the browser context of one env instance, from its making (or clearing) at a
reset to its closing, with its tabs, CDP sessions, route guard and waits for what an action loads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from agentgym_webarena.browser import BrowserCrashedError, BrowserHost, is_closed_error, shared_host
from agentgym_webarena.navigation import Marks, Navigations
from agentgym_webarena.tasks import origin

T = TypeVar("T")
#: how long the page an action navigated to may take to fire its load event, in milliseconds
LOAD_PATIENCE_MS = 10_000
#: how long Chromium's error page for a refused navigation may take to commit, in seconds (bounded:
#: the navigation may have been superseded, and then no error page comes)
ERROR_PAGE_PATIENCE = 1.0
_LOCAL_SCHEMES = ("data:", "about:", "blob:")


class BrowserSession:
    """One env instance's context of the process's browser (its cookies, tabs, and the header that
    selects its copy of the bundled sites' data), made anew or cleared at each reset."""

    def __init__(
        self,
        *,
        chromium: str | None,
        headless: bool,
        viewport: tuple[int, int],
        step_timeout: float,
        token: str,
    ):
        self.chromium, self.headless = chromium, headless
        self.viewport = viewport
        self.step_timeout = step_timeout
        self.token = token
        self.context: Any = None
        self.page: Any = None  # the current tab
        self.allowed: set[str] = set()  # the origins of this task's sites
        self.notes: list[str] = []  # what the next observation tells the agent
        self.navigations = Navigations()
        self._bundled = False
        self._refused: set[Any] = set()  # pages whose navigation the guard refused
        self._cdp: dict[Any, Any] = {}
        self._context_key: tuple[bool, str | None] | None = None
        self._origins_seen: set[str] = set()  # sites of earlier tasks, whose storage a reuse clears
        self._host: BrowserHost | None = None

    @property
    def host(self) -> BrowserHost:
        if self._host is None:
            self._host = shared_host(self.chromium, self.headless)
        return self._host

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the browser's loop; a browser gone meanwhile is a lost session."""
        try:
            return self.host.run(coro, timeout=timeout or self.step_timeout + 30)
        except Exception as exc:
            if is_closed_error(exc):
                raise BrowserCrashedError(
                    "the browser of this session is gone (crashed or killed); the session is lost, "
                    "a new one gets a new browser"
                ) from exc
            raise

    def retarget(self, allowed: set[str], bundled: bool) -> None:
        """Serve a new task's sites from the next reset on (which clears what the last ones stored)."""
        self._origins_seen |= self.allowed
        self.allowed, self._bundled = allowed, bundled

    # -- the context's life cycle ----------------------------------------------------------------
    async def reset(
        self,
        start_urls: list[str],
        state: str | None,
        login: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        """A context as new (with ``state``'s cookies; signed in by ``login(request)``), its tabs
        at ``start_urls``, loaded."""
        old_pages = await self._fresh_context(state)
        if login is not None:
            await login(self.context.request)
        for url in start_urls:
            page = await self.context.new_page()
            await page.goto(url, wait_until="load")
        for page in old_pages:  # closed only now, so their renderer process serves the new tabs
            await page.close()
        self.page = self.context.pages[0]
        await self.page.bring_to_front()
        self.notes = []  # what the start pages requested is not the agent's doing
        self._refused = set()

    async def _fresh_context(self, state: str | None) -> list[Any]:
        """Reuse the context where it can be made as new, else make one; the old tabs to close."""
        key = (self._bundled, state)
        browser = getattr(self.context, "browser", None)
        alive = browser is not None and browser.is_connected()
        old_pages: list[Any] = []
        if alive and state is None and key == self._context_key:
            try:
                old_pages = await self._clear_context()
            except Exception as exc:
                if not is_closed_error(exc):
                    raise
                await self._new_context(state)  # the browser went away meanwhile
        else:
            await self._new_context(state)
        self._context_key = key
        return old_pages

    async def _new_context(self, state: str | None) -> None:
        await self.close()
        options: dict[str, Any] = {"viewport": {"width": self.viewport[0], "height": self.viewport[1]}}
        if self._bundled:
            from agentgym_webarena.sites import SESSION_HEADER  # the sites pick a database by it

            options["extra_http_headers"] = {SESSION_HEADER: self.token}
        if state is not None:
            options["storage_state"] = state
        self.context = await self.host.new_context(**options)
        self.context.set_default_timeout(self.step_timeout * 1000)
        await self.context.route("**/*", self._guard)
        self.context.on("page", self._on_page)
        self.context.on("request", self.navigations.on_request)

    async def _clear_context(self) -> list[Any]:
        """Make the session's context as new: no cookies, no site storage, and (once the caller has
        opened the new tabs and closed these) no tab with a history to go back into. Reusing it
        costs a fraction of a new context's start (measured in the README); contexts that carry a
        login state are made anew instead."""
        await self.context.clear_cookies()
        pages = list(self.context.pages)
        if pages:
            cdp = await self.cdp(pages[0])
            for site in self.allowed | self._origins_seen:
                await cdp.send(
                    "Storage.clearDataForOrigin",
                    {"origin": site, "storageTypes": "local_storage,session_storage,indexeddb,cache_storage"},
                )
        self.page, self._cdp = None, {}
        return pages  # the caller closes them once the new tabs are open

    def release(self) -> None:
        """Close the context, if one was made (from any thread; a browser gone already is fine)."""
        if self.context is not None and self._host is not None:
            try:
                self.run(self.close(), timeout=30)
            except Exception:
                pass

    async def close(self) -> None:
        context, self.context, self.page, self._cdp = self.context, None, None, {}
        if context is not None:
            try:
                await context.close()
            except Exception:
                pass  # a context of a crashed browser is gone already

    async def _guard(self, route: Any) -> None:
        request = route.request
        url = request.url
        if url.startswith(_LOCAL_SCHEMES) or origin(url) in self.allowed:
            await route.continue_()
            return
        self.notes.append(f"The request to {url} was refused: it is outside this task's sites.")
        if request.is_navigation_request() and request.frame.parent_frame is None:
            self._refused.add(request.frame.page)
        await route.abort("blockedbyclient")

    def _on_page(self, page: Any) -> None:
        page.set_default_timeout(self.step_timeout * 1000)
        page.on("framenavigated", self.navigations.on_commit)

    # -- tabs --------------------------------------------------------------------------------------
    async def cdp(self, page: Any) -> Any:
        """The CDP session of ``page`` (one per tab, kept while the tab lives)."""
        session = self._cdp.get(page)
        if session is None:
            session = self._cdp[page] = await self.context.new_cdp_session(page)
        return session

    async def new_tab(self) -> None:
        self.page = await self.context.new_page()

    async def focus(self, page: Any) -> None:
        self.page = page
        await page.bring_to_front()

    async def close_tab(self) -> None:
        page = self.page
        await page.close()
        self._cdp.pop(page, None)
        await self.focus(self.context.pages[-1])

    # -- waiting for what an action started ---------------------------------------------------------
    def marks(self) -> Marks:
        return self.navigations.marks()

    async def settle(self, before: Marks) -> None:
        """Let a navigation started since ``before`` finish: its document committed and loaded."""
        await self.navigations.follow(before)
        pages = self.context.pages
        if self.page not in pages:  # the action closed the current tab
            self.page = pages[-1]
        try:
            await self.page.wait_for_load_state("load", timeout=LOAD_PATIENCE_MS)
        except Exception:
            pass  # a page that never finishes loading is read as it is

    async def undo_refused(self) -> None:
        """After the guard refused the current tab's navigation, Chromium shows its error page: go
        back from it, so the agent stays on the page it acted on."""
        page, refused, self._refused = self.page, self._refused, set()
        if page is None or page not in refused:
            return
        if await self.navigations.until(lambda: page.url.startswith("chrome-error://"), ERROR_PAGE_PATIENCE):
            try:
                await page.go_back(wait_until="load")
            except Exception:
                pass
