"""``agentgym search serve-retriever``: one index served to many env servers, over the retrieval
protocol of Search-R1 and AgentGym-RL's search env:

``POST /retrieve {"queries": [...], "topk": 3, "return_scores": false}`` ->
``{"result": [[{"id", "contents"}, ...], ...]}``, or with ``return_scores``
``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}``.

Requests that arrive while a search runs are answered together by the next retriever call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentgym_search.retrievers import Batcher
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from agentgym.errors import AgentGymError
from agentgym.server.guard import GuardMiddleware
from agentgym.server.responses import error_response

MAX_QUERIES = 4096
MAX_TOPK = 1000


class RetrieveBody(BaseModel):
    queries: list[str] = Field(min_length=1, max_length=MAX_QUERIES)
    topk: int = Field(default=3, ge=1, le=MAX_TOPK)
    return_scores: bool = False


def create_app(batcher: Batcher, *, name: str, passages: int | None, token: str | None = None) -> FastAPI:
    app = FastAPI(
        title="AgentGym retrieval server",
        version="1",
        description="A retriever over the Search-R1 / AgentGym-RL retrieval protocol (POST /retrieve).",
    )

    @app.exception_handler(AgentGymError)
    async def _agentgym_error(request: Request, exc: AgentGymError):
        return error_response(exc.status or 500, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return error_response(422, "invalid_request", f"{where}: {first.get('msg', 'invalid')}")

    app.add_middleware(GuardMiddleware, token=token, state={})

    @app.post("/retrieve")
    async def retrieve(body: RetrieveBody) -> dict[str, Any]:
        """Top-``topk`` passages per query (wiki-18 documents ``{"id", "contents"}``)."""
        rows = await asyncio.to_thread(batcher.search_many, body.queries, body.topk)
        if body.return_scores:
            return {"result": [[{"document": h.to_json(), "score": h.score} for h in row] for row in rows]}
        return {"result": [[h.to_json() for h in row] for row in rows]}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "retriever": name, "passages": passages, "batches": batcher.calls}

    return app
