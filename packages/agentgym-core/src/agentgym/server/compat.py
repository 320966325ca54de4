"""AgentGym-compatible routes: the API of AgentGym's own per-env servers, so that its clients
(``agentenv.envs.*EnvClient`` and the ``Evaluator`` over them) work unchanged.

Paths and field names are the original servers': ``GET /`` (a banner), ``POST /create``,
``POST /reset {"id", "data_idx"}``, ``POST /step {"id", "action"}``, ``GET /observation?id=``,
``POST /close {"id"}``, also under ``/<env>/`` when several envs are served. What each reply holds
is the env's *dialect*: ``EnvSpec.compat``, a function ``(env, route, reply) -> JSON`` run next to
the env instance, shapes our result as that env's original server did (SciWorld's 0-100 score and
``task_description``, say). Envs without one get :func:`default_reply`.

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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field

from agentgym.errors import AgentGymError, BadRequestError, UnknownSessionError

if TYPE_CHECKING:
    from agentgym.env import TextEnv
    from agentgym.server.sessions import SessionManager
    from agentgym.spec import EnvSpec

#: ``(env, route, reply) -> JSON``: route is ``create``, ``reset``, ``step`` or ``observation``;
#: ``reply`` is the v1 result (``observation``, ``reward``, ``terminated``, ``truncated``, ``info``).
Dialect = Callable[["TextEnv", str, dict[str, Any]], Any]


def default_reply(env: TextEnv, route: str, reply: dict[str, Any]) -> Any:
    """The fields every original client reads: ``observation``, ``reward``, ``score`` (the return so
    far), ``done``; ``GET /observation`` answers the bare observation text."""
    if route == "observation":
        return reply["observation"]
    return {
        "observation": reply["observation"],
        "reward": reply.get("reward", 0.0),
        "score": env.score,
        "done": bool(reply.get("terminated") or reply.get("truncated")),
    }


def shape(spec: EnvSpec, env: TextEnv, route: str, reply: dict[str, Any]) -> Any:
    from agentgym.spec import resolve

    try:
        dialect: Dialect = resolve(spec.compat) if spec.compat is not None else default_reply
        return dialect(env, route, reply)
    except Exception as exc:  # the env stepped; its plugin's dialect failed to describe it
        raise AgentGymError(
            f"env {spec.name!r}: its AgentGym dialect ({spec.compat}) failed on /{route}: "
            f"{type(exc).__name__}: {exc}",
            code="compat_failed",
            status=500,
        ) from exc


#: A dialect's ``create`` reply that is this value makes ``/create`` answer the bare session id
#: (SearchQA's); a reply field holding it gets the session id (WebArena's ``{"env_idx": ...}``).
SESSION_ID = "__agentgym_session_id__"


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


def add_routes(
    app: FastAPI,
    specs: Mapping[str, EnvSpec],
    manager: Callable[[], SessionManager],
    pick_env: Callable[[str | None], str],
    check_action: Callable[[str], None],
) -> None:
    """Add the compatible routes, unprefixed and under ``/{env}``, to ``app``."""
    names = [spec.title for spec in specs.values()]

    @app.get("/", tags=["agentgym-compat"])
    async def banner() -> str:
        """What the original servers answer at ``/``; clients and tools use it as a health check."""
        return f"This is environment {', '.join(names)}."

    def session_env(sid: int, env: str | None) -> None:
        session = manager().get(sid)
        if env is not None and session.env != pick_env(env):
            raise UnknownSessionError(
                f"session {sid} is a {session.env!r} session, not {env!r}: use /{session.env}/... "
                "or the unprefixed routes"
            )

    async def create(request: Request, env: str | None) -> dict:
        body: dict[str, Any] = {}
        raw = await request.body()
        if raw.strip():
            try:
                parsed = json.loads(raw)
            except ValueError:
                raise AgentGymError(
                    "the body is not valid UTF-8 JSON", code="invalid_json", status=422
                ) from None
            body = parsed if isinstance(parsed, dict) else {}
        name = env or body.get("env")
        if name is not None and not isinstance(name, str):
            raise BadRequestError(f"'env' must be an env name, got {name!r}")
        given = [k for k in _UNSUPPORTED_CREATE_FIELDS if body.get(k) is not None]
        if given:
            raise BadRequestError(
                f"/create with custom {' and '.join(given)} is not supported: tasks come from "
                "task ids (POST /reset with data_idx)"
            )
        sid, reply = await manager().create(pick_env(name), compat=True)
        if reply == SESSION_ID:
            return sid
        if isinstance(reply, dict):  # a field holding SESSION_ID gets the id (WebArena's env_idx)
            return {"id": sid, **{k: sid if v == SESSION_ID else v for k, v in reply.items()}}
        return {"id": sid}

    for prefix in ("", "/{env}"):

        def routes(prefix: str = prefix) -> None:
            @app.post(prefix + "/create", tags=["agentgym-compat"])
            async def create_route(request: Request, env: str | None = None):
                return await create(request, env)

            @app.post(prefix + "/reset", tags=["agentgym-compat"])
            async def reset(body: CompatReset, env: str | None = None):
                sid = body.session()
                session_env(sid, env)
                return await manager().reset(sid, body.task(), compat=True)

            @app.post(prefix + "/step", tags=["agentgym-compat"])
            async def step(body: CompatStep, env: str | None = None):
                sid = body.session()
                session_env(sid, env)
                check_action(body.action)
                return await manager().step(sid, body.action, compat=True)

            @app.get(prefix + "/observation", tags=["agentgym-compat"])
            async def observation(id: int | None = None, env_idx: int | None = None, env: str | None = None):
                sid = _session(id, env_idx)
                session_env(sid, env)
                return await manager().call(sid, "observation", True)

            @app.post(prefix + "/close", tags=["agentgym-compat"])
            async def close(body: CompatClose, env: str | None = None):
                sid = body.session()
                session_env(sid, env)
                await manager().close(sid)
                return {"closed": sid}

        routes()
