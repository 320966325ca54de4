"""``WebArenaEnv``: a WebArena task in a real browser (Playwright driving Chromium).

Each env instance owns one browser context of the process's browser (``browser.py``): its own
cookies, tabs and, on the bundled sites, its own copy of the sites' database (selected by the
``X-AgentGym-Session`` header the context sends), so state-changing tasks run side by side and a
reset restores the pristine data exactly. Requests to any origin but the task's sites are refused.

The bundled sites listen on a free port of each process, so their real address differs from one
process to the next. The agent reads and writes them under fixed names instead
(:data:`SHOWN_ORIGINS`, ``http://shopping.test`` and ``http://reddit.test``): the same task and
actions read the same in any process, so a server can restore a lost session elsewhere by replay,
and the viewer can replay an episode to re-create its frames.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from agentgym import TextEnv
from agentgym.parsers import parse_fenced
from agentgym_webarena import axtree
from agentgym_webarena.actions import Action, ActionError, parse_action, playwright_keys
from agentgym_webarena.browser import BrowserCrashedError, BrowserHost, shared_host
from agentgym_webarena.evaluators import Judge, TaskConfigError, evaluate
from agentgym_webarena.tasks import AND, category, configured_tasks, resolve, site_urls, uses_bundled

SESSION_HEADER = "X-AgentGym-Session"
#: What the bundled sites are called in observations and actions (``.test`` is reserved: RFC 2606).
SHOWN_ORIGINS = {"shopping": "http://shopping.test", "reddit": "http://reddit.test"}
AUTH_DIR_VAR = "AGENTGYM_WEBARENA_AUTH_DIR"
INSTRUCTION = """You are an autonomous agent on the web. You are given an objective and the page as an \
accessibility tree, where each element has an [id]. Issue one action per turn, in a ``` code block:
click [id] | type [id] [text] [0|1] (1, the default, presses Enter after) | hover [id] | press [keys] |
scroll [up|down] | new_tab | tab_focus [i] | close_tab | goto [url] | go_back | go_forward |
stop [answer] (end the task; put the answer in the brackets if the objective asks for one, else stop [])."""

# Elements are found by the backend node id shown in the tree; clicks go to the element's centre
# after scrolling it into view, as a person's would (so overlays and disabled elements behave).
_CENTRE = """function() {
  const el = this.nodeType === 3 ? this.parentElement : this;
  el.scrollIntoView({block: 'center', inline: 'center'});
  const r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2, el.tagName];
}"""
_SELECT = """function(label) {
  const el = this.nodeType === 3 ? this.parentElement : this;
  const want = label.trim().toLowerCase();
  const option = [...el.options].find(o => o.label.trim().toLowerCase() === want || o.value.toLowerCase() === want);
  if (!option) return [...el.options].map(o => o.label);
  el.value = option.value;
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return null;
}"""


def _origin(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}".lower()


class WebArenaEnv(TextEnv):
    """Options: ``tasks`` (a folder or file of WebArena configs; default
    ``$AGENTGYM_WEBARENA_TASKS``, else the bundled tasks), ``chromium`` (the executable; default
    ``$AGENTGYM_CHROMIUM`` or PATH), ``headless``, ``viewport`` (width, height),
    ``step_timeout`` (seconds one action may take)."""

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        tasks: str | None = None,
        chromium: str | None = None,
        headless: bool = True,
        viewport: tuple[int, int] = (1280, 720),
        step_timeout: float = 30.0,
    ):
        super().__init__(render_mode=render_mode)
        self.tasks = configured_tasks(tasks)
        self.chromium, self.headless = chromium, headless
        self.viewport = (int(viewport[0]), int(viewport[1]))
        self.step_timeout = step_timeout
        self.token = uuid.uuid4().hex
        self.config: dict[str, Any] = {}
        self.category = ""
        self.context: Any = None
        self.page: Any = None
        self.allowed: set[str] = set()
        self.shown: set[int] = set()
        self.previous_action = "None"
        self.history: list[str] = []  # this episode's actions, as given (the expert reads them)
        self.notes: list[str] = []
        self.answer: str | None = None
        self.verdict: Any = None
        self._cdp: dict[Any, Any] = {}
        self._ids: dict[tuple[int, int], int] = {}  # (tab, backend node id) -> the [id] shown
        self._elements: dict[int, tuple[Any, int]] = {}  # [id] -> (page, backend node id)
        self._navigations = 0  # main-frame navigation requests (a click may start one)
        self._commits = 0  # main-frame documents committed
        self._bundled: list[str] = []
        self._to_shown: list[tuple[re.Pattern[str], str]] = []  # a bundled site's real origin -> name
        self._to_real: list[tuple[re.Pattern[str], str]] = []
        self._context_key: tuple[bool, str | None] | None = None
        self._origins_seen: set[str] = set()  # sites of earlier tasks, whose storage a reuse clears
        self._host: BrowserHost | None = None

    @property
    def host(self) -> BrowserHost:
        if self._host is None:
            self._host = shared_host(self.chromium, self.headless)
        return self._host

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        try:
            return self.host.run(coro, timeout=timeout or self.step_timeout + 30)
        except Exception as exc:
            if _closed(exc):
                raise BrowserCrashedError(
                    "the browser of this session is gone (crashed or killed); the session is lost, "
                    "a new one gets a new browser"
                ) from exc
            raise

    # -- reset ------------------------------------------------------------------------------------
    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        raw = self.tasks[task_id % len(self.tasks)]
        sites = list(raw.get("sites") or [])
        urls = site_urls(sites)
        self.config = resolve(raw, urls)
        self.category = category(raw)
        self._origins_seen |= self.allowed
        self.allowed = {_origin(u) for u in urls.values()}
        self._bundled = [s for s in sites if uses_bundled(s)]
        aliases = {_origin(urls[s]): SHOWN_ORIGINS[s] for s in self._bundled}
        # a port is not followed by a digit, a name not by a name's character
        self._to_shown = [
            (re.compile(re.escape(real) + r"(?![0-9])"), shown) for real, shown in aliases.items()
        ]
        self._to_real = [
            (re.compile(re.escape(shown) + r"(?![\w-])", re.I), real) for real, shown in aliases.items()
        ]
        if self._bundled:
            from agentgym_webarena.sites.server import shared_sites

            shared_sites().databases.reset(self.token)
        self.previous_action, self.notes, self.answer, self.verdict = "None", [], None, None
        self.history = []
        observation = self.to_shown(self._run(self._reset()))
        return observation, {
            "instruction": INSTRUCTION,
            "intent": self.to_shown(self.config["intent"]),
            "sites": sites,
            "category": self.category,
        }

    async def _reset(self) -> str:
        state = self._storage_state()
        key = (bool(self._bundled), state)
        old_pages: list[Any] = []
        browser = getattr(self.context, "browser", None)
        alive = browser is not None and browser.is_connected()
        if alive and state is None and key == self._context_key:
            try:
                old_pages = await self._clear_context()
            except Exception as exc:
                if not _closed(exc):
                    raise
                await self._new_context(state)  # the browser went away meanwhile
        else:
            await self._new_context(state)
        self._context_key = key
        if self.config.get("require_login") and self._bundled:
            await self._login()
        for url in str(self.config["start_url"]).split(AND):
            page = await self.context.new_page()
            await page.goto(url.strip(), wait_until="load")
        for page in old_pages:  # closed only now, so their renderer process serves the new tabs
            await page.close()
        self.page = self.context.pages[0]
        await self.page.bring_to_front()
        self.notes = []  # what the start pages requested is not the agent's doing
        return await self._observe()

    async def _new_context(self, state: str | None) -> None:
        await self._close_context()
        options: dict[str, Any] = {"viewport": {"width": self.viewport[0], "height": self.viewport[1]}}
        if self._bundled:
            options["extra_http_headers"] = {SESSION_HEADER: self.token}
        if state is not None:
            options["storage_state"] = state
        self.context = await self.host.new_context(**options)
        self.context.set_default_timeout(self.step_timeout * 1000)
        await self.context.route("**/*", self._guard)
        self.context.on("page", self._on_page)
        self.context.on("request", self._on_request)

    async def _clear_context(self) -> list[Any]:
        """Make the session's context as new: no cookies, no site storage, and (once the caller has
        opened the new tabs and closed these) no tab with a history to go back into. Reusing it costs a fraction of a new context's start (measured in the README);
        contexts that carry a login state are made anew instead."""
        await self.context.clear_cookies()
        pages = list(self.context.pages)
        if pages:
            cdp = await self._session(pages[0])
            for origin in self.allowed | self._origins_seen:
                await cdp.send(
                    "Storage.clearDataForOrigin",
                    {
                        "origin": origin,
                        "storageTypes": "local_storage,session_storage,indexeddb,cache_storage",
                    },
                )
        self.page, self._cdp, self._ids, self._elements = None, {}, {}, {}
        return pages  # the caller closes them once the new tabs are open

    def _storage_state(self) -> str | None:
        """A real deployment's login cookies: WebArena's ``storage_state`` file, looked up as given,
        then under ``$AGENTGYM_WEBARENA_AUTH_DIR``."""
        given = self.config.get("storage_state")
        if not given or not self.config.get("require_login") or self._bundled:
            return None
        candidates = [Path(given)]
        if os.environ.get(AUTH_DIR_VAR):
            candidates.append(Path(os.environ[AUTH_DIR_VAR]) / Path(given).name)
        for path in candidates:
            if path.is_file():
                return str(path)
        raise TaskConfigError(
            f"the task needs the login state {given!r}: make it with WebArena's auto-login script and "
            f"put it there or in ${AUTH_DIR_VAR}"
        )

    async def _login(self) -> None:
        from agentgym_webarena.bundled import sign_in

        for site in self._bundled:
            await sign_in(self.context.request, site, site_urls([site])[site], self.config)

    async def _guard(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("data:", "about:", "blob:")) or _origin(url) in self.allowed:
            await route.continue_()
            return
        self.notes.append(f"The request to {url} was refused: it is outside this task's sites.")
        await route.abort("blockedbyclient")

    def _on_page(self, page: Any) -> None:
        page.set_default_timeout(self.step_timeout * 1000)
        page.on("framenavigated", lambda frame: self._count_commit(page, frame))

    def _on_request(self, request: Any) -> None:
        if request.is_navigation_request() and request.frame.parent_frame is None:
            self._navigations += 1

    def _count_commit(self, page: Any, frame: Any) -> None:
        if frame.parent_frame is None:
            self._commits += 1

    async def _close_context(self) -> None:
        context, self.context, self.page, self._cdp = self.context, None, None, {}
        self._ids, self._elements = {}, {}
        if context is not None:
            try:
                await context.close()
            except Exception:
                pass  # a context of a crashed browser is gone already

    # -- observation ------------------------------------------------------------------------------
    async def _session(self, page: Any) -> Any:
        cdp = self._cdp.get(page)
        if cdp is None:
            cdp = self._cdp[page] = await self.context.new_cdp_session(page)
        return cdp

    async def _observe(self) -> str:
        await self._undo_refused()
        # A navigation an action started can show itself late under load (after _settle stopped
        # looking): one seen while the page was being read is let finish and the page read again,
        # with the [id]s handed out by the discarded read taken back.
        for attempt in range(3):
            marks, ids, elements = (self._navigations, self._commits), dict(self._ids), dict(self._elements)
            tree = await self._read_page()
            if (self._navigations, self._commits) == marks or attempt == 2:
                break
            self._ids, self._elements = ids, elements
            await self._settle(*marks)
        page, self.shown = self.page, tree.ids
        tabs = []
        for i, p in enumerate(self.context.pages):
            title = await p.title()
            tabs.append(f"Tab {i}{' (current)' if p is page else ''}: {title}")
        lines = [
            "OBSERVATION:",
            " | ".join(tabs),
            tree.text,
            f"URL: {page.url}",
            f"OBJECTIVE: {self.config['intent']}",
            f"PREVIOUS ACTION: {self.previous_action}",
        ]
        if self.notes:
            lines.append("NOTE: " + " ".join(dict.fromkeys(self.notes)))
        self.notes = []
        return "\n".join(lines)

    async def _read_page(self) -> axtree.AXTree:
        page = self.page

        def number(backend: int) -> int:
            key = (id(page), backend)
            if key not in self._ids:
                self._ids[key] = len(self._ids) + 1
                self._elements[self._ids[key]] = (page, backend)
            return self._ids[key]

        return await axtree.snapshot(await self._session(page), self.viewport, number)

    def to_shown(self, text: str) -> str:
        """``text`` with the bundled sites' real origins under their shown names."""
        for pattern, shown in self._to_shown:
            text = pattern.sub(shown, text)
        return text

    def to_real(self, text: str) -> str:
        """``text`` (an action) with the bundled sites' shown names as their real origins."""
        for pattern, real in self._to_real:
            text = pattern.sub(real, text)
        return text

    # -- actions ----------------------------------------------------------------------------------
    def step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self._step(self.to_real(action))
        return self.to_shown(observation), reward, terminated, truncated, info

    def _step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if "```" in action:  # a model's whole text (AgentGym's client sends it): the first block
            block = parse_fenced(action)
            action = block.action or action
        self.history.append(action)
        try:
            parsed = parse_action(action)
        except ActionError as exc:
            text = f"Invalid action: {exc.message}\n\n{self.last_observation}"
            return text, 0.0, False, False, {"valid_action": False, "category": self.category}
        if parsed.kind == "stop":
            return self._stop(parsed.text, action)
        ok, problem = self._run(self._act(parsed))
        self.previous_action = action.strip()
        if problem:
            self.notes.append(problem)
        observation = self._run(self._observe())
        return observation, 0.0, False, False, {"valid_action": ok, "category": self.category}

    async def _act(self, action: Action) -> tuple[bool, str]:
        """(valid, what went wrong): an unknown element or a failed action is told, not raised."""
        page = self.page
        kind = action.kind
        before = (self._navigations, self._commits)
        try:
            if kind in ("click", "hover", "type"):
                return await self._element_action(action)
            if kind == "press":
                await page.keyboard.press(playwright_keys(action.text))
            elif kind == "scroll":
                sign = 1 if action.text == "down" else -1
                await page.evaluate(f"window.scrollBy(0, {sign} * window.innerHeight * 0.8)")
                return True, ""  # nothing to wait for
            elif kind == "new_tab":
                self.page = await self.context.new_page()
            elif kind == "tab_focus":
                pages = self.context.pages
                if not 0 <= (action.index or 0) < len(pages):
                    return False, f"There is no tab {action.index}: the tabs are 0 to {len(pages) - 1}."
                self.page = pages[action.index or 0]
                await self.page.bring_to_front()
            elif kind == "close_tab":
                if len(self.context.pages) == 1:
                    return False, "This is the last tab; it stays open."
                await page.close()
                self._cdp.pop(page, None)
                self.page = self.context.pages[-1]
                await self.page.bring_to_front()
            elif kind == "goto":
                url = action.text
                if not url.startswith(("http://", "https://")):
                    return False, f"goto needs a full http(s) URL, got {url!r}."
                if _origin(url) not in self.allowed:
                    sites = ", ".join(sorted(self.allowed))
                    return (
                        False,
                        f"Navigation to {url} was refused: it is outside this task's sites ({sites}).",
                    )
                await page.goto(url, wait_until="load")
            elif kind == "go_back":
                await page.go_back(wait_until="load")
            elif kind == "go_forward":
                await page.go_forward(wait_until="load")
        except Exception as exc:
            if _closed(exc):
                raise
            return False, f"The action failed: {_short(exc)}"
        await self._settle(*before)
        return True, ""

    async def _element_action(self, action: Action) -> tuple[bool, str]:
        element = action.element
        if element not in self.shown:
            return False, (
                f"There is no element [{element}] in the current view. Use an [id] from the latest "
                "observation (scroll to see more of the page)."
            )
        page, backend = self._elements[element]
        if page is not self.page:
            return False, f"[{element}] is on another tab; use the ids of the current observation."
        cdp = await self._session(page)
        before = (self._navigations, self._commits)
        try:
            node = await cdp.send("DOM.resolveNode", {"backendNodeId": backend})
            object_id = node["object"]["objectId"]
            centre = await cdp.send(
                "Runtime.callFunctionOn",
                {"objectId": object_id, "functionDeclaration": _CENTRE, "returnByValue": True},
            )
            x, y, tag = centre["result"]["value"]
            if action.kind == "hover":
                await page.mouse.move(x, y)
            elif action.kind == "click":
                await page.mouse.click(x, y)
            elif tag == "SELECT":
                picked = await cdp.send(
                    "Runtime.callFunctionOn",
                    {
                        "objectId": object_id,
                        "functionDeclaration": _SELECT,
                        "arguments": [{"value": action.text}],
                        "returnByValue": True,
                    },
                )
                options = picked["result"].get("value")
                if options:
                    return (
                        False,
                        f"[{element}] has no option {action.text!r}; its options: {', '.join(options)}.",
                    )
            else:
                await page.mouse.click(x, y)
                await page.keyboard.press("Control+a")
                await page.keyboard.type(action.text)
                if action.enter:
                    await page.keyboard.press("Enter")
        except Exception as exc:
            if _closed(exc):
                raise
            return False, f"The action on [{element}] failed: {_short(exc)}"
        await self._settle(*before)
        return True, ""

    async def _settle(self, navigations: int, commits: int) -> None:
        """Let a navigation the action started finish (the sites answer in milliseconds): an action's
        request starts a little after the click returns, and its document commits after that."""
        # The request of a navigation an action started reaches us a few milliseconds after the
        # action returns (measured: ~5 ms on the bundled sites, more under load): look for one for
        # up to 50 ms, going on as soon as it shows.
        for _ in range(10):
            if self._navigations != navigations:
                break
            await asyncio.sleep(0.005)
        if self._navigations != navigations:
            for _ in range(100):
                if self._commits != commits:
                    break
                await asyncio.sleep(0.05)
        pages = self.context.pages
        if self.page not in pages:
            self.page = pages[-1]
        try:
            await self.page.wait_for_load_state("load", timeout=10_000)
        except Exception:
            pass

    async def _undo_refused(self) -> None:
        """After a navigation out of the task's sites was refused, Chromium shows its error page: go
        back from it, so the agent stays on the page it acted on."""
        if not any("refused" in note for note in self.notes) or self.page is None:
            return
        for _ in range(20):  # the error page commits a few milliseconds after the refusal
            if self.page.url.startswith("chrome-error://"):
                try:
                    await self.page.go_back(wait_until="load")
                except Exception:
                    pass
                return
            await asyncio.sleep(0.05)

    # -- the end ----------------------------------------------------------------------------------
    def _stop(self, answer: str, raw: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.answer = answer.strip()
        self.previous_action = raw.strip()
        # the answer as the agent wrote it: a URL in it under the shown name it read
        shown_answer = self.to_shown(self.answer)
        verdict = self._run(self._evaluate(self.answer))
        self.verdict = verdict
        info = {
            "success": verdict.score == 1.0,
            "answer": shown_answer,
            "eval": verdict.checks,
            "skipped": verdict.skipped,
            "category": self.category,
        }
        text = "The task is done; it was " + ("completed." if verdict.score == 1.0 else "not completed.")
        return text, self.reward_to(verdict.score), True, False, info

    async def _evaluate(self, answer: str) -> Any:
        page_url = self.page.url

        async def fetch(url: str, locator: str) -> str:
            page = self.page if url == "last" else await self.context.new_page()
            try:
                if url != "last":
                    await page.goto(url, wait_until="load")
                if not locator.strip():
                    return await page.content()
                if locator.startswith(("document.", "[...document", "(document")):
                    try:
                        value = await page.evaluate(f"() => {locator}")
                    except Exception as exc:
                        if _closed(exc):
                            raise
                        return ""  # as WebArena: a locator that throws (no such element) finds nothing
                    return "" if value is None else str(value)
                raise TaskConfigError(
                    f"unsupported program_html locator {locator!r}: use a document.* expression"
                )
            finally:
                if page is not self.page:
                    await page.close()

        return await evaluate(self.config, answer, page_url, fetch, Judge.from_env())

    # -- rendering and cleanup ----------------------------------------------------------------------
    def render(self) -> Any:
        if self.render_mode == "ansi":
            return self.last_observation
        if self.page is None:
            return None
        png = self._run(self.page.screenshot(type="png"))
        import numpy as np
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    def close(self) -> None:
        if self.context is not None and self._host is not None:
            try:
                self._run(self._close_context(), timeout=30)
            except Exception:
                pass
        if self._bundled:
            from agentgym_webarena.sites.server import shared_sites

            shared_sites().databases.drop(self.token)
        super().close()


def _closed(exc: BaseException) -> bool:
    text = str(exc)
    return (
        "Target page, context or browser has been closed" in text
        or "Browser has been closed" in text
        or ("Connection closed" in text)
    )


def _short(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return first[:200]
