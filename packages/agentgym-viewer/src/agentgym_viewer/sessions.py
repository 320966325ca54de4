"""Play sessions: an env instance each, its moves so far, and the moves themselves (by hand, the
env's expert's, a policy's).

A session shows a policy the episode as a rollout would (:mod:`agentgym.prompting`): the env's
system prompt, the first observation, then each reply and the user turn after it, so a played
episode and a trained one read the same.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agentgym.parsers import format_action, parse_action
from agentgym.prompting import format_error_observation, observation_turn, opening_messages
from agentgym_viewer import frames

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
    #: what the env's reset gave (the system prompt is made from it, as in a rollout)
    reset_info: dict[str, Any] = field(default_factory=dict)
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

    def chat(self, *, format_hint: bool = False) -> list[dict[str, str]]:
        """The episode as a policy sees it in a rollout with the same ``format_hint``: the system
        prompt, the first observation, then each reply and the user turn after it. Moves typed or
        taken by the expert appear as replies in the parser's format."""
        parser = self.spec.action_parser
        messages = opening_messages(self.spec, self.reset_info, self.initial, format_hint=format_hint)
        for m in self.moves:
            messages.append({"role": "assistant", "content": self._reply(m)})
            turn = m.observation
            if m.action is not None:  # a format error goes back as it is: the env was not stepped
                turn = observation_turn(parser, turn, format_hint=format_hint)
            messages.append({"role": "user", "content": turn})
        return messages

    def _reply(self, move: Move) -> str:
        if move.reply is not None:
            return move.reply
        try:
            return format_action(self.spec.action_parser, move.action or "")
        except Exception:  # noqa: BLE001 - a parser without a format: the bare action
            return move.action or ""

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

    def close_all(self) -> None:
        """Close every session's env (the app's shutdown)."""
        with self._lock:
            held, self._by_id = list(self._by_id.values()), {}
        for session in held:
            close_session(session)


def close_session(session: Session) -> None:
    with session.lock:
        try:
            session.env.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass


def start_session(spec: Any, task_id: int) -> Session:
    """Make the env of ``spec``, reset it to ``task_id`` and hold it in a new session."""
    env = spec.make()
    try:
        observation, info = env.reset(options={"task_id": task_id})
        renders = False
        if frames.spec_reason(spec.name)[1] is None:
            renders = isinstance(frames.render_png(env), bytes)
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
        reset_info=dict(info),
    )


def expert_move(session: Session) -> None:
    """Step the env with its expert's next action."""
    with session.lock:
        if session.done:
            session.notice = "The episode is over."
            return
        if session.expert is None:
            session.expert = session.spec.make_expert(session.env)
        action = session.expert(session.observation, session.info)
        session.apply("expert", action)


def take_reply(session: Session, reply: str) -> None:
    """Record a policy's ``reply``: its action (by the env's parser) steps the env; one that does
    not parse steps nothing, and the parser's complaint is the observation, as in a rollout."""
    parsed = parse_action(session.spec.action_parser, reply)
    with session.lock:
        if session.done:
            session.notice = "The episode is over."
            return
        if parsed.action is None:
            error = format_error_observation(parsed.error)
            session.moves.append(Move("policy", None, 0.0, error, False, reply))
            session.observation = error
            return
        session.apply("policy", parsed.action, reply)


def ask_policy(endpoint: str, model: str, messages: list[dict[str, str]]) -> str:
    """The reply of an OpenAI-compatible chat endpoint to ``messages``."""
    import httpx

    body: dict[str, Any] = {"messages": messages}
    if model:
        body["model"] = model
    response = httpx.post(endpoint.rstrip("/") + "/chat/completions", json=body, timeout=POLICY_TIMEOUT)
    if response.status_code >= 400:
        raise ValueError(f"the endpoint answered HTTP {response.status_code}: {response.text[:300]}")
    try:
        return response.json()["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"the endpoint's answer is not a chat completion: {response.text[:300]}") from exc


def policy_move(session: Session, endpoint: str, model: str) -> None:
    """Ask the policy at ``endpoint`` for the next reply and take it."""
    with session.lock:
        messages = session.chat()
    take_reply(session, ask_policy(endpoint, model, messages))
