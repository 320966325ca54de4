"""A worker process (``agentgym serve --workers N``): one ``EnvHost`` answering its server's calls over a pipe, its steps watched by a thread of its own.

Messages: the server sends ``(call_id, op, args)``, an ``EnvHost`` operation (``Op``) and its arguments; the
worker answers ``(call_id, ok, value)`` in order, ``("ready",)`` once its envs are loaded and
``("alive",)`` while a long call runs. It ignores the terminal's SIGINT (a Ctrl-C goes to the
whole process group; the server decides when its workers stop) and exits when its server closes
the pipe or dies.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from agentgym.errors import AgentGymError
from agentgym.server.config import tune_gc
from agentgym.server.host import EnvHost
from agentgym.server.messages import Answer, Op, StepItem
from agentgym.server.watchdog import Progress, after_hang, heartbeat_interval


def worker_main(conn: Any, env_names: list[str], parent_pid: int, step_timeout: float | None) -> None:
    """The worker process's entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked by the server around the spawn
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
    host = EnvHost(env_names)
    tune_gc()
    try:
        conn.send(("ready",))
    except OSError:  # the server stopped while this worker was starting
        os._exit(0)
    WorkerLoop(conn, host, step_timeout).run()


def _exit_with_parent(parent_pid: int) -> None:
    # A worker must not outlive its server (killed, crashed): orphans would hold env instances,
    # JVMs or browsers, and spin. Reparenting changes getppid().
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(0)


def _exit_closing(host: EnvHost, budget: float = 4.0) -> None:
    """Close the env instances (JVMs, browsers: they ignore the terminal's SIGINT as this worker
    does), within ``budget`` seconds (a hung step may hold one), then exit."""
    closing = threading.Thread(target=host.close_all, daemon=True)
    closing.start()
    closing.join(budget)
    os._exit(0)


@dataclass
class _Running:
    """A batch of steps the worker is running, for its watchdog."""

    call_id: int
    items: list[StepItem]
    progress: Progress
    prefix: list[Answer]  # answers of the batch's items before these (hung ones among them)


class WorkerLoop:
    """The worker's receive-run-reply loop, with a watchdog for steps that hang.

    The loop runs each call on the thread that received it (no hand-off: a call costs what it
    did). A watchdog thread looks at the batch of steps running now; when an item is overdue it
    answers for it (:func:`after_hang`) and hands the loop, with the rest of the batch, to a new
    thread, as the hung thread cannot receive any more. The hung thread, if its call ever returns,
    finds the loop no longer its own and ends without a word. While a call runs the watchdog also
    tells the server the worker is alive, so that a long batch of steps each in time is not taken
    for a hang.
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

    def _loop(self, generation: int, first: _Running | None = None) -> None:
        """Receive and answer calls while the loop is this thread's; ``first``: a batch to finish."""
        if first is not None and not self._steps(generation, first):
            return
        while True:
            try:
                call_id, op, args = self.conn.recv()
            except (EOFError, OSError):  # the server closed the pipe (it stops) or is gone
                _exit_closing(self.host)
            self.busy = True
            if self.step_timeout is not None and op is Op.STEP_MANY:
                if not self._steps(generation, _Running(call_id, args[0], Progress(), [])):
                    return
                continue
            try:
                reply = (call_id, True, self.host.ops[op](*args))
            except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
                reply = (call_id, False, exc)
            if not self._send(generation, reply):
                return

    def _steps(self, generation: int, running: _Running) -> bool:
        """Run a watched batch of steps and answer it; False if the watchdog took over meanwhile."""
        with self.lock:
            self.running = running
        try:
            out = self.host.step_many(running.items, running.progress)
            reply = (running.call_id, True, running.prefix + out)
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
        tick, beat = min(0.25, self.step_timeout / 10), heartbeat_interval(self.step_timeout)
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
                done = running.progress.overdue(self.step_timeout) if running is not None else None
                if running is None or done is None:
                    continue
                self.generation += 1  # from here on, the hung thread's replies are dropped
                self.running = None
                generation = self.generation
            answered, rest = after_hang(self.host.abandon, running.items, done, self.step_timeout)
            resumed = _Running(running.call_id, rest, Progress(), running.prefix + answered)
            threading.Thread(
                target=self._loop, args=(generation, resumed), name="agentgym-worker-loop", daemon=True
            ).start()
