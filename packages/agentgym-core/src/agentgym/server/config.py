"""``ServerConfig``: the settings a server runs with, each with one meaning, and the GC tuning of its processes."""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from agentgym.errors import AgentGymError
from agentgym.resources import Bound

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


@dataclass(frozen=True)
class ServerConfig:
    """How a server holds its sessions.

    ``workers``: shards; 1 runs env code in the server process on ``threads`` threads (default: 4
    per core, at most 32), N > 1 in N worker processes. ``capacity``: sessions at once.
    ``ttl``: seconds an idle v1 session, or an env instance kept idle for reuse, lives.
    ``compat_ttl``: the same for sessions made through the AgentGym-compatible ``/create``
    (None: never expire, as on the original servers, whose clients cannot recover a lost session).
    ``max_instances``: env instances of one env at once (None: from the env's declared cost and the
    machine). ``step_timeout``: seconds one env step may run before it is answered 504 and its
    session closed (None: no limit; default: ``$AGENTGYM_STEP_TIMEOUT``, else 60). ``bounds``: the
    instance bound of each env, computed once by whoever shows it (``agentgym serve`` prints it
    before it starts), so that ``/health`` answers the same number; an env missing from it gets its
    bound computed when the server starts.
    """

    workers: int = 1
    capacity: int = 1024
    ttl: float = 1800.0
    compat_ttl: float | None = None
    max_instances: int | None = None
    step_timeout: float | None = field(default_factory=step_timeout_from_env)
    threads: int | None = None
    bounds: Mapping[str, Bound] | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.step_timeout is not None and self.step_timeout <= 0:
            raise ValueError("step_timeout must be positive (None: no limit)")

    @property
    def thread_count(self) -> int:
        return self.threads or min(32, (os.cpu_count() or 1) * 4)


# How long a server whose clients are programs (env servers, the search env's retriever server, the
# model server) keeps an idle connection open: longer than clients keep one for reuse (httpx: 5 s,
# aiohttp: 15 s). At uvicorn's default, 5 s, the server closed connections just as an httpx client
# sent its next request on them, which the client read as "connection reset by peer": a soak test's
# client hit it under load (2026-12-07). Browsers retry such a request themselves.
KEEP_ALIVE_S = 75


# Env steps allocate many short-lived objects (BabyAI builds a grid of WorldObj per reset), and a
# server holds many long-lived env instances: with CPython's default gen-0 threshold (700) the
# collector runs every few steps and re-walks them all. Fewer, larger collections measured 15-25%
# more BabyAI steps/s; cyclic garbage is still collected.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """Set a server process's garbage-collector thresholds; objects alive now (imports, plugins) are
    frozen out of future collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
