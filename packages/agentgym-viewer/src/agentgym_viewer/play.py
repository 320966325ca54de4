"""The play page: act in an env by hand, or let its expert or a policy act, step by step.

- ``GET /play``: pick an env and a task; ``POST /play`` starts a session and redirects to it.
- ``GET /play/<sid>``: the instruction, the observation (and the env's picture), the return, the
  moves so far, and forms to act: an action typed by hand (sent to the env as typed), the expert's
  move, or a policy's move (an OpenAI-compatible chat endpoint, its reply parsed by the env's
  action parser as in a rollout).
- ``POST /play/<sid>/step|expert|policy|end``: act (or end), then 303 back to the page.

Sessions live in the viewer process: an env instance each, closed on "End" or after
:data:`IDLE_SECONDS` without a request. Every POST carries a form token (per session; the start
form's per app) so another site cannot drive them through the person's browser.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from agentgym_viewer import frames as frames_mod
from agentgym_viewer.replay import visible

#: A session without a request for this long is closed (its env too).
IDLE_SECONDS = 30 * 60
#: Sessions held at most; starting one more closes the least recently used.
MAX_SESSIONS = 8
#: Moves per session at most: a person (or a looping policy) cannot grow one without bound.
MAX_MOVES = 1000
#: Seconds to wait for a policy's reply.
POLICY_TIMEOUT = 120.0


@dataclass
class Move:
    by: str  # "you", "expert" or "policy"
    action: str | None  # None: the policy's reply did not parse; nothing was sent to the env
    reward: float
    observation: str
    valid: bool = True
    reply: str | None = None  # the policy's full reply


@dataclass
class Session:
    sid: str
    spec: Any
    env: Any
    task_id: int
    instruction: str
    initial: str
    observation: str
    info: dict[str, Any]
    renders: bool
    form_token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    moves: list[Move] = field(default_factory=list)
    done: bool = False
    success: bool = False
    notice: str | None = None  # shown once, on the next view of the page
    endpoint: str = ""
    model: str = ""
    expert: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> float:
        return math.fsum(m.reward for m in self.moves)

    def chat(self) -> list[dict[str, str]]:
        """The episode as a policy sees it in a rollout: the env's prompt, then observations and
        replies. Moves typed or taken by the expert appear as replies in the parser's format."""
        from agentgym.parsers import format_action

        messages = [{"role": "system", "content": self.spec.prompt or self.instruction}]
        messages.append({"role": "user", "content": self.initial})
        for m in self.moves:
            if m.reply is not None:
                reply = m.reply
            else:
                try:
                    reply = format_action(self.spec.action_parser, m.action or "")
                except Exception:  # noqa: BLE001 - a parser without a format: the bare action
                    reply = m.action or ""
            messages.append({"role": "assistant", "content": reply})
            messages.append({"role": "user", "content": m.observation})
        if not messages[0]["content"]:
            messages.pop(0)
        return messages

    def apply(self, by: str, action: str, reply: str | None = None) -> None:
        """Step the env with ``action`` and record the move (call under ``lock``, in a thread)."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.observation, self.info = observation, info
        self.moves.append(
            Move(by, action, float(reward), observation, bool(info.get("valid_action", True)), reply)
        )
        if terminated or truncated:
            self.done = True
            self.success = bool(info.get("success", False))
        elif len(self.moves) >= MAX_MOVES:
            self.done = True
            self.notice = f"Stopped after {MAX_MOVES} moves."


class Sessions:
    """The play sessions of one app, with idle expiry."""

    def __init__(self) -> None:
        _every.append(self)
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()
        #: The start form's token (a new session has no token of its own yet).
        self.start_token = secrets.token_urlsafe(16)

    def get(self, sid: str) -> Session | None:
        with self._lock:
            s = self._by_id.get(sid)
            if s is not None:
                s.last_used = time.monotonic()
            return s

    def add(self, session: Session) -> list[Session]:
        """Hold ``session``; returns the sessions to close (expired, or beyond the cap)."""
        with self._lock:
            self._by_id[session.sid] = session
            out = self._expired()
            while len(self._by_id) > MAX_SESSIONS:
                oldest = min(self._by_id.values(), key=lambda s: s.last_used)
                out.append(self._by_id.pop(oldest.sid))
            return out

    def pop(self, sid: str) -> Session | None:
        with self._lock:
            return self._by_id.pop(sid, None)

    def expired(self) -> list[Session]:
        with self._lock:
            return self._expired()

    def _expired(self) -> list[Session]:
        now = time.monotonic()
        gone = [sid for sid, s in self._by_id.items() if now - s.last_used > IDLE_SECONDS]
        return [self._by_id.pop(sid) for sid in gone]


_every: list[Sessions] = []  # of every app in this process, for close_all at shutdown


def close_all() -> None:
    """Close every play session's env (the app's shutdown)."""
    for sessions in _every:
        with sessions._lock:
            held, sessions._by_id = list(sessions._by_id.values()), {}
        for session in held:
            close_session(session)


def close_session(session: Session) -> None:
    with session.lock:
        try:
            session.env.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass


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
    from agentgym_viewer.app import render

    return render(
        request, "play_error.html", status_code=status, message=message, code=status, env=env, active="play"
    )


def _start(spec: Any, task_id: int) -> Session:
    env = spec.make()
    try:
        observation, info = env.reset(options={"task_id": task_id})
        renders = False
        if frames_mod.spec_reason(spec.name)[1] is None:
            renders = isinstance(frames_mod.render_png(env), bytes)
    except BaseException:
        try:
            env.close()
        finally:
            raise
    instruction = str(info.get("instruction") or getattr(env, "instruction", "") or "")
    return Session(
        sid=secrets.token_urlsafe(9),
        spec=spec,
        env=env,
        task_id=task_id,
        instruction=instruction,
        initial=observation,
        observation=observation,
        info=info,
        renders=renders,
    )


def _expert_move(session: Session) -> None:
    with session.lock:
        if session.done:
            session.notice = "The episode is over."
            return
        if session.expert is None:
            session.expert = session.spec.make_expert(session.env)
        action = session.expert(session.observation, session.info)
        session.apply("expert", action)


def _policy_move(session: Session, endpoint: str, model: str) -> None:
    """Ask an OpenAI-compatible endpoint for the next reply, parse it, step the env."""
    import httpx

    from agentgym.parsers import parse_action

    url = endpoint.rstrip("/") + "/chat/completions"
    with session.lock:
        messages = session.chat()
    body: dict[str, Any] = {"messages": messages}
    if model:
        body["model"] = model
    response = httpx.post(url, json=body, timeout=POLICY_TIMEOUT)
    if response.status_code >= 400:
        raise ValueError(f"the endpoint answered HTTP {response.status_code}: {response.text[:300]}")
    try:
        reply = response.json()["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"the endpoint's answer is not a chat completion: {response.text[:300]}") from exc
    parsed = parse_action(session.spec.action_parser, reply)
    with session.lock:
        if session.done:
            session.notice = "The episode is over."
            return
        if parsed.action is None:
            # As in a rollout: nothing goes to the env, the parser's complaint is the observation.
            error = parsed.error or "Format error: no action parsed."
            session.moves.append(Move("policy", None, 0.0, error, False, reply))
            session.observation = error
            return
        session.apply("policy", parsed.action, reply)


def routes(index: Any) -> list[BaseRoute]:
    """The play pages; sessions belong to this app."""
    sessions = Sessions()

    async def session_or_error(request: Request) -> Session | Response:
        await _close_all(sessions.expired())
        sid = request.path_params["sid"]
        session = sessions.get(sid)
        if session is None:
            return _error(
                request, "No such play session: it ended, or was closed after 30 minutes idle.", 404
            )
        return session

    async def checked(request: Request) -> tuple[Session, dict[str, str]] | Response:
        session = await session_or_error(request)
        if isinstance(session, Response):
            return session
        form = await _form(request)
        if not secrets.compare_digest(form.get("form_token", ""), session.form_token):
            return _error(
                request, "This form is stale or did not come from this page: reload it and retry.", 403
            )
        return session, form

    def back(session: Session) -> Response:
        return RedirectResponse(f"/play/{session.sid}", status_code=303)

    async def start_page(request: Request) -> Response:
        from agentgym_viewer.app import render

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

    async def start(request: Request) -> Response:
        form = await _form(request)
        if not secrets.compare_digest(form.get("form_token", ""), sessions.start_token):
            return _error(
                request, "This form is stale or did not come from this page: reload it and retry.", 403
            )
        name = form.get("env", "").strip()
        envs = _installed()
        spec = envs.get(name)
        if spec is None:
            known = ", ".join(envs) or "none"
            return _error(request, f"Unknown env {name!r}. Installed envs: {known}.", 400)
        raw = form.get("task", "").strip()
        if raw:
            try:
                task_id = int(raw)
            except ValueError:
                return _error(request, f"Task {raw!r} is not a task id (a whole number).", 400, env=name)
        else:
            default = _first_test_task(spec)
            if default is None:
                return _error(request, f"Env {name!r} has no test split: give a task id.", 400, env=name)
            task_id = default
        if task_id < 0:
            return _error(request, f"Task {task_id} is not a task id (ids are 0 or more).", 400, env=name)
        try:
            session = await run_in_threadpool(_start, spec, task_id)
        except (ValueError, KeyError, IndexError, LookupError) as exc:
            return _error(request, f"Env {name!r} has no task {task_id}: {exc}", 400, env=name)
        except Exception as exc:  # noqa: BLE001 - an env that cannot start here (a missing JVM...)
            return _error(
                request, f"Env {name!r} could not start: {type(exc).__name__}: {exc}", 503, env=name
            )
        await _close_all(sessions.add(session))
        return back(session)

    async def page(request: Request) -> Response:
        from agentgym_viewer.app import render

        session = await session_or_error(request)
        if isinstance(session, Response):
            return session
        notice, session.notice = session.notice, None
        moves = [
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
            moves=moves,
            notice=visible(notice) if notice else None,
            has_expert=session.spec.expert is not None,
            frame_url=f"/play/{session.sid}/frame.png?turn={len(session.moves)}" if session.renders else None,
            again_url="/play?" + urlencode({"env": session.spec.name, "task": session.task_id}),
        )

    async def step(request: Request) -> Response:
        got = await checked(request)
        if isinstance(got, Response):
            return got
        session, form = got
        action = form.get("action", "")

        def act() -> None:
            with session.lock:
                if session.done:
                    session.notice = "The episode is over."
                    return
                # Sent as typed: a person writes the action itself, not a model's reply around it;
                # an invalid one comes back as an observation, as it would to a model.
                session.apply("you", action)

        try:
            await run_in_threadpool(act)
        except Exception as exc:  # noqa: BLE001 - shown on the page, never a 500
            session.notice = f"The env failed on {action!r}: {type(exc).__name__}: {exc}"
        return back(session)

    async def expert(request: Request) -> Response:
        got = await checked(request)
        if isinstance(got, Response):
            return got
        session, _ = got
        try:
            await run_in_threadpool(_expert_move, session)
        except LookupError as exc:
            session.notice = f"No expert move: {exc}"
        except Exception as exc:  # noqa: BLE001
            session.notice = f"The expert failed: {type(exc).__name__}: {exc}"
        return back(session)

    async def policy(request: Request) -> Response:
        got = await checked(request)
        if isinstance(got, Response):
            return got
        session, form = got
        session.endpoint = form.get("endpoint", "").strip()
        session.model = form.get("model", "").strip()
        if not session.endpoint.startswith(("http://", "https://")):
            session.notice = (
                "Policy move: the endpoint must be an http(s) URL, e.g. http://127.0.0.1:8000/v1."
            )
            return back(session)
        try:
            await run_in_threadpool(_policy_move, session, session.endpoint, session.model)
        except Exception as exc:  # noqa: BLE001 - unreachable endpoint, bad answer: on the page
            session.notice = f"Policy move failed: {type(exc).__name__}: {exc}"
        return back(session)

    async def end(request: Request) -> Response:
        got = await checked(request)
        if isinstance(got, Response):
            return got
        session, _ = got
        sessions.pop(session.sid)
        await run_in_threadpool(close_session, session)
        return RedirectResponse("/play", status_code=303)

    async def frame(request: Request) -> Response:
        session = await session_or_error(request)
        if isinstance(session, Response):
            return PlainTextResponse("No such play session.", status_code=404)

        def draw() -> bytes | str:
            with session.lock:
                return frames_mod.render_png(session.env)

        png = await run_in_threadpool(draw)
        if isinstance(png, str):
            return PlainTextResponse(f"No frame: {png}.", status_code=404)
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    return [
        Route("/play", start_page, methods=["GET"], name="play"),
        Route("/play", start, methods=["POST"], name="play_start"),
        Route("/play/{sid}", page, methods=["GET"], name="play_session"),
        Route("/play/{sid}/step", step, methods=["POST"]),
        Route("/play/{sid}/expert", expert, methods=["POST"]),
        Route("/play/{sid}/policy", policy, methods=["POST"]),
        Route("/play/{sid}/end", end, methods=["POST"]),
        Route("/play/{sid}/frame.png", frame, methods=["GET"]),
    ]
