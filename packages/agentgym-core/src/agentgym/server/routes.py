"""API v1's routes (sessions, batched steps and resets, experts, renders), health and metrics."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from agentgym.errors import AgentGymError
from agentgym.protocol import error_body
from agentgym.server.deps import Manager, Specs, check_action, pick_env
from agentgym.server.encoding import batch_reply
from agentgym.server.messages import NEXT_TASK, Answer, Op, ResetItem, ResetTo, StepItem
from agentgym.server.responses import JSONBody
from agentgym.server.sessions import SessionManager

MAX_BATCH = 4096
#: API v1's minor version and what it added, in ``/health``: v1 grows only by additions, so a client
#: built for an older minor works unchanged and a newer one can see what a server supports.
#: 1.1: ``autoreset`` on ``/v1/step`` items, ``tasks`` on ``/v1/sessions``.
PROTOCOL = {"version": "1.1", "features": ["autoreset", "session_tasks"]}

router = APIRouter()


class CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: str | None = None
    task_id: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)
    #: the task ids the session's autoresets of ``true`` take in turn
    tasks: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, max_length=MAX_BATCH)


class ResetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)


class StepBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str


class AutoReset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=0)


class BatchItem(BaseModel):
    session_id: int
    action: str
    #: reset the session at once if this step ends its episode: to this task, or (``true``) to the
    #: next of the tasks it was created with; the new episode's start comes back under ``reset``
    autoreset: AutoReset | StrictBool | None = None

    def item(self) -> StepItem:
        auto = self.autoreset
        if auto is None or auto is False:
            return StepItem(self.session_id, self.action)
        return StepItem(
            self.session_id, self.action, NEXT_TASK if auto is True else ResetTo(auto.task_id, auto.seed)
        )


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


@router.get("/v1/envs")
async def list_envs(specs: Specs):
    return {"envs": [spec.to_json() for spec in specs.values()]}


@router.post("/v1/sessions")
async def create_session(body: CreateBody, m: Manager, specs: Specs):
    sid, result = await m.create(pick_env(specs, body.env), body.task_id, body.seed, tasks=body.tasks)
    return JSONBody({"session_id": sid, **result})


@router.post("/v1/sessions/{sid}/reset")
async def reset_session(sid: int, body: ResetBody, m: Manager):
    return JSONBody(await m.reset(sid, body.task_id, body.seed))


@router.post("/v1/sessions/{sid}/step")
async def step_session(sid: int, body: StepBody, m: Manager):
    check_action(body.action)
    return JSONBody(await m.step(sid, body.action))


@router.post("/v1/step")
async def step_batch(body: BatchBody, m: Manager):
    """Step many sessions at once; a failing item carries its own error."""
    return JSONBody(await run_step_batch(m, [item.item() for item in body.steps]))


@router.post("/v1/reset")
async def reset_batch(body: BatchResetBody, m: Manager):
    """Reset many sessions at once; a failing item carries its own error."""
    items = [ResetItem(r.session_id, r.task_id, r.seed) for r in body.resets]
    return JSONBody(await run_reset_batch(m, items))


async def run_step_batch(m: SessionManager, steps: list[StepItem], *, checked: bool = False) -> bytes:
    """``POST /v1/step``'s answer, as JSON (also the fast path's, fastpath.py); ``checked``: every
    action is known to be text (orjson, which parsed the fast path's body, refuses a lone surrogate)."""
    sids = [step.sid for step in steps]
    if checked:
        return batch_reply(sids, await m.step_batch(steps) if steps else [])
    answers: list[Answer] = [{}] * len(steps)
    items, positions = [], []
    for i, step in enumerate(steps):
        try:
            check_action(step.action)
        except AgentGymError as exc:
            answers[i] = error_body(exc.code, exc.message)
            continue
        items.append(step)
        positions.append(i)
    for i, out in zip(positions, await m.step_batch(items) if items else [], strict=True):
        answers[i] = out
    return batch_reply(sids, answers)


async def run_reset_batch(m: SessionManager, resets: list[ResetItem]) -> bytes:
    """``POST /v1/reset``'s answer, as JSON (also the fast path's)."""
    return batch_reply([r.sid for r in resets], await m.reset_batch(resets))


@router.delete("/v1/sessions/{sid}")
async def close_session(sid: int, m: Manager):
    await m.close(sid)
    return {"closed": sid}


@router.get("/v1/sessions/{sid}/render")
async def render_session(sid: int, m: Manager):
    return Response(await m.call(sid, Op.RENDER_PNG), media_type="image/png")


@router.get("/v1/sessions/{sid}/observation")
async def session_observation(sid: int, m: Manager):
    return {"observation": await m.call(sid, Op.OBSERVATION)}


@router.post("/v1/expert")
async def expert_batch(body: ExpertBatchBody, m: Manager):
    """The env's expert's next action for many sessions in one request (the ``scripted``
    policy over many episodes): one result per id, in order, ``{"action"}`` or ``{"error"}``."""

    async def one(sid: int) -> dict:
        try:
            return {"action": await m.call(sid, Op.EXPERT_ACTION)}
        except AgentGymError as exc:
            return error_body(exc.code, exc.message)

    return {"results": await asyncio.gather(*(one(sid) for sid in body.session_ids))}


@router.get("/v1/sessions/{sid}/expert")
async def session_expert(sid: int, m: Manager):
    """The env's expert's next action for this session (for the ``scripted`` policy)."""
    return {"action": await m.call(sid, Op.EXPERT_ACTION)}


@router.get("/health")
async def health(request: Request, specs: Specs):
    m = getattr(request.app.state, "manager", None)  # None before the lifespan has started it
    if m is None:
        return {
            "status": "ok",
            "protocol": PROTOCOL,
            "envs": list(specs),
            "sessions": 0,
            "workers": request.app.state.config.workers,
        }
    return {
        "status": "ok",
        "protocol": PROTOCOL,
        "envs": list(specs),
        "sessions": len(m.sessions),
        "workers": len(m.shards),
        "step_timeout": m.step_timeout,  # seconds; None: no limit
        "max_instances": {env: b.limit for env, b in m.bounds.items()},
        "instances": {env: m.instances[env] for env in specs},
        "idle_instances": {env: sum(len(sh.idle[env]) for sh in m.shards) for env in specs},
    }


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request, m: Manager):
    lines = [
        "# TYPE agentgym_sessions_active gauge",
        f"agentgym_sessions_active {len(m.sessions)}",
        "# TYPE agentgym_capacity gauge",
        f"agentgym_capacity {m.capacity}",
        "# TYPE agentgym_uptime_seconds gauge",
        f"agentgym_uptime_seconds {time.time() - m.started:.1f}",
        "# TYPE agentgym_request_seconds_total counter",
        f"agentgym_request_seconds_total {_latency_sum(request):.6f}",
    ]
    for key in sorted(m.counters):
        lines += [f"# TYPE agentgym_{key}_total counter", f"agentgym_{key}_total {m.counters[key]}"]
    for shard in m.shards:
        lines.append(f'agentgym_worker_sessions{{worker="{shard.index}"}} {len(shard.sessions)}')
    return "\n".join(lines) + "\n"


def _latency_sum(request: Request) -> Any:
    return request.app.state.guard.get("latency_sum", 0.0)
