"""The wire protocol's types and their JSON forms, shared by the server, the clients and env code.

What a reset and a step answer (:func:`reset_result`, :func:`step_result`), how an error travels
(``{"error": {"code", "message"}}``, :func:`error_body`; one item of a batched route,
:func:`item_error`; back to an exception, :func:`error_from`), how env ``info`` is made JSON-safe
(:func:`jsonable`; every body the server sends is encoded by ``agentgym.server.encoding.encode``).
A client's view of one step is a :class:`StepOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from uuid import UUID

from agentgym.errors import (
    AgentGymError,
    BadRequestError,
    CapacityError,
    EnvCrashedError,
    EpisodeOverError,
    UnknownEnvError,
    UnknownNameError,
    UnknownSessionError,
    UnknownTaskError,
)

#: containers nested deeper than this are written as their repr (a cycle must end somewhere): orjson's
#: own limit, so that the server's encoder (agentgym.server.encoding) writes what jsonable makes
MAX_DEPTH = 254


def jsonable(value: Any, _depth: int = 0) -> Any:
    """Make env ``info`` JSON-safe (numpy scalars and arrays, tuples, sets, odd keys, NaN; an enum as
    its value, a UUID as its text)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most of every info: no walk
        return value
    # plain dicts and lists walked here, one frame a level: a nest as deep as orjson writes fits
    # in Python's recursion limit
    if kind is dict and _depth < MAX_DEPTH:
        out = {}
        for k, v in value.items():
            vk = type(v)
            plain = vk is str or vk is int or vk is bool or v is None or (vk is float and v == v)
            out[k if type(k) is str else str(k)] = v if plain else jsonable(v, _depth + 1)
        return out
    if (kind is list or kind is tuple) and _depth < MAX_DEPTH:
        items = []
        for v in value:
            vk = type(v)
            plain = vk is str or vk is int or vk is bool or v is None or (vk is float and v == v)
            items.append(v if plain else jsonable(v, _depth + 1))
        return items
    return _jsonable(value, _depth)


def _jsonable(value: Any, _depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and value != value:  # NaN is not JSON
            return None
        return value
    if _depth >= MAX_DEPTH:
        return repr(value)
    if isinstance(value, Enum):
        return jsonable(value.value, _depth)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, _depth + 1) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return jsonable(value.tolist(), _depth + 1)
    if hasattr(value, "item"):
        return jsonable(value.item(), _depth + 1)
    return repr(value)


def reset_result(observation: str, info: dict[str, Any], *, safe: bool = True) -> dict[str, Any]:
    """What a reset (or a session's creation) answers; ``safe``: ``info`` made JSON-safe (False: as
    the env gave it, for an encoder that makes it so, ``agentgym.server.encoding.encode``)."""
    return {"observation": observation, "info": jsonable(info) if safe else info}


def step_result(
    observation: str,
    reward: float,
    terminated: bool,
    truncated: bool,
    info: dict[str, Any],
    score: float,
    *,
    safe: bool = True,
) -> dict[str, Any]:
    """What a step answers; ``score`` is the episode's return so far; ``safe`` as in :func:`reset_result`."""
    return {
        "observation": observation,
        "reward": float(reward),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "info": jsonable(info) if safe else info,
        "score": float(score),
    }


def error_body(code: str, message: str) -> dict[str, Any]:
    """The body of every error answer: ``{"error": {"code", "message"}}``."""
    return {"error": {"code": code, "message": message}}


def item_error(exc: AgentGymError) -> dict[str, Any]:
    """One failed item of a batched route, as a shard hands it to the server: the error and its status."""
    return {**error_body(exc.code, exc.message), "status": exc.status}


_ERRORS: dict[str, type[AgentGymError]] = {
    "unknown_env": UnknownEnvError,
    "unknown_name": UnknownNameError,
    "unknown_session": UnknownSessionError,
    "unknown_task": UnknownTaskError,
    "episode_over": EpisodeOverError,
    "at_capacity": CapacityError,
    "env_crashed": EnvCrashedError,
    "invalid_request": BadRequestError,
}


def error_from(code: str, message: str, status: int) -> AgentGymError:
    """The exception an error body stands for (its own class where the code has one)."""
    return _ERRORS.get(code, AgentGymError)(message, code=code, status=status)


@dataclass
class StepOutcome:
    """One step as a client sees it; ``error`` set when the step could not be made."""

    observation: str = ""
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    #: an autoreset's answer (the new episode's ``{"observation", "info"}``, or ``{"error"}``);
    #: None when none was asked for or the episode did not end
    reset: dict[str, Any] | None = None
