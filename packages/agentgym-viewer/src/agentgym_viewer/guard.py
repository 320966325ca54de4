"""The guard in front of every page: the token check, when a token is set, and security headers.

Every response carries a Content-Security-Policy that allows scripts, styles and images from the
viewer itself only, so markup that slips into a page from an episode still cannot run.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from http.cookies import SimpleCookie

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "agentgym_viewer_token"
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _token_of(conn: HTTPConnection) -> tuple[str | None, bool]:
    """The token the request carries, and whether it came in the query string."""
    auth = conn.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip(), False
    query = conn.query_params.get("token")
    if query:
        return query, True
    return conn.cookies.get(COOKIE), False


def secure(response: Response) -> Response:
    """``response`` with the security headers (for one that leaves past the guard)."""
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    return response


class Guard:
    """Token check (when a token is set) and security headers on every response; ``refresh``
    (the index's) runs before each page.

    A valid ``?token=`` sets an HttpOnly cookie, so the links of the page it opens work without it.
    """

    def __init__(
        self, app: ASGIApp, token: str | None = None, refresh: Callable[[], None] | None = None
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.refresh = refresh

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        set_cookie = None
        if self.token is not None:
            given, from_query = _token_of(HTTPConnection(scope))
            # compare_digest: the time taken says nothing about how much of a guess was right
            if not given or not hmac.compare_digest(given.encode(), self.token):
                await self._refuse(scope, receive, send)
                return
            if from_query:
                set_cookie = given
        if (
            scope["type"] == "http"
            and self.refresh is not None
            and not scope.get("path", "").startswith("/static/")
        ):
            # pages see what a live run appended since (the index throttles this itself)
            await run_in_threadpool(self.refresh)
        await self.app(scope, receive, self._headers(send, set_cookie))

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
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

    @staticmethod
    def _headers(send: Send, set_cookie: str | None) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    headers[key] = value
                if set_cookie is not None:
                    headers.append("set-cookie", _cookie(set_cookie))
            await send(message)

        return wrapped


def _cookie(token: str) -> str:
    cookie: SimpleCookie = SimpleCookie()
    cookie[COOKIE] = token
    cookie[COOKIE]["path"] = "/"
    cookie[COOKIE]["httponly"] = True
    cookie[COOKIE]["samesite"] = "Strict"
    return cookie.output(header="").strip()
