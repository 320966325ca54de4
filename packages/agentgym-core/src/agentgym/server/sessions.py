"""Session pool: ids, capacity, idle TTL, and sharding of env instances over worker processes.

With ``workers=1`` env code runs in the server process on a thread pool (off the event loop).
With ``workers=N > 1`` each shard is one worker process holding its own ``EnvHost``; a session
lives on the least-loaded shard. A worker that dies takes its sessions with it: they are reported
as crashed and the worker is restarted, the server keeps serving.

A step that runs longer than ``step_timeout`` seconds (default ``$AGENTGYM_STEP_TIMEOUT``, else 60)
is answered ``504 step_timeout`` and its session is closed; the hung thread is abandoned and every
other session keeps being served, in a batched step too (the items before and after the hung one are
stepped). On threads (one worker) the server watches the steps; a worker process watches its own
(``_WorkerLoop``: a watchdog thread answers for the hung call and takes over the worker's loop). A
worker that cannot do even that (a hang holding the GIL, in C code that never releases it) falls
silent: past ``step_timeout`` plus a grace without a word from it, the server kills and restarts it
(its sessions are lost, as when it dies).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import multiprocessing
import os
import pickle
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentgym.errors import AgentGymError, CapacityError, EnvCrashedError, UnknownSessionError
from agentgym.plugins import get_env_spec
from agentgym.resources import Bound, instance_bound
from agentgym.server.host import BatchProgress, EnvHost

#: Seconds one env step may run before its session is closed with ``504 step_timeout``.
DEFAULT_STEP_TIMEOUT = 60.0


def step_timeout_from_env() -> float | None:
    """``$AGENTGYM_STEP_TIMEOUT`` (seconds; 0 or less: no limit), else ``DEFAULT_STEP_TIMEOUT``."""
    raw = os.environ.get("AGENTGYM_STEP_TIMEOUT", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_STEP_TIMEOUT
    except ValueError:
        raise AgentGymError(f"AGENTGYM_STEP_TIMEOUT={raw!r} is not a number of seconds") from None
    return value if value > 0 else None


def _step_timeout_error(sid: int, env: str, seconds: float) -> AgentGymError:
    """504 ``step_timeout``: a declared env failure (its session is closed), not a proxy's 504."""
    return AgentGymError(
        f"session {sid}: env {env!r} did not finish a step within {seconds:g} s; session closed",
        code="step_timeout",
        status=504,
    )


# Env steps allocate many short-lived objects (BabyAI builds a grid of WorldObj per reset), and a
# server holds many long-lived env instances: with CPython's default gen-0 threshold (700) the
# collector runs every few steps and re-walks them all. Fewer, larger collections measured 15-25%
# more BabyAI steps/s; cyclic garbage is still collected.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """Set the server's garbage-collector thresholds; objects alive now (imports, plugins) are frozen
    out of future collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _worker_main(conn: Any, env_names: list[str], parent_pid: int, step_timeout: float | None = None) -> None:
    """A worker process: one ``EnvHost``, answering ``(call_id, op, args)`` messages in order."""
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
    host = EnvHost(env_names)
    tune_gc()
    conn.send(("ready",))
    _WorkerLoop(conn, host, step_timeout).run()


def heartbeat_interval(step_timeout: float) -> float:
    """How often a busy worker says it is alive (at most 5 s apart)."""
    return min(5.0, step_timeout / 4)


def silence_limit(step_timeout: float) -> float:
    """Seconds without a word from a worker with a step in flight before it is killed: its own
    watchdog answers a hung step after ``step_timeout``; this is for a worker that cannot."""
    return step_timeout + max(2.0, step_timeout / 2)


@dataclass
class _Running:
    """A step call a worker is running, for its watchdog."""

    call_id: int
    op: str  # "step" or "step_many"
    args: tuple
    started: float  # for "step"; a batch's running item has its own, in progress
    progress: BatchProgress | None = None
    prefix: list[dict] | None = None  # items of the batch answered before this call resumed it


class _WorkerLoop:
    """A worker's receive-run-reply loop, with a watchdog for steps that hang.

    The loop runs each call on the thread that received it (no hand-off: a call costs what it
    did). A watchdog thread looks at the step running now; past ``step_timeout`` it abandons that
    item's session, answers for it (504, or the batch's results so far, the 504 and the rest run
    anew) and hands the loop to a new thread, as the hung thread cannot receive any more. The hung
    thread, if its call ever returns, finds the loop no longer its own and ends without a word.
    While a step runs the watchdog also tells the server the worker is alive, so that a long batch
    of steps that are each in time is not taken for a hang.
    """

    def __init__(self, conn: Any, host: EnvHost, step_timeout: float | None):
        self.conn, self.host, self.step_timeout = conn, host, step_timeout
        self.lock = threading.Lock()  # every send, and the hand-over of the loop
        self.generation = 0  # the loop belongs to the thread started with this number
        self.running: _Running | None = None
        self.busy = False  # a call is running (any call: a step may wait behind it at the server)

    def run(self) -> None:
        if self.step_timeout is not None:
            threading.Thread(target=self._watch, name="agentgym-worker-watchdog", daemon=True).start()
        self._loop(0)

    def _loop(self, generation: int, first: _Running | tuple | None = None) -> None:
        """Receive and answer calls while the loop is this thread's; ``first``: a call to resume or
        a reply to send before that."""
        if isinstance(first, _Running) and not self._call(generation, first):
            return
        if isinstance(first, tuple) and not self._send(generation, first):
            return
        while True:
            try:
                call_id, op, args = self.conn.recv()
            except (EOFError, OSError):  # the server closed the pipe or is gone
                os._exit(0)
            self.busy = True
            if self.step_timeout is not None and op in ("step", "step_many"):
                progress = BatchProgress() if op == "step_many" else None
                if not self._call(generation, _Running(call_id, op, args, time.monotonic(), progress)):
                    return
                continue
            try:
                reply = (call_id, True, getattr(self.host, op)(*args))
            except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
                reply = (call_id, False, exc)
            if not self._send(generation, reply):
                return

    def _call(self, generation: int, running: _Running) -> bool:
        """Run a watched step call and answer it; False if the watchdog took over meanwhile."""
        with self.lock:
            self.running = running
        try:
            if running.op == "step":
                reply = (running.call_id, True, self.host.step(*running.args))
            else:
                out = self.host.step_many(running.args[0], running.progress)
                reply = (running.call_id, True, (running.prefix or []) + out)
        except BaseException as exc:  # noqa: BLE001
            reply = (running.call_id, False, exc)
        return self._send(generation, reply)

    def _send(self, generation: int, reply: tuple) -> bool:
        with self.lock:
            if generation != self.generation:  # answered by the watchdog; the loop is another's
                return False
            self.running, self.busy = None, False
            try:
                self.conn.send(reply)
            except (EOFError, OSError):
                os._exit(0)
            except Exception as exc:  # an unpicklable result or exception
                error = AgentGymError(f"worker could not send its result: {exc!r}")
                self.conn.send((reply[0], False, error))
            return True

    def _watch(self) -> None:
        assert self.step_timeout is not None
        tick = min(0.25, self.step_timeout / 10)
        beat = heartbeat_interval(self.step_timeout)
        last_beat = time.monotonic()
        while True:
            time.sleep(tick)
            with self.lock:
                running, now = self.running, time.monotonic()
                if (running is not None or self.busy) and now - last_beat >= beat:
                    try:
                        self.conn.send(("alive",))
                    except (EOFError, OSError):  # the server is gone
                        os._exit(0)
                    last_beat = now
                if running is None:
                    continue
                if running.progress is not None:
                    with running.progress.lock:
                        started = running.progress.started
                        if now - started >= self.step_timeout:
                            running.progress.cancelled = True  # no further item starts there
                        done = list(running.progress.out)
                else:
                    started, done = running.started, []
                if now - started < self.step_timeout:
                    continue
                self.generation += 1  # from here on, the hung thread's replies are dropped
                self.running = None
                generation = self.generation
            first = self._after_hang(running, done)
            threading.Thread(
                target=self._loop, args=(generation, first), name="agentgym-worker-loop", daemon=True
            ).start()

    def _after_hang(self, running: _Running, done: list[dict]) -> _Running | tuple:
        """Abandon the hung item's session; what the new loop thread does first: send the reply to a
        single step, or run the rest of a batch (the items after the hung one)."""
        assert self.step_timeout is not None
        if running.op == "step":
            sid, rest = running.args[0], None
        else:
            items = running.args[0]
            sid, rest = items[len(done)][0], items[len(done) + 1 :]
        error = _step_timeout_error(sid, self.host.abandon(sid), self.step_timeout)
        if rest is None:
            return (running.call_id, False, error)
        prefix = (running.prefix or []) + done + [_item_error(error)]
        return _Running(running.call_id, "step_many", (rest,), time.monotonic(), BatchProgress(), prefix)


def _exit_with_parent(parent_pid: int) -> None:
    # A worker must not outlive its server (killed, crashed): orphans would hold env instances,
    # JVMs or browsers, and spin. Reparenting changes getppid().
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(0)


# Messages to a worker larger than this are written from a thread: a blocking write on the event
# loop could deadlock against a worker that is itself blocked writing a large result to us.
_INLINE_SEND_BYTES = 32 << 10


class Shard:
    """Runs ``EnvHost`` operations somewhere off the event loop.

    In-process: a thread pool. As a worker process: a duplex pipe read by the event loop itself
    (``add_reader``), so a call costs one pickled message each way and no thread hand-offs (a
    ``ProcessPoolExecutor`` needed four per call, which dominated batched steps).
    """

    def __init__(
        self,
        env_names: list[str],
        index: int,
        *,
        process: bool,
        threads: int,
        on_lost: Any = None,
        step_timeout: float | None = None,
    ):
        self.env_names, self.index, self.process, self.threads = env_names, index, process, threads
        self.step_timeout = step_timeout  # a worker process watches its own steps
        self.sessions: set[int] = set()  # placed here, including creations still in flight
        # idle env instances kept for reuse, per env: when each was put back (the manager's own
        # account of the host's free lists, which only its calls change)
        self.idle: dict[str, list[float]] = defaultdict(list)
        self.on_lost = on_lost  # called with the session ids and idle instances a dead worker took
        self._ids = itertools.count()
        self._start()

    def _start(self) -> None:
        self.host: EnvHost | None = None
        if not self.process:
            self.host = EnvHost(self.env_names)
            self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix=f"agentgym-env-{self.index}")
            return
        ctx = multiprocessing.get_context("spawn")  # no inherited event loop, threads or JVMs
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_worker_main,
            args=(child, self.env_names, os.getpid(), self.step_timeout),
            name=f"agentgym-worker-{self.index}",
            daemon=True,
        )
        self.proc.start()
        child.close()
        self.pending: dict[int, asyncio.Future] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.last_heard = time.monotonic()  # the worker's last message (a reply, or "alive")

    async def call(self, op: str, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        if self.host is not None:
            return await loop.run_in_executor(self.executor, getattr(self.host, op), *args)
        if self.loop is not loop:
            loop.add_reader(self.conn.fileno(), self._on_readable)
            # The loop may make the fd non-blocking; messages are read whole once one has started
            # to arrive (the worker writes each in one go), so reads stay blocking.
            os.set_blocking(self.conn.fileno(), True)
            self.loop = loop
        call_id = next(self._ids)
        future = loop.create_future()
        self.pending[call_id] = future
        message = pickle.dumps((call_id, op, args), protocol=pickle.HIGHEST_PROTOCOL)
        conn = self.conn
        try:
            if len(message) <= _INLINE_SEND_BYTES:
                conn.send_bytes(message)
            else:
                await loop.run_in_executor(None, conn.send_bytes, message)
        except OSError:
            if conn is self.conn:
                self._died()
        return await future

    def _on_readable(self) -> None:
        try:
            while self.conn.poll():
                message = self.conn.recv()
                self.last_heard = time.monotonic()
                if message[0] in ("ready", "alive"):
                    continue
                call_id, ok, value = message
                future = self.pending.pop(call_id, None)
                if future is not None and not future.done():
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        except (EOFError, OSError):
            self._died()

    def _died(self) -> None:
        """The worker is gone: fail its calls, forget its sessions, start a new one."""
        if self.loop is not None:
            self.loop.remove_reader(self.conn.fileno())
        lost = sorted(self.sessions)
        lost_idle = {env: len(times) for env, times in self.idle.items() if times}
        self.sessions.clear()
        self.idle.clear()
        error = EnvCrashedError(f"worker {self.index} died; its sessions are lost and it was restarted")
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.conn.close()
        self.proc.join(timeout=1)
        if self.proc.is_alive():
            self.proc.kill()
        self._start()
        if self.on_lost is not None:
            self.on_lost(lost, lost_idle)

    def kill(self) -> None:
        """A worker that hangs: kill it now (its sessions are lost, a fresh worker starts)."""
        if self.host is None:
            self.proc.kill()
            self._died()

    def warm_up(self) -> None:
        """Wait until the worker process has loaded its envs (called before serving starts)."""
        if self.host is None:
            message = self.conn.recv()
            if message[0] != "ready":
                raise AgentGymError(f"worker {self.index} failed to start")

    def shutdown(self) -> None:
        if self.host is not None:
            self.host.close_all()  # env instances may hold JVMs or browsers
            self.executor.shutdown(wait=False, cancel_futures=True)
            return
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.conn.fileno())
        self.conn.close()  # the worker sees EOF and exits
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.terminate()


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

    def __init__(
        self,
        env_names: list[str],
        *,
        workers: int = 1,
        capacity: int = 1024,
        ttl: float = 1800.0,
        compat_ttl: float | None = None,
        threads: int | None = None,
        max_instances: int | None = None,
        step_timeout: float | None | str = "env",
    ):
        """``step_timeout``: seconds one step may run (None: no limit; default: from
        ``$AGENTGYM_STEP_TIMEOUT``, else ``DEFAULT_STEP_TIMEOUT``)."""
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.step_timeout = step_timeout_from_env() if step_timeout == "env" else step_timeout
        if self.step_timeout is not None and self.step_timeout <= 0:
            raise ValueError("step_timeout must be positive (None: no limit)")
        self.env_names = list(env_names)
        self.capacity, self.ttl, self.compat_ttl = capacity, ttl, compat_ttl
        # Each session holds one env instance: at most bounds[env] sessions of an env at once, over
        # all workers (from the env's declared cost and the machine, or max_instances).
        self.bounds: dict[str, Bound] = {
            name: instance_bound(get_env_spec(name).cost, override=max_instances) for name in self.env_names
        }
        # env instances alive per env: in sessions, being created, and idle (kept for reuse)
        self.instances: dict[str, int] = defaultdict(int)
        threads = threads or min(32, (os.cpu_count() or 1) * 4)
        process = workers > 1
        self.shards = [
            Shard(
                self.env_names,
                i,
                process=process,
                threads=threads,
                on_lost=self._lost,
                step_timeout=self.step_timeout,
            )
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
            elif exc.code == "step_timeout":  # a worker's watchdog abandoned the session
                self._forget(session.sid)
                self.counters["step_timeouts"] += 1
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
        self, env: str, task_id: int | None = None, seed: int | None = None, *, compat: bool = False
    ) -> tuple[int, Any]:
        """A new session of ``env`` reset to ``task_id``; ``(session id, reply)``. ``compat``: made by
        an AgentGym-compatible route (its reply in the env's dialect, its idle TTL ``compat_ttl``)."""
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
            result = await shard.call("create", sid, env, task_id, seed, compat, reuse)
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
        result = await self._call(session, "reset", task_id, seed, compat)
        session.task_id = task_id
        self.counters["resets"] += 1
        return result

    async def step(self, sid: int, action: str, *, compat: bool = False) -> Any:
        session = self.get(sid)
        call = self._call(session, "step", action, compat)
        result = await self._timed(session.shard, call, [sid], partial(_step_timeout_error, sid, session.env))
        self.counters["steps"] += 1
        return result

    async def _timed(
        self, shard: Shard, call: Any, sids: list[int], error: Callable[[float], AgentGymError]
    ) -> Any:
        """Await a call stepping ``sids`` on ``shard``. In-process, within the step timeout: past it
        the sessions are closed and ``error(timeout)`` raised. A worker process watches its own
        steps and answers a hung one itself; it is killed only when it falls silent for longer
        than ``silence_limit`` (it could not), and then ``error(that limit)`` is raised."""
        if self.step_timeout is None:
            return await call
        task = asyncio.ensure_future(call)
        if shard.host is not None:
            done, _ = await asyncio.wait({task}, timeout=self.step_timeout)
            limit = self.step_timeout
        else:
            limit, sent, done = silence_limit(self.step_timeout), time.monotonic(), set()
            while not done and (left := max(shard.last_heard, sent) + limit - time.monotonic()) > 0:
                done, _ = await asyncio.wait({task}, timeout=left)
        if done:
            return task.result()
        task.cancel()
        self._abandon(shard, sids)
        self.counters["step_timeouts"] += 1
        raise error(limit)

    def _abandon(self, shard: Shard, sids: list[int]) -> None:
        """Close sessions whose step hangs: their env instances are left to the hung call."""
        for sid in sids:
            self._forget(sid)
            if shard.host is not None:
                shard.host.abandon(sid)
        if shard.host is None:
            shard.kill()

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
            shard = self.shards[shard_index]
            try:
                if self.step_timeout is not None and op == "step_many" and shard.host is not None:
                    outs = await self._watched(shard, [items[i] for i in idxs])
                elif self.step_timeout is not None and op == "step_many":
                    # the worker answers a hung item itself (504 for it, results for the others);
                    # one that falls silent is killed: which item hung is not known then, so every
                    # session of the batch is reported lost (the pool re-creates them)
                    call = shard.call(op, [items[i] for i in idxs])

                    def lost(seconds: float) -> AgentGymError:
                        return EnvCrashedError(
                            f"worker {shard.index} was silent for {seconds:g} s during a batched "
                            "step; it was restarted and its sessions are lost"
                        )

                    outs = await self._timed(shard, call, [items[i][0] for i in idxs], lost)
                else:
                    outs = await shard.call(op, [items[i] for i in idxs])
            except AgentGymError as exc:  # the worker died (or hung): all its sessions are gone
                for i in idxs:
                    self._forget(items[i][0])
                    results[i] = _item_error(exc)
                return
            for i, out in zip(idxs, outs, strict=True):
                # the item's session is gone: crashed, lost, or given up as hung (by the worker, or
                # by _watched); counted as for a single step (see _call)
                counter = _GONE.get(out["error"]["code"]) if "error" in out else None
                if counter is not None:
                    if items[i][0] in self.sessions:
                        self.counters[counter] += 1
                    self._forget(items[i][0])
                results[i] = out

        await asyncio.gather(*(run(k, v) for k, v in by_shard.items()))
        return results

    async def _watched(self, shard: Shard, items: list[tuple]) -> list[dict]:
        """``step_many`` on an in-process shard, each item within the step timeout: an item that
        hangs is answered 504 and abandoned with its session; the items after it run anew."""
        assert self.step_timeout is not None and shard.host is not None
        loop = asyncio.get_running_loop()
        progress = BatchProgress()
        future = loop.run_in_executor(shard.executor, shard.host.step_many, items, progress)
        while True:
            with progress.lock:
                wait = progress.started + self.step_timeout - time.monotonic()
                if wait <= 0:  # the item running now hangs: stop the batch after it
                    progress.cancelled = True
                    outs = list(progress.out)
                    break
            done, _ = await asyncio.wait({future}, timeout=max(wait, 0.001))
            if done:
                return future.result()
        sid = items[len(outs)][0]  # forgotten and counted with the batch's results
        outs.append(_item_error(_step_timeout_error(sid, shard.host.abandon(sid), self.step_timeout)))
        rest = items[len(outs) :]
        return outs + (await self._watched(shard, rest) if rest else [])

    async def close(self, sid: int) -> None:
        """Close a session; its env instance is kept idle for the next creation when the env is
        reusable (within the bound: it counts as held), else closed."""
        session = self.get(sid)
        keep = get_env_spec(session.env).cost.reusable
        # Out of the table before the await: a step or a second close racing with this one finds
        # no session (404) instead of forgetting the instance this close is about to keep.
        self.sessions.pop(sid, None)
        try:
            await session.shard.call("close", sid, keep)
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

    async def call(self, sid: int, op: str, *args: Any) -> Any:
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
                await shard.call("drop_idle", env, stale)
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
        for shard in self.shards:
            shard.shutdown()


#: Error codes of a batch item whose session is gone, and the counter each goes to.
_GONE = {"env_crashed": "env_crashes", "unknown_session": "lost_sessions", "step_timeout": "step_timeouts"}


def _item_error(exc: AgentGymError) -> dict:
    return {"error": {"code": exc.code, "message": exc.message}, "status": exc.status}
