"""Shards, where env code runs off the event loop: ``ThreadShard`` (a thread pool in the server process) and ``ProcessShard`` (a worker process), behind one interface.

A shard runs any ``EnvHost`` operation (:meth:`Shard.call`) and batches of steps watched for hangs
(:meth:`Shard.step_many`, see watchdog.py). A worker process that dies takes its sessions with it:
they are reported lost (``on_lost``) and a new worker starts, unless the server is stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import os
import pickle
import signal
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentgym.errors import AgentGymError, EnvCrashedError
from agentgym.server.config import ServerConfig
from agentgym.server.host import EnvHost
from agentgym.server.inline import InlineWatch, step_inline
from agentgym.server.messages import Answer, Op, StepItem
from agentgym.server.watchdog import Progress, after_hang, silence_limit
from agentgym.server.worker import worker_main

#: ``on_lost(session ids, {env: idle instances})``: what a dead worker took with it.
LostCallback = Callable[[list[int], dict[str, int]], None]


class SilentWorkerError(EnvCrashedError):
    """A worker said nothing for ``seconds`` with a step in flight: it was killed (and restarted)."""

    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.seconds = seconds


class Shard:
    """One shard's sessions and idle env instances, as the session manager accounts for them, and
    the operations that run its env code."""

    def __init__(self, env_names: list[str], index: int, config: ServerConfig, on_lost: LostCallback | None):
        self.env_names, self.index, self.on_lost = env_names, index, on_lost
        self.step_timeout = config.step_timeout
        self.sessions: set[int] = set()  # placed here, including creations still in flight
        # idle env instances kept for reuse, per env: when each was put back (the manager's own
        # account of the host's free lists, which only its calls change)
        self.idle: dict[str, list[float]] = defaultdict(list)

    async def call(self, op: Op, *args: Any) -> Any:
        """Run ``EnvHost.ops[op](*args)`` and return its result (or raise its error)."""
        raise NotImplementedError

    async def step_many(self, items: list[StepItem]) -> list[Answer]:
        """``EnvHost.step_many(items)``, each item within the step timeout: an item that hangs is
        answered 504 and its session abandoned; the others are stepped."""
        raise NotImplementedError

    def warm_up(self) -> None:
        """Wait until the shard can serve (called before serving starts, off the event loop)."""

    def stop(self) -> None:
        """Stop serving: calls from now on, and those pending, fail with 503 ``server_stopping``."""
        raise NotImplementedError

    def join(self) -> None:
        """Wait (a bounded time) until the shard's env instances are closed or its worker is gone."""


class ThreadShard(Shard):
    """Env code on a thread pool in the server process (``--workers 1``); the event loop watches
    steps. Steps of envs that declare them cheap run on the loop's thread instead (inline.py)."""

    def __init__(self, env_names: list[str], index: int, config: ServerConfig, on_lost: LostCallback | None):
        super().__init__(env_names, index, config, on_lost)
        self.stopping = False
        self.host = EnvHost(env_names)
        self.executor = ThreadPoolExecutor(config.thread_count, thread_name_prefix=f"agentgym-env-{index}")
        # envs whose steps run on the loop's thread (inline.py), and their watchdog
        self.cheap = {name for name, spec in self.host.specs.items() if spec.cost.cheap_step}
        self.inline_watch = InlineWatch(self.step_timeout) if self.step_timeout is not None else None

    def _inline(self, items: list[StepItem]) -> bool:
        """Whether a batch runs on the loop's thread: every item of a cheap env, none waiting for
        its session's lock (held by a reset on a pool thread: the loop must not wait for it)."""
        if not self.cheap:
            return False
        slots = self.host.slots
        for item in items:
            slot = slots.get(item.sid)
            if slot is not None and (slot.spec.name not in self.cheap or slot.lock.locked()):
                return False
        return True

    async def call(self, op: Op, *args: Any) -> Any:
        if self.stopping:
            raise _stopping_error()
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.host.ops[op], *args)

    async def step_many(self, items: list[StepItem]) -> list[Answer]:
        if self.stopping:
            raise _stopping_error()
        if self._inline(items):
            return step_inline(self.host, items, self.inline_watch)
        if self.step_timeout is None:
            return await self.call(Op.STEP_MANY, items)
        loop, answers = asyncio.get_running_loop(), []
        while items:
            progress = Progress()
            future = loop.run_in_executor(self.executor, self.host.step_many, items, progress)
            while (done := progress.overdue(self.step_timeout)) is None:
                finished, _ = await asyncio.wait({future}, timeout=progress.left(self.step_timeout))
                if finished:
                    return answers + future.result()
            answered, items = after_hang(self.host.abandon, items, done, self.step_timeout)
            answers += answered
        return answers

    def stop(self) -> None:
        self.stopping = True
        self.host.close_all()  # env instances may hold JVMs or browsers
        self.executor.shutdown(wait=False, cancel_futures=True)


# Messages to a worker larger than this are written from a thread: a blocking write on the event
# loop could deadlock against a worker that is itself blocked writing a large result to us.
_INLINE_SEND_BYTES = 32 << 10


class ProcessShard(Shard):
    """Env code in a worker process (``--workers N``), over a duplex pipe the event loop reads itself.

    The loop reads the pipe with ``add_reader``, so a call costs one pickled message each way and no
    thread hand-offs (a ``ProcessPoolExecutor`` needed four per call, which dominated batched
    steps). The worker watches its own steps (worker.py); one that falls silent past
    ``silence_limit`` is killed.
    """

    def __init__(self, env_names: list[str], index: int, config: ServerConfig, on_lost: LostCallback | None):
        super().__init__(env_names, index, config, on_lost)
        self._ids = itertools.count()
        self.stopping = False  # no worker starts once the server stops
        self._start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # no inherited event loop, threads or JVMs
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=worker_main,
            args=(child, self.env_names, os.getpid(), self.step_timeout),
            name=f"agentgym-worker-{self.index}",
            daemon=True,
        )
        with _sigint_blocked():
            self.proc.start()
        child.close()
        self.pending: dict[int, asyncio.Future] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.last_heard = time.monotonic()  # the worker's last message (a reply, or "alive")

    async def call(self, op: Op, *args: Any) -> Any:
        if self.stopping:
            raise _stopping_error()
        loop = asyncio.get_running_loop()
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

    async def step_many(self, items: list[StepItem]) -> list[Answer]:
        if self.step_timeout is None:
            return await self.call(Op.STEP_MANY, items)
        # the worker answers a hung item itself; one that falls silent (a hang holding the GIL) is
        # killed, as nothing else can stop it
        task = asyncio.ensure_future(self.call(Op.STEP_MANY, items))
        limit, sent, done = silence_limit(self.step_timeout), time.monotonic(), set()
        try:
            while not done and (left := max(self.last_heard, sent) + limit - time.monotonic()) > 0:
                done, _ = await asyncio.wait({task}, timeout=left)
        finally:
            if not task.done():  # given up, or the request itself was cancelled
                task.cancel()
        if done:
            return task.result()
        # the batch's sessions are the caller's to report (its step hung); the others go with the worker
        self.sessions.difference_update(item.sid for item in items)
        self.kill()
        raise SilentWorkerError(
            f"worker {self.index} was silent for {limit:g} s during a step; it was restarted and its "
            "sessions are lost",
            limit,
        )

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
        """The worker is gone: fail its calls, forget its sessions, start a new one (not when stopping)."""
        if self.stopping:  # stop() has closed the pipe and failed the calls already
            return
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.conn.fileno())
        lost = sorted(self.sessions)
        lost_idle = {env: len(times) for env, times in self.idle.items() if times}
        self.sessions.clear()
        self.idle.clear()
        self._fail_pending(
            EnvCrashedError(f"worker {self.index} died; its sessions are lost and it was restarted")
        )
        self.conn.close()
        self.proc.join(timeout=1)
        if self.proc.is_alive():
            self.proc.kill()
        self._start()
        if self.on_lost is not None:
            self.on_lost(lost, lost_idle)

    def _fail_pending(self, error: AgentGymError) -> None:
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()

    def kill(self) -> None:
        """A worker that hangs: kill it now (its sessions are lost, a fresh worker starts)."""
        self.proc.kill()
        self._died()

    def warm_up(self) -> None:
        message = self.conn.recv()
        if message[0] != "ready":
            raise AgentGymError(f"worker {self.index} failed to start")

    def stop(self) -> None:
        self.stopping = True
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.conn.fileno())
        self._fail_pending(_stopping_error())
        self.conn.close()  # the worker sees EOF and exits

    def join(self) -> None:
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)


def _stopping_error() -> AgentGymError:
    return AgentGymError("the server is stopping", code="server_stopping", status=503)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while a worker is spawned: the worker starts with it blocked
    (the mask is inherited) and ignores it from its first line, so a Ctrl-C sent to the process
    group while it starts raises no ``KeyboardInterrupt`` in it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def make_shards(env_names: list[str], config: ServerConfig, on_lost: LostCallback) -> list[Shard]:
    """One thread shard (``workers == 1``), or one process shard per worker."""
    if config.workers == 1:
        return [ThreadShard(env_names, 0, config, on_lost)]
    return [ProcessShard(env_names, i, config, on_lost) for i in range(config.workers)]
