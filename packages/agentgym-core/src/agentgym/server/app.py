"""``create_app``: the ASGI app of ``agentgym serve``, its routes, error answers, guard and session manager put together.

Every error is ``{"error": {"code", "message"}}`` with a meaningful status: 401 bad or missing
token, 404 unknown env/session/route, 409 step after the episode ended, 413 body too large,
422 malformed body or bad task id, 503 at capacity, 500 a crashed env (its session is closed;
the server keeps serving). An over-long action is not an error: as in-process, it gets a 200 with an
observation saying so (``info.valid_action`` False) and the episode goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentgym.errors import AgentGymError, CapacityError
from agentgym.plugins import get_env_spec
from agentgym.server.compat import add_routes as add_compat_routes
from agentgym.server.config import ServerConfig
from agentgym.server.fastpath import BatchFastPath
from agentgym.server.guard import MAX_BODY_BYTES, GuardMiddleware
from agentgym.server.responses import JSONBody, error_response
from agentgym.server.routes import router
from agentgym.server.sessions import SessionManager

__all__ = ["MAX_BODY_BYTES", "create_app"]


def create_app(
    env_names: list[str],
    config: ServerConfig | None = None,
    *,
    token: str | None = None,
    openenv: bool = False,
    **settings: Any,
) -> FastAPI:
    """Build the app serving ``env_names`` (all must be installed; unknown names raise).

    ``config``, or the ``ServerConfig`` fields as keywords (``workers=2, ttl=60``...), says how
    sessions are held; ``token``: the bearer token every route but ``/health`` requires;
    ``openenv``: OpenEnv's protocol too, under ``/openenv/<env>`` (``agentgym.adapters.openenv``)."""
    if not env_names:
        raise ValueError("no env to serve")
    config = config if config is not None else ServerConfig(**settings)
    specs = {name: get_env_spec(name) for name in env_names}  # UnknownEnvError early, before binding
    guard: dict[str, Any] = {}  # the guard's accounting; it finds the manager here once it runs

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        manager = SessionManager(env_names, config)
        try:
            await asyncio.gather(*(asyncio.to_thread(s.warm_up) for s in manager.shards))
            guard["manager"] = app.state.manager = manager
            reaper = asyncio.create_task(manager.reaper())
            try:
                yield
            finally:
                reaper.cancel()
        finally:
            manager.shutdown()

    app = FastAPI(
        title="AgentGym env server",
        version="1",
        description="Serves AgentGym text environments: API v1 plus AgentGym-compatible routes.",
        lifespan=lifespan,
        default_response_class=JSONBody,
    )
    app.state.specs, app.state.config, app.state.guard = specs, config, guard
    _add_error_handlers(app)
    app.add_middleware(BatchFastPath, state=guard)  # inside the guard: token and body size checked first
    app.add_middleware(GuardMiddleware, token=token, state=guard)
    app.include_router(router)
    add_compat_routes(app)
    if openenv:
        from agentgym.adapters.openenv import mount

        mount(app, env_names, capacity=config.capacity, token=token)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AgentGymError)
    async def _agentgym_error(request: Request, exc: AgentGymError):
        response = error_response(exc.status, exc.code, exc.message)
        if isinstance(exc, CapacityError):
            response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {err.get('msg', 'invalid')}")
        return error_response(422, "invalid_request", "; ".join(parts) or "invalid request body")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 400 and "parsing the body" in message:
            return error_response(422, "invalid_json", "the body is not valid UTF-8 JSON")
        return error_response(exc.status_code, codes.get(exc.status_code, "http_error"), message)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception):
        return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")
