"""The ASGI app: API v1, AgentGym-compatible routes, health and metrics.

Every error is ``{"error": {"code", "message"}}`` with a meaningful status: 401 bad or missing
token, 404 unknown env/session/route, 409 step after the episode ended, 413 body too large,
422 malformed body or bad task id, 503 at capacity, 500 a crashed env (its session is closed;
the server keeps serving). An over-long action is not an error: as in-process, it gets a 200 with an
observation saying so (``info.valid_action`` False) and the episode goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentgym.errors import AgentGymError, BadRequestError, CapacityError, UnknownEnvError
from agentgym.plugins import get_env_spec
from agentgym.server import compat
from agentgym.server.sessions import SessionManager

MAX_BODY_BYTES = 16 << 20
MAX_BATCH = 4096


class CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: str | None = None
    task_id: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)


class ResetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)


class StepBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str


class BatchItem(BaseModel):
    session_id: int
    action: str


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: list[BatchItem] = Field(max_length=MAX_BATCH)


class ExpertBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_ids: list[int] = Field(max_length=MAX_BATCH)


class BatchResetItem(BaseModel):
    session_id: int
    task_id: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)


class BatchResetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    resets: list[BatchResetItem] = Field(max_length=MAX_BATCH)


async def _get_manager(request: Request) -> SessionManager:
    # async on purpose: FastAPI runs a sync dependency on a worker thread, one hop per request
    return request.app.state.manager


Manager = Annotated[SessionManager, Depends(_get_manager)]


def _json(content: Any) -> Response:
    # Results are plain JSON-safe dicts already (the host made them so): skip FastAPI's
    # jsonable_encoder walk, which cost more than the env step for a batch of observations.
    return Response(
        json.dumps(content, ensure_ascii=False, separators=(",", ":")), media_type="application/json"
    )


def _item(sid: int, out: dict) -> str:
    """One batched result as JSON text: the shard's encoded result with the session id put first."""
    if "json" in out:
        body = out["json"]
        return f'{{"session_id":{sid},{body[1:]}' if body != "{}" else f'{{"session_id":{sid}}}'
    return _dumps({"session_id": sid, "error": out["error"]})


def _dumps(content: Any) -> str:
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def _results(items: list[str]) -> Response:
    return Response('{"results":[' + ",".join(items) + "]}", media_type="application/json")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _check_action(action: str) -> None:
    """Refuse an action that is not text at all (a lone surrogate from a JSON ``"\\ud800"`` escape).

    An over-long action is *not* refused here: it goes to the env, whose ``TextEnv.step`` answers it
    as it does in-process (an observation saying it is too long, ``valid_action`` False, the episode
    goes on). The body-size cap (413) bounds what can arrive at all."""
    try:
        action.encode("utf-8")
    except UnicodeEncodeError:
        raise AgentGymError(
            "the action is not valid Unicode text", code="invalid_action_text", status=422
        ) from None


class _BodyTooLarge(Exception):
    """Raised from the guard's ``receive`` once a streamed body passes ``MAX_BODY_BYTES``."""


class _GuardMiddleware:
    """Body-size limit, bearer token and request accounting, as plain ASGI.

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
            return await _error(413, "body_too_large", f"request body over {MAX_BODY_BYTES} bytes")(
                scope, receive, send
            )
        if self.token is not None and scope["path"] != "/health":
            given = headers.get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token.encode()):
                response = _error(
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
            await _error(413, "body_too_large", f"request body over {MAX_BODY_BYTES} bytes")(
                scope, receive, send
            )


#: The guard (body-size limit, bearer token) for other loopback services of the ecosystem: the search
#: package's retrieval server uses it.
GuardMiddleware = _GuardMiddleware


def create_app(
    env_names: list[str],
    *,
    workers: int = 1,
    capacity: int = 1024,
    ttl: float = 1800.0,
    compat_ttl: float | None = None,
    token: str | None = None,
    max_instances: int | None = None,
    step_timeout: float | None | str = "env",
) -> FastAPI:
    """Build the app serving ``env_names`` (all must be installed; unknown names raise).

    ``ttl``: seconds an idle v1 session lives. ``compat_ttl``: the same for sessions made through
    the AgentGym-compatible ``/create`` (default: never expire, as on the original servers, whose
    clients cannot recover a lost session). ``max_instances``: sessions (env instances) of one env
    at once (default: from the env's declared cost and the machine); more get 503.
    ``step_timeout``: seconds one env step may run before it is answered 504 (None: no limit;
    default: ``$AGENTGYM_STEP_TIMEOUT``, else 60)."""
    if not env_names:
        raise ValueError("no env to serve")
    specs = {name: get_env_spec(name) for name in env_names}  # UnknownEnvError early, before binding
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        manager = SessionManager(
            env_names,
            workers=workers,
            capacity=capacity,
            ttl=ttl,
            compat_ttl=compat_ttl,
            max_instances=max_instances,
            step_timeout=step_timeout,
        )
        await asyncio.gather(*(asyncio.to_thread(s.warm_up) for s in manager.shards))
        state["manager"] = app.state.manager = manager
        reaper = asyncio.create_task(manager.reaper())
        try:
            yield
        finally:
            reaper.cancel()
            manager.shutdown()

    app = FastAPI(
        title="AgentGym env server",
        version="1",
        description="Serves AgentGym text environments: API v1 plus AgentGym-compatible routes.",
        lifespan=lifespan,
    )

    # -- errors -------------------------------------------------------------------------------
    @app.exception_handler(AgentGymError)
    async def _agentgym_error(request: Request, exc: AgentGymError):
        response = _error(exc.status, exc.code, exc.message)
        if isinstance(exc, CapacityError):
            response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {err.get('msg', 'invalid')}")
        return _error(422, "invalid_request", "; ".join(parts) or "invalid request body")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 400 and "parsing the body" in message:
            return _error(422, "invalid_json", "the body is not valid UTF-8 JSON")
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), message)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception):
        return _error(500, "internal_error", f"{type(exc).__name__}: {exc}")

    app.add_middleware(_GuardMiddleware, token=token, state=state)

    # -- API v1 -------------------------------------------------------------------------------
    @app.get("/v1/envs")
    async def list_envs():
        return {"envs": [spec.to_json() for spec in specs.values()]}

    def pick_env(name: str | None) -> str:
        if name is None:
            if len(specs) == 1:
                return next(iter(specs))
            raise BadRequestError(f"several envs are served ({', '.join(specs)}): say which with 'env'")
        if name not in specs:
            raise UnknownEnvError(
                f"env {name!r} is not served here (served: {', '.join(specs)})", name=name, known=specs
            )
        return name

    @app.post("/v1/sessions")
    async def create_session(body: CreateBody, m: Manager):
        sid, result = await m.create(pick_env(body.env), body.task_id, body.seed)
        return _json({"session_id": sid, **result})

    @app.post("/v1/sessions/{sid}/reset")
    async def reset_session(sid: int, body: ResetBody, m: Manager):
        return _json(await m.reset(sid, body.task_id, body.seed))

    @app.post("/v1/sessions/{sid}/step")
    async def step_session(sid: int, body: StepBody, m: Manager):
        _check_action(body.action)
        return _json(await m.step(sid, body.action))

    @app.post("/v1/step")
    async def step_batch(body: BatchBody, m: Manager):
        items, results, positions = [], [""] * len(body.steps), []
        for i, item in enumerate(body.steps):
            try:
                _check_action(item.action)
            except AgentGymError as exc:
                results[i] = _item(item.session_id, {"error": {"code": exc.code, "message": exc.message}})
                continue
            items.append((item.session_id, item.action))
            positions.append(i)
        outs = await m.step_batch(items) if items else []
        for i, out in zip(positions, outs, strict=True):
            results[i] = _item(body.steps[i].session_id, out)
        return _results(results)

    @app.post("/v1/reset")
    async def reset_batch(body: BatchResetBody, m: Manager):
        """Reset many sessions at once; a failing item carries its own error."""
        outs = await m.reset_batch([(r.session_id, r.task_id, r.seed) for r in body.resets])
        return _results([_item(r.session_id, out) for r, out in zip(body.resets, outs, strict=True)])

    @app.delete("/v1/sessions/{sid}")
    async def close_session(sid: int, m: Manager):
        await m.close(sid)
        return {"closed": sid}

    @app.get("/v1/sessions/{sid}/render")
    async def render_session(sid: int, m: Manager):
        return Response(await m.call(sid, "render_png"), media_type="image/png")

    @app.get("/v1/sessions/{sid}/observation")
    async def session_observation(sid: int, m: Manager):
        return {"observation": await m.call(sid, "observation")}

    @app.post("/v1/expert")
    async def expert_batch(body: ExpertBatchBody, m: Manager):
        """The env's expert's next action for many sessions in one request (the ``scripted``
        policy over many episodes): one result per id, in order, ``{"action"}`` or ``{"error"}``."""

        async def one(sid: int) -> dict:
            try:
                return {"action": await m.call(sid, "expert_action")}
            except AgentGymError as exc:
                return {"error": {"code": exc.code, "message": exc.message}}

        return {"results": await asyncio.gather(*(one(sid) for sid in body.session_ids))}

    @app.get("/v1/sessions/{sid}/expert")
    async def session_expert(sid: int, m: Manager):
        """The env's expert's next action for this session (for the ``scripted`` policy)."""
        return {"action": await m.call(sid, "expert_action")}

    @app.get("/health")
    async def health():
        m = state.get("manager")
        return {
            "status": "ok",
            "envs": list(specs),
            "sessions": len(m.sessions) if m else 0,
            "workers": len(m.shards) if m else workers,
            "step_timeout": m.step_timeout if m else None,  # seconds; None: no limit
            "max_instances": {env: b.limit for env, b in m.bounds.items()} if m else {},
            "instances": {env: m.instances[env] for env in specs} if m else {},
            "idle_instances": {env: sum(len(sh.idle[env]) for sh in m.shards) for env in specs} if m else {},
        }

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics(m: Manager):
        lines = [
            "# TYPE agentgym_sessions_active gauge",
            f"agentgym_sessions_active {len(m.sessions)}",
            "# TYPE agentgym_capacity gauge",
            f"agentgym_capacity {m.capacity}",
            "# TYPE agentgym_uptime_seconds gauge",
            f"agentgym_uptime_seconds {time.time() - m.started:.1f}",
            "# TYPE agentgym_request_seconds_total counter",
            f"agentgym_request_seconds_total {state.get('latency_sum', 0.0):.6f}",
        ]
        for key in sorted(m.counters):
            lines += [f"# TYPE agentgym_{key}_total counter", f"agentgym_{key}_total {m.counters[key]}"]
        for shard in m.shards:
            lines.append(f'agentgym_worker_sessions{{worker="{shard.index}"}} {len(shard.sessions)}')
        return "\n".join(lines) + "\n"

    # -- AgentGym-compatible routes (see compat.py) -------------------------------------------
    compat.add_routes(app, specs, lambda: state["manager"], pick_env, _check_action)

    return app
