"""Every JSON answer the server sends, encoded by the one encoder (encoding.py): a body already
encoded where it was made, or content encoded here (FastAPI's default for a route's return value,
and every error answer)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response

from agentgym.protocol import error_body
from agentgym.server.encoding import encode


class JSONBody(Response):
    """A JSON answer: bytes as they are (encoded already: FastAPI's ``jsonable_encoder`` walk cost
    more than the env step for a batch of observations), anything else by ``encode``."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return content if type(content) is bytes else encode(content)


def error_response(status: int, code: str, message: str) -> JSONBody:
    """An error answer: status and ``{"error": {"code", "message"}}``."""
    return JSONBody(error_body(code, message), status_code=status)
