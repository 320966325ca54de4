"""The viewer's ASGI app: the page modules' routes, error pages, the guard and static files.

Each page module (:mod:`~agentgym_viewer.pages`, :mod:`~agentgym_viewer.replay`,
:mod:`~agentgym_viewer.play`) exposes a ``routes`` list whose handlers find what they serve in
``request.app.state``: ``index`` (the :class:`~agentgym_viewer.index.Index`) and ``sessions``
(the play sessions of this app).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from agentgym_viewer import frames, pages, play, replay
from agentgym_viewer.guard import Guard, secure
from agentgym_viewer.index import Index
from agentgym_viewer.render import error_page
from agentgym_viewer.sessions import Sessions

STATIC = Path(__file__).parent / "static"


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else None
    title = {400: "Bad request", 404: "Not found", 405: "Method not allowed"}.get(status, "Error")
    if not detail or detail == title:
        detail = {404: "There is nothing at this address."}.get(status, "")
    return error_page(request, status, detail, title)


async def _server_error(request: Request, exc: Exception) -> Response:
    # the 500 page leaves through Starlette's outermost middleware, past the guard's headers
    return secure(error_page(request, 500, f"{type(exc).__name__}: {exc}", "Server error"))


def create_app(index: Index, token: str | None = None) -> Starlette:
    """The viewer over ``index``; with ``token`` every request must carry it."""
    sessions = Sessions()
    routes: list[BaseRoute] = [
        *pages.routes,
        *replay.routes,
        *play.routes,
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        # the envs behind replays and play sessions (a browser, a JVM) end with the viewer
        await run_in_threadpool(frames.clear)
        await run_in_threadpool(sessions.close_all)

    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, 500: _server_error},
        lifespan=lifespan,
    )
    app.state.index = index
    app.state.token = token
    app.state.sessions = sessions
    app.add_middleware(Guard, token=token, refresh=index.refresh)
    return app
