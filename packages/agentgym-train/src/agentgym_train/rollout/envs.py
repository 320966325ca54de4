"""Where a rollout's episodes live: env instances in this process, or sessions on env servers.

Both backends have the same async interface, batched (:class:`EnvBackend`): ``open`` episodes,
``step`` many at once, ask the ``expert`` for an action, ``close``. The remote one is
:class:`agentgym.AsyncEnvPool` (one batched request per server per turn, retries, lost sessions
replayed on another server).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentgym.client import AsyncEnvPool, PoolSession
from agentgym.client.transport import check_token
from agentgym.env import close_quietly
from agentgym.errors import AgentGymError
from agentgym.protocol import StepOutcome
from agentgym.resources import Bound, instance_bound
from agentgym.spec import EnvSpec


@dataclass
class Handle:
    """One open episode: its first observation and info, then the latest ones."""

    task_id: int
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    ref: Any = None  # the backend's own object (an env instance, a pool session)
    #: the episode an autoreset started on this one's session when it ended (``RemoteEnvs.step``)
    next: Handle | None = None


class EnvBackend(Protocol):
    """What the rollout engine runs episodes on: :class:`LocalEnvs` or :class:`RemoteEnvs`."""

    spec: EnvSpec
    #: Whether ``step`` takes ``then``: a session that ends an episode starts the next one at once
    #: (the remote pool's batched step does; in-process instances gain nothing by it).
    autoresets: bool

    @property
    def sessions_restored(self) -> int:
        """Lost sessions re-created and replayed so far (a server or worker died): 0 in-process."""
        ...

    @property
    def max_live(self) -> int | None:
        """How many episodes may be open at once (None: no bound known); the rollout queues the
        rest. Read-only here, so a backend whose bound is always known may declare it ``int``."""
        ...

    async def open(self, task_ids: Sequence[int], seeds: Sequence[int | None]) -> list[Handle]: ...

    async def step(
        self, pairs: Sequence[tuple[Handle, str]], then: Sequence[tuple[int, int | None] | None] | None = None
    ) -> list[StepOutcome]:
        """Step the pairs' episodes. ``then`` (where the backend has ``autoresets``): per pair, the
        ``(task_id, seed)`` its instance starts at once if this step ends the episode, as
        ``handle.next``; a backend without it ignores ``then``."""
        ...

    async def expert(self, h: Handle) -> str: ...

    async def close(self, handles: Sequence[Handle]) -> None: ...

    async def release_idle(self) -> None:
        """Give back what no open episode holds (idle instances or sessions): made again when
        needed. The trainer calls it before an evaluation, which makes its own within the same bound."""
        ...

    async def aclose(self) -> None: ...

    def describe(self) -> str:
        """Where its episodes run and how many at once, in a line for a run's log."""
        ...


class LocalEnvs:
    """Env instances of ``spec`` in this process, at most ``bound.limit`` at once (from the env's
    declared cost and the machine, or ``max_instances``), recycled across episodes when the env is
    reusable. The rollout engine reads ``max_live`` and queues episodes beyond it.

    ``threads`` > 1 steps envs on a thread pool: worth it for envs that wait outside Python (a JVM,
    a browser); for pure-Python envs the GIL makes inline stepping (the default) the fastest.
    """

    autoresets = False
    sessions_restored = 0

    def __init__(self, spec: EnvSpec, *, threads: int = 1, max_instances: int | None = None):
        self.spec = spec
        self.bound: Bound = instance_bound(spec.cost, override=max_instances)
        self.max_live = self.bound.limit
        self.live = 0  # instances lent to open episodes
        self.made = 0  # instances made so far (a test counts them)
        self._free: list[Any] = []
        self._experts: dict[int, Any] = {}
        self.executor = (
            ThreadPoolExecutor(threads, thread_name_prefix=f"agentgym-{spec.name}") if threads > 1 else None
        )

    def describe(self) -> str:
        return f"in-process, {self.bound.explain()}"

    async def _call(self, fn: Any, *args: Any) -> Any:
        if self.executor is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _open_one(self, task_id: int, seed: int | None) -> Handle:
        if self._free:
            env = self._free.pop()
        else:
            env = self.spec.make()
            self.made += 1
        h = Handle(task_id, ref=env)
        try:
            h.observation, h.info = env.reset(seed=seed, options={"task_id": task_id})
        except Exception as exc:  # noqa: BLE001 - an env failure ends this episode only
            h.error = f"reset failed: {type(exc).__name__}: {exc}"
        return h

    async def open(self, task_ids: Sequence[int], seeds: Sequence[int | None]) -> list[Handle]:
        if self.live + len(task_ids) > self.max_live:
            raise AgentGymError(
                f"{self.spec.name}: {len(task_ids)} more episodes asked with {self.live} open; "
                f"{self.bound.explain()}"
            )
        self.live += len(task_ids)
        if self.executor is None:
            return [self._open_one(t, s) for t, s in zip(task_ids, seeds, strict=True)]
        return list(
            await asyncio.gather(
                *(self._call(self._open_one, t, s) for t, s in zip(task_ids, seeds, strict=True))
            )
        )

    @staticmethod
    def _step_one(h: Handle, action: str) -> StepOutcome:
        try:
            obs, reward, terminated, truncated, info = h.ref.step(action)
        except Exception as exc:  # noqa: BLE001
            h.error = f"step failed: {type(exc).__name__}: {exc}"
            return StepOutcome(error=h.error)
        h.observation, h.info = obs, info
        return StepOutcome(obs, float(reward), bool(terminated), bool(truncated), info)

    async def step(self, pairs: Sequence[tuple[Handle, str]], then: Any = None) -> list[StepOutcome]:
        if self.executor is None:
            return [self._step_one(h, a) for h, a in pairs]
        return list(await asyncio.gather(*(self._call(self._step_one, h, a) for h, a in pairs)))

    async def expert(self, h: Handle) -> str:
        act = self._experts.get(id(h))
        if act is None:
            act = self._experts[id(h)] = self.spec.make_expert(h.ref)
        return await self._call(act, h.observation, h.info)

    async def close(self, handles: Sequence[Handle]) -> None:
        for h in handles:
            self._experts.pop(id(h), None)
            if h.ref is None:
                continue
            self.live -= 1
            if h.error is None and self.spec.cost.reusable:
                self._free.append(h.ref)
            else:  # a failed env, or one whose reset cannot restore every task, is not reused
                await self._call(close_quietly, h.ref)
            h.ref = None

    async def release_idle(self) -> None:
        self._close_free()

    def _close_free(self) -> None:
        for env in self._free:
            close_quietly(env)
        self._free.clear()

    async def aclose(self) -> None:
        self._close_free()
        if self.executor is not None:
            self.executor.shutdown(wait=False)


def _served_bound(env: str, urls: Sequence[str]) -> int | None:
    """The sessions of ``env`` the servers hold at once, summed from their ``/health`` (None when
    one does not say: the rollout then relies on their 503s and the pool's retries)."""
    import httpx

    total = 0
    for url in urls:
        try:
            health = httpx.get(url.rstrip("/") + "/health", timeout=10).json()  # needs no token
            total += int(health["max_instances"][env])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
    return total or None


class RemoteEnvs:
    """Sessions of ``spec.name`` on one or more ``agentgym serve`` servers (each server bounds its
    own instances and answers 503 beyond, which the pool retries)."""

    def __init__(self, spec: EnvSpec, urls: Sequence[str], *, token: str | None = None):
        self.spec = spec
        self.pool = AsyncEnvPool(list(urls), spec.name, token=token)
        self._idle: list[PoolSession] = []
        self.max_live: int | None = _served_bound(spec.name, urls)
        self.urls = list(urls)

    @property
    def sessions_restored(self) -> int:
        return self.pool.restored

    def describe(self) -> str:
        at_once = f"at most {self.max_live} sessions at once" if self.max_live else "their bound not reported"
        return f"on {len(self.urls)} env server(s) ({', '.join(self.urls)}), {at_once}"

    async def open(self, task_ids: Sequence[int], seeds: Sequence[int | None]) -> list[Handle]:
        reuse = [self._idle.pop() for _ in range(min(len(self._idle), len(task_ids)))]
        handles: list[Handle] = []
        resets = [self.pool.reset(s, t, seed) for s, t, seed in zip(reuse, task_ids, seeds, strict=False)]
        sessions = list(await asyncio.gather(*resets))
        rest = list(zip(task_ids, seeds, strict=True))[len(reuse) :]
        for seed in {s for _, s in rest}:
            ids = [t for t, s in rest if s == seed]
            sessions += await self.pool.open(ids, seed=seed) if ids else []
        by_task: dict[int, list[PoolSession]] = {}
        for s in sessions:
            by_task.setdefault(s.task_id, []).append(s)
        for t in task_ids:
            s = by_task[t].pop()
            handles.append(Handle(t, s.observation, s.info, s.error, ref=s))
        return handles

    #: a step that ends an episode may start the next on the same session in the same request
    autoresets = True

    async def step(
        self, pairs: Sequence[tuple[Handle, str]], then: Sequence[tuple[int, int | None] | None] | None = None
    ) -> list[StepOutcome]:
        then = then or [None] * len(pairs)
        asked = [(h.ref, a) if t is None else (h.ref, a, t) for (h, a), t in zip(pairs, then, strict=True)]
        outcomes = await self.pool.step(asked)
        for (h, _), o, t in zip(pairs, outcomes, then, strict=True):
            if o.error is not None:
                h.error = o.error
                continue
            h.observation, h.info = o.observation, o.info
            if t is not None and o.reset is not None and "error" not in o.reset:
                # the session holds the next episode now: it moves to that episode's handle
                h.next = Handle(t[0], o.reset["observation"], o.reset["info"], ref=h.ref)
                h.ref = None
        return outcomes

    async def expert(self, h: Handle) -> str:
        return await self.pool.expert_action(h.ref)

    async def close(self, handles: Sequence[Handle]) -> None:
        failed = [h.ref for h in handles if h.ref is not None and (h.error or h.ref.failed)]
        self._idle.extend(h.ref for h in handles if h.ref is not None and not (h.error or h.ref.failed))
        if failed:
            await self.pool.close(failed)
        for h in handles:
            h.ref = None

    async def release_idle(self) -> None:
        idle, self._idle = self._idle, []
        if idle:
            await self.pool.close(idle)

    async def aclose(self) -> None:
        self._idle.clear()
        await self.pool.aclose()


def make_backend(
    spec: EnvSpec,
    urls: Sequence[str] = (),
    *,
    token: str | None = None,
    threads: int = 1,
    max_instances: int | None = None,
) -> EnvBackend:
    """Remote sessions when server URLs are given, else in-process envs (at most ``max_instances``,
    default: the bound from the env's cost and the machine)."""
    if urls:
        return RemoteEnvs(spec, urls, token=token)
    return LocalEnvs(spec, threads=threads, max_instances=max_instances)


def read_env_token(token_file: str | None) -> str | None:
    """``$AGENTGYM_TOKEN``, else the token in ``token_file`` (its first line; a verl worker on a
    node without the variable reads the file). Kept in memory and process environments only."""
    token = os.environ.get("AGENTGYM_TOKEN", "").strip()
    if token or token_file is None:
        return check_token(token, "$AGENTGYM_TOKEN") or None
    try:
        lines = Path(token_file).expanduser().read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentGymError(f"env_token_file: cannot read {token_file} ({exc.__class__.__name__})") from None
    token = lines[0].strip() if lines else ""
    if not token:
        raise AgentGymError(f"env_token_file: {token_file} holds no token on its first line")
    return check_token(token, f"env_token_file {token_file}")
