"""Session pool: ids, capacity, idle TTL, and sharding of env instances over worker processes.

With ``workers=1`` env code runs in the server process on a thread pool (off the event loop).
With ``workers=N > 1`` each shard is one worker process holding its own ``EnvHost``; a session
lives on the least-loaded shard. A worker that dies takes its sessions with it: they are reported
as crashed and the worker is restarted, the server keeps serving.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import threading
import time
from collections import defaultdict
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from agentgym.errors import AgentGymError, CapacityError, EnvCrashedError, UnknownSessionError
from agentgym.server.host import EnvHost

_worker_host: EnvHost | None = None


def _init_worker(env_names: list[str], parent_pid: int) -> None:
    global _worker_host
    _worker_host = EnvHost(env_names)
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()


def _exit_with_parent(parent_pid: int) -> None:
    # A worker must not outlive its server (killed, crashed): orphans would hold env instances,
    # JVMs or browsers, and spin. Reparenting changes getppid().
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(0)


def _worker_call(op: str, args: tuple) -> Any:
    assert _worker_host is not None
    return getattr(_worker_host, op)(*args)


class Shard:
    """Runs ``EnvHost`` operations somewhere off the event loop."""

    def __init__(
        self,
        env_names: list[str],
        index: int,
        *,
        process: bool,
        threads: int,
        on_lost: Any = None,
    ):
        self.env_names, self.index, self.process, self.threads = env_names, index, process, threads
        self.sessions: set[int] = set()  # placed here, including creations still in flight
        self.on_lost = on_lost  # called with the session ids a dead worker took with it
        self._start()

    def _start(self) -> None:
        if self.process:
            ctx = multiprocessing.get_context("spawn")  # no inherited event loop, threads or JVMs
            self.executor: Executor = ProcessPoolExecutor(
                1, mp_context=ctx, initializer=_init_worker, initargs=(self.env_names, os.getpid())
            )
            self.host: EnvHost | None = None
        else:
            self.host = EnvHost(self.env_names)
            self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix=f"agentgym-env-{self.index}")

    async def call(self, op: str, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        if self.host is not None:
            return await loop.run_in_executor(self.executor, getattr(self.host, op), *args)
        executor = self.executor
        try:
            return await asyncio.wrap_future(executor.submit(_worker_call, op, args))
        except BrokenProcessPool:
            if executor is self.executor:  # the first call to notice restarts the worker, once
                lost = sorted(self.sessions)
                self.sessions.clear()
                executor.shutdown(wait=False, cancel_futures=True)
                self._start()
                if self.on_lost is not None:
                    self.on_lost(lost)
            raise EnvCrashedError(
                f"worker {self.index} died; its sessions are lost and it was restarted"
            ) from None

    def warm_up(self) -> None:
        """Start the worker process now rather than on the first request."""
        if self.host is None:
            self.executor.submit(_worker_call, "stats", ()).result()

    def shutdown(self) -> None:
        if self.host is not None:
            self.host.close_all()  # env instances may hold JVMs or browsers
        processes = list(getattr(self.executor, "_processes", {}).values())  # the worker, if any
        self.executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()


@dataclass
class Session:
    sid: int
    env: str
    shard: Shard
    last_used: float
    task_id: int | None = None


class SessionManager:
    def __init__(
        self,
        env_names: list[str],
        *,
        workers: int = 1,
        capacity: int = 1024,
        ttl: float = 1800.0,
        threads: int | None = None,
    ):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.env_names = list(env_names)
        self.capacity, self.ttl = capacity, ttl
        threads = threads or min(32, (os.cpu_count() or 1) * 4)
        process = workers > 1
        self.shards = [
            Shard(self.env_names, i, process=process, threads=threads, on_lost=self._lost)
            for i in range(workers)
        ]
        self.sessions: dict[int, Session] = {}
        self._ids = itertools.count(1)
        self._pending = 0
        self.counters: dict[str, int] = defaultdict(int)
        self.started = time.time()

    # -- sessions -----------------------------------------------------------------------------
    def get(self, sid: int) -> Session:
        session = self.sessions.get(sid)
        if session is None:
            raise UnknownSessionError(f"unknown session {sid} (closed, expired, or never created)")
        session.last_used = time.monotonic()
        return session

    async def _call(self, session: Session, op: str, *args: Any) -> Any:
        try:
            return await session.shard.call(op, session.sid, *args)
        except AgentGymError as exc:
            if isinstance(exc, (EnvCrashedError, UnknownSessionError)):
                self._forget(session.sid)
                self.counters["env_crashes" if isinstance(exc, EnvCrashedError) else "lost_sessions"] += 1
            raise

    def _lost(self, sids: list[int]) -> None:
        for sid in sids:
            self._forget(sid)
        self.counters["lost_sessions"] += len(sids)

    def _forget(self, sid: int) -> None:
        session = self.sessions.pop(sid, None)
        if session is not None:
            session.shard.sessions.discard(sid)

    async def create(self, env: str, task_id: int | None = None, seed: int | None = None) -> tuple[int, dict]:
        if len(self.sessions) + self._pending >= self.capacity:
            raise CapacityError(f"server at capacity ({self.capacity} sessions); close some or retry later")
        shard = min(self.shards, key=lambda s: len(s.sessions))
        sid = next(self._ids)
        self._pending += 1
        shard.sessions.add(sid)  # counted at once, so that concurrent creations spread out
        try:
            result = await shard.call("create", sid, env, task_id, seed)
        except BaseException:
            shard.sessions.discard(sid)
            raise
        finally:
            self._pending -= 1
        self.sessions[sid] = Session(sid, env, shard, time.monotonic(), task_id)
        self.counters["sessions_created"] += 1
        return sid, result

    async def reset(self, sid: int, task_id: int | None = None, seed: int | None = None) -> dict:
        session = self.get(sid)
        result = await self._call(session, "reset", task_id, seed)
        session.task_id = task_id
        self.counters["resets"] += 1
        return result

    async def step(self, sid: int, action: str) -> dict:
        result = await self._call(self.get(sid), "step", action)
        self.counters["steps"] += 1
        return result

    async def step_batch(self, items: list[tuple[int, str]]) -> list[dict]:
        """Step many sessions: one call per shard, shards in parallel; per-item errors."""
        results = await self._batch("step_many", items)
        self.counters["steps"] += len(items)
        self.counters["batched_requests"] += 1
        return results

    async def reset_batch(self, items: list[tuple[int, int | None, int | None]]) -> list[dict]:
        """Reset many sessions (``(session, task_id, seed)``), batched like ``step_batch``."""
        results = await self._batch("reset_many", items)
        self.counters["resets"] += sum("error" not in r for r in results)
        return results

    async def _batch(self, op: str, items: list[tuple]) -> list[dict]:
        """Send each shard its items in one call (shards in parallel); ``{"json"}`` or ``{"error"}`` each."""
        results: list[dict] = [{}] * len(items)
        by_shard: dict[int, list[int]] = defaultdict(list)
        for i, item in enumerate(items):
            session = self.sessions.get(item[0])
            if session is None:
                results[i] = _item_error(UnknownSessionError(f"unknown session {item[0]}"))
            else:
                session.last_used = time.monotonic()
                by_shard[session.shard.index].append(i)

        async def run(shard_index: int, idxs: list[int]) -> None:
            try:
                outs = await self.shards[shard_index].call(op, [items[i] for i in idxs])
            except AgentGymError as exc:  # the worker died: all its sessions are gone
                for i in idxs:
                    self._forget(items[i][0])
                    results[i] = _item_error(exc)
                return
            for i, out in zip(idxs, outs, strict=True):
                if "error" in out and out["error"]["code"] in ("env_crashed", "unknown_session"):
                    self._forget(items[i][0])
                results[i] = out

        await asyncio.gather(*(run(k, v) for k, v in by_shard.items()))
        return results

    async def close(self, sid: int) -> None:
        session = self.get(sid)
        try:
            await self._call(session, "close")
        finally:
            self._forget(sid)
        self.counters["sessions_closed"] += 1

    async def call(self, sid: int, op: str) -> Any:
        return await self._call(self.get(sid), op)

    # -- housekeeping -------------------------------------------------------------------------
    async def reap_idle(self) -> int:
        """Close sessions idle longer than the TTL; returns how many were closed."""
        now = time.monotonic()
        stale = [s.sid for s in list(self.sessions.values()) if now - s.last_used > self.ttl]
        for sid in stale:
            try:
                await self.close(sid)
            except AgentGymError:
                self._forget(sid)
        self.counters["sessions_expired"] += len(stale)
        return len(stale)

    async def reaper(self) -> None:
        interval = max(0.05, min(60.0, self.ttl / 4))
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    def shutdown(self) -> None:
        for shard in self.shards:
            shard.shutdown()


def _item_error(exc: AgentGymError) -> dict:
    return {"error": {"code": exc.code, "message": exc.message}, "status": exc.status}
