"""``BatchFastPath``: the batched routes (``POST /v1/step``, ``/v1/reset``) answered as plain ASGI,
ahead of FastAPI's routing, dependencies and pydantic models, for the bodies they are meant for.

A body is taken here only when it is exactly what the route's model accepts without coercion
(``{"steps": [{"session_id": int, "action": str, "autoreset"?: ...}, ...]}``; ``{"resets": [{"session_id": int,
"task_id": int >= 0 | null, "seed": int >= 0 | null}, ...]}``); anything else (bad JSON, a
wrong type, an extra key, another content type) goes on to the FastAPI route with the body
replayed, so that every error answer is the route's own. The answer is the route's, byte for byte:
the handlers in routes.py make it. Measured: FastAPI's request handling (routing, dependency
solving, ``json.loads`` and model validation) cost more per batch than 64 TextCraft steps.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentgym.errors import AgentGymError, CapacityError
from agentgym.server.messages import NEXT_TASK, ResetItem, ResetTo, StepItem
from agentgym.server.responses import error_response
from agentgym.server.routes import MAX_BATCH, run_reset_batch, run_step_batch

_JSON_HEADERS = [(b"content-type", b"application/json")]


def _plain_int(value: Any, minimum: int | None = None) -> bool:
    return type(value) is int and (minimum is None or value >= minimum)


def _items(data: Any, key: str) -> list[dict] | None:
    """A batch body's items (``{key: [{...}, ...]}`` and nothing else), or None."""
    if type(data) is not dict or len(data) != 1 or type(items := data.get(key)) is not list:
        return None
    if len(items) > MAX_BATCH or any(type(item) is not dict for item in items):
        return None
    return items


def parse_steps(data: Any) -> list[StepItem] | None:
    """A ``/v1/step`` body's items, or None when it is not the plain well-formed case."""
    if (items := _items(data, "steps")) is None:
        return None
    steps: list[StepItem] = []
    for item in items:
        sid, action = item.get("session_id"), item.get("action")
        if type(sid) is not int or type(action) is not str:
            return None
        auto = item.get("autoreset")
        if auto is None or auto is False:
            steps.append(StepItem(sid, action))
        elif auto is True:
            steps.append(StepItem(sid, action, NEXT_TASK))
        elif _plain_target(auto):
            steps.append(StepItem(sid, action, ResetTo(auto.get("task_id"), auto.get("seed"))))
        else:
            return None
    return steps


def _plain_target(auto: Any) -> bool:
    """``{"task_id": int >= 0 | null, "seed": int >= 0 | null}`` (either key may be left out)."""
    if type(auto) is not dict or not set(auto) <= {"task_id", "seed"}:
        return False
    return all(v is None or _plain_int(v, 0) for v in auto.values())


def parse_resets(data: Any) -> list[ResetItem] | None:
    """A ``/v1/reset`` body's items, or None when it is not the plain well-formed case."""
    if (items := _items(data, "resets")) is None:
        return None
    resets = [ResetItem(item.get("session_id"), item.get("task_id"), item.get("seed")) for item in items]
    for sid, task_id, seed in resets:
        if type(sid) is not int:
            return None
        if not (task_id is None or _plain_int(task_id, 0)) or not (seed is None or _plain_int(seed, 0)):
            return None
    return resets


async def _step_batch(manager: Any, items: list[StepItem]) -> bytes:
    return await run_step_batch(manager, items, checked=True)  # orjson parsed the actions: text


_ROUTES = {"/v1/step": (parse_steps, _step_batch), "/v1/reset": (parse_resets, run_reset_batch)}


class BatchFastPath:
    """Plain ASGI in front of the app's routes (inside the guard, which has checked the token and
    the body size): the batched routes' well-formed bodies answered here, all else passed on."""

    def __init__(self, app: Any, *, state: dict[str, Any]):
        self.app, self.state = app, state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        route = _ROUTES.get(scope["path"]) if scope["type"] == "http" else None
        manager = self.state.get("manager")
        if route is None or scope["method"] != "POST" or manager is None or not _json_type(scope):
            return await self.app(scope, receive, send)
        body, messages = await _read_body(receive)
        items = None
        if messages[-1]["type"] == "http.request" and body:
            try:
                items = route[0](orjson.loads(body))
            except orjson.JSONDecodeError:
                items = None
        if items is None:
            return await self.app(scope, _replay(messages, receive), send)
        try:
            payload = await route[1](manager, items)
        except AgentGymError as exc:
            response = error_response(exc.status, exc.code, exc.message)
            if isinstance(exc, CapacityError):
                response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
            return await response(scope, receive, send)
        except Exception as exc:  # as the app's own handler answers it
            return await error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")(
                scope, receive, send
            )
        headers = [(b"content-length", str(len(payload)).encode()), *_JSON_HEADERS]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _json_type(scope: dict) -> bool:
    """The request says its body is JSON (``application/json``, parameters allowed)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


async def _read_body(receive: Any) -> tuple[bytes, list[dict]]:
    """The request's body and the messages it came in (the last one not body if the client went
    away first: a disconnect, then the app's to see)."""
    messages = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request"), messages


def _replay(messages: list[dict], receive: Any) -> Any:
    """``receive`` with the messages already read given back first."""
    pending = list(messages)

    async def replayed() -> dict:
        return pending.pop(0) if pending else await receive()

    return replayed
