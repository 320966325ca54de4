"""The play page: act in an env by hand, or let its expert or a policy act, step by step.

- ``GET /play``: pick an env and a task; ``POST /play`` starts a session and redirects to it.
- ``GET /play/<sid>``: the instruction, the observation (and the env's picture), the return, the
  moves so far, and forms to act: an action typed by hand (sent to the env as typed), the expert's
  move, or a policy's move (an OpenAI-compatible chat endpoint, its reply parsed by the env's
  action parser as in a rollout).
- ``POST /play/<sid>/step|expert|policy|end``: act (or end), then 303 back to the page.

Sessions (:mod:`agentgym_viewer.sessions`) live in the viewer process, in ``app.state.sessions``:
an env instance each, closed on "End" or after an idle half hour. Every POST carries a form token
(per session; the start form's per app) so another site cannot drive them through the person's
browser.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from agentgym_viewer import frames
from agentgym_viewer.render import render
from agentgym_viewer.sessions import (
    Session,
    Sessions,
    close_session,
    expert_move,
    policy_move,
    start_session,
)
from agentgym_viewer.text import visible

STALE_FORM = "This form is stale or did not come from this page: reload it and retry."


async def _close_all(sessions: list[Session]) -> None:
    for s in sessions:
        await run_in_threadpool(close_session, s)


async def _form(request: Request) -> dict[str, str]:
    # HTML forms post application/x-www-form-urlencoded; parsed here so the viewer does not
    # need python-multipart for Starlette's request.form().
    body = (await request.body()).decode("utf-8", "replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def _installed() -> dict[str, Any]:
    import agentgym

    return dict(sorted(agentgym.env_specs().items()))


def _first_test_task(spec: Any) -> int | None:
    split = spec.splits.get("test") or next(iter(spec.splits.values()), None)
    ids = list(split.task_ids[:1]) if split is not None else []
    return ids[0] if ids else None


def _error(request: Request, message: str, status: int, *, env: str | None = None) -> Response:
    return render(
        request, "play_error.html", status_code=status, message=message, code=status, env=env, active="play"
    )


def _sessions(request: Request) -> Sessions:
    return request.app.state.sessions


async def _session_or_error(request: Request) -> Session | Response:
    sessions = _sessions(request)
    await _close_all(sessions.expired())
    session = sessions.get(request.path_params["sid"])
    if session is None:
        return _error(request, "No such play session: it ended, or was closed after 30 minutes idle.", 404)
    return session


async def _checked(request: Request) -> tuple[Session, dict[str, str]] | Response:
    """The request's session and form, or the error page (no session, a bad form token)."""
    session = await _session_or_error(request)
    if isinstance(session, Response):
        return session
    form = await _form(request)
    if not secrets.compare_digest(form.get("form_token", ""), session.form_token):
        return _error(request, STALE_FORM, 403)
    return session, form


def _back(session: Session) -> Response:
    return RedirectResponse(f"/play/{session.sid}", status_code=303)


async def start_page(request: Request) -> Response:
    sessions = _sessions(request)
    await _close_all(sessions.expired())
    envs = _installed()
    chosen = request.query_params.get("env")
    if chosen not in envs:
        chosen = "babyai" if "babyai" in envs else next(iter(envs), None)
    return render(
        request,
        "play_start.html",
        active="play",
        envs=[(name, _first_test_task(spec)) for name, spec in envs.items()],
        chosen=chosen,
        task=request.query_params.get("task", ""),
        form_token=sessions.start_token,
    )


def _task_id(request: Request, spec: Any, name: str, raw: str) -> int | Response:
    """The task the start form names (its env's first test task when blank), or the error page."""
    if not raw:
        default = _first_test_task(spec)
        if default is None:
            return _error(request, f"Env {name!r} has no test split: give a task id.", 400, env=name)
        return default
    try:
        task_id = int(raw)
    except ValueError:
        return _error(request, f"Task {raw!r} is not a task id (a whole number).", 400, env=name)
    if task_id < 0:
        return _error(request, f"Task {task_id} is not a task id (ids are 0 or more).", 400, env=name)
    return task_id


async def start(request: Request) -> Response:
    sessions = _sessions(request)
    form = await _form(request)
    if not secrets.compare_digest(form.get("form_token", ""), sessions.start_token):
        return _error(request, STALE_FORM, 403)
    name = form.get("env", "").strip()
    envs = _installed()
    spec = envs.get(name)
    if spec is None:
        return _error(request, f"Unknown env {name!r}. Installed envs: {', '.join(envs) or 'none'}.", 400)
    task_id = _task_id(request, spec, name, form.get("task", "").strip())
    if isinstance(task_id, Response):
        return task_id
    try:
        session = await run_in_threadpool(start_session, spec, task_id)
    except (ValueError, KeyError, IndexError, LookupError) as exc:
        return _error(request, f"Env {name!r} has no task {task_id}: {exc}", 400, env=name)
    except Exception as exc:  # noqa: BLE001 - an env that cannot start here (a missing JVM...)
        return _error(request, f"Env {name!r} could not start: {type(exc).__name__}: {exc}", 503, env=name)
    await _close_all(sessions.add(session))
    return _back(session)


def _moves(session: Session) -> list[dict[str, Any]]:
    return [
        {
            "n": i,
            "by": m.by,
            "action": visible(m.action) if m.action is not None else None,
            "reward": f"{m.reward:.4g}",
            "observation": visible(m.observation),
            "valid": m.valid,
            "reply": visible(m.reply) if m.reply is not None else None,
        }
        for i, m in enumerate(session.moves, 1)
    ]


async def page(request: Request) -> Response:
    session = await _session_or_error(request)
    if isinstance(session, Response):
        return session
    notice, session.notice = session.notice, None
    return render(
        request,
        "play.html",
        active="play",
        s=session,
        env_name=session.spec.name,
        instruction=visible(session.instruction or session.spec.prompt),
        observation=visible(session.observation),
        total=f"{session.total:.4g}",
        turns=len(session.moves),
        moves=_moves(session),
        notice=visible(notice) if notice else None,
        has_expert=session.spec.expert is not None,
        frame_url=f"/play/{session.sid}/frame.png?turn={len(session.moves)}" if session.renders else None,
        again_url="/play?" + urlencode({"env": session.spec.name, "task": session.task_id}),
    )


def _act_by_hand(session: Session, action: str) -> None:
    with session.lock:
        if session.done:
            session.notice = "The episode is over."
            return
        # Sent as typed: a person writes the action itself, not a model's reply around it;
        # an invalid one comes back as an observation, as it would to a model.
        session.apply("you", action)


async def step(request: Request) -> Response:
    got = await _checked(request)
    if isinstance(got, Response):
        return got
    session, form = got
    action = form.get("action", "")
    try:
        await run_in_threadpool(_act_by_hand, session, action)
    except Exception as exc:  # noqa: BLE001 - shown on the page, never a 500
        session.notice = f"The env failed on {action!r}: {type(exc).__name__}: {exc}"
    return _back(session)


async def expert(request: Request) -> Response:
    got = await _checked(request)
    if isinstance(got, Response):
        return got
    session, _ = got
    try:
        await run_in_threadpool(expert_move, session)
    except LookupError as exc:
        session.notice = f"No expert move: {exc}"
    except Exception as exc:  # noqa: BLE001
        session.notice = f"The expert failed: {type(exc).__name__}: {exc}"
    return _back(session)


async def policy(request: Request) -> Response:
    got = await _checked(request)
    if isinstance(got, Response):
        return got
    session, form = got
    session.endpoint = form.get("endpoint", "").strip()
    session.model = form.get("model", "").strip()
    if not session.endpoint.startswith(("http://", "https://")):
        session.notice = "Policy move: the endpoint must be an http(s) URL, e.g. http://127.0.0.1:8000/v1."
        return _back(session)
    try:
        await run_in_threadpool(policy_move, session, session.endpoint, session.model)
    except Exception as exc:  # noqa: BLE001 - unreachable endpoint, bad answer: on the page
        session.notice = f"Policy move failed: {type(exc).__name__}: {exc}"
    return _back(session)


async def end(request: Request) -> Response:
    got = await _checked(request)
    if isinstance(got, Response):
        return got
    session, _ = got
    _sessions(request).pop(session.sid)
    await run_in_threadpool(close_session, session)
    return RedirectResponse("/play", status_code=303)


def _draw(session: Session) -> bytes | str:
    with session.lock:
        return frames.render_png(session.env)


async def frame(request: Request) -> Response:
    session = await _session_or_error(request)
    if isinstance(session, Response):
        return PlainTextResponse("No such play session.", status_code=404)
    png = await run_in_threadpool(_draw, session)
    if isinstance(png, str):
        return PlainTextResponse(f"No frame: {png}.", status_code=404)
    return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})


routes: list[BaseRoute] = [
    Route("/play", start_page, methods=["GET"], name="play"),
    Route("/play", start, methods=["POST"], name="play_start"),
    Route("/play/{sid}", page, methods=["GET"], name="play_session"),
    Route("/play/{sid}/step", step, methods=["POST"]),
    Route("/play/{sid}/expert", expert, methods=["POST"]),
    Route("/play/{sid}/policy", policy, methods=["POST"]),
    Route("/play/{sid}/end", end, methods=["POST"]),
    Route("/play/{sid}/frame.png", frame, methods=["GET"]),
]
