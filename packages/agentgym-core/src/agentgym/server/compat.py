"""AgentGym-compatible routes: the API of AgentGym's own per-env servers, so that its clients
(``agentenv.envs.*EnvClient`` and the ``Evaluator`` over them) work unchanged.

Paths and field names are the original servers': ``GET /`` (a banner), ``POST /create``,
``POST /reset {"id", "data_idx"}``, ``POST /step {"id", "action"}``, ``GET /observation?id=``,
``POST /close {"id"}``, also under ``/<env>/`` when several envs are served. What each reply holds
is the env's *dialect* (dialects.py): ``EnvSpec.compat`` shapes our result as that env's original
server did (SciWorld's 0-100 score and ``task_description``, say).

The session field is ``id`` for most clients and ``env_idx`` for SearchQA's and WebArena's, whose
``/reset`` names the task ``id`` (SearchQA) or ``idx`` (WebArena); both are accepted on every route.
A dialect that answers :data:`SESSION_ID` on ``create`` makes ``/create`` reply the bare session id,
as SearchQA's server did; one that puts it in a field gets the id there (WebArena's ``env_idx``).

Departures from the originals, on purpose: errors have real statuses and the v1 error body (the
originals answered HTTP 200 ``{"error": ...}``; their clients ``assert`` 200 either way), and a
session of one env cannot be driven through another env's prefix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field

from agentgym.errors import AgentGymError, BadRequestError, UnknownSessionError
from agentgym.server.deps import Manager, Specs, check_action, pick_env
from agentgym.server.dialects import SESSION_ID
from agentgym.server.messages import Op
from agentgym.server.responses import JSONBody
from agentgym.server.sessions import SessionManager
from agentgym.spec import EnvSpec


class CompatReset(BaseModel):
    """Two dialects: ``{"id": session, "data_idx": task}`` (most clients) and ``{"env_idx": session,
    "id": task}`` (SearchQA; WebArena's ``{"env_idx", "idx"}``)."""

    id: int | None = None
    env_idx: int | None = None
    data_idx: int | None = Field(default=None, ge=0)
    idx: int | None = Field(default=None, ge=0)

    def session(self) -> int:
        return _session(self.id, self.env_idx)

    def task(self) -> int:
        for value in (self.data_idx, self.idx, self.id if self.env_idx is not None else None):
            if value is not None:
                if value < 0:
                    raise BadRequestError(f"the task index must be >= 0, got {value}")
                return value
        return 0


class CompatStep(BaseModel):
    id: int | None = None
    env_idx: int | None = None
    action: str

    def session(self) -> int:
        return _session(self.id, self.env_idx)


class CompatClose(BaseModel):
    id: int | None = None
    env_idx: int | None = None

    def session(self) -> int:
        return _session(self.id, self.env_idx)


def _session(id: int | None, env_idx: int | None) -> int:
    """The session field: ``env_idx`` where the client sends it (its ``id`` is then the task), else ``id``."""
    sid = env_idx if env_idx is not None else id
    if sid is None:
        raise BadRequestError("the body needs the session: 'id' (or 'env_idx')")
    return sid


# Fields the original TextCraft client sends to /create. Its server could build a custom task from
# them; here tasks come from task ids only, so a non-null value is refused rather than ignored.
_UNSUPPORTED_CREATE_FIELDS = ("commands", "goal")


#: The routes, unprefixed and under ``/{env}`` (see :func:`add_routes`).
router = APIRouter(tags=["agentgym-compat"])


def add_routes(app: FastAPI) -> None:
    """Add the compatible routes to ``app``: the banner, and the others unprefixed and under ``/{env}``."""
    app.add_api_route("/", banner, methods=["GET"], tags=["agentgym-compat"])
    app.include_router(router)
    app.include_router(router, prefix="/{env}")


async def banner(specs: Specs) -> str:
    """What the original servers answer at ``/``; clients and tools use it as a health check."""
    return f"This is environment {', '.join(spec.title for spec in specs.values())}."


def _session_env(m: SessionManager, specs: Mapping[str, EnvSpec], sid: int, env: str | None) -> None:
    """Refuse a session driven through another env's prefix."""
    session = m.get(sid)
    if env is not None and session.env != pick_env(specs, env):
        raise UnknownSessionError(
            f"session {sid} is a {session.env!r} session, not {env!r}: use /{session.env}/... "
            "or the unprefixed routes"
        )


async def _create_body(request: Request) -> dict[str, Any]:
    """``/create``'s optional JSON body (the original clients send none, or odd ones)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise AgentGymError("the body is not valid UTF-8 JSON", code="invalid_json", status=422) from None
    return parsed if isinstance(parsed, dict) else {}


@router.post("/create")
async def create(request: Request, m: Manager, specs: Specs, env: str | None = None):
    body = await _create_body(request)
    name = env or body.get("env")
    if name is not None and not isinstance(name, str):
        raise BadRequestError(f"'env' must be an env name, got {name!r}")
    given = [k for k in _UNSUPPORTED_CREATE_FIELDS if body.get(k) is not None]
    if given:
        raise BadRequestError(
            f"/create with custom {' and '.join(given)} is not supported: tasks come from "
            "task ids (POST /reset with data_idx)"
        )
    sid, reply = await m.create(pick_env(specs, name), compat=True)
    if reply == SESSION_ID:
        return sid
    if isinstance(reply, dict):  # a field holding SESSION_ID gets the id (WebArena's env_idx)
        return {"id": sid, **{k: sid if v == SESSION_ID else v for k, v in reply.items()}}
    return {"id": sid}


@router.post("/reset")
async def reset(body: CompatReset, m: Manager, specs: Specs, env: str | None = None):
    sid = body.session()
    _session_env(m, specs, sid, env)
    return await m.reset(sid, body.task(), compat=True)


@router.post("/step")
async def step(body: CompatStep, m: Manager, specs: Specs, env: str | None = None):
    sid = body.session()
    _session_env(m, specs, sid, env)
    check_action(body.action)
    return JSONBody(await m.step(sid, body.action, compat=True))


@router.get("/observation")
async def observation(
    m: Manager, specs: Specs, id: int | None = None, env_idx: int | None = None, env: str | None = None
):
    sid = _session(id, env_idx)
    _session_env(m, specs, sid, env)
    return await m.call(sid, Op.OBSERVATION, True)


@router.post("/close")
async def close(body: CompatClose, m: Manager, specs: Specs, env: str | None = None):
    sid = body.session()
    _session_env(m, specs, sid, env)
    await m.close(sid)
    return {"closed": sid}
