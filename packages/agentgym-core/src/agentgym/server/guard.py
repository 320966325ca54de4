"""``GuardMiddleware``: the body-size limit, the bearer token and request accounting in front of every server's routes."""

from __future__ import annotations

import hmac
import time
from typing import Any

from agentgym.server.responses import error_response

MAX_BODY_BYTES = 16 << 20


class _BodyTooLarge(Exception):
    """Raised from the guard's ``receive`` once a streamed body passes ``MAX_BODY_BYTES``."""


class GuardMiddleware:
    """Body-size limit, bearer token and request accounting, as plain ASGI (the search package's
    retrieval server uses it too).

    (Starlette's ``@app.middleware("http")`` wraps every request in extra tasks and streams: it
    cost more than the env step for cheap envs.)
    """

    def __init__(self, app: Any, *, token: str | None, state: dict[str, Any]):
        self.app, self.token, self.state = app, token, state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            return await error_response(413, "body_too_large", f"request body over {MAX_BODY_BYTES} bytes")(
                scope, receive, send
            )
        if self.token is not None and scope["path"] != "/health":
            given = headers.get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token.encode()):
                response = error_response(
                    401, "unauthorized", "missing bearer token" if not given else "wrong bearer token"
                )
                response.headers["WWW-Authenticate"] = "Bearer"
                return await response(scope, receive, send)
        t0 = time.perf_counter()
        try:
            if length:
                # the server's HTTP parser holds the body to its Content-Length, checked above
                await self.app(scope, receive, send)
            else:
                await self._limited(scope, receive, send)
        finally:
            manager = self.state.get("manager")
            if manager is not None:
                manager.counters["requests"] += 1
                self.state["latency_sum"] = self.state.get("latency_sum", 0.0) + time.perf_counter() - t0

    async def _limited(self, scope: dict, receive: Any, send: Any) -> None:
        """Run the app on a body without Content-Length (``Transfer-Encoding: chunked``), counting
        its bytes as they arrive: past ``MAX_BODY_BYTES`` the app's reading fails, whatever the app
        would answer is dropped and the client gets 413."""
        received = 0
        over = started = False

        async def receive_limited() -> dict:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    over = True
                    raise _BodyTooLarge
            return message

        async def send_guarded(message: dict) -> None:
            nonlocal started
            if over and not started:
                return  # the app's answer to a body it could not read whole
            started = True
            await send(message)

        try:
            await self.app(scope, receive_limited, send_guarded)
        except Exception:
            if not over:
                raise
        if over and not started:
            await error_response(413, "body_too_large", f"request body over {MAX_BODY_BYTES} bytes")(
                scope, receive, send
            )
