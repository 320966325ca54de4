"""Clients of ``agentgym serve``: ``RemoteEnv`` (one session, sync) and ``AsyncEnvPool`` (many).

Both retry transport failures and 503s with exponential backoff, and re-create a session the server
lost (restart, idle expiry, crashed worker) by replaying its actions on a fresh session: envs are
deterministic per task id (the conformance kit checks it), so the replayed session is in the same
state, and the replay's last observation must equal the one the episode last saw. A session that
cannot be restored, or whose replay ends elsewhere, is marked failed (``error`` set) so that the
rollout can mark its episode ``termination="error"`` and leave it out of training instead of
scoring it as a failure or training on a state the model never saw.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import httpx

from agentgym.errors import (
    AgentGymError,
    BadRequestError,
    CapacityError,
    EnvCrashedError,
    EpisodeOverError,
    ServerUnavailableError,
    UnknownEnvError,
    UnknownNameError,
    UnknownSessionError,
)
from agentgym.spaces import action_space, observation_space

_ERRORS: dict[str, type[AgentGymError]] = {
    "unknown_env": UnknownEnvError,
    "unknown_name": UnknownNameError,
    "unknown_session": UnknownSessionError,
    "episode_over": EpisodeOverError,
    "at_capacity": CapacityError,
    "env_crashed": EnvCrashedError,
    "invalid_request": BadRequestError,
}
_RETRY_STATUS = {502, 503, 504}
#: Errors the server declares about the env itself (its session is closed): never resent, even
#: with a retryable status (a step that hung past the server's step timeout answers 504).
_FINAL_CODES = {"step_timeout"}


def _retryable(response: httpx.Response) -> bool:
    if response.status_code not in _RETRY_STATUS:
        return False
    try:
        return response.json()["error"]["code"] not in _FINAL_CODES
    except (ValueError, KeyError, TypeError):
        return True


def error_from(code: str, message: str, status: int) -> AgentGymError:
    return _ERRORS.get(code, AgentGymError)(message, code=code, status=status)


def _raise_for(response: httpx.Response) -> Any:
    if response.status_code < 400:
        return (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else response
        )
    try:
        err = response.json()["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError):
        raise AgentGymError(
            f"HTTP {response.status_code}: {response.text[:200]}", status=response.status_code
        ) from None
    raise error_from(code, message, response.status_code)


def _retry_delay(response: httpx.Response | None, backoff: float, attempt: int) -> float:
    """Exponential backoff, or the server's ``Retry-After`` when it asks for longer (capped at 30 s)."""
    delay = backoff * 2**attempt
    if response is not None:
        try:
            delay = max(delay, min(30.0, float(response.headers.get("retry-after", 0))))
        except ValueError:
            pass
    return delay


def _safe_to_retry(method: str, exc: httpx.TransportError) -> bool:
    """A POST (create, step, reset) is resent only if it never reached the server: after a read
    timeout the step may have been applied, and applying it twice would corrupt the episode.
    Callers restore such a session by replay on a fresh one instead."""
    return method != "POST" or isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))


def check_replay(observation: str, seen: str, n_actions: int) -> None:
    """A restored session must stand where the lost one stood: the replay's last observation is the
    one the episode last saw; else ``replay_diverged`` (the env is not deterministic there)."""
    if observation != seen:
        raise AgentGymError(
            f"replay after a lost session diverged: after {n_actions} action(s) the env showed another "
            f"observation than the episode saw ({observation[:80]!r} vs {seen[:80]!r}); the env is "
            "not deterministic for this task, so the episode cannot go on",
            code="replay_diverged",
        )


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


_READ_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError)


class _KeepAliveTransport(httpx.AsyncBaseTransport):
    """Plain HTTP/1.1 over asyncio streams, with a LIFO of idle keep-alive connections per server.

    httpcore's pool rescans every connection for every connection on each request it queues or
    finishes (quadratic in the connections: with 64 sessions stepping at once, most of the
    client's time), and without ``sniffio`` installed it retries a failed import on every request.
    The env servers answer small JSON bodies on loopback: this is all the pool needs. At most
    ``max_connections`` requests are in flight per server; the rest wait for a connection.
    """

    #: an idle connection older than this is not reused (uvicorn closes idle ones after 5 s)
    IDLE_S = 4.0

    def __init__(self, max_connections: int = 64):
        self.max_connections = max_connections
        self._idle: dict[tuple[str, int], list[tuple[float, asyncio.StreamReader, asyncio.StreamWriter]]] = {}
        self._slots: dict[tuple[str, int], asyncio.Semaphore] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"only http:// is served by this transport, not {url}")
        key = (url.host, url.port or 80)
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = asyncio.Semaphore(self.max_connections)
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        head = [f"{request.method} {url.raw_path.decode('ascii')} HTTP/1.1\r\n".encode()]
        head += [k + b": " + v + b"\r\n" for k, v in request.headers.raw]
        head.append(b"\r\n")
        payload = b"".join(head) + body
        async with slots:
            reader, writer = await self._connect(key, timeouts.get("connect"))
            try:
                async with asyncio.timeout(timeouts.get("read")):
                    writer.write(payload)
                    status, headers, content, keep = await self._read_response(reader, request.method)
            except TimeoutError as exc:
                writer.close()
                raise httpx.ReadTimeout(f"no response from {url} in time", request=request) from exc
            except _READ_ERRORS as exc:
                writer.close()
                raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
            except BaseException:  # cancelled mid-exchange: the connection's state is unknown
                writer.close()
                raise
            if keep:
                self._idle.setdefault(key, []).append((time.monotonic(), reader, writer))
            else:
                writer.close()
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def _connect(
        self, key: tuple[str, int], timeout: float | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        idle, now = self._idle.get(key, []), time.monotonic()
        while idle:
            t, reader, writer = idle.pop()
            if now - t < self.IDLE_S and not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.open_connection(*key)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {key[0]}:{key[1]} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{key[0]}:{key[1]}: {exc}") from exc

    @staticmethod
    async def _read_response(
        reader: asyncio.StreamReader, method: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        version, status = lines[0].split(b" ", 2)[:2]
        headers = [tuple(part.strip() for part in line.split(b":", 1)) for line in lines[1:] if line]
        fields = {k.lower(): v for k, v in headers}
        keep = version == b"HTTP/1.1" and fields.get(b"connection", b"").lower() != b"close"
        code = int(status)
        if method == "HEAD" or code in (204, 304) or 100 <= code < 200:
            return code, headers, b"", keep
        if b"content-length" in fields:
            return code, headers, await reader.readexactly(int(fields[b"content-length"])), keep
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            chunks = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return code, headers, b"".join(chunks), keep
        return code, headers, await reader.read(), False  # delimited by the connection's close

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for _, _, writer in idle:
                writer.close()
        self._idle.clear()


class RemoteEnv(gym.Env[str, str]):
    """One session on a remote server, with the interface of an in-process ``TextEnv``."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        url: str,
        env: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.25,
    ):
        self.url, self.env_name = url.rstrip("/"), env
        self.retries, self.backoff = retries, backoff
        self.client = httpx.Client(base_url=self.url, timeout=timeout, headers=_headers(token))
        self.observation_space, self.action_space = observation_space(), action_space()
        self.session_id: int | None = None
        self.task_id: int | None = None
        self._seed: int | None = None
        self.actions: list[str] = []
        self.last_observation = ""
        self.score = 0.0

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        for attempt in range(self.retries + 1):
            response = None
            try:
                response = self.client.request(method, path, **kw)
            except httpx.TransportError as exc:
                if attempt == self.retries or not _safe_to_retry(method, exc):
                    raise ServerUnavailableError(f"{self.url} unreachable: {exc}") from exc
            else:
                if not _retryable(response) or attempt == self.retries:
                    return _raise_for(response)
            time.sleep(_retry_delay(response, self.backoff, attempt))
        raise AssertionError("unreachable")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        task_id = (options or {}).get("task_id")
        self._seed = seed
        if self.session_id is None:
            result = self._create(task_id, seed)
        else:
            try:
                result = self._request(
                    "POST", f"/v1/sessions/{self.session_id}/reset", json={"task_id": task_id, "seed": seed}
                )
            except UnknownSessionError:
                result = self._create(task_id, seed)
        self.task_id = result["info"].get("task_id", task_id)
        self.actions, self.score = [], 0.0
        self.last_observation = result["observation"]
        return result["observation"], result["info"]

    def _create(self, task_id: int | None, seed: int | None) -> dict:
        result = self._request(
            "POST", "/v1/sessions", json={"env": self.env_name, "task_id": task_id, "seed": seed}
        )
        self.session_id = result["session_id"]
        return result

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.session_id is None:
            raise EpisodeOverError("call reset() before step()")
        try:
            r = self._request("POST", f"/v1/sessions/{self.session_id}/step", json={"action": action})
        except UnknownSessionError:
            self._restore()
            r = self._request("POST", f"/v1/sessions/{self.session_id}/step", json={"action": action})
        self.actions.append(action)
        self.score, self.last_observation = r["score"], r["observation"]
        return r["observation"], r["reward"], r["terminated"], r["truncated"], r["info"]

    def _restore(self) -> None:
        """The server lost the session: re-create it and replay the episode's actions."""
        observation = self._create(self.task_id, self._seed)["observation"]
        for past in self.actions:
            r = self._request("POST", f"/v1/sessions/{self.session_id}/step", json={"action": past})
            observation = r["observation"]
        check_replay(observation, self.last_observation, len(self.actions))

    def expert_action(self) -> str:
        return self._request("GET", f"/v1/sessions/{self.session_id}/expert")["action"]

    def render_png(self) -> bytes:
        return self._request("GET", f"/v1/sessions/{self.session_id}/render").content

    def render(self) -> str:
        return self.last_observation

    def specs(self) -> list[dict]:
        return self._request("GET", "/v1/envs")["envs"]

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self._request("DELETE", f"/v1/sessions/{self.session_id}")
            except AgentGymError:
                pass  # already gone: closing is best effort
            self.session_id = None
        self.client.close()


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

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class StepOutcome:
    observation: str = ""
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class AsyncEnvPool:
    """Many sessions of one env over one or more servers, stepped in batches.

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
        self.client = httpx.AsyncClient(
            timeout=timeout,
            headers=_headers(token),
            transport=_KeepAliveTransport(max_connections),  # per server
        )
        self._next_url = itertools.cycle(range(len(self.urls)))
        self.sessions: list[PoolSession] = []
        self._experts_wanted: list[tuple[PoolSession, asyncio.Future]] = []  # this tick's expert asks
        self._expert_tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> AsyncEnvPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _request(self, url: str, method: str, path: str, **kw: Any) -> Any:
        for attempt in range(self.retries + 1):
            response = None
            try:
                response = await self.client.request(method, url + path, **kw)
            except httpx.TransportError as exc:
                if attempt == self.retries or not _safe_to_retry(method, exc):
                    raise ServerUnavailableError(f"{url} unreachable: {exc}") from exc
            else:
                if not _retryable(response) or attempt == self.retries:
                    return _raise_for(response)
            await asyncio.sleep(_retry_delay(response, self.backoff, attempt))
        raise AssertionError("unreachable")

    # -- sessions -----------------------------------------------------------------------------
    async def open(self, task_ids: Sequence[int | None], seed: int | None = None) -> list[PoolSession]:
        """Create one session per task id, spread over the servers; failures come back failed."""
        sessions = [PoolSession(task_id=t, seed=seed) for t in task_ids]
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
                r = await self._request(
                    url, "POST", "/v1/sessions", json={"env": self.env, "task_id": s.task_id, "seed": s.seed}
                )
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
        """Re-create a lost session and replay its actions; False if it cannot be restored."""
        if s.restarts >= self.max_restarts:
            s.error = f"session lost {s.restarts + 1} times; giving up"
            return False
        s.restarts += 1
        actions, seen = list(s.actions), s.observation
        await self._create(s, avoid=avoid)
        if s.failed:
            return False
        for past in actions:
            try:
                r = await self._request(
                    s.url, "POST", f"/v1/sessions/{s.session_id}/step", json={"action": past}
                )
            except AgentGymError as exc:
                s.error = f"replay after a lost session failed: {exc.message}"
                return False
            s.observation, s.info = r["observation"], r["info"]
        try:
            check_replay(s.observation, seen, len(actions))
        except AgentGymError as exc:
            s.error = exc.message
            return False
        s.actions = actions
        return True

    # -- stepping -----------------------------------------------------------------------------
    async def step(self, pairs: Sequence[tuple[PoolSession, str]]) -> list[StepOutcome]:
        """Step sessions in one batched request per server; returns outcomes in order."""
        if len({id(s) for s, _ in pairs}) != len(pairs):
            raise ValueError("a session appears twice in one step() call; step it in the next call")
        outcomes: list[StepOutcome | None] = [None] * len(pairs)
        by_url: dict[str, list[int]] = {}
        for i, (s, _) in enumerate(pairs):
            if s.failed:
                outcomes[i] = StepOutcome(error=s.error)
            else:
                by_url.setdefault(s.url, []).append(i)

        async def run(url: str, idxs: list[int]) -> None:
            body = {"steps": [{"session_id": pairs[i][0].session_id, "action": pairs[i][1]} for i in idxs]}
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
                s, action = pairs[i]
                if "error" not in r:
                    outcomes[i] = self._apply(s, action, r)
                elif r["error"]["code"] in ("unknown_session", "server_unavailable", "env_crashed"):
                    retry.append(i)
                else:
                    outcomes[i] = StepOutcome(error=f"{r['error']['code']}: {r['error']['message']}")
            await asyncio.gather(
                *(self._retry_one(pairs[i][0], pairs[i][1], url, outcomes, i) for i in retry)
            )

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
    def _apply(s: PoolSession, action: str, r: dict) -> StepOutcome:
        s.actions.append(action)
        s.observation, s.info = r["observation"], r["info"]
        s.done = bool(r["terminated"] or r["truncated"])
        return StepOutcome(r["observation"], r["reward"], r["terminated"], r["truncated"], r["info"])

    async def expert_action(self, s: PoolSession) -> str:
        """The env's expert's next action; a lost session is restored first (like ``step``).

        Calls made together (the scripted policy asks for every active episode at once) go out as
        one ``POST /v1/expert`` per server: one request per episode per turn was most of a remote
        rollout's requests (bench/rollout.py)."""
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
        await self.client.aclose()
