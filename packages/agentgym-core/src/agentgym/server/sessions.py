"""The session manager: session ids, capacity, idle TTLs and env-instance bounds, over shards.

A session lives on the least-loaded shard (shards.py) and holds one env instance there; a closed
session's instance is kept idle for reuse where the env allows. Every step, single or batched, is a
batch sent to the session's shard, which answers a hung item itself (watchdog.py).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from agentgym.errors import AgentGymError, CapacityError, EnvCrashedError, UnknownSessionError
from agentgym.plugins import get_env_spec
from agentgym.protocol import error_from, item_error
from agentgym.resources import Bound, instance_bound
from agentgym.server.config import ServerConfig
from agentgym.server.messages import Answer, Op, ResetItem, StepItem
from agentgym.server.shards import Shard, SilentWorkerError, make_shards
from agentgym.server.watchdog import step_timeout_error


@dataclass
class Session:
    sid: int
    env: str
    shard: Shard
    last_used: float
    task_id: int | None = None
    ttl: float | None = None  # idle seconds before it is closed; None: never
    compat: bool = False  # made by an AgentGym-compatible /create


class SessionManager:
    #: A session made by the compatible /create never expires (the original clients cannot recover
    #: one, and have no close). When a creation finds no room, the one idle longest, if idle at
    #: least this many seconds, is closed to make room: clients long gone leave no JVM held forever.
    COMPAT_EVICT_IDLE = 60.0

    def __init__(self, env_names: list[str], config: ServerConfig | None = None):
        self.config = config = config if config is not None else ServerConfig()
        self.env_names = list(env_names)
        self.step_timeout = config.step_timeout  # seconds; None: no limit
        self.capacity, self.ttl, self.compat_ttl = config.capacity, config.ttl, config.compat_ttl
        # Each session holds one env instance: at most bounds[env] sessions of an env at once, over
        # all workers (from the env's declared cost and the machine, or max_instances); the config's
        # where given, as computed (and printed) by `agentgym serve`: the same number in /health
        given = config.bounds or {}
        self.bounds: dict[str, Bound] = {
            name: given.get(name) or instance_bound(get_env_spec(name).cost, override=config.max_instances)
            for name in self.env_names
        }
        # env instances alive per env: in sessions, being created, and idle (kept for reuse)
        self.instances: dict[str, int] = defaultdict(int)
        self.shards: list[Shard] = make_shards(self.env_names, config, self._lost)
        self.sessions: dict[int, Session] = {}
        self._ids = itertools.count(1)
        self._pending = 0
        self.counters: dict[str, int] = defaultdict(int)
        self.started = time.time()

    # -- sessions -----------------------------------------------------------------------------
    def get(self, sid: int) -> Session:
        session = self.sessions.get(sid)
        if session is None:
            raise UnknownSessionError.of(sid)
        session.last_used = time.monotonic()
        return session

    async def _call(self, session: Session, op: Op, *args: Any) -> Any:
        try:
            return await session.shard.call(op, session.sid, *args)
        except AgentGymError as exc:
            if isinstance(exc, (EnvCrashedError, UnknownSessionError)):
                self._forget(session.sid)
                self.counters["env_crashes" if isinstance(exc, EnvCrashedError) else "lost_sessions"] += 1
            raise

    def _lost(self, sids: list[int], idle: dict[str, int]) -> None:
        for sid in sids:
            self._forget(sid)
        for env, count in idle.items():
            self.instances[env] -= count
        self.counters["lost_sessions"] += len(sids)

    def _forget(self, sid: int) -> None:
        """Drop a session whose env instance is gone (closed, crashed, lost with its worker)."""
        session = self.sessions.pop(sid, None)
        if session is not None:
            session.shard.sessions.discard(sid)
            self.instances[session.env] -= 1

    def _take_idle(self, env: str) -> Shard | None:
        """A shard with an idle instance of ``env``, that instance now promised to the caller."""
        shard = next((s for s in self.shards if s.idle[env]), None)
        if shard is not None:
            shard.idle[env].pop()
        return shard

    async def create(
        self,
        env: str,
        task_id: int | None = None,
        seed: int | None = None,
        *,
        compat: bool = False,
        tasks: list[int] | None = None,
    ) -> tuple[int, Any]:
        """A new session of ``env`` reset to ``task_id``; ``(session id, reply)``. ``compat``: made by
        an AgentGym-compatible route (its reply in the env's dialect, its idle TTL ``compat_ttl``);
        ``tasks``: the task ids its autoresets take in turn."""
        bound = self.bounds[env]
        while len(self.sessions) + self._pending >= self.capacity:
            if not await self._evict_idle_compat(None):
                raise CapacityError(
                    f"server at capacity ({self.capacity} sessions); close some or retry later"
                )
        # an idle instance first; a new one while the env's bound allows; else make room or refuse
        shard = self._take_idle(env)
        while shard is None and self.instances[env] >= bound.limit:
            if not await self._evict_idle_compat(env):
                raise CapacityError(
                    f"{env}: {self.instances[env]} instances held, {bound.explain()}; close a session "
                    "or retry later",
                    retry_after=max(1.0, get_env_spec(env).cost.startup_s),
                )
            shard = self._take_idle(env)  # the evicted session's instance, if it was kept
        reuse = shard is not None
        if shard is None:
            self.instances[env] += 1
            shard = min(self.shards, key=lambda s: len(s.sessions))
        sid = next(self._ids)
        self._pending += 1
        shard.sessions.add(sid)  # counted at once, so that concurrent creations spread out
        try:
            result = await shard.call(Op.CREATE, sid, env, task_id, seed, compat, reuse, tasks)
        except BaseException:
            shard.sessions.discard(sid)
            self.instances[env] -= 1  # the host closes the instance of a creation that failed
            raise
        finally:
            self._pending -= 1
        self.counters["instances_reused" if reuse else "instances_started"] += 1
        ttl = self.compat_ttl if compat else self.ttl
        self.sessions[sid] = Session(sid, env, shard, time.monotonic(), task_id, ttl, compat)
        self.counters["sessions_created"] += 1
        return sid, result

    async def reset(
        self, sid: int, task_id: int | None = None, seed: int | None = None, *, compat: bool = False
    ) -> Any:
        session = self.get(sid)
        result = await self._call(session, Op.RESET, task_id, seed, compat)
        session.task_id = task_id
        self.counters["resets"] += 1
        return result

    async def step(self, sid: int, action: str, *, compat: bool = False) -> bytes:
        """Step one session: a batch of one (watched alike); its result as JSON, or its error."""
        self.get(sid)
        out = (await self._batch(Op.STEP_MANY, [StepItem(sid, action, None, compat)]))[0]
        if "error" in out:
            raise error_from(out["error"]["code"], out["error"]["message"], out["status"])
        self.counters["steps"] += 1
        return out["json"]

    async def step_batch(self, items: list[StepItem]) -> list[Answer]:
        """Step many sessions: one call per shard, shards in parallel; per-item errors."""
        results = await self._batch(Op.STEP_MANY, items)
        self.counters["steps"] += len(items)
        self.counters["batched_requests"] += 1
        return results

    async def reset_batch(self, items: list[ResetItem]) -> list[Answer]:
        """Reset many sessions, batched like ``step_batch``."""
        results = await self._batch(Op.RESET_MANY, items)
        self.counters["resets"] += sum("error" not in r for r in results)
        return results

    async def _batch(self, op: Op, items: list[StepItem] | list[ResetItem]) -> list[Answer]:
        """Send each shard its items in one call (shards in parallel); ``{"json"}`` or ``{"error"}`` each."""
        results: list[Answer] = [{}] * len(items)
        by_shard: dict[int, list[int]] = defaultdict(list)
        now, sessions = time.monotonic(), self.sessions
        for i, item in enumerate(items):
            session = sessions.get(item.sid)
            if session is None:
                results[i] = item_error(UnknownSessionError.of(item.sid))
            else:
                session.last_used = now
                by_shard[session.shard.index].append(i)
        if len(by_shard) == 1:  # one shard (a single step, or --workers 1): no task to gather
            [(k, idxs)] = by_shard.items()
            await self._shard_batch(op, items, idxs, k, results)
        else:
            await asyncio.gather(
                *(self._shard_batch(op, items, idxs, k, results) for k, idxs in by_shard.items())
            )
        return results

    async def _shard_batch(
        self,
        op: Op,
        items: list[StepItem] | list[ResetItem],
        idxs: list[int],
        shard_index: int,
        results: list[Answer],
    ) -> None:
        """One shard's part of a batch, into ``results``; sessions found gone are forgotten and counted."""
        shard = self.shards[shard_index]
        mine = items if len(idxs) == len(items) else [items[i] for i in idxs]
        try:
            outs = await (shard.step_many(mine) if op is Op.STEP_MANY else shard.call(op, mine))
        except AgentGymError as exc:  # the worker died, or fell silent and was killed
            error = item_error(self._lost_error(exc, [items[i].sid for i in idxs]))
            for i in idxs:
                self._forget(items[i].sid)
                results[i] = error
            return
        for i, out in zip(idxs, outs, strict=True):
            results[i] = out
            if "error" in out and (counter := _GONE.get(out["error"]["code"])) is not None:
                # the item's session is gone: crashed, lost, or given up as hung; counted once
                if items[i].sid in self.sessions:
                    self.counters[counter] += 1
                self._forget(items[i].sid)

    def _lost_error(self, exc: AgentGymError, sids: list[int]) -> AgentGymError:
        """What a shard's failure means for the sessions it was stepping: a worker silent during one
        step hung on that step (504); in a batch, which item hung is not known, so each session is
        reported lost."""
        if isinstance(exc, SilentWorkerError):
            self.counters["step_timeouts"] += 1
            if len(sids) == 1 and sids[0] in self.sessions:
                return step_timeout_error(sids[0], self.sessions[sids[0]].env, exc.seconds)
        return exc

    async def close(self, sid: int) -> None:
        """Close a session; its env instance is kept idle for the next creation when the env is
        reusable (within the bound: it counts as held), else closed."""
        session = self.get(sid)
        keep = get_env_spec(session.env).cost.reusable
        # Out of the table before the await: a step or a second close racing with this one finds
        # no session (404) instead of forgetting the instance this close is about to keep.
        self.sessions.pop(sid, None)
        try:
            await session.shard.call(Op.CLOSE, sid, keep)
        except BaseException:
            session.shard.sessions.discard(sid)
            self.instances[session.env] -= 1
            raise
        session.shard.sessions.discard(sid)
        if keep:
            session.shard.idle[session.env].append(time.monotonic())
        else:
            self.instances[session.env] -= 1
        self.counters["sessions_closed"] += 1

    async def call(self, sid: int, op: Op, *args: Any) -> Any:
        return await self._call(self.get(sid), op, *args)

    # -- housekeeping -------------------------------------------------------------------------
    async def _evict_idle_compat(self, env: str | None) -> bool:
        """Close the compat session (of ``env``; any when None) idle longest, if idle at least
        ``COMPAT_EVICT_IDLE``; whether one was closed."""
        now = time.monotonic()
        idle = [
            s
            for s in self.sessions.values()
            if s.compat and (env is None or s.env == env) and now - s.last_used >= self.COMPAT_EVICT_IDLE
        ]
        if not idle:
            return False
        victim = min(idle, key=lambda s: s.last_used)
        try:
            await self.close(victim.sid)
        except AgentGymError:
            pass  # close() has accounted for its instance either way
        self.counters["sessions_evicted"] += 1
        return True

    async def drop_idle_instances(self, older_than: float) -> int:
        """Close idle env instances kept longer than ``older_than`` seconds; how many."""
        now, dropped = time.monotonic(), 0
        plan = []  # decided before any await: a worker dying meanwhile accounts for its own
        for shard in self.shards:
            for env, times in shard.idle.items():
                stale = sum(1 for t in times if now - t > older_than)  # the oldest come first
                if stale:
                    del times[:stale]
                    self.instances[env] -= stale
                    dropped += stale
                    plan.append((shard, env, stale))
        for shard, env, stale in plan:
            try:
                await shard.call(Op.DROP_IDLE, env, stale)
            except AgentGymError:
                pass  # a dead worker took them anyway
        self.counters["instances_dropped"] += dropped
        return dropped

    async def reap_idle(self) -> int:
        """Close sessions idle longer than their TTL, and idle instances kept longer than the
        TTL; returns how many sessions were closed."""
        await self.drop_idle_instances(self.ttl)
        now = time.monotonic()
        stale = [
            s.sid for s in list(self.sessions.values()) if s.ttl is not None and now - s.last_used > s.ttl
        ]
        for sid in stale:
            try:
                await self.close(sid)
            except AgentGymError:
                pass  # close() has accounted for its instance either way
        self.counters["sessions_expired"] += len(stale)
        return len(stale)

    async def reaper(self) -> None:
        interval = max(0.05, min(60.0, self.ttl / 4, (self.compat_ttl or self.ttl) / 4))
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    def shutdown(self) -> None:
        """Stop every shard: all are told first, then each is waited for."""
        for shard in self.shards:
            shard.stop()
        for shard in self.shards:
            shard.join()


#: Error codes of a batch item whose session is gone, and the counter each goes to.
_GONE = {"env_crashed": "env_crashes", "unknown_session": "lost_sessions", "step_timeout": "step_timeouts"}
