"""The viewer's ASGI app: routes gathered from the page modules, the token guard, static files.

Each page module exposes ``routes(index: Index) -> list[starlette.routing.BaseRoute]`` and renders
templates that extend ``templates/base.html`` through :func:`render`. Templates are autoescaped;
pages never mark data as safe. Every response carries a Content-Security-Policy that allows
scripts, styles and images from the viewer itself only, so markup that slips into a page from an
episode still cannot run.
"""

from __future__ import annotations

import contextlib
import hmac
import math
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentgym_viewer.index import Index

PACKAGE = Path(__file__).parent
TEMPLATES = PACKAGE / "templates"
STATIC = PACKAGE / "static"
COOKIE = "agentgym_viewer_token"
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def money(value: Any, digits: int = 2) -> str:
    """``1234.5`` -> ``1,234.50``; None (or NaN) -> an em dash."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):
        return "—"
    return f"{number:,.{digits}f}"


def pct(value: Any, digits: int = 1) -> str:
    """A rate as a percentage: ``0.25`` -> ``25.0%``."""
    if value is None:
        return "—"
    try:
        return f"{float(value) * 100:.{digits}f}%"
    except (TypeError, ValueError):
        return str(value)


def num(value: Any) -> str:
    """A count or measurement for a table cell: ints with separators, floats to 4 significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:,.4g}"
    return str(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, whatever its name: data never reaches a page unescaped
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.Undefined,
    )
    env.filters.update(money=money, pct=pct, num=num)
    # jinja2's own tojson escapes <, >, & and ' for HTML; these make it take paths and dates too
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": str, "ensure_ascii": False}
    return env


templates = _environment()


def render(request: Request, template_name: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    """Render ``templates/<template_name>`` (autoescaped) with ``request`` and ``ctx``."""
    html = templates.get_template(template_name).render(request=request, **ctx)
    return HTMLResponse(html, status_code=status_code)


def _token_of(conn: HTTPConnection) -> tuple[str | None, bool]:
    """The token the request carries, and whether it came in the query string."""
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip(), False
    query = conn.query_params.get("token")
    if query:
        return query, True
    return conn.cookies.get(COOKIE), False


class Guard:
    """Token check (when a token is set) and security headers on every response.

    A valid ``?token=`` sets an HttpOnly cookie, so the links of the page it opens work without it.
    """

    def __init__(self, app: ASGIApp, token: str | None = None, index: Index | None = None):
        self.app = app
        self.token = token.encode() if token else None
        self.index = index

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        set_cookie = None
        if self.token is not None:
            given, from_query = _token_of(HTTPConnection(scope))
            # compare_digest: the time taken says nothing about how much of a guess was right
            if not given or not hmac.compare_digest(given.encode(), self.token):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                response = PlainTextResponse(
                    "401: this viewer needs its token (open the URL printed with ?token=..., "
                    "or send Authorization: Bearer <token>)",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, self._headers(send, None))
                return
            if from_query:
                set_cookie = given
        if (
            scope["type"] == "http"
            and self.index is not None
            and not scope.get("path", "").startswith("/static/")
        ):
            # pages see what a live run appended since (the index throttles this itself)
            await run_in_threadpool(self.index.refresh)
        await self.app(scope, receive, self._headers(send, set_cookie))

    @staticmethod
    def _headers(send: Send, set_cookie: str | None) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    headers[key] = value
                if set_cookie is not None:
                    cookie: SimpleCookie = SimpleCookie()
                    cookie[COOKIE] = set_cookie
                    cookie[COOKIE]["path"] = "/"
                    cookie[COOKIE]["httponly"] = True
                    cookie[COOKIE]["samesite"] = "Strict"
                    headers.append("set-cookie", cookie.output(header="").strip())
            await send(message)

        return wrapped


def _secure(response: Response) -> Response:
    # the 500 page leaves through Starlette's outermost middleware, past the guard's headers
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else None
    titles = {400: "Bad request", 404: "Not found", 405: "Method not allowed"}
    title = titles.get(status, "Error")
    if not detail or detail == title:
        detail = {404: "There is nothing at this address."}.get(status, "")
    return render(request, "error.html", status_code=status, status=status, title=title, detail=detail)


async def _server_error(request: Request, exc: Exception) -> Response:
    response = render(
        request,
        "error.html",
        status_code=500,
        status=500,
        title="Server error",
        detail=f"{type(exc).__name__}: {exc}",
    )
    return _secure(response)


def create_app(index: Index, token: str | None = None) -> Starlette:
    """The viewer over ``index``; with ``token`` every request must carry it."""
    from starlette.concurrency import run_in_threadpool

    from agentgym_viewer import frames, pages, play, replay

    routes: list[BaseRoute] = [
        *pages.routes(index),
        *replay.routes(index),
        *play.routes(index),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        # the envs behind replays and play sessions (a browser, a JVM) end with the viewer
        await run_in_threadpool(frames.clear)
        await run_in_threadpool(play.close_all)

    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, 500: _server_error},
        lifespan=lifespan,
    )
    app.state.index = index
    app.state.token = token
    app.add_middleware(Guard, token=token, index=index)
    return app
