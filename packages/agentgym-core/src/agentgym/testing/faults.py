"""Faults injected into served envs, for the tests and benchmarks of what survives them.

:class:`DroppingProxy` sits between clients and a server and cuts every connection open through
it on demand (requests in flight included); :class:`FaultyServer` is ``agentgym serve`` in a process
group of its own, whose workers (``--workers``) can be SIGKILLed or stopped past ``--step-timeout``,
and which can itself be SIGKILLed and restarted on its port; :class:`FaultInjector` runs a job on
them (a training run) and injects one fault after another, the job's own death included. Linux only
(signals, process groups, ``/proc``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agentgym.server.background import free_port, wait_healthy

KINDS = ("job_kill", "worker_kill", "server_kill", "hang", "drop")


class DroppingProxy:
    """A loopback TCP proxy to ``127.0.0.1:target_port`` on a port of its own (``url``)."""

    def __init__(self, target_port: int, port: int | None = None):
        self.target_port, self.port = target_port, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._watch: tuple[bytes, threading.Event] | None = None  # a request line awaited
        self._failed: BaseException | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name="dropping-proxy")
        self._thread.start()
        if not ready.wait(10) or self._failed is not None:
            raise RuntimeError(f"the proxy could not listen on port {self.port}: {self._failed}")

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._link, "127.0.0.1", self.port)
            )
        except OSError as exc:  # the port was taken meanwhile
            self._failed = exc
            ready.set()
            self._loop.close()
            return
        ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:  # the server is down: the client sees its connection closed
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._links.add(pair)
        try:
            await asyncio.gather(self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False))
        finally:
            self._links.discard(pair)
            for w in pair:
                w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
                watch = self._watch
                if upstream and watch is not None and watch[0] in chunk:
                    watch[1].set()
        writer.close()  # its end closed: the other's too, after what it has buffered (drop aborts)

    def wait_request(self, marker: bytes = b"POST /v1/step", timeout: float = 30.0) -> bool:
        """Wait until a request holding ``marker`` (its request line) has been passed on to the
        server (True; False: none came for ``timeout`` s). A fault injected then meets it in
        flight, or the batch its client sends next."""
        seen = threading.Event()
        self._watch = (marker, seen)
        try:
            return seen.wait(timeout)
        finally:
            self._watch = None

    def drop(self) -> int:
        """Abort every connection open through the proxy (a reset, both ways); how many."""

        async def cut() -> int:
            links = list(self._links)
            for pair in links:
                for w in pair:
                    w.transport.abort()
            return len(links)

        return asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)

    def close(self) -> None:
        self.drop()
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> DroppingProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FaultyServer:
    """``agentgym serve ENVS --port P --workers W --step-timeout T ARGS``, started at once; its log
    (stderr) goes to ``log_path``."""

    def __init__(
        self, envs: list[str], *, port: int | None = None, workers: int = 2, step_timeout: float = 10.0,
        args: tuple[str, ...] = (), log_path: str | Path | None = None,
    ):  # fmt: skip
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", "agentgym", "serve", *envs, "--port", str(self.port),
                        "--workers", str(workers), "--step-timeout", str(step_timeout), *args]  # fmt: skip
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="agentgym-serve-", suffix=".log")
            os.close(fd)
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        try:
            wait_healthy(self.url, self.proc, timeout=120, what="agentgym serve", log_tail=self._tail)
        except BaseException:
            self.kill()
            raise

    def _tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]

    def kill(self) -> None:
        """SIGKILL the server and its workers (its whole process group, also when the server
        itself is gone: its workers are not)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def restart(self, down_s: float = 1.0) -> None:
        """SIGKILL it, then start it again on its port after ``down_s`` seconds."""
        self.kill()
        time.sleep(down_s)
        self.start()

    def workers(self) -> list[int]:
        """The pids of its worker processes (multiprocessing's resource tracker left out)."""
        assert self.proc is not None
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
                cmdline = (entry / "cmdline").read_bytes()
                if int(ppid) == self.proc.pid and state != "Z" and b"resource_tracker" not in cmdline:
                    found.append(int(entry.name))
        return sorted(found)

    def _signal_worker(self, which: int, sig: signal.Signals) -> int | None:
        pids = self.workers()
        if not pids:
            return None
        pid = pids[which % len(pids)]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        return pid

    def kill_worker(self, which: int = 0) -> int | None:
        """SIGKILL one worker (the server restarts it); its pid, or None if it had none."""
        return self._signal_worker(which, signal.SIGKILL)

    def hang_worker(self, seconds: float, which: int = 0) -> int | None:
        """SIGSTOP one worker for ``seconds`` (its steps hang; past ``--step-timeout`` the server
        answers them and restarts it), then SIGCONT it if it still runs; its pid, or None."""
        pid = self._signal_worker(which, signal.SIGSTOP)
        if pid is not None:

            def resume() -> None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

            timer = threading.Timer(seconds, resume)  # by then the server has most likely killed it
            timer.daemon = True
            timer.start()
        return pid

    def close(self) -> None:
        self.kill()

    def __enter__(self) -> FaultyServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FaultInjector:
    """Runs ``command`` (a job that resumes where it stopped when launched again: ``agentgym
    train`` with checkpoints) on ``servers``, reached through ``proxies`` (one each), and injects
    :data:`KINDS` in turn, on the servers alternately, each while a step request to its server is
    in flight: ``job_kill`` (the command SIGKILLed and launched again), ``worker_kill``,
    ``server_kill`` (restarted on its port), ``hang`` (a worker stopped for ``hang_s``) and ``drop``
    (the proxy's connections reset). The job's output goes to ``log``. A fault waits up to
    ``request_wait_s`` for a step request to its server: after a ``job_kill`` the relaunched job
    loads its model and checkpoint first, which took over 30 s on a loaded 2-core machine, and a
    fault that stops waiting lands between requests (``on_step`` False in its event)."""

    def __init__(
        self, servers: list[FaultyServer], proxies: list[DroppingProxy], command: list[str],
        log: str | Path, *, hang_s: float = 15.0, max_deaths: int = 3, request_wait_s: float = 120.0,
    ):  # fmt: skip
        self.servers, self.proxies, self.command, self.log = servers, proxies, command, Path(log)
        self.hang_s, self.max_deaths, self.request_wait_s = hang_s, max_deaths, request_wait_s
        self.counts: collections.Counter[str] = collections.Counter()
        self.events: list[dict[str, Any]] = []
        self.job = self._launch()
        self.turn = 0

    def _launch(self) -> subprocess.Popen:
        with open(self.log, "a") as out:
            # a group of its own: a kill takes its children too (verl's Ray, a sampler's engine)
            return subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _kill_job(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.job.pid, signal.SIGKILL)
        self.job.wait()

    def _wait_step(self, k: int) -> bool | None:
        """Wait for a step request to server ``k`` (True), up to ``request_wait_s`` (False), in
        one-second slices so that a job that ends meanwhile is seen (None: no fault to inject; the
        run loop records its end)."""
        deadline = time.monotonic() + self.request_wait_s
        while time.monotonic() < deadline:
            if self.job.poll() is not None:
                return None
            if self.proxies[k].wait_request(timeout=min(1.0, max(deadline - time.monotonic(), 0.01))):
                return True
        return False

    def inject(self, t: float) -> None:
        """The next fault (``t``: seconds into the run, for the record), unless the job ends
        before a step request comes."""
        kind, k = KINDS[self.turn % len(KINDS)], self.turn % len(self.servers)
        on_step = self._wait_step(k)  # a batch of env steps just sent
        if on_step is None:
            return
        self.turn += 1
        server, detail = self.servers[k], ""
        if kind == "worker_kill":
            detail = f"pid {server.kill_worker()}"
        elif kind == "server_kill":
            server.restart(down_s=2.0)
        elif kind == "hang":
            detail = f"pid {server.hang_worker(self.hang_s)}"
        elif kind == "drop":
            detail = f"{self.proxies[k].drop()} connections"
        else:
            self._kill_job()
            self.job = self._launch()
        self.counts[kind] += 1
        self.events.append(
            {"t_s": round(t, 1), "kind": kind, "server": k, "detail": detail, "on_step": on_step}
        )
        print(f"[{t / 60:5.1f} min] {kind} on server {k} {detail}", flush=True)  # a long run's progress

    def run(self, every: float, most: int | None = None, until_s: float | None = None) -> float:
        """Inject a fault every ``every`` seconds (at most ``most``) until the job ends well, or
        until ``until_s`` seconds have passed (the job left running); the seconds it ran. A job
        that dies on its own is launched again, the death recorded, up to ``max_deaths`` times in
        a row (then an error: it fails whatever happens)."""
        t0 = time.monotonic()
        next_at, deaths = t0 + every, 0
        while (code := self.job.poll()) != 0 and (until_s is None or time.monotonic() - t0 < until_s):
            if code is not None:
                self.events.append(
                    {"t_s": round(time.monotonic() - t0, 1), "kind": "job_died", "detail": code}
                )
                deaths += 1
                if deaths > self.max_deaths:
                    raise RuntimeError(f"the job died {deaths} times in a row (exit {code}); see {self.log}")
                self.job = self._launch()
                continue
            if time.monotonic() >= next_at and (most is None or self.turn < most):
                self.inject(time.monotonic() - t0)
                next_at, deaths = next_at + every, 0
            time.sleep(0.1)
        return time.monotonic() - t0

    def close(self) -> None:
        """Stop the job if it still runs (the servers and proxies are the caller's)."""
        self._kill_job()
