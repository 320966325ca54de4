"""A real uvicorn server on loopback in a background thread: for demos, tests and benchmarks."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from agentgym.errors import AgentGymError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_in_thread(env_names: list[str], *, port: int | None = None, **app_kwargs: Any) -> Iterator[str]:
    """Run a real uvicorn server on loopback in a background thread; yields its URL."""
    import uvicorn

    from agentgym.server.app import create_app

    port = port or free_port()
    app = create_app(env_names, **app_kwargs)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False)
    )
    thread = threading.Thread(target=server.run, name="agentgym-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AgentGymError("the env server failed to start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
