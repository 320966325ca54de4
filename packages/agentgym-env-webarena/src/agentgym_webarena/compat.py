"""The webarena env's replies on AgentGym's compatible routes, shaped as AgentGym-RL's WebArena
server answered its client (``agentenv.envs.WebarenaEnvClient``): ``/create`` answers
``{"env_idx"}``, ``/reset`` and ``/step`` ``observation``, ``reward`` and ``terminated`` (the client
counts the reward only when terminated)."""

from __future__ import annotations

from typing import Any

from agentgym.server.dialects import SESSION_ID


def reply(env: Any, route: str, result: dict[str, Any]) -> Any:
    if route == "create":
        return {"env_idx": SESSION_ID, "observation": result["observation"]}
    if route == "observation":
        return result["observation"]
    return {
        "observation": result["observation"],
        "reward": result.get("reward", 0.0),
        "terminated": bool(result.get("terminated")),
        "truncated": bool(result.get("truncated")),
        "score": env.score,
    }
