"""What the route handlers share: the session manager, the env a request names, and the check of an action's text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request

from agentgym.errors import AgentGymError, BadRequestError, UnknownEnvError
from agentgym.server.sessions import SessionManager
from agentgym.spec import EnvSpec


async def _get_manager(request: Request) -> SessionManager:
    # async on purpose: FastAPI runs a sync dependency on a worker thread, one hop per request
    return request.app.state.manager


async def _get_specs(request: Request) -> Mapping[str, EnvSpec]:
    return request.app.state.specs


#: The app's ``SessionManager``, for a handler's parameter.
Manager = Annotated[SessionManager, Depends(_get_manager)]
#: The served envs' specs by name, for a handler's parameter.
Specs = Annotated[Mapping[str, EnvSpec], Depends(_get_specs)]


def pick_env(specs: Mapping[str, EnvSpec], name: str | None) -> str:
    """The served env a request names (the only one, if it names none)."""
    if name is None:
        if len(specs) == 1:
            return next(iter(specs))
        raise BadRequestError(f"several envs are served ({', '.join(specs)}): say which with 'env'")
    if name not in specs:
        raise UnknownEnvError(
            f"env {name!r} is not served here (served: {', '.join(specs)})", name=name, known=specs
        )
    return name


def check_action(action: str) -> None:
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
