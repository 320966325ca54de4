"""Serve the shop and the forum on loopback: ``SiteServer`` and the process-wide ``shared_sites()``.

Both apps run in one daemon thread with its own asyncio loop, as two ``uvicorn.Server`` instances on
sockets bound here to free ports of 127.0.0.1 (binding before the thread starts means the ports are
known, and taken, before anything waits on them). uvicorn only installs signal handlers in the main
thread, so running it in a worker thread leaves the host process's Ctrl-C alone.

    sites = SiteServer().start()
    sites.urls        # {"shopping": "http://127.0.0.1:P1", "reddit": "http://127.0.0.1:P2"}
    sites.databases   # the Databases behind both: open/reset/drop/connect a session token
    sites.stop()
"""

from __future__ import annotations

import asyncio
import atexit
import socket
import threading
import time
import urllib.error
import urllib.request
from types import TracebackType

import uvicorn

from .db import Databases
from .forum import create_forum_app
from .shop import create_shop_app

HOST = "127.0.0.1"


def _bind_port(host: str = HOST, port: int = 0) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(False)
    return sock


class SiteServer:
    """Both sites, served from one background thread. ``start()`` returns once both answer HTTP."""

    def __init__(
        self, databases: Databases | None = None, host: str = HOST, ports: dict[str, int] | None = None
    ) -> None:
        self.databases = databases if databases is not None else Databases()
        self.host = host
        self.ports = dict(ports or {})  # site -> port; free ports where not given
        self.urls: dict[str, str] = {}
        self._servers: list[uvicorn.Server] = []
        self._sockets: list[socket.socket] = []
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> SiteServer:
        """Start serving (no-op if already running) and wait until both sites answer."""
        with self._lock:
            if self.running:
                return self
            apps = {"shopping": create_shop_app(self.databases), "reddit": create_forum_app(self.databases)}
            self._sockets, self._servers, self.urls, self._error = [], [], {}, None
            for name, app in apps.items():
                sock = _bind_port(self.host, self.ports.get(name, 0))
                config = uvicorn.Config(
                    app,
                    log_config=None,
                    access_log=False,
                    lifespan="off",
                    ws="none",
                    loop="asyncio",
                    timeout_graceful_shutdown=2,
                )
                self._sockets.append(sock)
                self._servers.append(uvicorn.Server(config))
                self.urls[name] = f"http://{self.host}:{sock.getsockname()[1]}"
            self._thread = threading.Thread(target=self._run, name="agentgym-webarena-sites", daemon=True)
            self._thread.start()
            try:
                self._wait_ready(timeout)
            except BaseException:
                self._stop_locked()
                raise
            return self

    def _run(self) -> None:
        async def serve_all() -> None:
            await asyncio.gather(
                *(
                    server.serve(sockets=[sock])
                    for server, sock in zip(self._servers, self._sockets, strict=True)
                )
            )

        try:
            asyncio.run(serve_all())
        except BaseException as error:  # reported to the thread waiting in start()
            self._error = error

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = dict(self.urls)
        while pending:
            if self._error is not None or not self.running:
                raise RuntimeError(f"the site servers stopped while starting: {self._error!r}")
            for name, url in list(pending.items()):
                try:
                    with urllib.request.urlopen(url + "/", timeout=2) as response:
                        if response.status == 200:
                            del pending[name]
                except (urllib.error.URLError, OSError):
                    pass
            if pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the sites did not answer within {timeout} s: {sorted(pending)}")
                time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both servers and wait for the thread (the databases stay; see ``Databases.close``)."""
        with self._lock:
            self._stop_locked(timeout)

    def _stop_locked(self, timeout: float = 10.0) -> None:
        for server in self._servers:
            server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        for sock in self._sockets:
            sock.close()
        self._thread = None

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


_shared: SiteServer | None = None
_shared_lock = threading.Lock()


def shared_sites() -> SiteServer:
    """The process's one running SiteServer, started on first use (thread-safe)."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            server = SiteServer().start()
            atexit.register(server.stop)
            _shared = server
        return _shared
