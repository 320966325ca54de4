"""``WebArenaEnv``: a WebArena task in a real browser (Playwright driving Chromium).

Each env instance owns one browser context of the process's browser (``session.py``): its own
cookies, tabs and, on the bundled sites, its own copy of the sites' database (selected by the
``X-AgentGym-Session`` header the context sends), so state-changing tasks run side by side and a
reset restores the pristine data exactly. Requests to any origin but the task's sites are refused.
The env is the glue: a reset makes the session new at the task's start pages, a step parses the
action, carries it out (``act.py``) and reads the next observation (``observe.py``).

The bundled sites listen on a free port of each process, so their real address differs from one
process to the next. The agent reads and writes them under fixed names instead
(:data:`SHOWN_ORIGINS`, ``http://shopping.test`` and ``http://reddit.test``): the same task and
actions read the same in any process, so a server can restore a lost session elsewhere by replay,
and the viewer can replay an episode to re-create its frames.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

from agentgym import TextEnv
from agentgym.errors import UnknownTaskError
from agentgym.parsers import parse_fenced
from agentgym_webarena.act import act
from agentgym_webarena.actions import ActionError, parse_action
from agentgym_webarena.aliases import SHOWN_ORIGINS, OriginAliases
from agentgym_webarena.browser import BrowserHost, is_closed_error
from agentgym_webarena.evaluators import Judge, TaskConfigError, evaluate
from agentgym_webarena.observe import ElementIds, observe
from agentgym_webarena.session import BrowserSession
from agentgym_webarena.tasks import (
    AND,
    AUTH_DIR_VAR,
    category,
    configured_tasks,
    origin,
    resolve,
    site_urls,
    split_of,
    storage_state,
    uses_bundled,
)

__all__ = ["AUTH_DIR_VAR", "INSTRUCTION", "SHOWN_ORIGINS", "WebArenaEnv"]

INSTRUCTION = """You are an autonomous agent on the web. You are given an objective and the page as an \
accessibility tree, where each element has an [id]. Issue one action per turn, in a ``` code block:
click [id] | type [id] [text] [0|1] (1, the default, presses Enter after) | hover [id] | press [keys] |
scroll [up|down] | new_tab | tab_focus [i] | close_tab | goto [url] | go_back | go_forward |
stop [answer] (end the task; put the answer in the brackets if the objective asks for one, else stop [])."""

Step = tuple[str, float, bool, bool, dict[str, Any]]


class WebArenaEnv(TextEnv):
    """Options: ``tasks`` (a folder or file of WebArena configs; default
    ``$AGENTGYM_WEBARENA_TASKS``, else the bundled tasks), ``chromium`` (the executable; default
    ``$AGENTGYM_CHROMIUM`` or PATH), ``headless``, ``viewport`` (width, height),
    ``step_timeout`` (seconds one action may take)."""

    #: What legitimately differs between two instances after the same reset (the kit's check of
    #: instance state): ``session``, the instance's own Chromium (pages, contexts, an event loop);
    #: ``token``, the instance's own key to the bundled sites' databases (a uuid); ``ids``, made
    #: afresh at every reset, but keyed by the page object's id and Chromium's node ids, which two
    #: browsers number differently (the ``[id]``s an agent sees are compared by the episode checks).
    persistent_attributes = ("session", "token", "ids")

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
        self.token = uuid.uuid4().hex
        self.session = BrowserSession(
            chromium=chromium,
            headless=headless,
            viewport=(int(viewport[0]), int(viewport[1])),
            step_timeout=step_timeout,
            token=self.token,
        )
        self.ids = ElementIds()
        self.config: dict[str, Any] = {}
        self.category = ""
        self.previous_action = "None"
        self.history: list[str] = []  # this episode's actions, as given (the expert reads them)
        self.answer: str | None = None
        self.verdict: Any = None
        self._bundled: list[str] = []
        self._aliases = OriginAliases()

    # the session's parts, under the names the env has always had
    @property
    def host(self) -> BrowserHost:
        return self.session.host

    @property
    def context(self) -> Any:
        return self.session.context

    @property
    def page(self) -> Any:
        return self.session.page

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self.session.run(coro, timeout)

    def to_shown(self, text: str) -> str:
        """``text`` with the bundled sites' real origins under their shown names."""
        return self._aliases.to_shown(text)

    def to_real(self, text: str) -> str:
        """``text`` (an action) with the bundled sites' shown names as their real origins."""
        return self._aliases.to_real(text)

    # -- reset ------------------------------------------------------------------------------------
    def check_task_id(self, task_id: int) -> None:
        """Ids index this env's task list (its ``tasks`` option may differ from the spec's): any other
        id is refused, never wrapped onto another task."""
        if task_id >= len(self.tasks):
            splits: dict[str, list[int]] = {}
            for i, config in enumerate(self.tasks):
                splits.setdefault(split_of(config), []).append(i)
            raise UnknownTaskError.among(task_id, "webarena", splits)

    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        raw = self.tasks[task_id]
        sites = list(raw.get("sites") or [])
        urls = site_urls(sites)
        self.config = resolve(raw, urls)
        self.category = category(raw)
        self._bundled = [s for s in sites if uses_bundled(s)]
        self.session.retarget({origin(u) for u in urls.values()}, bool(self._bundled))
        self._aliases = OriginAliases({origin(urls[s]): SHOWN_ORIGINS[s] for s in self._bundled})
        if self._bundled:
            from agentgym_webarena.sites.server import shared_sites

            shared_sites().databases.reset(self.token)
        self.previous_action, self.answer, self.verdict = "None", None, None
        self.history = []
        observation = self.to_shown(self._run(self._reset()))
        return observation, {
            "instruction": INSTRUCTION,
            "intent": self.to_shown(self.config["intent"]),
            "sites": sites,
            "category": self.category,
        }

    async def _reset(self) -> str:
        state = storage_state(self.config, bool(self._bundled))
        login = self._login if self.config.get("require_login") and self._bundled else None
        start_urls = [url.strip() for url in str(self.config["start_url"]).split(AND)]
        self.ids = ElementIds()
        await self.session.reset(start_urls, state, login)
        return await self._observe()

    async def _login(self, request: Any) -> None:
        from agentgym_webarena.bundled import sign_in

        for site in self._bundled:
            await sign_in(request, site, site_urls([site])[site], self.config)

    async def _observe(self) -> str:
        return await observe(self.session, self.ids, self.config["intent"], self.previous_action)

    # -- actions ----------------------------------------------------------------------------------
    def step_action(self, action: str) -> Step:
        observation, reward, terminated, truncated, info = self._step(self.to_real(action))
        return self.to_shown(observation), reward, terminated, truncated, info

    def _step(self, action: str) -> Step:
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
        ok, problem = self._run(act(self.session, self.ids, parsed))
        self.previous_action = action.strip()
        if problem:
            self.session.notes.append(problem)
        observation = self._run(self._observe())
        return observation, 0.0, False, False, {"valid_action": ok, "category": self.category}

    # -- the end ----------------------------------------------------------------------------------
    def _stop(self, answer: str, raw: str) -> Step:
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
        return await evaluate(self.config, answer, self.page.url, self._fetch, Judge.from_env())

    async def _fetch(self, url: str, locator: str) -> str:
        """What ``program_html`` reads: ``locator``'s value on ``url`` (``last``: the current tab),
        opened in this session's context."""
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
                    if is_closed_error(exc):
                        raise
                    return ""  # as WebArena: a locator that throws (no such element) finds nothing
                return "" if value is None else str(value)
            raise TaskConfigError(
                f"unsupported program_html locator {locator!r}: use a document.* expression"
            )
        finally:
            if page is not self.page:
                await page.close()

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
        self.session.release()
        if self._bundled:
            from agentgym_webarena.sites.server import shared_sites

            shared_sites().databases.drop(self.token)
        super().close()
