"""Real env servers on loopback, for demos, tests and benchmarks: uvicorn in a background thread, or
``agentgym serve`` in a process of its own."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentgym.errors import AgentGymError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_app_in_thread(app: Any, *, port: int | None = None, name: str = "agentgym-server") -> Iterator[str]:
    """Run ``app`` under a real uvicorn server on loopback in a background thread; yields its URL."""
    import uvicorn

    from agentgym.server.config import KEEP_ALIVE_S

    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="error", access_log=False, timeout_keep_alive=KEEP_ALIVE_S
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AgentGymError(f"{name} failed to start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextlib.contextmanager
def serve_in_thread(env_names: list[str], *, port: int | None = None, **app_kwargs: Any) -> Iterator[str]:
    """Run a real env server on loopback in a background thread; yields its URL."""
    from agentgym.server.app import create_app

    with serve_app_in_thread(create_app(env_names, **app_kwargs), port=port) as url:
        yield url


@dataclass
class ServedProcess:
    url: str
    proc: subprocess.Popen


@contextlib.contextmanager
def serve_in_process(
    env_names: list[str],
    *serve_args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    port: int | None = None,
) -> Iterator[ServedProcess]:
    """Run ``agentgym serve ENV... --port P SERVE_ARGS...`` as a user would, in a process of its own,
    until ``/health`` answers; stopped (SIGTERM, then SIGKILL) on exit unless it already ended.
    ``port``: a given one (to restart a server where its clients expect it), else a free one."""
    port = port or free_port()
    args = ["serve", *env_names, "--port", str(port), *serve_args]
    with command_in_process(args, port=port, env=env, timeout=timeout) as served:
        yield served


@contextlib.contextmanager
def command_in_process(
    args: list[str], *, port: int, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> Iterator[ServedProcess]:
    """Run the server command ``agentgym ARGS...`` (listening on ``port``) in a process of its own
    until its ``/health`` answers; stopped (SIGTERM, then SIGKILL) on exit unless it already ended."""
    # stderr to a file, not a pipe nobody reads while it serves: a full pipe would block the server
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym", *args],
        env=dict(env) if env is not None else os.environ.copy(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def tail() -> str:
        log.seek(0)
        return log.read()[-2000:]

    try:
        wait_healthy(url, proc, timeout=timeout, what=f"agentgym {args[0]}", log_tail=tail)
        yield ServedProcess(url, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        log.close()


def wait_healthy(
    url: str, proc: subprocess.Popen, *, timeout: float = 60.0, what: str = "the server",
    log_tail: Callable[[], str] = lambda: "",
) -> None:  # fmt: skip
    """Wait until ``url``'s ``/health`` answers 200; an error with the tail of the process's log
    if ``proc`` ends first or ``timeout`` seconds pass."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AgentGymError(f"{what} did not start: {log_tail() or 'timeout'}")
        time.sleep(0.1)
