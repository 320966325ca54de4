"""``AsyncEnvPool``: many sessions of one env over one or more servers, stepped in batches."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentgym.client.retry import SEND, arun, replaying, retrying
from agentgym.client.transport import AsyncHTTP, raise_for
from agentgym.errors import (
    AgentGymError,
    CapacityError,
    EnvCrashedError,
    ServerUnavailableError,
    UnknownSessionError,
)
from agentgym.protocol import StepOutcome


@dataclass
class PoolSession:
    """One episode's session in an ``AsyncEnvPool``."""

    task_id: int | None
    seed: int | None = None
    url: str = ""
    session_id: int | None = None
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    done: bool = False
    error: str | None = None
    restarts: int = 0
    #: the tasks an autoreset of ``True`` starts next, in turn (given to ``open``)
    tasks: list[int] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.error is not None


def _then(pair: tuple) -> tuple[int, int | None] | bool | None:
    """A pair's autoreset (its third element): ``(task_id, seed)``, ``True``, or None."""
    then = pair[2] if len(pair) > 2 else None
    return then if then is None or then is True or isinstance(then, tuple) else (then, None)


def _item(s: PoolSession, action: str, then: tuple[int, int | None] | bool | None) -> dict[str, Any]:
    """One ``/v1/step`` item, with its autoreset where one is asked for."""
    item: dict[str, Any] = {"session_id": s.session_id, "action": action}
    if then is True:
        item["autoreset"] = True
    elif then is not None:
        item["autoreset"] = {"task_id": then[0], "seed": then[1]}
    return item


class AsyncEnvPool:
    """Many sessions of one env over one or more servers, stepped in batches.

    Requests are retried by the shared policy (``client/retry.py``); a session a server lost is
    re-created (on another server if there is one) and its episode replayed, at most
    ``max_restarts`` times per episode; one that cannot be restored is marked failed (``error``).

    >>> async with AsyncEnvPool(["http://127.0.0.1:36001"], "guess") as pool:
    ...     sessions = await pool.open(range(16))
    ...     outcomes = await pool.step([(s, "guess 50") for s in sessions])
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        env: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.25,
        max_restarts: int = 2,
        max_connections: int = 64,
    ):
        self.urls = [urls.rstrip("/")] if isinstance(urls, str) else [u.rstrip("/") for u in urls]
        if not self.urls:
            raise ValueError("AsyncEnvPool needs at least one server URL")
        self.env = env
        self.retries, self.backoff, self.max_restarts = retries, backoff, max_restarts
        # max_connections per server
        self.http = AsyncHTTP(timeout=timeout, token=token, max_connections=max_connections)
        self._next_url = itertools.cycle(range(len(self.urls)))
        self.sessions: list[PoolSession] = []
        self._experts_wanted: list[tuple[PoolSession, asyncio.Future]] = []  # this tick's expert asks
        self._expert_tasks: set[asyncio.Task] = set()
        self.restored = 0  # lost sessions re-created and replayed to where they stood

    async def __aenter__(self) -> AsyncEnvPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _request(self, url: str, method: str, path: str, json: Any = None) -> Any:
        # encoded by orjson: the standard library's cost a batch several times more
        body = orjson.dumps(json) if json is not None else None

        def do(command: Any) -> Awaitable[Any]:
            if command is SEND:
                return self.http.send(method, url, path, body)
            return asyncio.sleep(command.seconds)

        return raise_for(await arun(retrying(method, url, self.retries, self.backoff), do))

    # -- sessions -----------------------------------------------------------------------------
    async def open(
        self,
        task_ids: Sequence[int | None],
        seed: int | None = None,
        tasks: Sequence[Sequence[int]] | None = None,
    ) -> list[PoolSession]:
        """Create one session per task id, spread over the servers; failures come back failed.
        ``tasks``: per session, the task ids its autoresets of ``True`` start in turn."""
        sessions = [PoolSession(task_id=t, seed=seed) for t in task_ids]
        for s, queue in zip(sessions, tasks or (), strict=False):
            s.tasks = list(queue)
        await asyncio.gather(*(self._create(s) for s in sessions))
        self.sessions.extend(sessions)
        return sessions

    async def _create(self, s: PoolSession, *, avoid: str | None = None) -> None:
        order = [self.urls[next(self._next_url)]] + self.urls
        if avoid is not None and len(self.urls) > 1:
            order = [u for u in order if u != avoid] + [avoid]
        last: Exception | None = None
        for url in dict.fromkeys(order):
            try:
                body = {"env": self.env, "task_id": s.task_id, "seed": s.seed}
                if s.tasks:  # what is left of them, on a session re-created after a loss too
                    body["tasks"] = s.tasks
                r = await self._request(url, "POST", "/v1/sessions", json=body)
            except (ServerUnavailableError, CapacityError, EnvCrashedError) as exc:
                last = exc
                continue
            except AgentGymError as exc:
                s.error = f"{exc.code}: {exc.message}"
                return
            s.url, s.session_id, s.observation, s.info = url, r["session_id"], r["observation"], r["info"]
            s.actions, s.done, s.error = [], False, None
            return
        s.error = f"could not create a session on any server: {last}"

    async def reset(self, s: PoolSession, task_id: int | None = None, seed: int | None = None) -> PoolSession:
        s.task_id, s.seed = task_id if task_id is not None else s.task_id, seed
        try:
            r = await self._request(
                s.url, "POST", f"/v1/sessions/{s.session_id}/reset", json={"task_id": s.task_id, "seed": seed}
            )
        except (UnknownSessionError, ServerUnavailableError):
            await self._create(s, avoid=s.url)
            return s
        s.observation, s.info, s.actions, s.done, s.error = r["observation"], r["info"], [], False, None
        s.restarts = 0  # max_restarts counts per episode
        return s

    async def _restore(self, s: PoolSession, *, avoid: str | None) -> bool:
        """Re-create a lost session and replay its actions; False (``error`` set) if it cannot be restored."""
        if s.restarts >= self.max_restarts:
            s.error = f"session lost {s.restarts + 1} times; giving up"
            return False
        s.restarts += 1
        actions, seen = list(s.actions), s.observation
        await self._create(s, avoid=avoid)
        if s.failed:
            return False
        try:
            await arun(replaying(actions, seen, s.observation), lambda past: self._replay_step(s, past))
        except AgentGymError as exc:
            diverged = exc.code == "replay_diverged"
            s.error = exc.message if diverged else f"replay after a lost session failed: {exc.message}"
            return False
        s.actions = actions
        self.restored += 1
        return True

    async def _replay_step(self, s: PoolSession, action: str) -> dict:
        r = await self._request(s.url, "POST", f"/v1/sessions/{s.session_id}/step", json={"action": action})
        s.observation, s.info = r["observation"], r["info"]
        return r

    # -- stepping -----------------------------------------------------------------------------
    async def step(self, pairs: Sequence[tuple]) -> list[StepOutcome]:
        """Step sessions in one batched request per server; returns outcomes in order.

        A pair ``(session, action)`` may carry a third element, the task its session starts next
        if this step ends the episode (an autoreset: the task id, ``(task_id, seed)``, or ``True``
        for the next of the tasks the session was opened with). The server then resets it in the
        same request: the outcome is the ended episode's last step, with the new episode's first
        ``{"observation", "info"}`` (or ``{"error"}``) as ``outcome.reset``, and the session holds
        the new episode."""
        if len({id(p[0]) for p in pairs}) != len(pairs):
            raise ValueError("a session appears twice in one step() call; step it in the next call")
        outcomes: list[StepOutcome | None] = [None] * len(pairs)
        thens = [_then(pair) for pair in pairs]
        by_url: dict[str, list[int]] = {}
        for i, pair in enumerate(pairs):
            s = pair[0]
            if s.failed:
                outcomes[i] = StepOutcome(error=s.error)
            else:
                by_url.setdefault(s.url, []).append(i)

        async def run(url: str, idxs: list[int]) -> None:
            body = {"steps": [_item(pairs[i][0], pairs[i][1], thens[i]) for i in idxs]}
            try:
                results = (await self._request(url, "POST", "/v1/step", json=body))["results"]
            except ServerUnavailableError:
                results = [
                    {"error": {"code": "server_unavailable", "message": f"{url} unreachable"}} for _ in idxs
                ]
            except AgentGymError as exc:
                results = [{"error": {"code": exc.code, "message": exc.message}} for _ in idxs]
            retry = []
            for i, r in zip(idxs, results, strict=True):
                s, action = pairs[i][0], pairs[i][1]
                if "error" not in r:
                    outcomes[i] = self._apply(s, action, r, thens[i])
                elif r["error"]["code"] in ("unknown_session", "server_unavailable", "env_crashed"):
                    retry.append(i)
                else:
                    outcomes[i] = StepOutcome(error=f"{r['error']['code']}: {r['error']['message']}")
            if retry:
                await asyncio.gather(
                    *(self._retry_one(pairs[i][0], pairs[i][1], url, outcomes, i) for i in retry)
                )

        if len(by_url) == 1:  # one server: no task to gather (a request's worth of loop turns)
            await run(*next(iter(by_url.items())))
        else:
            await asyncio.gather(*(run(url, idxs) for url, idxs in by_url.items()))
        return [o if o is not None else StepOutcome(error="no result") for o in outcomes]

    async def _retry_one(self, s: PoolSession, action: str, url: str, outcomes: list, i: int) -> None:
        if not await self._restore(s, avoid=url):
            outcomes[i] = StepOutcome(error=s.error)
            return
        try:
            r = await self._request(
                s.url, "POST", f"/v1/sessions/{s.session_id}/step", json={"action": action}
            )
        except AgentGymError as exc:
            s.error = f"{exc.code}: {exc.message}"
            outcomes[i] = StepOutcome(error=s.error)
            return
        outcomes[i] = self._apply(s, action, r)

    @staticmethod
    def _apply(
        s: PoolSession, action: str, r: dict, then: tuple[int, int | None] | bool | None = None
    ) -> StepOutcome:
        outcome = StepOutcome(r["observation"], r["reward"], r["terminated"], r["truncated"], r["info"])
        reset = r.get("reset")
        if reset is not None and "error" not in reset:  # the session holds the next episode now
            if then is True:
                s.task_id = reset["info"].get("task_id", s.task_id)
                if s.tasks and s.tasks[0] == s.task_id:
                    s.tasks.pop(0)
            elif then is not None:
                s.task_id, s.seed = then
            s.observation, s.info = reset["observation"], reset["info"]
            s.actions, s.done, s.restarts = [], False, 0
        else:
            s.actions.append(action)
            s.observation, s.info = r["observation"], r["info"]
            s.done = bool(r["terminated"] or r["truncated"])
        outcome.reset = reset
        return outcome

    async def expert_action(self, s: PoolSession) -> str:
        """The env's expert's next action; a lost session is restored first (like ``step``).

        Calls made together (the scripted policy asks for every active episode at once) go out as
        one ``POST /v1/expert`` per server: one request per episode per turn was most of a remote
        rollout's requests (bench/speed/rollout.py)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._experts_wanted.append((s, future))
        if len(self._experts_wanted) == 1:  # the first of this tick's calls sends them all
            loop.call_soon(self._start_sending_experts)
        return await future

    def _start_sending_experts(self) -> None:
        task = asyncio.ensure_future(self._send_experts())
        self._expert_tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._expert_tasks.discard)

    async def _send_experts(self) -> None:
        wanted, self._experts_wanted = self._experts_wanted, []
        by_url: dict[str, list[tuple[PoolSession, asyncio.Future]]] = {}
        for s, future in wanted:
            by_url.setdefault(s.url, []).append((s, future))

        async def settle(s: PoolSession, future: asyncio.Future, coro: Any) -> None:
            try:
                result = await coro
            except BaseException as exc:  # noqa: BLE001 - handed to the caller awaiting it
                if not future.done():
                    future.set_exception(exc)
                return
            if not future.done():
                future.set_result(result)

        async def run(url: str, group: list[tuple[PoolSession, asyncio.Future]]) -> None:
            body = {"session_ids": [s.session_id for s, _ in group]}
            try:
                results = (await self._request(url, "POST", "/v1/expert", json=body))["results"]
            except AgentGymError:
                results = [None] * len(group)  # each asks on its own, with restoration
            single = []
            for (s, future), r in zip(group, results, strict=True):
                if r is not None and "action" in r:
                    future.set_result(r["action"])
                elif r is not None and r["error"]["code"] not in ("unknown_session", "server_unavailable"):
                    future.set_exception(AgentGymError(r["error"]["message"], code=r["error"]["code"]))
                else:
                    single.append(settle(s, future, self._expert_one(s)))
            await asyncio.gather(*single)

        await asyncio.gather(*(run(url, group) for url, group in by_url.items()))

    async def _expert_one(self, s: PoolSession) -> str:
        try:
            return (await self._request(s.url, "GET", f"/v1/sessions/{s.session_id}/expert"))["action"]
        except (UnknownSessionError, ServerUnavailableError) as exc:
            if not await self._restore(s, avoid=s.url):
                raise AgentGymError(s.error or str(exc), code=exc.code, status=exc.status) from exc
        return (await self._request(s.url, "GET", f"/v1/sessions/{s.session_id}/expert"))["action"]

    async def close(self, sessions: Sequence[PoolSession] | None = None) -> None:
        targets = list(self.sessions if sessions is None else sessions)

        async def close_one(s: PoolSession) -> None:
            if s.session_id is not None:
                try:
                    await self._request(s.url, "DELETE", f"/v1/sessions/{s.session_id}")
                except AgentGymError:
                    pass  # gone already
                s.session_id = None

        await asyncio.gather(*(close_one(s) for s in targets))
        closed = {id(s) for s in targets}
        self.sessions = [s for s in self.sessions if id(s) not in closed]

    async def aclose(self) -> None:
        await self.close()
        await self.http.aclose()
