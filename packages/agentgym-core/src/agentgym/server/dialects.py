"""Env dialects: an env's results shaped as its original AgentGym server answered them (``EnvSpec.compat``).

A dialect is a function ``(env, route, reply) -> JSON`` run next to the env instance (in the shard
that holds it), so that it can read the env; :func:`default_reply` serves envs without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentgym.errors import AgentGymError
from agentgym.spec import resolve

if TYPE_CHECKING:
    from agentgym.env import TextEnv
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
    """``reply`` (a v1 result) as ``spec``'s original server answered ``route``."""
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
