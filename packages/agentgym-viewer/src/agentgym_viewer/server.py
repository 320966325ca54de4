"""Serving the viewer: :func:`serve` for ``agentgym view``, :func:`serve_in_thread` for tests and
benchmarks (a real uvicorn server on loopback in a daemon thread)."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from agentgym.errors import AgentGymError
from agentgym_viewer.index import Index

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(app: object, host: str, port: int):  # -> uvicorn.Server
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    return uvicorn.Server(config)


def _wait_started(server: object, thread: threading.Thread, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not getattr(server, "started", False):
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AgentGymError("the viewer failed to start")
        time.sleep(0.02)


@contextlib.contextmanager
def serve_in_thread(
    paths: Sequence[str | Path] | Index, *, token: str | None = None, port: int = 0
) -> Iterator[str]:
    """Serve the viewer over ``paths`` (or an :class:`Index`) on 127.0.0.1 in a daemon thread;
    yields its base URL (no trailing slash)."""
    from agentgym_viewer.app import create_app

    index = paths if isinstance(paths, Index) else Index(paths)
    port = port or _free_port()
    server = _server(create_app(index, token=token), "127.0.0.1", port)
    thread = threading.Thread(target=server.run, name="agentgym-viewer", daemon=True)
    thread.start()
    _wait_started(server, thread)
    try:
        yield _url("127.0.0.1", port)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _progress_printer() -> Callable[[int, int, int], None]:
    """Index progress on one line of stderr, rewritten at most a few times a second."""
    last = [0.0]

    def show(files_done: int, files_total: int, episodes: int) -> None:
        now = time.monotonic()
        if now - last[0] < 0.2 and files_done < files_total:
            return
        last[0] = now
        end = "\n" if files_done >= files_total else ""
        print(f"\rindexing: {files_done}/{files_total} files, {episodes} episodes", end=end, file=sys.stderr)
        sys.stderr.flush()

    return show


def serve(
    paths: Sequence[str | Path],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    open_browser: bool = True,
) -> None:
    """Index ``paths`` and serve the viewer until Ctrl-C. A non-loopback ``host`` needs a token."""
    from agentgym.server.run import check_bind
    from agentgym_viewer.app import create_app

    try:
        check_bind(host, token, insecure=False)
    except AgentGymError as exc:
        # the same refusal, without pointing at an --insecure this command does not have
        raise AgentGymError(
            f"refusing to serve the viewer on non-loopback address {host!r} without a token: "
            "pass --token (or set AGENTGYM_TOKEN)",
            code=exc.code,
            status=exc.status,
        ) from None
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # say so in one line now rather than after indexing, in uvicorn's words
        try:
            s.bind((host, port))
        except OSError as exc:
            raise AgentGymError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc} (try --port)"
            ) from None
    started = time.monotonic()
    index = Index(paths, progress=_progress_printer())
    count = sum(r.episodes for r in index.runs())
    print(
        f"indexed {count} episodes of {len(index.runs())} source(s) in {time.monotonic() - started:.1f}s "
        f"({index.db_path})",
        file=sys.stderr,
    )
    server = _server(create_app(index, token=token), host, port)
    url = _url(host, port)
    print(f"serving {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        # the token in the first URL sets the cookie every later page is checked against
        target = f"{url}/?token={quote(token)}" if token else f"{url}/"

        def opener() -> None:
            deadline = time.monotonic() + 60
            while not server.started and time.monotonic() < deadline and not server.should_exit:
                time.sleep(0.05)
            if server.started:
                webbrowser.open(target)

        threading.Thread(target=opener, name="agentgym-viewer-browser", daemon=True).start()
    try:
        server.run()
    finally:
        index.close()
