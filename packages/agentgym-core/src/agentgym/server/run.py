"""Running ``agentgym serve``: the address policy (loopback unless a token protects it) and uvicorn."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
from typing import Any

from agentgym.errors import AgentGymError
from agentgym.server.config import KEEP_ALIVE_S, ServerConfig, tune_gc

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 36001


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None)
            )
        except OSError:
            return False


def check_bind(host: str, token: str | None, insecure: bool) -> None:
    if not is_loopback(host) and not token and not insecure:
        raise AgentGymError(
            f"refusing to serve on non-loopback address {host!r} without a token: "
            "pass --token (or set AGENTGYM_TOKEN), or --insecure if you really mean it",
            code="insecure_bind",
            status=2,
        )


def serve(
    env_names: list[str],
    config: ServerConfig | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    insecure: bool = False,
    log_level: str = "warning",
    openenv: bool = False,
) -> None:
    """Serve ``env_names`` until interrupted (Ctrl-C, SIGTERM): in-flight requests are answered,
    every shard is stopped, and nothing is left running when this returns. ``openenv``: OpenEnv's
    protocol too (``agentgym.adapters.openenv``)."""
    import uvicorn

    from agentgym.server.app import create_app

    token = token or os.environ.get("AGENTGYM_TOKEN") or None
    check_bind(host, token, insecure)
    app = create_app(env_names, config, token=token, openenv=openenv)
    tune_gc()
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler it found:
    # this one, so that the process exits (143) through Python, its cleanup run, not killed by it
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        uvicorn.run(
            app, host=host, port=port, log_level=log_level, access_log=False, timeout_keep_alive=KEEP_ALIVE_S
        )
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
