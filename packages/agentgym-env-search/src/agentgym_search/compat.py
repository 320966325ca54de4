"""The search env's replies on AgentGym's compatible routes, shaped as AgentGym-RL's SearchQA server
answered its client (``agentenv.envs.SearchQAEnvClient``): ``/create`` answers the bare session id,
``GET /observation`` the question, ``/step`` ``observation``, ``reward`` and ``done``."""

from __future__ import annotations

from typing import Any

from agentgym.server.dialects import SESSION_ID, default_reply


def reply(env: Any, route: str, result: dict[str, Any]) -> Any:
    if route == "create":
        return SESSION_ID
    if route == "observation":
        question = getattr(env, "question", None)
        return question.question if question is not None else result["observation"]
    return default_reply(env, route, result)
