"""Running the server: address policy (loopback unless a token protects it) and uvicorn."""

from __future__ import annotations

import ipaddress
import os
import socket

from agentgym.errors import AgentGymError

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
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    workers: int = 1,
    capacity: int = 1024,
    ttl: float = 1800.0,
    compat_ttl: float | None = None,
    max_instances: int | None = None,
    token: str | None = None,
    insecure: bool = False,
    log_level: str = "warning",
    step_timeout: float | None = None,
) -> None:
    """Serve ``env_names`` until interrupted. ``step_timeout``: seconds one env step may run
    (0: no limit; None: ``$AGENTGYM_STEP_TIMEOUT``, else 60)."""
    import uvicorn

    from agentgym.server.app import create_app
    from agentgym.server.sessions import tune_gc

    token = token or os.environ.get("AGENTGYM_TOKEN") or None
    check_bind(host, token, insecure)
    app = create_app(
        env_names,
        workers=workers,
        capacity=capacity,
        ttl=ttl,
        compat_ttl=compat_ttl,
        token=token,
        max_instances=max_instances,
        step_timeout="env" if step_timeout is None else (step_timeout or None),
    )
    tune_gc()
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
